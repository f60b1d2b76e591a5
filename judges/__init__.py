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
``openai`` and ``hf`` and ``vllm`` (an LLM judge over that chat backend), ``hf_score`` (a local LLM that
scores every candidate turn by its log-probabilities and proposes the best: it cannot fail to parse;
judges/scoring.py), and ``agentic`` (tool-calling, over a ``backend``).
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
    "hf_score",
    "agentic",
)

# kinds built from their class alone (no model): module, class
_HEURISTIC = {
    "random": ("judges.heuristic", "RandomJudge"),
    "first_divergence": ("judges.heuristic", "FirstDivergenceJudge"),
    "last_shared_state": ("judges.heuristic", "LastSharedStateJudge"),
    "oracle": ("judges.oracle", "OracleJudge"),
    "pivot": ("judges.oracle", "PivotJudge"),
    "exhaustive": ("judges.exhaustive", "ExhaustiveJudge"),
}
LLM_JUDGE_OPTS = ("max_turn_chars", "template", "retries", "side")  # the rest configures the chat backend
AGENTIC_JUDGE_OPTS = ("max_calls", "max_chars", "side")


def _judge_class(kind: str):
    import importlib

    module, name = _HEURISTIC[kind]
    return getattr(importlib.import_module(module), name)


def check(cfg, where: str = "judge") -> list[str]:
    """The problems of a judge config (a mapping), each naming its key path, without building the judge
    (an LLM judge's model is not loaded): the kind, the side, and every key against what that kind
    accepts."""
    from agents.backends import check_backend
    from prover_gym.checks import bad_choice, params_of, unknown_keys

    if not isinstance(cfg, dict):
        return [f"{where} = {cfg!r}: a judge is a mapping with a kind, e.g. {{kind: first_divergence, side: won}}"]
    kind = cfg.get("kind")
    problems = bad_choice(f"{where}.kind", kind, KINDS, "judge kind")
    if "side" in cfg:  # every kind takes it
        problems += bad_choice(f"{where}.side", cfg["side"], SIDES, "side")
    if kind not in KINDS:
        return problems
    opts = {k: v for k, v in cfg.items() if k != "kind"}
    if kind in _HEURISTIC:
        problems += unknown_keys(where, opts, params_of(_judge_class(kind)))
    elif kind == "hf_score":  # its own options, the rest is the hf backend's
        from judges.scoring import MODES, SCORE_JUDGE_OPTS

        if "mode" in cfg:
            problems += bad_choice(f"{where}.mode", cfg["mode"], MODES, "scoring mode")
        backend = {"kind": "hf", **{k: v for k, v in opts.items() if k not in SCORE_JUDGE_OPTS}}
        problems += check_backend(backend, where, extra=SCORE_JUDGE_OPTS)
    elif kind == "agentic":
        problems += unknown_keys(where, opts, [*AGENTIC_JUDGE_OPTS, "backend"])
        if not isinstance(cfg.get("backend"), dict):
            problems.append(f"{where}.backend: an agentic judge needs backend: {{kind: openai|hf|vllm, ...}}")
        else:
            problems += check_backend(cfg["backend"], f"{where}.backend")
    else:  # an LLM judge: its own options, the rest is the backend's
        backend = {k: v for k, v in cfg.items() if k not in LLM_JUDGE_OPTS}
        problems += check_backend(backend, where, extra=LLM_JUDGE_OPTS)
    return problems


def make(cfg) -> Judge:
    """``cfg``: a dict with ``kind`` and the judge's options, a path to a YAML file of one, or the name
    of a shipped one (``first_divergence``: configs/judges/first_divergence.yaml)."""
    if isinstance(cfg, (str, Path)):  # a YAML file, or the name of a shipped one (configs/judges/)
        import yaml

        from prover_gym.resources import config_path

        cfg = yaml.safe_load(config_path(cfg, "judges").read_text()) or {}
    cfg = dict(cfg)
    kind = cfg.pop("kind", None)
    if kind in _HEURISTIC:
        return _judge_class(kind)(**cfg)
    if kind in ("openai", "hf", "vllm"):  # an LLM judge over that chat backend
        from agents.backends import make_backend
        from judges.llm import LLMJudge

        judge_opts = {k: cfg.pop(k) for k in LLM_JUDGE_OPTS if k in cfg}
        return LLMJudge(make_backend({"kind": kind, **cfg}), **judge_opts)
    if kind == "hf_score":  # a local model that scores candidate turns (judges/scoring.py)
        from agents.backends import make_backend
        from judges.scoring import SCORE_JUDGE_OPTS, ScoringJudge

        judge_opts = {k: cfg.pop(k) for k in SCORE_JUDGE_OPTS if k in cfg}
        return ScoringJudge(make_backend({"kind": "hf", "temperature": 0.0, **cfg}), **judge_opts)
    if kind == "agentic":
        from agents.backends import make_backend
        from judges.agentic import AgenticJudge

        judge_opts = {k: cfg.pop(k) for k in AGENTIC_JUDGE_OPTS if k in cfg}
        backend_cfg = cfg.pop("backend", None)
        if not isinstance(backend_cfg, dict):
            raise ValueError("an agentic judge needs backend: {kind: openai|hf, ...}")
        return AgenticJudge(make_backend(backend_cfg), **judge_opts)
    raise ValueError(f"judge kind={kind!r} is not available; use one of {', '.join(KINDS)}")


__all__ = ["KINDS", "SIDES", "Judge", "Proposal", "check", "make", "mixed_outcome"]
