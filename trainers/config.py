"""One config dataclass for the trainer; YAML files plus dotted ``key=value`` overrides."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

METHODS = ("grpo", "prover", "prover_random", "prover_unverified")


def _f(default, help_text: str):
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help_text})
    return field(default=default, metadata={"help": help_text})


@dataclass
class TrainConfig:
    env_id: str = _f("prover/SearchQA-v0", "environment id")
    env_kwargs: dict = _f({"split": "train"}, "gym.make kwargs of the training env")
    method: str = _f("grpo", "grpo | prover | prover_random | prover_unverified (same loop, different advantages)")
    model_path: str | None = _f(None, "HF model directory; None = the tiny local Qwen3 model")
    iterations: int = _f(10, "RL iterations")
    tasks_per_iteration: int = _f(4, "distinct tasks per iteration")
    group_size: int = _f(4, "rollouts per task (the GRPO group)")
    lr: float = _f(1e-4, "AdamW learning rate")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    clip_eps: float = _f(0.2, "ratio clip (PPO/GRPO)")
    kl_coef: float = _f(0.0, "KL-to-reference coefficient (0 = no reference model)")
    std_normalize: bool = _f(True, "divide group advantages by their std (GRPO); False = Dr. GRPO")
    agg: str = _f("token-mean", "loss aggregation: token-mean | seq-mean")
    ppo_epochs: int = _f(1, "passes over each iteration's batch (GRPO's mu); >1 makes the clipped ratio matter")
    updates_per_epoch: int = _f(1, "optimizer steps per pass (the batch cut into that many mini-batches)")
    minibatch_size: int = _f(16, "turn samples per gradient-accumulation micro-batch")
    max_tokens: int = _f(48, "generated tokens per turn")
    temperature: float = _f(1.0, "sampling temperature for rollouts and continuations")
    beta: float = _f(1.0, "ProVer: scale of the segment advantage added to the segment's tokens")
    continuations: int = _f(4, "ProVer: M continuations from each side of the segment")
    sign: str = _f("positive", "ProVer: credit positive segment advantages only (the paper) or both signs")
    max_verified_groups: int = _f(2, "ProVer: cap on verified groups per iteration")
    judge: dict = _f({"kind": "first_divergence"}, "judge config (judges.make)")
    policy_format: dict = _f({}, "kwargs of the env's prompt format (agents.formats.make_format), e.g. {history_length: 1}")
    sft_steps: int = _f(0, "SFT warm-start steps on expert trajectories before RL")
    sft_episodes: int = _f(32, "expert episodes collected for the SFT warm start")
    sft_lr: float = _f(1e-3, "SFT learning rate")
    seed: int = _f(0, "seed of task sampling, generation and initialisation")
    out_dir: str = _f("runs/default", "where metrics.jsonl and checkpoints go")
    checkpoint_every: int = _f(1, "iterations between checkpoints (atomic; --resume continues from the last)")
    loggers: list = _f([], "extra metric sinks besides metrics.jsonl: tensorboard, wandb (each needs its package)")
    wandb_project: str = _f("prover-gym", "W&B project when loggers has wandb (offline unless WANDB_MODE says otherwise)")
    progress: bool = _f(True, "tqdm progress bar over iterations")
    pool_backend: str = _f("sync", "EnvPool backend of batched rollouts and continuations: sync | process | thread | ray "
                                   "(ray: env actors on the cluster ray.init connects to; snapshots shipped pickled)")
    pool_options: dict = _f({}, "EnvPool options, e.g. {envs_per_worker: 4, timeout: 300, ray_init: {address: auto}}")
    lora: dict = _f({}, "LoRA adapters instead of full fine-tuning (peft), e.g. {r: 8, alpha: 16, dropout: 0.0, "
                        "target_modules: [q_proj, v_proj]}; {} = full fine-tuning")
    rollout_engine: dict = _f({}, "a separate generation engine whose weights are synced after every update, e.g. "
                                  "{kind: vllm, gpu_memory_utilization: 0.4}; {} = generate with the learner's model")
    recompute_logprobs: bool | None = _f(None, "recompute the sampled tokens' log-probs with the learner before the update "
                                               "(None = only when rollout_engine is set: its numerics differ)")
    batched_rollouts: bool = _f(True, "step all episodes of an iteration (and ProVer's continuations) in lock-step "
                                      "through a sync EnvPool, one generation batch per turn; False = one by one")

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}; use one of {METHODS}")
        if self.sign not in ("positive", "both"):
            raise ValueError(f"sign={self.sign!r}; use 'positive' or 'both'")
        if self.ppo_epochs < 1 or self.updates_per_epoch < 1:
            raise ValueError("ppo_epochs and updates_per_epoch must be >= 1")
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

    def to_dict(self) -> dict:
        return asdict(self)


def _set(tree: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    for k in keys[:-1]:
        tree = tree.setdefault(k, {})
    tree[keys[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """A YAML file (or nothing) plus ``key=value`` overrides (values parsed as YAML, keys dotted)."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config {str(p)!r} not found (see configs/train/)")
        data = yaml.safe_load(p.read_text()) or {}
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like key=value (dotted keys for nested fields)")
        key, raw = item.split("=", 1)
        _set(data, key.strip(), yaml.safe_load(raw))
    known = {f.name: f for f in fields(TrainConfig)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown config keys {unknown}; valid keys: {sorted(known)}")
    for key, value in data.items():
        data[key] = _coerce(key, known[key].type, value)
    return TrainConfig(**data)


def _coerce(key: str, kind: str, value):
    """YAML 1.1 reads ``2e-4`` (no dot) as a string: numbers given that way are converted, anything
    else of the wrong type is refused with the key's name."""
    if kind == "float" and isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{key}={value!r}: expected a number") from None
    if kind == "int" and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{key}={value!r}: expected an integer") from None
    return value
