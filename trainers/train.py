"""The training loop: rollouts -> advantages (trainers/credit.py) -> clipped loss (trainers/learner.py).

    python -m trainers.train --config configs/train/searchqa_tiny_grpo.yaml method=prover iterations=20
    python -m trainers.train --config ... --resume          # continue exactly from the last checkpoint
    torchrun --standalone --nproc_per_node 2 -m trainers.train --config ...   # data-parallel (trainers/distributed.py)

Same loop for every method; only the advantages differ (the registry in trainers/advantages.py):
- ``grpo`` / ``dr_grpo``: group-normalised (or centred) outcome advantage on every policy token;
- ``gigpo``: + the step-group advantage of turns that share an exact state (Feng et al. 2025);
- ``prover``: + beta * A_seg on the judge's segment (default: the successful trajectory's decisive
  turn), A_seg verified by M continuations from both sides, positive estimates only;
- ``prover_random``: the same verification of a random segment of a random trajectory on the judge's
  side (won by default: the placebo differs from ``prover`` only in where the segment is);
- ``prover_unverified``: the judge's segment credited with A_seg = 1, no continuations.
An iteration (``Trainer.step``) is four stages, each a method: ``collect`` (rollouts) -> ``advantages``
(credit: ``trainers/credit.py``) -> ``learn`` (``trainers/learner.py``) -> ``summarize`` / ``metrics`` /
``record`` (one row, gathered over ranks). Checkpoints: ``trainers/checkpoint.py``; SFT: ``trainers/sft.py``.
Metrics go to ``out_dir/metrics.jsonl`` (names in ``METRICS`` and docs/training.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from trainers import checkpoint, methods
from trainers.config import TrainConfig, load_config
from trainers.sinks import make_sink


def make_optimizer(cfg: TrainConfig, params: list) -> torch.optim.Optimizer:
    """The RL optimizer of ``cfg.optimizer``: AdamW (lr, weight_decay, adam_eps) or plain SGD (lr, weight_decay)."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.adam_eps)


# the stable names of metrics.jsonl (documented in docs/training.md; a test checks every row against them);
# besides these, success/<type> per task type (ALFWorld) or data source (Search-QA) when the env
# reports one, and judge/<counter> for judges that count their calls (METRIC_PREFIXES)
METRIC_PREFIXES = ("success/", "judge/")
# an iteration's tokens by who spent them (rollouts, verification continuations, an LLM judge), generated and
# encoded as prompts; summed over a run, they are what grpo_matched is matched on
COST_METRICS = (
    "cost/rollout_tokens",
    "cost/rollout_prompt_tokens",
    "cost/credit_tokens",
    "cost/credit_prompt_tokens",
    "cost/judge_tokens",
    "cost/judge_prompt_tokens",
    "cost/generated_tokens",
    "cost/total_tokens",
)


def run_cost(rows: list[dict]) -> dict:
    """A run's ``COST_METRICS`` summed over its metrics rows, and ``match_ratio``: the tokens credit
    assignment generated (continuations + an LLM judge) per rollout token, what grpo_matched is given."""
    cost = {k: sum(r.get(k, 0) for r in rows) for k in COST_METRICS}
    cost["match_ratio"] = (cost["cost/credit_tokens"] + cost["cost/judge_tokens"]) / max(1, cost["cost/rollout_tokens"])
    return cost


METRICS = (
    "iteration",
    "reward",
    "success",
    "loss",
    "clip_ratio",
    "kl",
    "approx_kl_old",
    "samples",
    "updates",
    "env_steps",
    "tokens",
    "groups/mixed",
    "groups/dropped_fraction",
    "prover/proposed_segments",
    "prover/verified_segments",
    "prover/credited_segments",
    "prover/positive_segments",
    "prover/mean_segment_advantage",
    "prover/segment_advantages",
    "prover/credited_tokens",
    "prover/bonus_share",
    "prover/extra_tokens_ratio",
    "prover/extra_env_steps_ratio",
    *COST_METRICS,
    "tasks",
    "rollout_logprob_gap",
    "rollout_logprob_gap_max",
    "policy/failures",
    "time/rollout_generate",
    "time/rollout_env",
    "time/credit",
    "time/credit_generate",
    "time/credit_env",
    "time/learn",
    "time/probe",
    "probe/success_start",
    "probe/success",
    "rollout_digest",
    "seconds",
)
TASK_GROUP_KEYS = ("task_type", "data_source")
RANK_SEED_STRIDE = 1_000_003  # rank r samples with seed + r * this (rank 0: the single-process stream)


