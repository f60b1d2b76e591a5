"""One config dataclass for the trainer; YAML files plus dotted ``key=value`` overrides."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

OPTIMIZERS = ("adamw", "sgd")

# The config's sections: each field belongs to one. Storage stays flat (``cfg.lr``: users' scripts and
# overrides such as ``lr=1e-4`` keep working); a YAML file or an override may also name a field through its
# section (``learner: {lr: 1e-4}``, ``learner.lr=1e-4``), ``--help`` and docs/config-reference.md list the
# fields by section, and ``TrainConfig.sections()`` gives the nested view.
SECTIONS: dict[str, tuple[str, ...]] = {
    "env": ("env_id", "env_kwargs", "policy_format"),
    "model": ("model_path", "lora", "rollout_engine", "recompute_logprobs", "torch_threads"),
    "rollout": (
        "iterations",
        "tasks_per_iteration",
        "group_size",
        "match_ratio",
        "max_tokens",
        "temperature",
        "batched_rollouts",
        "pool_backend",
        "pool_options",
        "seed",
    ),
    "credit": (
        "method",
        "std_normalize",
        "drop_zero_std_groups",
        "invalid_action_penalty",
        "gigpo_gamma",
        "gigpo_omega",
        "judge",
        "beta",
        "continuations",
        "sign",
        "max_verified_groups",
        "value_before",
        "reverify",
        "min_a_seg",
        "gate_alpha",
    ),
    "learner": (
        "lr",
        "optimizer",
        "adam_eps",
        "weight_decay",
        "clip_eps",
        "clip_eps_high",
        "kl_coef",
        "agg",
        "ppo_epochs",
        "updates_per_epoch",
        "minibatch_size",
    ),
    "sft": ("sft_steps", "sft_episodes", "sft_demonstrator", "sft_lr", "sft_schedule"),
    "logging": (
        "out_dir",
        "checkpoint_every",
        "loggers",
        "wandb_project",
        "progress",
        "probe_kwargs",
        "probe_tasks",
        "probe_every",
        "credit_records",
        "credit_obs_chars",
    ),
}


def _f(default, help_text: str):
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help_text})
    return field(default=default, metadata={"help": help_text})


@dataclass
class TrainConfig:
    """Every setting of a training run (fields below, each with its help text; docs/config-reference.md), checked at
    construction with an error naming the key and its valid values. Made by ``load_config``."""

    env_id: str = _f("prover/SearchQA-v0", "environment id")
    env_kwargs: dict = _f({"split": "train"}, "gym.make kwargs of the training env")
    method: str = _f(
        "grpo",
        "grpo | dr_grpo | gigpo | grpo_matched | prover | prover_random | prover_unverified, or another "
        "method registered in trainers/methods.py (same loop, different advantages); grpo_matched = grpo "
        "with match_ratio extra tasks",
    )
    model_path: str | None = _f(
        None,
        "HF model directory, base:NAME (a shipped SFT base) or pretrained:NAME (a named pretrained model, "
        "prover_gym/models.py); None = the tiny local Qwen3 model",
    )
    iterations: int = _f(10, "RL iterations")
    tasks_per_iteration: int = _f(4, "distinct tasks per iteration")
    match_ratio: float = _f(
        0.0,
        "compute matching (method grpo_matched): extra tasks per iteration as a fraction of "
        "tasks_per_iteration, the fractional part carried to the next iteration, drawn from their own "
        "stream (the first tasks_per_iteration tasks and their rollouts stay those of grpo); set it to "
        "ProVer's measured extra generated tokens / rollout tokens so GRPO spends the same budget",
    )
    torch_threads: int | None = _f(
        None,
        "torch intra-op threads, fixed for the run (float sums depend on it, so runs to be compared "
        "use the same); None = torch's default",
    )
    group_size: int = _f(4, "rollouts per task (the GRPO group)")
    lr: float = _f(1e-4, "learning rate of the RL optimizer")
    optimizer: str = _f(
        "adamw",
        "RL optimizer: adamw | sgd (plain SGD: a step proportional to the clipped gradient, "
        "so parameters whose policy gradient is only noise barely move; Adam moves every "
        "parameter by ~lr whatever its gradient's size)",
    )
    adam_eps: float = _f(1e-8, "AdamW's eps; larger values shrink the steps of parameters with tiny gradients")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    clip_eps: float = _f(0.2, "ratio clip (PPO/GRPO): the ratio is kept in [1 - clip_eps, 1 + clip_eps_high]")
    clip_eps_high: float | None = _f(None, "upper ratio clip (DAPO's clip-higher, e.g. 0.28); None = clip_eps")
    kl_coef: float = _f(0.0, "KL-to-reference coefficient (0 = no reference model)")
    std_normalize: bool = _f(True, "divide group advantages by their std (GRPO); False = Dr. GRPO's centring only")
    drop_zero_std_groups: bool = _f(
        False,
        "leave groups whose rewards are all equal out of the loss (DAPO's dynamic "
        "sampling filter); the dropped fraction is logged as groups/dropped_fraction",
    )
    invalid_action_penalty: float = _f(
        0.0,
        "subtracted from a trajectory's reward per turn whose text did not parse into an action (verl-agent uses 0.1)",
    )
    gigpo_gamma: float = _f(0.95, "GiGPO: discount of the step returns (verl-agent's default)")
    gigpo_omega: float = _f(1.0, "GiGPO: weight of the step-group advantage added to the episode advantage")
    agg: str = _f(
        "token-mean",
        "loss aggregation: token-mean (DAPO / Dr. GRPO) | seq-mean (per turn sample) | "
        "traj-mean (GRPO's 1/|o_i| over a multi-turn trajectory's policy tokens; trainers/loss.py)",
    )
    ppo_epochs: int = _f(1, "passes over each iteration's batch (GRPO's mu); >1 makes the clipped ratio matter")
    updates_per_epoch: int = _f(1, "optimizer steps per pass (the batch cut into that many mini-batches)")
    minibatch_size: int = _f(16, "turn samples per gradient-accumulation micro-batch")
    max_tokens: int = _f(48, "generated tokens per turn")
    temperature: float = _f(1.0, "sampling temperature for rollouts and continuations")
    beta: float = _f(
        1.0,
        "ProVer: weight of the segment bonus, beta * A_seg in the units of the group's advantages "
        "(divided by the group's reward std when std_normalize; trainers.advantages.bonus_scale)",
    )
    continuations: int = _f(4, "ProVer: M continuations from each side of the segment")
    sign: str = _f("positive", "ProVer: credit positive segment advantages only (the paper) or both signs")
    max_verified_groups: int | None = _f(
        2, "ProVer: cap on judged groups per iteration (the first mixed ones); None = every mixed group"
    )
    value_before: str = _f(
        "group",
        "ProVer: V(before) of a segment that starts at turn 0: 'group' reuses the group's own rollouts (free, "
        "but conditioned on the group being mixed: biased toward 0.5); 'continuations' samples M of its own",
    )
    reverify: bool = _f(
        False,
        "ProVer: verify a judge's self-measured proposal (the exhaustive judge's best turn) again on fresh "
        "continuations, so its credit is not the max over noisy estimates (a winner's curse)",
    )
    min_a_seg: float = _f(0.0, "ProVer: credit only segments whose verified A_seg exceeds this")
    gate_alpha: float | None = _f(
        None,
        "ProVer: significance gate, credit only when the one-sided p-value of "
        "V(after) > V(before) is <= gate_alpha (Fisher / binomial); None = no gate",
    )
    credit_records: int | None = _f(
        None,
        "credit.jsonl: at most this many records per iteration (one per judged segment: the group, the "
        "proposal, its verification and bonus; trainers/credit_record.py); None = all, 0 = none",
    )
    credit_obs_chars: int = _f(300, "credit.jsonl: observations are cut to this many characters")
    judge: dict = _f(
        {"kind": "first_divergence", "side": "won"},
        "judge config (judges.make); prover_random uses {kind: random} on this judge's side (won by default)",
    )
    policy_format: dict = _f(
        {}, "kwargs of the env's prompt format (agents.formats.make_format), e.g. {history_length: 1}"
    )
    sft_steps: int = _f(0, "SFT warm-start steps on expert trajectories before RL")
    sft_episodes: int | None = _f(
        32,
        "expert episodes for the SFT warm start, on consecutive tasks of the train split; "
        "null = one per task, so SFT covers every task RL trains on",
    )
    sft_demonstrator: dict = _f(
        {},
        "whose episodes SFT imitates: {} = the env's expert; {kind: hasty, p: 0.6} = a "
        "flawed demonstrator that commits early with probability p where the env names a "
        "hasty action (agents.baselines.HastyExpert); {kind: skip, p: 0.3, distractors: 0} "
        "(ALFWorld's pivot settings: SkipExpert); {kind: decoy, p: 0.3} (WebShop start=results, "
        "Search-QA multi-hop: DecoyExpert)",
    )
    sft_lr: float = _f(1e-3, "SFT learning rate")
    sft_schedule: str = _f(
        "constant", "SFT learning-rate schedule: constant | cosine (5% linear warm-up, then cosine decay to 0)"
    )
    probe_kwargs: dict = _f(
        {}, "gym.make kwargs of a held-out split for the learning curve's probe, e.g. {split: test}; {} = no probe"
    )
    probe_tasks: int = _f(50, "probe: the first this many tasks of probe_kwargs' split, played greedily")
    probe_every: int = _f(2, "probe: after every this many iterations (and before the first), logged as probe/success")
    seed: int = _f(0, "seed of task sampling, generation and initialisation")
    out_dir: str = _f("runs/default", "where metrics.jsonl and checkpoints go")
    checkpoint_every: int = _f(1, "iterations between checkpoints (atomic; --resume continues from the last)")
    loggers: list = _f([], "extra metric sinks besides metrics.jsonl: tensorboard, wandb (each needs its package)")
    wandb_project: str = _f(
        "prover-gym", "W&B project when loggers has wandb (offline unless WANDB_MODE says otherwise)"
    )
    progress: bool = _f(True, "tqdm progress bar over iterations")
    pool_backend: str = _f(
        "sync",
        "EnvPool backend of batched rollouts and continuations: sync | process | thread | ray "
        "(ray: env actors on the cluster ray.init connects to; snapshots shipped pickled)",
    )
    pool_options: dict = _f({}, "EnvPool options, e.g. {envs_per_worker: 4, timeout: 300, ray_init: {address: auto}}")
    lora: dict = _f(
        {},
        "LoRA adapters instead of full fine-tuning (peft), e.g. {r: 8, alpha: 16, dropout: 0.0, "
        "target_modules: [q_proj, v_proj]}; {} = full fine-tuning",
    )
    rollout_engine: dict = _f(
        {},
        "a separate generation engine whose weights are synced after every update, e.g. "
        "{kind: vllm, gpu_memory_utilization: 0.4}; {} = generate with the learner's model",
    )
    recompute_logprobs: bool | None = _f(
        None,
        "recompute the sampled tokens' log-probs with the learner before the update "
        "(None = only when rollout_engine is set: its numerics differ)",
    )
    batched_rollouts: bool = _f(
        True,
        "step all episodes of an iteration (and ProVer's continuations) in lock-step "
        "through a sync EnvPool, one generation batch per turn; False = one by one",
    )

    def __post_init__(self):
        from trainers import methods

        if self.method not in methods.names("rl"):
            raise ValueError(f"method={self.method!r}; use one of {tuple(methods.names('rl'))}")
        from trainers.loss import AGGS

        if self.agg not in AGGS:
            raise ValueError(f"agg={self.agg!r}; use one of {AGGS}")
        if self.sft_schedule not in ("constant", "cosine"):
            raise ValueError(f"sft_schedule={self.sft_schedule!r}; use 'constant' or 'cosine'")
        if self.sign not in ("positive", "both"):
            raise ValueError(f"sign={self.sign!r}; use 'positive' or 'both'")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer={self.optimizer!r}; use one of {OPTIMIZERS}")
        if self.probe_kwargs and (self.probe_every < 1 or self.probe_tasks < 1):
            raise ValueError("probe_every and probe_tasks must be >= 1 when probe_kwargs is set")
        if self.ppo_epochs < 1 or self.updates_per_epoch < 1:
            raise ValueError("ppo_epochs and updates_per_epoch must be >= 1")
        if self.gate_alpha is not None and not 0 < self.gate_alpha <= 1:
            raise ValueError(f"gate_alpha={self.gate_alpha!r}; use a probability in (0, 1], or null for no gate")
        if self.invalid_action_penalty < 0:
            raise ValueError("invalid_action_penalty must be >= 0 (it is subtracted)")
        if self.value_before not in ("group", "continuations"):
            raise ValueError(f"value_before={self.value_before!r}; use 'group' or 'continuations'")
        if self.max_verified_groups is not None and self.max_verified_groups < 0:
            raise ValueError("max_verified_groups must be >= 0, or null for every mixed group")
        if self.match_ratio < 0:
            raise ValueError(f"match_ratio={self.match_ratio!r}; use a fraction >= 0 (0.15 = 15% more tasks)")
        if methods.get(self.method).extra_tasks and self.match_ratio <= 0:
            raise ValueError(
                f"method={self.method} needs match_ratio > 0: ProVer's measured extra generated tokens per "
                "rollout token (its metrics' prover/extra_tokens_ratio), e.g. match_ratio=0.15"
            )
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError(f"torch_threads={self.torch_threads!r}; use a count >= 1, or null for torch's default")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2: GRPO needs a group")
        from prover_gym.pool import BACKENDS

        if self.pool_backend not in BACKENDS:
            raise ValueError(f"pool_backend={self.pool_backend!r}; use one of {BACKENDS}")
        if self.rollout_engine and self.rollout_engine.get("kind") not in ("hf", "vllm"):
            raise ValueError(f"rollout_engine.kind={self.rollout_engine.get('kind')!r}; use 'vllm' (GPU) or 'hf'")
        bad = sorted(set(self.lora) - {"r", "alpha", "dropout", "target_modules"})
        if bad:
            raise ValueError(f"lora keys {bad} unknown; use r, alpha, dropout, target_modules")
        unknown = sorted(set(self.loggers) - {"jsonl", "tensorboard", "wandb"})
        if unknown:
            raise ValueError(f"loggers={unknown}: use any of 'tensorboard', 'wandb' (metrics.jsonl is always written)")

    def sections(self) -> dict[str, dict]:
        """The config by section (SECTIONS): ``{"learner": {"lr": ..., ...}, ...}``."""
        flat = self.to_dict()
        return {name: {key: flat[key] for key in keys} for name, keys in SECTIONS.items()}

    def to_dict(self) -> dict:
        """The config as a plain dict (checkpoints and metrics record it)."""
        return asdict(self)


def _set(tree: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        tree = tree.setdefault(k, {})
    tree[keys[-1]] = value


def _merge(base: dict, top: dict) -> dict:
    """``top`` over ``base``; mappings merged key by key (a part's ``env_kwargs`` extended, not replaced)."""
    out = dict(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def parts_dirs(path: Path | None = None) -> list[Path]:
    """Where a config's ``defaults`` entries are looked up: ``parts/`` beside the file, then the shipped
    ``configs/train/parts/`` (env settings, model budgets: one home for each)."""
    from prover_gym.resources import shipped

    dirs = [path.parent / "parts"] if path is not None else []
    shipped_parts = shipped("configs") / "train" / "parts"
    return [*dirs, shipped_parts] if shipped_parts not in dirs else dirs


def _compose(data: dict, where: Path | None, seen: tuple[str, ...] = ()) -> dict:
    """A config with ``defaults: [env/<setting>, model/<budget>, ...]``: the parts merged in order, then
    the config's own keys over them (Hydra's order with ``_self_`` last). Parts may list defaults too."""
    if not isinstance(data, dict):
        raise ValueError(f"config {where}: expected a mapping of keys to values, got {type(data).__name__}")
    names = data.get("defaults") or []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"defaults={names!r} in {where}: expected a list of part names such as [env/searchqa_cpu]")
    merged: dict = {}
    dirs = parts_dirs(where)
    for name in names:
        if name in seen:
            raise ValueError(f"defaults: {' -> '.join((*seen, name))} is a cycle")
        found = next((d / f"{name}.yaml" for d in dirs if (d / f"{name}.yaml").is_file()), None)
        if found is None:
            known = sorted({str(p.relative_to(d))[: -len(".yaml")] for d in dirs for p in d.glob("*/*.yaml")})
            from prover_gym.checks import did_you_mean

            raise ValueError(
                f"defaults entry {name!r} of {where or 'the overrides'} is not a part{did_you_mean(name, known)}; "
                f"parts: {', '.join(known) or 'none'} (looked in {', '.join(str(d) for d in dirs)})"
            )
        part = yaml.safe_load(found.read_text()) or {}
        merged = _merge(merged, _compose(part, found, (*seen, name)))
    # each layer flat before merging: a later layer's ``lr`` overrides an earlier ``learner: {lr: ...}``
    return _merge(merged, _flatten_sections({k: v for k, v in data.items() if k != "defaults"}))


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """A YAML file (or nothing) plus ``key=value`` overrides (values parsed as YAML, keys dotted).

    A file may compose parts: ``defaults: [env/alfworld_cpu, model/tiny]`` merges
    ``configs/train/parts/env/alfworld_cpu.yaml`` then ``.../model/tiny.yaml``, then the file's own keys;
    a ``defaults=[...]`` override replaces the file's list."""
    data: dict = {}
    where: Path | None = None
    if path is not None:
        from prover_gym.resources import config_path

        where = config_path(path, "train")
        data = yaml.safe_load(where.read_text()) or {}
    pairs = []
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like key=value (dotted keys for nested fields)")
        key, raw = item.split("=", 1)
        pairs.append((key.strip(), yaml.safe_load(raw)))
    for key, value in pairs:
        if key == "defaults":
            data = {**data, "defaults": value}
    data = _compose(data, where)
    for key, value in pairs:
        if key != "defaults":
            _set(data, _unsection(key), value)
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown config keys {unknown}; valid keys: {sorted(known)}")
    for key, value in data.items():
        data[key] = _coerce(key, known[key].type, value)
    if data.get("model_path"):
        data["model_path"] = resolve_model_path(str(data["model_path"]))
    return TrainConfig(**data)


def _unsection(dotted: str) -> str:
    """An override's key without its section: ``learner.lr`` -> ``lr``, ``model.lora.r`` -> ``lora.r``."""
    head, _, rest = dotted.partition(".")
    if head not in SECTIONS or not rest:
        return dotted
    _flatten_sections({head: {rest.split(".")[0]: None}})  # the same checks and messages as a YAML section
    return rest


def _flatten_sections(data: dict) -> dict:
    """``{"learner": {"lr": x}}`` -> ``{"lr": x}``; a key the section does not have, or a field given both
    flat and through its section, is an error naming it."""
    out = {k: v for k, v in data.items() if k not in SECTIONS}
    for name in [k for k in data if k in SECTIONS]:
        block = data[name]
        if not isinstance(block, dict):
            raise ValueError(f"{name}: a section, given as a mapping of its keys ({', '.join(SECTIONS[name])})")
        for key, value in block.items():
            if key not in SECTIONS[name]:
                from prover_gym.checks import did_you_mean

                home = next((s for s, keys in SECTIONS.items() if key in keys), None)
                hint = f"; {key} is in section {home}" if home else did_you_mean(key, SECTIONS[name])
                raise ValueError(
                    f"unknown config key {name}.{key}{hint}; section {name} has {', '.join(SECTIONS[name])}"
                )
            if key in out:
                raise ValueError(f"{key} is given twice: as {key} and as {name}.{key}; keep one")
            out[key] = value
    return out


def resolve_model_path(spec: str) -> str:
    """``base:<name>`` (a shipped SFT base, trainers/bases.py) or a repo-relative ``bases/<name>`` that
    is not a folder here (a README command run from another folder) -> that base's directory; any
    other value unchanged (an HF directory, or a hub name the backend explains)."""
    from trainers.recipes import RECIPES, base_dir

    path = Path(spec)
    if spec.startswith("base:"):
        return str(base_dir(spec[len("base:") :]))
    if not path.exists() and path.parent.name == "bases" and path.name in RECIPES:
        return str(base_dir(path.name))
    return spec


def _coerce(key: str, kind: Any, value):
    """YAML 1.1 reads ``2e-4`` (no dot) as a string: numbers given that way are converted, anything
    else of the wrong type is refused with the key's name."""
    if kind == "float | None" and value is not None:
        kind = "float"
    if kind == "float" and isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{key}={value!r}: expected a number") from None
    if kind in ("int", "int | None") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{key}={value!r}: expected an integer") from None
    return value


def _default_text(f) -> str:
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def field_help(width: int = 100) -> str:
    """Every TrainConfig field as ``name (type, default): help``, for ``python -m trainers.train --help``."""
    import textwrap

    by_name = {f.name: f for f in fields(TrainConfig)}
    lines = [
        "config keys, by section (give them as key=value or section.key=value overrides, or in a YAML config,",
        "flat or under their section):",
    ]
    for section, keys in SECTIONS.items():
        lines.append(f" [{section}]")
        for key in keys:
            f = by_name[key]
            lines.append(f"  {f.name} ({f.type}, default {_default_text(f)})")
            lines += textwrap.wrap(
                f.metadata.get("help", ""), width, initial_indent="      ", subsequent_indent="      "
            )
    return "\n".join(lines)


def reference_markdown() -> str:
    """docs/config-reference.md: the same field docs as a table (``python -m trainers.config`` writes it)."""
    rows = [
        "# Train config reference",
        "",
        "Generated from `trainers.config.TrainConfig` by `python -m trainers.config > docs/config-reference.md`",
        "(a test checks it is current). Keys go in a YAML config or as `key=value` overrides (dotted for",
        "nested fields: `judge.kind=oracle`, `env_kwargs.max_turns=2`). A config may compose parts:",
        "`defaults: [env/alfworld_cpu, model/tiny]` merges `configs/train/parts/env/alfworld_cpu.yaml`, then",
        "`parts/model/tiny.yaml`, then the file's own keys (mappings merged key by key); `parts/` beside a",
        "config of your own is searched first, then the shipped parts. `python -m trainers.train --config X",
        "--print-config` shows what a config resolves to.",
        "",
        "Each key belongs to a section; a YAML config or an override may name it flat (`lr: 1.0e-4`, `lr=1e-4`)",
        "or through its section (`learner: {lr: 1.0e-4}`, `learner.lr=1e-4`), never both. `TrainConfig.sections()`",
        "gives the nested view.",
    ]
    by_name = {f.name: f for f in fields(TrainConfig)}
    for section, keys in SECTIONS.items():
        rows += ["", f"## {section}", "", "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        for key in keys:
            f = by_name[key]
            text = f.metadata.get("help", "").replace("|", "\\|")
            kind = str(f.type).replace("|", "\\|")
            rows.append(f"| `{f.name}` | `{kind}` | `{_default_text(f)}` | {text} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(reference_markdown(), end="")
