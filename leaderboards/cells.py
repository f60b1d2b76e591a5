"""What a leaderboard cell is, below everything that plans, checks or runs one: the method lookups (through
the method registry), the preset error, a cell's key and its training config. ``leaderboards/validate.py`` and
``leaderboards/plan.py`` import it; it imports neither."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import NamedTuple

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


def config_hash(obj) -> str:
    """A short stable hash of ``obj`` (JSON with sorted keys): the identity of a row, checkpoint or measurement."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


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


# ---- training ----------------------------------------------------------------------------------
def shipped_base(env_name: str, env_cfg: dict) -> dict | None:
    """The env block's ``base`` (a name in trainers.bases.RECIPES): its directory and recipe, checked
    against the block (a base SFT'd for another setting would not be the `sft` row of this one)."""
    name = env_cfg.get("base")
    if not name:
        return None
    from trainers.recipes import BaseError, base_dir

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


# relative cost of one cell (eval only; an RL cell counts 4x), to start the longest first
CELL_COST = {"alfworld": 3, "webshop": 2, "searchqa": 1}


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


class CellError(NamedTuple):
    """A cell that raised in a worker: the cell, the error's first line and the traceback (recorded in the results
    store)."""

    cell: Cell
    error: str
    trace: str