class StageClock:
    """Wall time and the rollout profiler's counters (agents.rollout.PROFILE) at each stage boundary of an
    iteration, and the judge's token counts at its start."""

    def __init__(self, judge_stats: dict | None = None):
        from agents.rollout import PROFILE

        self._profile = PROFILE
        self.t0 = time.time()
        self.judge_before = dict(judge_stats or {})
        self.marks: list[tuple[str, float, dict]] = [("start", self.t0, dict(PROFILE))]

    def mark(self, stage: str) -> None:
        """Record the end of ``stage``: the time and the profiler's counters now."""
        self.marks.append((stage, time.time(), dict(self._profile)))

    def _span(self, stage: str) -> tuple[tuple, tuple]:
        k = next(i for i, m in enumerate(self.marks) if m[0] == stage)
        return self.marks[k - 1], self.marks[k]

    def seconds(self, stage: str) -> float:
        """Seconds of ``stage`` (from the previous mark to its own)."""
        before, after = self._span(stage)
        return round(after[1] - before[1], 3)

    def profile_spent(self, stage: str, key: str) -> float:
        """Seconds ``stage`` spent on ``key`` (generate / env) by the profiler."""
        before, after = self._span(stage)
        return round(after[2].get(key, 0.0) - before[2].get(key, 0.0), 3)


@dataclasses.dataclass
class IterationSummary:
    """One iteration's outcomes and costs, per rank or gathered over ranks (Trainer.summarize)."""

    outcomes: list  # (reward, won, task group) per episode
    steps: int
    tokens: int
    digest: str  # of the sampled token ids: the same rollouts give the same digest
    credit: Any  # trainers.credit.CreditStats
    policy_failures: int
    timing: dict
    cost: dict
    tasks: int


