"""Segment proposers for ProVer. ``judges.make(cfg)`` builds a judge from a dict or a YAML file
(``configs/judges/*.yaml``); ``judge.propose(group) -> Proposal | None`` names turns
``start..end`` (inclusive) of one trajectory that likely decided the group's divergent outcome.

Every judge takes ``side``: ``won`` (default: a segment of a successful trajectory, the decision
that made it succeed; the only kind ProVer's positive-only credit can reward), ``failed`` (a
failed trajectory's mistake) or ``any``.

Kinds: ``random``, ``first_divergence``, ``last_shared_state`` (decision-seeking: the last state a
won and a failed run shared where they chose differently), ``oracle`` (the env's scripted expert, privileged),
``pivot`` (the turn the env records as deciding, ``info["pivot_step"]``: the targeting upper bound),
``exhaustive`` (verifies every turn boundary: the upper bound; needs ``bind(estimator)``),
``openai`` and ``hf`` and ``vllm`` (an LLM judge over that chat backend), and ``agentic``
(tool-calling, over a ``backend``).
"""

from __future__ import annotations

from pathlib import Path

from judges.base import SIDES, Judge, Proposal, mixed_outcome

KINDS = (
    "random",
    "first_divergence",
    "last_shared_state",
    "oracle",
    "pivot",
    "exhaustive",
    "openai",
    "hf",
    "vllm",
    "agentic",
)


def make(cfg) -> Judge:
    """``cfg``: a dict with ``kind`` and the judge's options, or a path to a YAML file of one."""
    if isinstance(cfg, (str, Path)):
        import yaml

        path = Path(cfg)
        if not path.is_file():
            raise FileNotFoundError(f"judge config {str(path)!r} not found (see configs/judges/)")
        cfg = yaml.safe_load(path.read_text()) or {}
    cfg = dict(cfg)
    kind = cfg.pop("kind", None)
    if kind == "random":
        from judges.heuristic import RandomJudge

        return RandomJudge(**cfg)
    if kind == "first_divergence":
        from judges.heuristic import FirstDivergenceJudge

        return FirstDivergenceJudge(**cfg)
    if kind == "last_shared_state":
        from judges.heuristic import LastSharedStateJudge

        return LastSharedStateJudge(**cfg)
    if kind == "oracle":
        from judges.oracle import OracleJudge

        return OracleJudge(**cfg)
    if kind == "pivot":
        from judges.oracle import PivotJudge

        return PivotJudge(**cfg)
    if kind == "exhaustive":
        from judges.exhaustive import ExhaustiveJudge

        return ExhaustiveJudge(**cfg)
    if kind in ("openai", "hf", "vllm"):  # an LLM judge over that chat backend
        from agents.backends import make_backend
        from judges.llm import LLMJudge

        judge_opts = {k: cfg.pop(k) for k in ("max_turn_chars", "template", "retries", "side") if k in cfg}
        return LLMJudge(make_backend({"kind": kind, **cfg}), **judge_opts)
    if kind == "agentic":
        from agents.backends import make_backend
        from judges.agentic import AgenticJudge

        judge_opts = {k: cfg.pop(k) for k in ("max_calls", "max_chars", "side") if k in cfg}
        backend_cfg = cfg.pop("backend", None)
        if not isinstance(backend_cfg, dict):
            raise ValueError("an agentic judge needs backend: {kind: openai|hf, ...}")
        return AgenticJudge(make_backend(backend_cfg), **judge_opts)
    raise ValueError(f"judge kind={kind!r} is not available; use one of {', '.join(KINDS)}")


__all__ = ["KINDS", "SIDES", "Judge", "Proposal", "make", "mixed_outcome"]
