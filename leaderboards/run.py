"""`python leaderboards/run.py`: the benchmark tables, from the embedded default to the paper preset.

    python leaderboards/run.py                                  # preset "default": bundled data, tiny model, CPU
    python leaderboards/run.py --preset smoke                   # every stage once, under 2 minutes
    python leaderboards/run.py --preset paper                   # Qwen + vLLM + official data (GPU)
    python leaderboards/run.py --envs alfworld --methods sft grpo prover --seeds 0 1 2 --ablations
    python leaderboards/run.py --eval-only --policy my_endpoint.yaml   # put your own model on the board

For each env and seed: the `random` and `expert` baselines; one SFT warm start on expert
trajectories (`sft`); then `grpo`, `prover` (and the ablations `prover_random`,
`prover_unverified`, and `grpo_matched`: GRPO given the tokens prover spent) trained from that same
checkpoint with the same budget, under common random numbers (the same tasks and sampling keys);
each evaluated on the same eval tasks. Methods are compared paired by training seed. Finished rows
live in `<out>/results.sqlite` and trained checkpoints under `<out>/runs/`, keyed by a hash of their
config, so a re-run (or a run after a crash) only does what is missing. Tables and plots:
`<out>/leaderboard.{md,csv,json,html}` and `<out>/*.png`; `<out>` is ./prover-gym-results unless --out.

A run is ``make_plan`` (the preset checked whole, every cell and its row key; ``--dry-run`` prints it and
stops) -> ``execute`` (servers, judge precision, the cells on worker processes) -> ``Recorder`` (each row
stored as its cell comes back) -> ``write_reports``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from leaderboards.validate import TOP as PRESET_KEYS
from prover_gym.checks import did_you_mean
from trainers import methods as registry

PRESETS = Path(__file__).resolve().parent / "presets"
# results go where the user runs, never into the (possibly installed) package
DEFAULT_OUT = "prover-gym-results"


def baselines() -> list[str]:
    """Methods played without a model (trainers/methods.py)."""
    return registry.names("baseline")


def trained() -> list[str]:
    """Methods with a model: the start model (sft) and the RL methods (trainers/methods.py)."""
    return registry.names("sft", "rl")


def matched_to(name: str) -> str | None:
    """For a compute-matched method (grpo_matched: GRPO given the extra generation that `prover` spent in
    the same env and seed), the method whose measured ratio it takes: its cells run after that one's and
    read the ratio (or take train.match_ratio when it is not run). None for the others."""
    spec = registry.REGISTRY.get(name)
    return spec.matched_to if spec is not None and spec.extra_tasks else None


class PresetError(ValueError):
    """A preset file is missing, malformed or refers to something unset."""


# ---- presets ---------------------------------------------------------------------------------
def load_preset(name_or_path: str, check: bool = True) -> dict:
    """A preset by name (leaderboards/presets/) or path, defaults filled and ``${VAR}``s expanded;
    ``check``: its blocks validated (run() checks it whole, with what the run needs, instead)."""
    import yaml

    path = Path(name_or_path)
    if not path.suffix:
        path = PRESETS / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in PRESETS.glob("*.yaml"))
        raise PresetError(f"preset {name_or_path!r} not found; use one of {known} or a path to a YAML preset")
    try:
        preset = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(preset, dict):
        raise PresetError(f"{path}: a preset is a YAML mapping with keys {sorted(PRESET_KEYS)}")
    missing = [key for key in ("name", "envs", "methods") if key not in preset]
    if missing:
        raise PresetError(f"{path}: missing key(s) {missing}")
    preset.setdefault("seeds", [0])
    preset.setdefault("ablations", [])
    preset.setdefault("judge", {"kind": "first_divergence"})
    preset.setdefault("judge_precision", {"tasks": 0})
    preset.setdefault("eval", {})
    preset.setdefault("train", {})
    preset.setdefault("backend", "hf")
    preset.setdefault("variants", {})
    preset = _resolve_models(_expand(preset, path))
    _fill_from_bases(preset, path)
    preset["_path"] = str(path)
    if check:
        check_preset(preset)
    return preset


def _fill_from_bases(preset: dict, path: Path) -> None:
    """An env block that names a shipped ``base`` takes the setting that base was built for from its recipe
    (trainers.bases.RECIPES, the one home of the env settings): ``env_id``, ``train_kwargs``, ``eval_kwargs``
    and ``format`` where the block leaves them out. Values the block gives stay (shipped_base() refuses a
    train setting or format that is not the base's; another eval split is allowed)."""
    from trainers.bases import RECIPES

    envs = preset.get("envs")
    if not isinstance(envs, dict):
        return
    for env_name, block in envs.items():
        if not isinstance(block, dict) or not isinstance(block.get("base"), str):
            continue
        name = block["base"]
        if name not in RECIPES:
            from prover_gym.checks import did_you_mean

            raise PresetError(
                f"{path}: envs.{env_name}.base = {name!r} is not a base recipe{did_you_mean(name, RECIPES)}; "
                f"use one of {sorted(RECIPES)} (trainers/bases.py)"
            )
        recipe = RECIPES[name]
        for key in ("env_id", "train_kwargs", "eval_kwargs"):
            block.setdefault(key, copy.deepcopy(recipe[key]))
        if recipe.get("format"):  # an absent format is {}: left out, so the block's hash stays the same
            block.setdefault("format", copy.deepcopy(recipe["format"]))


def _resolve_models(preset: dict) -> dict:
    """``base:<name>`` (a shipped base) as the policy ``model`` or a judge's ``model_path`` -> its folder."""
    from trainers.bases import BaseError
    from trainers.config import resolve_model_path

    def fix(block, key):
        if isinstance(block, dict) and isinstance(block.get(key), str) and not getattr(block[key], "missing", None):
            try:
                block[key] = resolve_model_path(block[key])
            except BaseError as exc:
                raise PresetError(f"{preset.get('_path', preset.get('name'))}: {key} = {block[key]!r}: {exc}") from None

    fix(preset, "model")
    judges = [preset.get("judge"), *[v.get("judge") for v in preset["variants"].values() if isinstance(v, dict)]]
    for judge in judges:
        fix(judge, "model_path")
        if isinstance(judge, dict):
            fix(judge.get("backend"), "model_path")
    return preset


def check_preset(preset: dict, extra: list[str] | None = None, **run) -> None:
    """Raise one PresetError listing every problem of ``preset`` (leaderboards/validate.py) and ``extra``
    (the command line's); ``run``: the run's envs, methods, make_envs, require_set."""
    from leaderboards.validate import problems

    found = [*(extra or []), *problems({k: v for k, v in preset.items() if k != "_path"}, **run)]
    if found:
        where = preset.get("_path", preset.get("name"))
        raise PresetError(f"{len(found)} problem(s) in preset {where}:\n" + "\n".join(f"  - {p}" for p in found))


def _expand(obj, path):
    if isinstance(obj, dict):
        return {k: _expand(v, path) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_expand(v, path) for v in obj]
    if isinstance(obj, str) and "${" in obj:
        out = os.path.expandvars(obj)
        missing = re.findall(r"\$\{(\w+)\}", out)
        if missing:
            return _Unset(obj, missing, path)
        return out
    return obj


class _Unset(str):
    """A value that names an unset environment variable; using it raises with the fix."""

    missing: list[str]
    path: str

    def __new__(cls, raw, missing, path):
        s = super().__new__(cls, raw)
        s.missing, s.path = missing, path
        return s


def config_hash(obj) -> str:
    """A short stable hash of ``obj`` (JSON with sorted keys): the identity of a row, checkpoint or measurement."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def git_commit() -> str | None:
    """prover-gym's own commit (12 hex, ``-dirty`` with uncommitted changes to tracked files), from its
    checkout or the wheel it was installed from; never the caller's repository."""
    from prover_gym.resources import provenance

    info = provenance()
    if not info["commit"]:
        return None
    return info["commit"][:12] + ("-dirty" if info["dirty"] else "")


# ---- evaluation --------------------------------------------------------------------------------
def eval_tasks(env_id: str, env_kwargs: dict, episodes: int, seed: int) -> list[str]:
    """The eval tasks of a seed: ``episodes`` of the split's tasks drawn with that seed's own stream (all of them when
    ``episodes`` is 0 or more than the split has); the same for every method."""
    import gymnasium as gym

    env = gym.make(env_id, **env_kwargs)
    ids = list(env.unwrapped.task_ids())  # type: ignore[attr-defined]  # a prover-gym TextEnv
    env.close()
    if episodes and episodes < len(ids):
        ids = random.Random(f"eval|{seed}").sample(ids, episodes)
    return ids


def evaluate(
    env_id: str, env_kwargs: dict, policy, task_ids: list[str], *, batch: int, group_by: str | None, desc: str
) -> dict:
    """Play each task once with ``policy`` (batched over a sync EnvPool); success, score, groups."""
    from tqdm import tqdm

    from agents.rollout import play_tasks

    t0 = time.time()
    bar = tqdm(total=len(task_ids), desc=desc, leave=False, disable=None)
    trajs = play_tasks(env_id, env_kwargs, policy, task_ids, batch=batch, progress=bar.update)
    bar.close()
    stats = getattr(policy, "stats", None) or {}
    if stats.get("requests") and stats.get("failures") == stats["requests"]:
        from agents.backends.base import BackendUnavailable

        raise BackendUnavailable(
            f"the policy backend failed all {stats['requests']} requests of {desc} (last: {policy.last_error})"
        )
    groups: dict[str, list[float]] = {}
    for t in trajs:
        key = (t.turns[0].info or {}).get(group_by) if (group_by and t.turns) else None
        if key:
            groups.setdefault(str(key), []).append(float(t.won))
    return {
        "episodes": len(trajs),
        "success": sum(t.won for t in trajs) / max(1, len(trajs)),
        "score": sum(t.total_reward for t in trajs) / max(1, len(trajs)),
        "groups": {k: sum(v) / len(v) for k, v in sorted(groups.items())},
        "env_steps": sum(len(t.turns) for t in trajs),
        "tokens": sum(len(turn.token_ids or []) for t in trajs for turn in t.turns),
        "invalid_actions": sum(not turn.valid for t in trajs for turn in t.turns),
        "eval_seconds": round(time.time() - t0, 2),
        # per task 0/1, for standard errors and paired comparisons between methods (same tasks, same seed)
        "outcomes": {task: int(t.won) for task, t in zip(task_ids, trajs)},
        # requests the policy's backend failed (after its retries); each cost one turn (an invalid action)
        "policy_failures": stats.get("failures", 0),
    }


def llm_policy(preset: dict, model_path: str, env_cfg: dict, seed: int, backend_cfg: dict | None = None):
    """The policy to evaluate: a backend (the preset's, on ``model_path``, or ``backend_cfg``) in the
    env's prompt format, with the env block's ``format`` kwargs (as in training)."""
    from agents.backends import make_backend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy

    ev = preset["eval"]
    cfg = backend_cfg or {
        "kind": preset.get("backend", "hf"),
        "model_path": model_path,
        "max_tokens": ev.get("max_tokens", 64),
        "temperature": ev.get("temperature", 0.0),
        "seed": seed,
    }
    return LLMPolicy(make_backend(cfg), make_format(env_cfg["env_id"], **(env_cfg.get("format") or {})))


# ---- training ----------------------------------------------------------------------------------
def shipped_base(env_name: str, env_cfg: dict) -> dict | None:
    """The env block's ``base`` (a name in trainers.bases.RECIPES): its directory and recipe, checked
    against the block (a base SFT'd for another setting would not be the `sft` row of this one)."""
    name = env_cfg.get("base")
    if not name:
        return None
    from trainers.bases import BaseError, base_dir

    try:
        path = base_dir(str(name))
    except BaseError as exc:
        raise PresetError(f"envs.{env_name}.base: {exc}") from None
    meta = json.loads((path / "recipe.json").read_text())
    built = meta["recipe"]
    for key, ours in (
        ("env_id", env_cfg["env_id"]),
        ("train_kwargs", env_cfg["train_kwargs"]),
        ("format", env_cfg.get("format") or {}),
    ):
        if built[key] != ours:
            raise PresetError(
                f"envs.{env_name}.base {name!r} was built for {key}={built[key]!r} but the block has "
                f"{ours!r}; use the same setting, or drop `base` to train SFT here"
            )
    digest = config_hash(meta)
    return {
        "model_dir": str(path),
        "curve": [],
        "train_seconds": 0.0,
        "extra": {"base": str(name), "base_hash": digest, "base_sft_seconds": meta.get("sft_seconds")},
        "hash": digest,
    }


def _train_config(
    preset: dict,
    env_cfg: dict,
    method: str,
    seed: int,
    out_dir: Path,
    model_path: str | None,
    judge: dict,
    match_ratio: float | None = None,
):
    from trainers.config import TrainConfig

    train = {**preset["train"], **(env_cfg.get("train") or {})}  # an env block may override the budget
    variant = preset.get("variants", {}).get(method)
    if variant is not None:  # a named variant: its method, with its own judge and trainer overrides
        method, judge = variant["method"], variant.get("judge", judge)
        train = {**train, **(variant.get("train") or {})}
    base = {k: v for k, v in train.items() if not k.startswith("sft_")}
    if method == "sft":
        data = {
            **{k: v for k, v in train.items() if k.startswith("sft_") or k in ("max_tokens", "minibatch_size")},
            "method": "grpo",
            "iterations": 0,
        }
    else:
        data = {**base, "method": method, "sft_steps": 0, "judge": judge}
        if match_ratio is not None:
            data["match_ratio"] = round(float(match_ratio), 6)
            # ProVer spent nothing on credit (it verified no segment): the compute-matched control is GRPO
            if registry.get(method).extra_tasks and data["match_ratio"] == 0:
                data["method"] = "grpo"
        if data.get("probe_tasks"):  # the learning curve's probe: greedy on the env's held-out split
            data["probe_kwargs"] = env_cfg["eval_kwargs"]
    data.update(
        env_id=env_cfg["env_id"],
        env_kwargs=env_cfg["train_kwargs"],
        seed=seed,
        out_dir=str(out_dir),
        model_path=model_path,
        policy_format=env_cfg.get("format") or {},
    )
    known = set(TrainConfig.__dataclass_fields__)
    bad = sorted(set(data) - known)
    if bad:
        raise PresetError(f"train: unknown trainer keys {bad}; see trainers/config.py")
    return TrainConfig(**data)


def train(
    preset: dict,
    env_name: str,
    method: str,
    seed: int,
    out: Path,
    model_path: str | None,
    judge: dict,
    model_hash: str | None = None,
    match_ratio: float | None = None,
) -> dict:
    """Train (or reuse) one checkpoint; returns its model dir, curve, seconds and overhead figures."""
    from prover_gym.cache import atomic_write
    from trainers.checkpoint import has_checkpoint
    from trainers.train import Trainer

    env_cfg = preset["envs"][env_name]
    run_dir = out / "runs" / preset["name"] / env_name / method / f"seed{seed}"
    cfg = _train_config(preset, env_cfg, method, seed, run_dir, model_path, judge, match_ratio)
    digest = config_hash([cfg.to_dict(), model_hash])  # model_hash: the start model's content, when shipped
    meta_path = run_dir / "leaderboard_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("hash") != digest and run_dir.exists():
        shutil.rmtree(run_dir)  # another config: start over
        meta = {}
    done = meta.get("finished") and has_checkpoint(run_dir)  # (puts back a checkpoint a kill left as .old)
    seconds = meta.get("seconds", 0.0)
    if not done:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(meta_path, json.dumps({"hash": digest, "finished": False, "seconds": seconds}))
        t0 = time.time()
        trainer = Trainer(cfg, resume=has_checkpoint(run_dir))
        if method == "sft":
            trainer.sft()
            trainer.save()
        else:
            trainer.run(desc=f"{env_name} {method} s{seed}")
        trainer.close()
        seconds += time.time() - t0
        atomic_write(meta_path, json.dumps({"hash": digest, "finished": True, "seconds": round(seconds, 2)}))
    curve = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        curve = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    extra: dict[str, Any] = {"model": str(run_dir / "checkpoint" / "model"), "train_hash": digest}
    if (run_dir / "credit.jsonl").is_file():  # where the credit went: the run's inspector page
        from leaderboards.credit_view import load_records, summary, write_page

        extra["inspector"] = str(write_page(run_dir).relative_to(out))
        records = load_records(run_dir)
        extra["credit"] = {
            **summary(records),
            "a_seg": [round(r["verification"]["a_seg"], 4) for r in records if r.get("verification")],
        }
    if curve:
        for k in ("prover/extra_tokens_ratio", "prover/extra_env_steps_ratio", "prover/bonus_share"):
            extra[k] = sum(r.get(k, 0.0) for r in curve) / len(curve)
        for k in (
            "prover/proposed_segments",
            "prover/verified_segments",
            "prover/credited_segments",
            "prover/positive_segments",
        ):
            extra[k] = sum(r.get(k, 0) for r in curve)
        extra["train_success_last"] = curve[-1].get("success")
        # the run's cost in tokens, by who spent them, and what grpo_matched is given (trainers.train.run_cost)
        from trainers.train import run_cost

        extra.update(run_cost(curve))
    return {
        "model_dir": str(run_dir / "checkpoint" / "model"),
        "curve": curve,
        "train_seconds": round(seconds, 2),
        "extra": extra,
    }


# ---- judge precision ----------------------------------------------------------------------------
def judge_precision(preset: dict, env_name: str, db) -> bool:
    """Each judge kind on one-slip groups, measured by verification: the share of its proposals whose
    A_seg (``m`` continuations of a noisy expert, ``eps`` random turns) is > 0, the mean A_seg, and the
    agreement with the exhaustive judge's best verified turn (trainers/judge_eval.py)."""
    import gymnasium as gym

    import judges
    from trainers.judge_eval import NoisyExpert, best_turns, slip_groups, verified_precision
    from trainers.verification import ValueEstimator

    spec = preset.get("judge_precision") or {}
    if not spec.get("tasks"):
        return False
    env_cfg = preset["envs"][env_name]
    kinds = spec.get("kinds", ["random", "first_divergence", "oracle", "exhaustive"])
    digest = config_hash([env_cfg, spec, "verified"])
    todo = [k for k in kinds if db.get_precision(f"{preset['name']}|{env_name}|{k}|{digest}") is None]
    if not todo:
        return False
    groups = slip_groups(
        env_cfg["env_id"],
        env_cfg["eval_kwargs"],
        spec["tasks"],
        spec.get("failures", 2),
        seed=0,
        slack=spec.get("slack"),
    )
    env = gym.make(env_cfg["env_id"], **env_cfg["eval_kwargs"])
    eps, m = spec.get("eps", 0.3), spec.get("m", 4)
    references = best_turns(groups, ValueEstimator(env, NoisyExpert(eps, seed=1), m))  # once for every kind
    for kind in todo:  # each judge gets the same continuation policy, seeded the same
        estimator = ValueEstimator(env, NoisyExpert(eps, seed=0), m)
        judge = judges.make({"kind": kind})
        if hasattr(judge, "bind"):
            judge.bind(ValueEstimator(env, NoisyExpert(eps, seed=2), m))
        stats = verified_precision(judge, groups, estimator, references=references)
        stats.update(continuation=f"noisy expert eps={eps}", m=m)
        db.put_precision(f"{preset['name']}|{env_name}|{kind}|{digest}", preset["name"], env_name, kind, digest, stats)
    env.close()
    return True


# relative cost of one cell (eval only; an RL cell counts 4x), to start the longest first
CELL_COST = {"alfworld": 3, "webshop": 2, "searchqa": 1}


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


class Cell(NamedTuple):
    """One (env, seed, method) of a run still to do: its row key, eval tasks and start base; for
    grpo_matched, ``match``: the key of the prover row whose measured ratio it takes, or a ratio."""

    cost: int  # relative, to start the longest first
    env: str
    seed: int
    method: str
    special: tuple | None  # ("policy", backend config) under --eval-only
    key: str
    key_hash: str
    tasks: list
    base: dict | None
    match: str | float | None = None


def run_cell(preset: dict, cell: Cell, out: str, judge: dict, commit: str | None):
    """One leaderboard cell: the policy of its method (trained or reused as needed) played on its tasks.
    Returns (row, curve, log line, warning or None); the caller writes the row. Runs in a worker
    process under ``--jobs``."""
    import prover_gym

    env_name, seed, method, special, base = cell.env, cell.seed, cell.method, cell.special, cell.base
    out_dir = Path(out)
    env_cfg = preset["envs"][env_name]
    ev = preset["eval"]
    split = str(env_cfg["eval_kwargs"].get("split", "test"))
    trained: dict[str, Any] = {"train_seconds": 0.0, "curve": [], "extra": {}}
    if special is not None:
        backend_cfg = {k: v for k, v in special[1].items() if k != "name"}
        policy = llm_policy(preset, "", env_cfg, seed, backend_cfg)
    elif method == "random":
        from agents.baselines import RandomPolicy

        policy = RandomPolicy(seed)
    elif method == "expert":
        from agents.baselines import ExpertPolicy

        policy = ExpertPolicy()
    else:
        sft_model: str | None = base["model_dir"] if base is not None else None
        if method == "sft" and base is not None:
            trained = base
        if sft_model is None:
            sft = train(preset, env_name, "sft", seed, out_dir, preset.get("model"), judge)
            sft_model = sft["model_dir"]
            if method == "sft":
                trained = sft
        if method != "sft":
            base_hash = base["hash"] if base is not None else None
            ratio = cell.match if isinstance(cell.match, float) else None
            trained = train(preset, env_name, method, seed, out_dir, sft_model, judge, base_hash, ratio)
        policy = llm_policy(preset, trained["model_dir"], env_cfg, seed)
    res = evaluate(
        env_cfg["env_id"],
        env_cfg["eval_kwargs"],
        policy,
        cell.tasks,
        batch=ev.get("batch", 8),
        group_by=env_cfg.get("group_by"),
        desc=f"eval {env_name} {method} s{seed}",
    )
    backend = getattr(policy, "backend", None)
    if backend is not None and hasattr(backend, "close") and special is None:  # a local engine: free it
        backend.close()
    failures = res.pop("policy_failures")
    outcomes = res.pop("outcomes")
    warning = None
    if failures:
        warning = (
            f"warning: {env_name} {method} seed {seed}: the policy backend failed {failures} requests "
            f"(each an invalid action); last error: {policy.last_error}"
        )
    row = {
        "key": cell.key,
        "preset": preset["name"],
        "env": env_name,
        "env_id": env_cfg["env_id"],
        "method": method,
        "split": split,
        "seed": seed,
        "config_hash": cell.key_hash,
        "commit_id": commit,
        "version": prover_gym.__version__,
        **res,
        "train_seconds": trained["train_seconds"],
        "extra": {**trained["extra"], "outcomes": outcomes, **({"policy_failures": failures} if failures else {})},
    }
    from leaderboards.stats import standard_error

    se = standard_error(list(outcomes.values()))
    line = (
        f"{env_name:9s} {method:18s} seed {seed}: success {100 * res['success']:5.1f}% +- {100 * se:.1f} (SE) "
        f"score {100 * res['score']:5.1f} ({res['episodes']} episodes; train {trained['train_seconds']:.0f}s, "
        f"eval {res['eval_seconds']:.0f}s)"
    )
    return row, trained["curve"], line, warning


# ---- the run -------------------------------------------------------------------------------------
def _method_of(preset: dict, name: str) -> str:
    """The trainer method behind a row name: itself, or a preset variant's ``method``."""
    variant = preset.get("variants", {}).get(name)
    return variant["method"] if variant is not None else name


def _asks_judge(name: str) -> bool:
    spec = registry.REGISTRY.get(name)
    return spec is not None and spec.asks_judge


def _trained(preset: dict, name: str) -> bool:
    return _method_of(preset, name) in trained()


def _known_methods(preset: dict) -> list[str]:
    return [*baselines(), *trained(), *(preset.get("variants") or {})]


def plan_methods(preset: dict, args) -> list[str]:
    """The methods a run trains or evaluates (the preset's or ``--methods``, plus its ablations with ``--ablations``),
    each checked; grpo_matched needs its reference method or a fixed ratio."""
    names = list(args.methods or preset["methods"])
    if args.ablations:
        names += [m for m in preset.get("ablations", []) if m not in names]
    known = _known_methods(preset)
    for m in names:
        if m not in known:
            raise PresetError(
                f"unknown method {m!r}{did_you_mean(m, known)} (valid: {', '.join(known)}; variants are defined "
                "in the preset)"
            )
    for m in names:
        to = matched_to(m)
        if to is not None and to not in names and not preset["train"].get("match_ratio"):
            raise PresetError(
                f"{m} is GRPO given the tokens {to} spends: run {to} too (its measured ratio is used), or set "
                "train.match_ratio (e.g. 0.15)"
            )
    return names


@dataclasses.dataclass
class Plan:
    """What a run will do, decided before anything runs (``--dry-run`` prints it): the checked preset, the
    judge, the envs and seeds, and the cells to run (and those ``out`` already has)."""

    preset: dict
    judge: dict
    envs: list[str]
    seeds: list[int]
    out: Path
    cells: list[Cell]
    reused: list[tuple[str, int, str]]  # (env, seed, method) rows already in out's results
    eval_only: bool = False
    jobs: int = 1


def make_plan(args, db=None) -> Plan:
    """The preset (checked whole with the command line's choices), and every (env, seed, method) cell with
    its row key: a cell whose key ``db`` already holds is reused, the others are to run."""
    preset = load_preset(args.preset, check=False)
    envs = list(args.envs or (preset["envs"] if isinstance(preset["envs"], dict) else []))
    judge = preset["judge"]
    if args.judge:
        judge = _kind_config(
            "--judge",
            args.judge,
            "give a judge config file, a shipped one's name (configs/judges/: "
            "first_divergence, oracle, ...) or a mapping with 'kind'",
        )
    cli: list[str] = []  # the command line's problems, reported with the preset's
    try:
        methods = [] if args.eval_only else plan_methods(preset, args)
    except PresetError as exc:  # check the valid ones, report the others
        known = _known_methods(preset)
        methods = [m for m in [*(args.methods or preset["methods"]), *(preset["ablations"] or [])] if m in known]
        if args.methods or all(m in known for m in preset["methods"]):
            cli.append(
                ("--methods: " if args.methods else "") + str(exc)
            )  # (a preset's own unknown method is reported below, with its key path)
    if args.judge:
        import judges

        cli += judges.check(judge, "--judge")
    # one pass over everything this run needs, before any model loads or cell runs (validate.py)
    check_preset(preset, cli, envs=envs, methods=methods, make_envs=True, require_set=True)
    seeds = list(args.seeds if args.seeds is not None else preset["seeds"])
    ev = preset["eval"]
    cells: list[Cell] = []
    reused: list[tuple[str, int, str]] = []
    for env_name in envs:
        env_cfg = preset["envs"][env_name]
        split = str(env_cfg["eval_kwargs"].get("split", "test"))
        for seed in seeds:
            tasks = eval_tasks(env_cfg["env_id"], env_cfg["eval_kwargs"], ev.get("episodes", 0), seed)
            eval_hash = config_hash([env_cfg, ev, tasks])
            base = None if args.eval_only else shipped_base(env_name, env_cfg)
            if args.eval_only:
                policy_cfg = _policy_config(args.policy)
                entries = [
                    (
                        policy_cfg.get("name") or f"policy:{policy_cfg.get('model') or policy_cfg.get('model_path')}",
                        ("policy", policy_cfg),
                    )
                ]
            else:
                entries = [(m, None) for m in methods]  # type: ignore[misc]  # no special policy
            keys: dict[str, tuple[str, str]] = {}
            entries.sort(key=lambda e: matched_to(e[0]) is not None)  # after the cell it is matched to
            for method, special in entries:
                to = matched_to(method)
                matched: str | float | None = keys[to][0] if to is not None and to in keys else None
                if to is not None and matched is None:  # its reference not run: the preset's fixed ratio
                    matched = float(preset["train"]["match_ratio"])
                key_hash = config_hash(
                    [
                        eval_hash,
                        method,
                        preset.get("model"),
                        base and base["hash"],
                        [preset["train"], env_cfg.get("train")] if _trained(preset, method) else None,
                        judge if _asks_judge(_method_of(preset, method)) else None,
                        preset["variants"].get(method),
                        special,
                        *([matched] if matched is not None else []),
                    ]
                )
                key = f"{preset['name']}|{env_name}|{method}|{split}|{seed}|{key_hash}"
                keys[method] = (key, key_hash)
                if db is not None and db.get(key) is not None:
                    reused.append((env_name, seed, method))
                    continue
                cost = CELL_COST.get(env_name, 2) * (4 if _trained(preset, method) and method != "sft" else 1)
                cells.append(Cell(cost, env_name, seed, method, special, key, key_hash, tasks, base, matched))
    return Plan(
        preset,
        judge,
        envs,
        seeds,
        Path(args.out),
        cells,
        reused,
        eval_only=bool(args.eval_only),
        jobs=max(1, int(getattr(args, "jobs", 1) or 1)),
    )


class Recorder:
    """Records each finished cell in the results store as it comes back (the main process is the only
    writer, so a kill loses at most the cells in flight) and prints its line; counts new and failed rows."""

    def __init__(self, db, name: str, t_start: float):
        self.db, self.name, self.t_start = db, name, t_start
        self.done = self.failed = 0

    def __call__(self, result) -> None:
        if isinstance(result, CellError):  # recorded as a failed cell; the other cells go on
            c = result.cell
            self.db.put_error(c.key, self.name, c.env, c.method, c.seed, result.error, result.trace)
            self.failed += 1
            print(
                f"[{time.time() - self.t_start:6.0f}s] {c.env:9s} {c.method:18s} seed {c.seed}: FAILED: {result.error}",
                file=sys.stderr,
                flush=True,
            )
            return
        row, curve, line, warning = result
        if warning:
            print(warning, file=sys.stderr)
        self.db.put(row, curve)
        self.done += 1
        print(f"[{time.time() - self.t_start:6.0f}s] {line}", flush=True)


def execute(plan: Plan, db, record: Recorder) -> None:
    """Run the plan: its servers, the judge-precision measurement, the SFT checkpoints RL cells start from,
    then the cells (longest first, on ``plan.jobs`` worker processes), each handed to ``record``."""
    preset, judge, out = plan.preset, plan.judge, plan.out
    commit = git_commit()
    with contextlib.ExitStack() as services:
        start_servers(preset, plan.envs, out, services)
        if not plan.eval_only:
            for env_name in plan.envs:
                t_judge = time.time()
                if judge_precision(preset, env_name, db):
                    print(
                        f"[{time.time() - record.t_start:6.0f}s] {env_name:9s} judge precision by verification: "
                        f"{time.time() - t_judge:.0f}s",
                        flush=True,
                    )
        cells = plan.cells
        if plan.jobs > 1 and not plan.eval_only:
            # an env without a shipped base trains its SFT checkpoint first: every RL cell starts from it
            for env_name in dict.fromkeys(c.env for c in cells if c.base is None and _trained(preset, c.method)):
                for seed in dict.fromkeys(c.seed for c in cells if c.env == env_name):
                    train(preset, env_name, "sft", seed, out, preset.get("model"), judge)

        def run_cells(todo: list[Cell]) -> None:
            jobs = plan.jobs
            if jobs > 1 and len(todo) > 1:
                import multiprocessing as mp
                from concurrent.futures import ProcessPoolExecutor, as_completed

                threads = max(1, (os.cpu_count() or 1) // jobs)
                print(f"{len(todo)} cells on {jobs} worker processes ({threads} torch thread(s) each)", flush=True)
                with ProcessPoolExecutor(
                    max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(threads,)
                ) as ex:
                    futures = [
                        ex.submit(run_cell_safe, preset, c, str(out), judge, commit)
                        for c in sorted(todo, key=lambda c: -c.cost)
                    ]  # longest first
                    for fut in as_completed(futures):
                        record(fut.result())
            else:
                for c in todo:
                    record(run_cell_safe(preset, c, str(out), judge, commit))

        # grpo_matched cells run after the prover cells whose measured token ratio they are given
        run_cells([c for c in cells if matched_to(c.method) is None])
        run_cells([_matched(c, db) for c in cells if matched_to(c.method) is not None])


def run(args) -> Path:
    """plan -> execute -> record: the plan checked before anything runs (printed and nothing else with
    ``--dry-run``), the cells run with each row recorded as it comes back, then the reports written."""
    from leaderboards.db import ResultsDB
    from leaderboards.report import write_reports

    out = Path(args.out)
    dry = bool(getattr(args, "dry_run", False))  # plan only: nothing trains, evaluates, starts or is written
    t_start = time.time()
    existing = out / "results.sqlite"
    db = ResultsDB(existing) if existing.is_file() else None
    try:
        plan = make_plan(args, db)  # the preset checked whole before anything is made or run
        if dry:
            print_plan(plan)
            return out
        out.mkdir(parents=True, exist_ok=True)
        db = db or ResultsDB(existing)
        record = Recorder(db, plan.preset["name"], t_start)
        execute(plan, db, record)
        paths, comps = write_reports(db, plan.preset["name"], out, envs=plan.envs)
        for comp in comps:
            if (comp["a"], comp["b"]) in (
                ("grpo", "sft"),
                ("prover", "grpo"),
                ("prover", "grpo_matched"),
                ("gigpo", "grpo"),
            ):
                print(f"{comp['a']} vs {comp['b']} ({comp['env']}, {comp['seeds']} paired seed(s)): {comp['verdict']}")
    finally:
        if db is not None:
            db.close()
    print(
        f"{record.done} new rows, {len(plan.reused)} reused; {time.time() - t_start:.0f}s. Tables: "
        + ", ".join(str(p) for p in paths if p.suffix in (".md", ".html"))
    )
    if record.failed:
        raise CellsFailed(
            f"{record.failed} cell(s) failed (listed above; their tracebacks are in {out / 'results.sqlite'}, table "
            "errors). The other rows are recorded; fix the cause and run the same command again: only what is "
            "missing runs"
        )
    return out


def print_plan(plan: Plan) -> None:
    """``--dry-run``: the cells a run would execute, in the order it would start them, and those it
    would reuse from ``out``; plus the judge-precision measurement and the servers it would start."""
    preset, cells, reused, out = plan.preset, plan.cells, plan.reused, plan.out
    todo = [c for c in sorted(cells, key=lambda c: -c.cost) if matched_to(c.method) is None]
    todo += [c for c in cells if matched_to(c.method) is not None]
    print(f"plan of preset {preset['name']!r} into {out}: {len(cells)} cell(s) to run, {len(reused)} reused")
    for c in todo:
        after = f" (after {matched_to(c.method)}: its measured token ratio)" if matched_to(c.method) else ""
        if c.method == "sft":
            kind = "SFT + eval" if c.base is None else "eval of the shipped base"
        else:
            kind = "train + eval" if _trained(preset, c.method) else "eval"
        print(f"  run    {c.env:9s} seed {c.seed}  {c.method:18s} {kind}{after}")
    for env, seed, method in reused:
        print(f"  reused {env:9s} seed {seed}  {method}")
    spec = preset.get("judge_precision") or {}
    if spec.get("tasks"):
        print(f"  judge precision: {spec.get('kinds')} on {spec['tasks']} task(s) per env (unless recorded)")
    for name, block in preset["envs"].items():
        if block.get("retrieval_server"):
            print(
                f"  retrieval server for {name}: {block['retrieval_server'].get('retriever', 'bm25')} over "
                f"{block['retrieval_server'].get('corpus')}"
            )


def start_servers(preset: dict, envs: list[str], out: Path, stack: contextlib.ExitStack) -> None:
    """Start the retrieval server of each selected env block that has a ``retrieval_server`` (one per
    search_url), on ``stack``: the run stops them when it ends, however it ends."""
    from prover_gym.searchqa.serve import served

    started: set[str] = set()
    for env_name in envs:
        block = preset["envs"][env_name]
        server = block.get("retrieval_server")
        if not server:
            continue
        for key in ("train_kwargs", "eval_kwargs"):
            kwargs = block.get(key) or {}
            url = kwargs.get("search_url")
            if kwargs.get("retriever") != "http" or not url or url in started:
                continue
            started.add(url)
            log = out / f"retrieval_server_{env_name}.log"
            stack.enter_context(served(str(url), **server, log=log))


class CellsFailed(RuntimeError):
    """Some cells raised; the others' rows are recorded."""


class CellError(NamedTuple):
    """A cell that raised in a worker: the cell, the error's first line and the traceback (recorded in the results
    store)."""

    cell: Cell
    error: str
    trace: str


def run_cell_safe(preset: dict, cell: Cell, out: str, judge: dict, commit: str | None):
    """``run_cell``, with an exception of the cell returned as a ``CellError`` (recorded, and the run goes
    on) rather than raised through the pool. A backend that is down is everyone's problem: it stops the run."""
    import traceback

    from agents.backends.base import BackendUnavailable

    try:
        return run_cell(preset, cell, out, judge, commit)
    except (BackendUnavailable, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001  (any failure of one cell is recorded, not fatal to the run)
        return CellError(cell, f"{type(exc).__name__}: {exc}".splitlines()[0][:500], traceback.format_exc())


def _matched(cell: Cell, db) -> Cell:
    """A grpo_matched cell with its ratio: the measured one of the prover row it is matched to."""
    if not isinstance(cell.match, str):
        return cell
    row = db.get(cell.match)
    ratio = (row or {}).get("extra", {}).get("match_ratio") if row else None
    if ratio is None:
        raise PresetError(
            f"{cell.method} ({cell.env}, seed {cell.seed}): the {matched_to(cell.method)} row it is matched to has "
            "no measured token ratio; re-run it (its row predates cost accounting) or set train.match_ratio"
        )
    return cell._replace(match=float(ratio))


def _kind_config(flag: str, spec: str, expected: str) -> dict:
    """A ``--judge`` / ``--policy`` value: a YAML file, or a YAML mapping inline, with a ``kind``."""
    import yaml

    from prover_gym.resources import shipped_configs

    shipped = shipped_configs("judges") if flag == "--judge" else {}
    if Path(spec).is_file():
        cfg = yaml.safe_load(Path(spec).read_text())
    elif spec in shipped:  # a shipped judge config, by name
        cfg = yaml.safe_load(shipped[spec].read_text())
    else:
        try:
            cfg = yaml.safe_load(spec)
        except yaml.YAMLError:
            cfg = None
    if not isinstance(cfg, dict) or "kind" not in cfg:
        raise PresetError(f"{flag} {spec!r}: {expected}")
    return cfg


def _policy_config(spec: str | None) -> dict:
    if not spec:
        raise PresetError(
            "--eval-only needs --policy: a backend config file or mapping, e.g. "
            "'{kind: openai, model: my-model, base_url: http://127.0.0.1:8000/v1}' or '{kind: hf, model_path: DIR}'"
        )
    return _kind_config("--policy", spec, "expected a mapping with 'kind' (openai | hf | vllm)")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The docstring's layout kept, and every option's default shown (an option without a value of its
    own states in its help what it defaults to)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def parser() -> argparse.ArgumentParser:
    """The command line of ``python leaderboards/run.py`` (``make_plan(parser().parse_args([...]))`` plans a
    run from Python)."""
    ap = argparse.ArgumentParser(
        prog="python leaderboards/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=_HelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument(
        "--preset",
        default="default",
        help=f"{' | '.join(sorted(p.stem for p in PRESETS.glob('*.yaml')))} | path/to/preset.yaml",
    )
    ap.add_argument(
        "--envs",
        nargs="+",
        help="subset of the preset's envs, e.g. searchqa webshop alfworld (default: all of the preset's)",
    )
    ap.add_argument(
        "--methods",
        nargs="+",
        help=f"some of {[*baselines(), *trained()]} or the preset's variants (default: the preset's methods)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, help="training seeds (default: the preset's)")
    ap.add_argument(
        "--ablations",
        action="store_true",
        help="also run the preset's ablations (prover_random, prover_unverified, grpo_matched)",
    )
    ap.add_argument(
        "--judge",
        help="judge config for the prover methods: a YAML file, a shipped name (configs/judges/) or an inline mapping "
        "(default: the preset's judge)",
    )
    ap.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help="folder of the results (results.sqlite, tables, plots, checkpoints under runs/), relative to the "
        "current folder; a re-run with the same --out reuses its finished rows",
    )
    ap.add_argument(
        "--bases",
        help="a folder of SFT bases (<name>/config.json + recipe.json) searched before the shipped ones "
        "(sets $PROVER_GYM_BASES)",
    )
    ap.add_argument("--eval-only", action="store_true", help="evaluate --policy without training")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="check the preset and print the plan (cells to run and to reuse), then stop: nothing trains, "
        "evaluates or is written",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes for the cells (each with cpu_count/jobs torch threads; default: 2 when the "
        "machine has 2+ cores: two 1-thread processes beat one 2-thread one on the tiny model)",
    )
    ap.add_argument("--policy", help="with --eval-only: backend config of the policy to evaluate")
    return ap


def main(argv: list[str] | None = None) -> int:
    """``python leaderboards/run.py``: parse the command line and run (exit 2 on a bad preset or flag)."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.bases:
        if not Path(args.bases).is_dir():
            ap.error(f"--bases {args.bases!r}: not a folder")
        prior = os.environ.get("PROVER_GYM_BASES")
        os.environ["PROVER_GYM_BASES"] = os.pathsep.join([str(Path(args.bases).resolve()), *([prior] if prior else [])])
    if args.jobs is None:
        args.jobs = 2 if (os.cpu_count() or 1) >= 2 else 1
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    from agents.backends.base import BackendUnavailable
    from prover_gym.searchqa.serve import ServerError

    try:
        run(args)
    except PresetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CellsFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except BackendUnavailable as exc:  # no row is written for it; finished rows stay, a re-run continues
        print(
            f"error: {exc}. Rows finished so far are kept; run the same command again once the backend is up.",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