class Trainer:
    """The RL loop of one run (see the module docstring): the learner's model, the generator (the same model, or a
    rollout engine synced after every update), the judge, env pools, checkpoints; ``run()`` does SFT (if configured)
    then the iterations."""

    def __init__(self, cfg: TrainConfig, resume: bool = False):
        import gymnasium as gym

        import judges
        import prover_gym  # noqa: F401
        from agents.backends.hf_backend import HFBackend
        from agents.formats import make_format
        from agents.llm_policy import LLMPolicy
        from agents.tiny_model import tiny_model_dir
        from trainers.credit import CreditAssigner, make_estimator_factory
        from trainers.distributed import Dist
        from trainers.learner import Learner, LogprobModule

        self.cfg = cfg
        if cfg.torch_threads:  # float sums depend on the thread count: fixed for the whole run
            torch.set_num_threads(cfg.torch_threads)
        self.dist = Dist()  # one process, or this rank of a torchrun / accelerate launch (trainers/distributed.py)
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt = self.out / "checkpoint"
        self.iteration = 0
        resuming = self.dist.broadcast(resume and checkpoint.has_checkpoint(self.out))
        model_path = str(self.ckpt / "model") if resuming else (cfg.model_path or str(tiny_model_dir()))
        checkpoint.seed_all(cfg.seed)
        # the learner's model; with LoRA a peft model (a resumed checkpoint holds the adapter only). Each
        # rank samples with its own stream (seed + rank); the model and the task draws are the same on all
        self.backend = HFBackend(
            model_path,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            seed=cfg.seed + RANK_SEED_STRIDE * self.dist.rank,
            trainable=True,
            device=str(self.dist.device),
        )
        if cfg.lora and not _is_peft(self.backend.model):
            self.backend.model = _with_lora(self.backend.model, cfg.lora)
        self.model = self.backend.model
        # data-parallel: the learner's forward runs through DDP (or FSDP) around the log-prob module
        self.forward_model = self.dist.prepare(LogprobModule(self.model)) if self.dist.enabled else None
        self.optimizer = make_optimizer(cfg, self._trainable())
        self.env = gym.make(cfg.env_id, **cfg.env_kwargs)
        # generation: the learner's own model, or a separate engine (vLLM) fed the weights after each update
        self.generator: Any = self.backend  # the learner's HF backend, or a separate engine (vllm, hf)
        if cfg.rollout_engine:
            from agents.backends import make_backend

            export = self.out / "rollout_engine_weights"
            self.export(export)
            self.generator = make_backend(
                {
                    "max_tokens": cfg.max_tokens,
                    "temperature": cfg.temperature,
                    "seed": cfg.seed,
                    **cfg.rollout_engine,
                    "model_path": str(export),
                }
            )
        self.policy = LLMPolicy(self.generator, make_format(cfg.env_id, **cfg.policy_format))
        spec = methods.get(cfg.method)
        # a method may force its own judge (prover_random: a random segment on the judge's side, same budget)
        judge_cfg = spec.judge(cfg.judge, cfg.seed) if spec.judge is not None else cfg.judge
        # only the methods that ask a judge build one (an LLM judge is a second model)
        self.judge = judges.make(judge_cfg) if spec.asks_judge else None
        # the task stream: which tasks each iteration trains on, the same for every method of a seed
        # (its own stream: SFT and the judges draw from theirs, sampling is keyed per row)
        self.rng = random.Random(f"tasks|{cfg.seed}")
        # grpo_matched's extra tasks: another stream, so the first tasks_per_iteration stay grpo's
        self.extra_rng = random.Random(f"extra-tasks|{cfg.seed}")
        self.extra_owed = 0.0  # grpo_matched: fractional extra tasks carried to the next iteration
        # verification continuations run the policy as it is when they run (self.policy may be swapped)
        self.credit = CreditAssigner(
            cfg,
            self.judge,
            make_estimator_factory(
                self.env, lambda: self.policy, cfg.continuations, self.pool if cfg.batched_rollouts else None
            ),
            judge_name=judge_cfg.get("kind") if isinstance(judge_cfg, dict) else str(judge_cfg),
        )
        self.learner = Learner(
            cfg,
            self.model,
            self.backend.tokenizer,
            self.optimizer,
            self.out,
            self.plain_model,
            self.recompute_logprobs,
            dist=self.dist,
            forward_model=self.forward_model,
        )
        if resuming:
            self._load()
            if self.dist.is_main:
                checkpoint.truncate_metrics(self.out / "metrics.jsonl", self.iteration)
                checkpoint.truncate_metrics(self.out / "credit.jsonl", self.iteration)
            self.sync_generator()
        elif self.dist.is_main:
            if resume:
                print(f"--resume: no checkpoint in {self.ckpt}; starting from scratch", file=sys.stderr)
            # a fresh start: rows a killed earlier attempt wrote before its first checkpoint are not this run's
            checkpoint.truncate_metrics(self.out / "metrics.jsonl", 0)
            checkpoint.truncate_metrics(self.out / "credit.jsonl", 0)
        if self.dist.is_main:
            (self.out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
            if cfg.method.startswith("prover"):  # every credit run has its record, empty until a segment is judged
                (self.out / "credit.jsonl").touch()
        self.dist.barrier()

    # ---- checkpoints ------------------------------------------------------------------------
    def save(self) -> None:
        """Rank 0 writes the checkpoint (the model and optimizer are the same on every rank), with
        every rank's own RNG states and generation counter under ``ranks``."""
        ranks = self.dist.gather(checkpoint.rng_state(self.generator.calls)) if self.dist.enabled else None
        if self.dist.is_main:
            checkpoint.save(
                self.out,
                self.model,
                self.backend.tokenizer,
                self.optimizer,
                {
                    "iteration": self.iteration,
                    "python_rng": checkpoint.encode_python_rng(self.rng),
                    "extra_rng": checkpoint.encode_python_rng(self.extra_rng),
                    "extra_owed": self.extra_owed,
                    "backend_calls": self.generator.calls,
                    **({"ranks": ranks} if ranks else {}),
                },
            )
        self.dist.barrier()  # no rank runs ahead of a checkpoint that is not written yet

    def _load(self) -> None:
        state = checkpoint.load(self.ckpt, self.optimizer)
        self.iteration = state["iteration"]
        checkpoint.decode_python_rng(self.rng, state["python_rng"])
        if "extra_rng" in state:
            checkpoint.decode_python_rng(self.extra_rng, state["extra_rng"])
            self.extra_owed = state["extra_owed"]
        self.generator.calls = state["backend_calls"]
        if self.dist.enabled or "ranks" in state:
            ranks = state.get("ranks") or []
            if len(ranks) != self.dist.world:
                raise ValueError(
                    f"{self.ckpt} was written by {len(ranks) or 1} process(es); resume it with as many "
                    f"(this launch has {self.dist.world})"
                )
            self.generator.calls = checkpoint.set_rng_state(ranks[self.dist.rank])

    def _trainable(self) -> list:
        return [p for p in (self.forward_model or self.model).parameters() if p.requires_grad]

    def plain_model(self):
        """The policy as an ordinary transformers model (LoRA merged into a copy; else the model itself)."""
        if _is_peft(self.model):
            import copy

            return copy.deepcopy(self.model).merge_and_unload()
        return self.model

    def export(self, out: Path) -> Path:
        """The current policy as a plain HF model directory (what vLLM or any HF loader reads)."""
        self.plain_model().save_pretrained(str(out))
        self.backend.tokenizer.save_pretrained(str(out))
        return out

    def sync_generator(self) -> None:
        """After an update: the separate generation engine gets the learner's weights (in memory)."""
        if self.generator is not self.backend:
            self.generator.load_weights(self.policy_weights())

    def policy_weights(self):
        """(HF name, tensor) of the policy as a plain model, streamed: with LoRA each adapted layer's
        weight is base + its adapter's delta, computed one layer at a time (no copy of the model)."""
        if not _is_peft(self.model):
            yield from self.model.state_dict().items()
            return
        prefix, adapter = "base_model.model.", self.model.active_adapter
        for name, tensor in self.model.state_dict().items():
            if ".lora_" in name:
                continue
            plain = name[len(prefix) :] if name.startswith(prefix) else name
            if ".base_layer." in name:
                module_name, _, kind = name.rpartition(".base_layer.")
                plain = plain.replace(".base_layer.", ".")
                if kind == "weight":
                    module = self.model.get_submodule(module_name)
                    if adapter in getattr(module, "lora_A", {}):
                        with torch.no_grad():
                            tensor = tensor + module.get_delta_weight(adapter).to(tensor.dtype)
            yield plain, tensor

    @property
    def recompute_logprobs(self) -> bool:
        """Whether the sampled tokens' log-probs are recomputed by the learner before the update (config; by default
        only with a separate rollout engine, whose numerics differ)."""
        flag = self.cfg.recompute_logprobs
        return bool(self.cfg.rollout_engine) if flag is None else flag

    # ---- SFT warm start -----------------------------------------------------------------------
    def sft(self) -> list[float]:
        """Cross-entropy on expert turns rendered in the policy's format (trainers/sft.py)."""
        from trainers.sft import expert_examples, sft_steps, sft_task_ids

        cfg = self.cfg
        examples = expert_examples(
            self.env, self.policy, self.backend, cfg.sft_episodes, cfg.seed, cfg.sft_demonstrator
        )
        covered = len(set(sft_task_ids(self.env, cfg.sft_episodes, cfg.seed)))
        train_tasks = len(self.env.unwrapped.task_ids())  # type: ignore[attr-defined]  # a prover-gym TextEnv
        # data-parallel: every rank runs the same SFT batches through DDP (replicated, not sharded: a
        # short warm start), so the ranks stay identical
        losses = sft_steps(
            self.model,
            self._trainable(),
            examples,
            steps=cfg.sft_steps,
            batch_size=cfg.minibatch_size,
            lr=cfg.sft_lr,
            pad_id=self.backend.tokenizer.pad_token_id,
            rng=random.Random(cfg.seed),  # SFT's own stream (mini-batch draws), as the shipped bases were built
            schedule=cfg.sft_schedule,
            progress=cfg.progress and self.dist.is_main,
            forward=self.learner.forward_logprobs,
        )
        self.sync_generator()
        if not self.dist.is_main:
            return losses
        with open(self.out / "sft.jsonl", "w", encoding="utf-8") as fh:
            # coverage: RL samples every task of the split, so SFT should have seen them all (sft_episodes=null)
            fh.write(
                json.dumps(
                    {
                        "examples": len(examples),
                        "tasks_covered": covered,
                        "train_tasks": train_tasks,
                        "first_loss": losses[0] if losses else None,
                        "last_loss": losses[-1] if losses else None,
                    }
                )
                + "\n"
            )
        return losses

    # ---- rollouts -----------------------------------------------------------------------------
    def draw_tasks(self) -> list[str]:
        """This iteration's tasks: ``tasks_per_iteration`` from the task stream (the same for every
        method of a seed), then grpo_matched's extra ones from their own stream."""
        task_ids = self.env.unwrapped.task_ids()  # type: ignore[attr-defined]  # a prover-gym TextEnv
        tasks = self.rng.sample(task_ids, min(self.cfg.tasks_per_iteration, len(task_ids)))
        if methods.get(self.cfg.method).extra_tasks:
            self.extra_owed += self.cfg.match_ratio * self.cfg.tasks_per_iteration
            extra = int(self.extra_owed + 1e-9)
            self.extra_owed -= extra
            rest = [t for t in task_ids if t not in set(tasks)]
            tasks += self.extra_rng.sample(rest, min(extra, len(rest)))
        return tasks

    def sample_key(self, task_id: str, index: int) -> tuple:
        """The sampling key of rollout ``index`` of ``task_id`` in this iteration (agents.backends.sampling):
        the same in every method of a seed, whatever the batch, the probe or verification drew."""
        return ("rollout", self.cfg.seed, self.iteration, task_id, index)

    def collect(self):
        """``tasks_per_iteration`` tasks x ``group_size`` rollouts of the current policy, as groups."""
        from agents.rollout import rollout

        tasks = self.draw_tasks()
        # data-parallel: every rank draws the same tasks and rolls out its share of the groups
        self.group_ids = self.dist.shard(list(range(len(tasks))))
        tasks = [tasks[k] for k in self.group_ids]
        g = self.cfg.group_size
        keys = [self.sample_key(t, j) for t in tasks for j in range(g)]
        if self.cfg.batched_rollouts:  # every episode of the iteration in lock-step: one generation batch per turn
            from agents.rollout import rollout_chunks

            trajs = rollout_chunks(self.pool(), self.policy, task_ids=[k[3] for k in keys], keys=keys)
            return [trajs[i * g : (i + 1) * g] for i in range(len(tasks))]
        return [
            [rollout(self.env, self.policy, task_id=k[3], key=k) for k in keys[i * g : (i + 1) * g]]
            for i in range(len(tasks))
        ]

    def pool(self):
        """A sync EnvPool for batched rollouts and verification continuations (envs share data)."""
        if getattr(self, "_pool", None) is None:
            from prover_gym import EnvPool

            cfg = self.cfg
            n = max(cfg.tasks_per_iteration * cfg.group_size, 2 * cfg.continuations)
            self._pool = EnvPool(cfg.env_id, n, backend=cfg.pool_backend, **cfg.pool_options, **cfg.env_kwargs)
        return self._pool

    # ---- advantages and the learner step ------------------------------------------------------
    def advantages(self, groups):
        """(per trajectory token advantages or None, CreditStats): trainers/credit.py."""
        return self.credit(
            groups, self.backend.tokenizer, iteration=self.iteration + 1, group_ids=getattr(self, "group_ids", None)
        )

    def learn(self, trajectories, advantages, groups=None) -> dict:
        """The learner's update on the iteration's trajectories and token advantages, then the generator synced to the
        new weights: the learner's logs."""
        logs = self.learner.learn(trajectories, advantages, groups)
        self.sync_generator()
        return logs

    def step(self) -> dict:
        """One iteration in four rooms: collect (rollouts) -> credit (advantages, ProVer's verification) ->
        learn (the update) -> metrics (one row, gathered over ranks, written by the main rank)."""
        start_probe = {}
        if self.cfg.probe_kwargs and self.iteration == 0:  # the policy RL starts from, before any rollout or update
            start_probe["probe/success_start"] = self.probe()
        clock = StageClock(getattr(self.judge, "stats", None))
        groups = self.collect()
        clock.mark("collect")
        advantages, credit = self.advantages(groups)
        clock.mark("credit")
        logs = self.learn(
            [t for g in groups for t in g], advantages, [self.group_ids[k] for k, g in enumerate(groups) for _ in g]
        )
        clock.mark("learn")
        summary = self.summarize(groups, credit, clock)
        self.iteration += 1
        row = self.metrics(summary, logs, start_probe, clock)
        if self.dist.is_main:
            self.record(row, summary.credit)
        return row

    def summarize(self, groups, credit, clock: StageClock) -> IterationSummary:
        """What the iteration did, over all ranks: outcomes, steps, tokens, a digest of the sampled tokens,
        the credit, where the time went (rollouts: generation / env; credit: judge + continuations, their
        generation / env; the learner's update; the slowest rank's) and what was generated and encoded."""
        trajectories = [t for g in groups for t in g]
        timing = {
            "time/rollout_generate": clock.profile_spent("collect", "generate"),
            "time/rollout_env": clock.profile_spent("collect", "env"),
            "time/credit": clock.seconds("credit"),
            "time/credit_generate": clock.profile_spent("credit", "generate"),
            "time/credit_env": clock.profile_spent("credit", "env"),
            "time/learn": clock.seconds("learn"),
        }
        tokens = sum(len(turn.token_ids or []) for t in trajectories for turn in t.turns)
        judge_now = getattr(self.judge, "stats", None) or {}
        judge_before = clock.judge_before
        cost = {  # what the iteration generated and encoded, by who asked (summed over ranks below)
            "cost/rollout_tokens": tokens,
            "cost/rollout_prompt_tokens": sum(len(u.prompt_token_ids or []) for t in trajectories for u in t.turns),
            "cost/credit_tokens": credit.extra_tokens,
            "cost/credit_prompt_tokens": credit.extra_prompt_tokens,
            "cost/judge_tokens": judge_now.get("completion_tokens", 0) - judge_before.get("completion_tokens", 0),
            "cost/judge_prompt_tokens": judge_now.get("prompt_tokens", 0) - judge_before.get("prompt_tokens", 0),
        }
        out = IterationSummary(
            outcomes=[(t.total_reward, t.won, _task_group(t)) for t in trajectories],
            steps=sum(len(t.turns) for t in trajectories),
            tokens=tokens,
            digest=hashlib.sha256(
                json.dumps([[turn.token_ids for turn in t.turns] for t in trajectories]).encode()
            ).hexdigest()[:16],
            credit=credit,
            policy_failures=(getattr(self.policy, "stats", None) or {}).get("failures", 0),
            timing=timing,
            cost=cost,
            tasks=len(groups),
        )
        if not self.dist.enabled:
            return out
        parts: list[IterationSummary] = self.dist.gather(out)  # the iteration over all ranks
        return IterationSummary(
            outcomes=[o for p in parts for o in p.outcomes],
            steps=sum(p.steps for p in parts),
            tokens=sum(p.tokens for p in parts),
            digest=hashlib.sha256(json.dumps([p.digest for p in parts]).encode()).hexdigest()[:16],
            credit=merge_credit([p.credit for p in parts]),
            policy_failures=sum(p.policy_failures for p in parts),
            timing={k: max(p.timing[k] for p in parts) for k in timing},
            cost={k: sum(p.cost[k] for p in parts) for k in cost},
            tasks=sum(len(p.outcomes) for p in parts) // self.cfg.group_size,
        )

    def metrics(self, summary: IterationSummary, logs: dict, start_probe: dict, clock: StageClock) -> dict:
        """The iteration's metrics.jsonl row (names in docs/training.md); the held-out probe runs here when
        one is due (after the update)."""
        probe, t4 = dict(start_probe), time.time()
        timing = dict(summary.timing)
        if self.cfg.probe_kwargs and (
            self.iteration % self.cfg.probe_every == 0 or self.iteration == self.cfg.iterations
        ):
            probe["probe/success"] = self.probe()
        if probe:
            timing["time/probe"] = round(time.time() - t4, 3)  # the start probe is not in it (before the clock)
        outcomes, credit, cost = summary.outcomes, summary.credit, summary.cost
        row = {
            "iteration": self.iteration,
            **probe,
            "reward": sum(o[0] for o in outcomes) / len(outcomes),
            "success": sum(o[1] for o in outcomes) / len(outcomes),
            **logs,
            "env_steps": summary.steps,
            "tokens": summary.tokens,
            **credit.metrics(),
            "prover/extra_tokens_ratio": credit.extra_tokens / max(summary.tokens, 1),
            "prover/extra_env_steps_ratio": credit.extra_env_steps / max(summary.steps, 1),
            **cost,
            "cost/generated_tokens": cost["cost/rollout_tokens"]
            + cost["cost/credit_tokens"]
            + cost["cost/judge_tokens"],
            "cost/total_tokens": sum(cost.values()),
            "tasks": summary.tasks,
            **success_by_group(outcomes),
            **timing,
            "rollout_digest": summary.digest,
            "seconds": round(time.time() - clock.t0, 3),
        }
        # an LLM judge's cumulative call / failure counts: a down or misbehaving judge server costs
        # ProVer its proposals (the group falls back to GRPO) but never stops training
        judge_stats = getattr(self.judge, "stats", None) or {}
        if self.dist.enabled:
            judge_stats = {k: sum(s.get(k, 0) for s in self.dist.gather(judge_stats)) for k in judge_stats}
        row.update({f"judge/{k}": v for k, v in judge_stats.items()})
        row["policy/failures"] = summary.policy_failures
        return row

    def record(self, row: dict, credit) -> None:
        """The row to metrics.jsonl and the extra sinks, the judged segments to credit.jsonl (main rank)."""
        with open(self.out / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if credit.records:  # where the credit went: one line per judged segment (trainers/credit_record.py)
            with open(self.out / "credit.jsonl", "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in credit.records)
        for sink in self.sinks():
            sink.log(row, self.iteration)

    def probe(self) -> float:
        """Greedy success on the first ``probe_tasks`` tasks of the held-out ``probe_kwargs`` split: a
        learning curve on the same unseen tasks at every point (the training success varies with the
        tasks each iteration draws, and is sampled at the rollout temperature). The probe's envs are
        kept between probes, each on its own task, so a game is loaded once (ALFWorld: ~0.65 s each)."""
        from agents.rollout import play_tasks, split_task_ids
        from prover_gym import EnvPool

        cfg = self.cfg
        if getattr(self, "_probe_pool", None) is None:  # data-parallel: each rank plays its share of the tasks
            self._probe_ids = self.dist.shard(split_task_ids(cfg.env_id, cfg.probe_kwargs, cfg.probe_tasks))
            self._probe_pool = EnvPool(
                cfg.env_id, max(1, min(50, len(self._probe_ids))), backend="sync", **cfg.probe_kwargs
            )
        with self.greedy():
            trajs = play_tasks(cfg.env_id, cfg.probe_kwargs, self.policy, self._probe_ids, pool=self._probe_pool)
        won, played = (sum(x) for x in zip(*self.dist.gather((sum(t.won for t in trajs), len(trajs)))))
        return won / max(1, played)

    @contextlib.contextmanager
    def greedy(self):
        """The policy generates greedily (temperature 0) inside the block, at the rollout temperature after."""
        self.generator.defaults["temperature"] = 0.0
        try:
            yield
        finally:
            self.generator.defaults["temperature"] = self.cfg.temperature

    def sinks(self) -> list:
        """The extra metric sinks of ``cfg.loggers`` (made on first use)."""
        if getattr(self, "_sinks", None) is None:
            self._sinks = [make_sink(kind, self.cfg, self.out) for kind in self.cfg.loggers if kind != "jsonl"]
        return self._sinks

    def run(self, desc: str | None = None) -> list[dict]:
        """SFT (when configured and not yet done), then iterations up to ``cfg.iterations``, saving a
        checkpoint every ``checkpoint_every``; ``desc`` labels the progress bar."""
        rows = []
        if (
            self.iteration == 0
            and self.cfg.sft_steps > 0
            and not self.dist.broadcast(checkpoint.has_checkpoint(self.out))
        ):
            self.sft()
            self.save()  # iteration 0: a resume (or iterations=0, SFT only) keeps the SFT model
        from tqdm import tqdm

        bar = tqdm(
            total=self.cfg.iterations,
            initial=self.iteration,
            desc=desc or self.cfg.method,
            unit="it",
            disable=not (self.cfg.progress and self.dist.is_main) or None,
            leave=False,
        )
        while self.iteration < self.cfg.iterations:
            rows.append(self.step())
            if self.iteration % self.cfg.checkpoint_every == 0 or self.iteration == self.cfg.iterations:
                self.save()
            bar.update(1)
            bar.set_postfix(success=f"{rows[-1]['success']:.2f}")
        bar.close()
        for sink in self.sinks():
            sink.close()
        return rows

    def close(self) -> None:
        """Close the env pools, a separate rollout engine and an LLM judge's backend (their memory
        goes back: a leaderboard worker trains many runs in one process)."""
        for name in ("_pool", "_probe_pool"):
            if getattr(self, name, None) is not None:
                getattr(self, name).close()
                setattr(self, name, None)
        engines = [self.generator if self.generator is not self.backend else None, getattr(self.judge, "backend", None)]
        for engine in engines:
            if engine is not None and hasattr(engine, "close"):
                engine.close()


def _task_group(t) -> str | None:
    """The task type (ALFWorld) or data source (Search-QA) of a trajectory, where the env reports one."""
    info = t.turns[0].info if t.turns else {}
    return next((str(info[key]) for key in TASK_GROUP_KEYS if info.get(key)), None)


def success_by_group(outcomes) -> dict:
    """``success/<task type or data source>`` over the iteration's episodes, given as
    (reward, won, group) triples (``_task_group``; ranks gather these, not trajectories)."""
    totals: dict[str, list[int]] = {}
    for _, won, group in outcomes:
        if group:
            totals.setdefault(f"success/{group}", []).append(int(won))
    return {k: sum(v) / len(v) for k, v in sorted(totals.items())}


def merge_credit(stats: list):
    """One ``CreditStats`` from the ranks' (counts add up, per-segment lists concatenate in rank order)."""
    import dataclasses

    from trainers.credit import CreditStats

    out = CreditStats()
    for st in stats:
        for f in dataclasses.fields(CreditStats):
            setattr(out, f.name, getattr(out, f.name) + getattr(st, f.name))
    return out


def _is_peft(model) -> bool:
    return hasattr(model, "peft_config")


def _with_lora(model, spec: dict):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("lora: ... needs peft: pip install peft") from None
    config = LoraConfig(
        task_type="CAUSAL_LM",
        r=spec.get("r", 8),
        lora_alpha=spec.get("alpha", 16),
        lora_dropout=spec.get("dropout", 0.0),
        target_modules=spec.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"]),
    )
    return get_peft_model(model, config)


def main(argv: list[str] | None = None) -> int:
    """``python -m trainers.train``: train from a config and overrides (``--print-config``: show it, stop)."""
    from prover_gym.resources import shipped_configs
    from trainers.config import field_help

    ap = argparse.ArgumentParser(
        prog="python -m trainers.train",
        description=__doc__.split("\n\n")[0],
        epilog=field_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    ap.add_argument(
        "--config",
        help="a YAML config file, or a shipped one by name: "
        + ", ".join(shipped_configs("train"))
        + " (default: none, the trainer's defaults plus the overrides)",
    )
    ap.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint")
    ap.add_argument(
        "--print-config", action="store_true", help="print the resolved config (parts, file, overrides) and exit"
    )
    ap.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. method=prover judge.kind=oracle")
    args = ap.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    if args.print_config:
        print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
        return 0
    trainer = Trainer(cfg, resume=args.resume)
    for row in trainer.run():
        if trainer.dist.is_main:
            print(
                json.dumps(
                    {
                        k: row[k]
                        for k in (
                            "iteration",
                            "reward",
                            "success",
                            "loss",
                            "prover/proposed_segments",
                            "prover/verified_segments",
                            "prover/credited_segments",
                        )
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
