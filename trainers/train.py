"""The training loop: rollouts -> GRPO advantages (+ ProVer's verified segment bonus) -> clipped loss.

    python -m trainers.train --config configs/train/searchqa_tiny_grpo.yaml method=prover iterations=20
    python -m trainers.train --config ... --resume          # continue exactly from the last checkpoint

Same loop for every method; only the advantages differ:
- ``grpo``: group-normalised outcome advantage on every policy token;
- ``prover``: + beta * A_seg on the judge's segment, A_seg verified by M continuations from both sides;
- ``prover_random``: the same verification of a random segment;
- ``prover_unverified``: the judge's segment credited with A_seg = 1, no continuations.
Metrics go to ``out_dir/metrics.jsonl`` (names below); checkpoints (model, optimizer, RNG, iteration)
are written atomically every ``checkpoint_every`` iterations.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prover_gym.cache import atomic_write  # noqa: E402
from trainers.config import TrainConfig, load_config  # noqa: E402

METRICS = ("reward", "success", "loss", "clip_ratio", "kl", "approx_kl_old", "samples", "env_steps", "tokens",
           "prover/verified_segments", "prover/mean_segment_advantage", "prover/extra_tokens_ratio",
           "prover/extra_env_steps_ratio", "seconds")


class Trainer:
    def __init__(self, cfg: TrainConfig, resume: bool = False):
        import gymnasium as gym

        import judges
        import prover_gym  # noqa: F401
        from agents.backends.hf_backend import HFBackend
        from agents.llm_policy import LLMPolicy
        from agents.tiny_model import tiny_model_dir

        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.ckpt = self.out / "checkpoint"
        self.iteration = 0
        resuming = resume and (self.ckpt / "state.json").is_file()
        model_path = str(self.ckpt / "model") if resuming else (cfg.model_path or str(tiny_model_dir()))
        _seed_all(cfg.seed)
        # the learner's model; with LoRA a peft model (a resumed checkpoint holds the adapter only)
        self.backend = HFBackend(model_path, max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=cfg.seed,
                                 trainable=True)
        if cfg.lora and not _is_peft(self.backend.model):
            self.backend.model = _with_lora(self.backend.model, cfg.lora)
        self.model = self.backend.model
        self.optimizer = torch.optim.AdamW(self._trainable(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.env = gym.make(cfg.env_id, **cfg.env_kwargs)
        from agents.formats import make_format

        # generation: the learner's own model, or a separate engine (vLLM) fed the weights after each update
        self.generator = self.backend
        if cfg.rollout_engine:
            from agents.backends import make_backend

            export = self.out / "rollout_engine_weights"
            self.export(export)
            self.generator = make_backend({"max_tokens": cfg.max_tokens, "temperature": cfg.temperature,
                                           "seed": cfg.seed, **cfg.rollout_engine, "model_path": str(export)})
        self.policy = LLMPolicy(self.generator, make_format(cfg.env_id, **cfg.policy_format))
        self.judge = judges.make({"kind": "random", "seed": cfg.seed} if cfg.method == "prover_random" else cfg.judge)
        self.rng = random.Random(cfg.seed)
        if resuming:
            self._load()
            self._truncate_metrics()
            self.sync_generator()
        elif resume:
            print(f"--resume: no checkpoint in {self.ckpt}; starting from scratch", file=sys.stderr)
        (self.out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))

    # ---- checkpoints ------------------------------------------------------------------------
    def save(self) -> None:
        tmp = Path(tempfile.mkdtemp(prefix="checkpoint.tmp", dir=self.out))
        self.model.save_pretrained(str(tmp / "model"))
        self.backend.tokenizer.save_pretrained(str(tmp / "model"))
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        state = {"iteration": self.iteration, "python_rng": _encode(self.rng.getstate()),
                 "torch_rng": self._torch_state(), "numpy_rng": _encode(np.random.get_state()),
                 "backend_calls": self.generator._calls}
        (tmp / "state.json").write_text(json.dumps(state))
        old = self.out / "checkpoint.old"
        if self.ckpt.exists():
            os.rename(self.ckpt, old)
        os.rename(tmp, self.ckpt)  # the switch is one rename; a kill before it leaves the previous one
        shutil.rmtree(old, ignore_errors=True)

    def _trainable(self) -> list:
        return [p for p in self.model.parameters() if p.requires_grad]

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
            self.generator.load_weights(self.plain_model().state_dict().items())

    @staticmethod
    def _torch_state() -> list[int]:
        return torch.get_rng_state().tolist()

    def _load(self) -> None:
        state = json.loads((self.ckpt / "state.json").read_text())
        self.optimizer.load_state_dict(torch.load(self.ckpt / "optimizer.pt", weights_only=True))
        self.iteration = state["iteration"]
        self.rng.setstate(_decode(state["python_rng"]))
        torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
        np.random.set_state(_decode(state["numpy_rng"]))
        self.generator._calls = state["backend_calls"]

    def _truncate_metrics(self) -> None:
        """Rows written after the last checkpoint (a run killed mid-interval) are dropped, atomically."""
        path = self.out / "metrics.jsonl"
        if not path.is_file():
            return
        rows = [line for line in path.read_text().splitlines() if line.strip()]
        keep = [r for r in rows if json.loads(r).get("iteration", 0) <= self.iteration]
        atomic_write(path, "".join(r + "\n" for r in keep))

    # ---- SFT warm start -----------------------------------------------------------------------
    def sft(self) -> list[float]:
        """Cross-entropy on expert turns rendered in the policy's format (prompt tokens masked)."""
        from dataclasses import replace

        from agents.baselines import ExpertPolicy
        from agents.rollout import rollout
        from prover_gym import restore
        from trainers.sequences import token_logprobs

        cfg, tok = self.cfg, self.backend.tokenizer
        examples = []
        for episode in range(cfg.sft_episodes):
            traj = rollout(self.env, ExpertPolicy(), seed=cfg.seed * 100_003 + episode)
            rendered = [replace(t, text=render_action(self.policy.format, t.action)) for t in traj.turns]
            for k, turn in enumerate(rendered):
                restore(self.env, turn.snapshot)
                info = self.env.unwrapped._info({})
                messages, prefix = self.policy._request(turn.observation, info, rendered[:k])
                prompt = self.backend.prompt_ids(messages, prefix)
                target = tok(turn.text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                examples.append((prompt, target))
        opt = torch.optim.AdamW(self._trainable(), lr=cfg.sft_lr)
        losses = []
        self.model.train()
        for _ in range(cfg.sft_steps):
            batch = self.rng.sample(examples, min(cfg.minibatch_size, len(examples)))
            width = max(len(p) + len(t) for p, t in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id)
            labels = torch.full((len(batch), width), -100)
            attn = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (p, t) in enumerate(batch):
                seq = p + t
                ids[row, :len(seq)] = torch.tensor(seq)
                labels[row, len(p):len(seq)] = torch.tensor(t)
                attn[row, :len(seq)] = 1
            targets = labels != -100
            lp = token_logprobs(self.model, {"input_ids": ids, "attention_mask": attn}, targets)
            loss = -(lp * targets).sum() / targets.sum()  # the same mean NLL as the HF loss, LM head on targets only
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        self.model.eval()
        self.sync_generator()
        with open(self.out / "sft.jsonl", "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"examples": len(examples), "first_loss": losses[0] if losses else None,
                                 "last_loss": losses[-1] if losses else None}) + "\n")
        return losses

    # ---- one iteration ------------------------------------------------------------------------
    def collect(self):
        from agents.rollout import rollout

        task_ids = self.env.unwrapped.task_ids()
        tasks = self.rng.sample(task_ids, min(self.cfg.tasks_per_iteration, len(task_ids)))
        g = self.cfg.group_size
        if self.cfg.batched_rollouts:  # every episode of the iteration in lock-step: one generation batch per turn
            from agents.rollout import rollout_batch

            trajs = rollout_batch(self.pool(), self.policy, task_ids=[t for t in tasks for _ in range(g)],
                                  indices=list(range(len(tasks) * g)))
            return [trajs[i * g:(i + 1) * g] for i in range(len(tasks))]
        return [[rollout(self.env, self.policy, task_id=task) for _ in range(g)] for task in tasks]

    def pool(self):
        """A sync EnvPool for batched rollouts and verification continuations (envs share data)."""
        if getattr(self, "_pool", None) is None:
            from prover_gym import EnvPool

            cfg = self.cfg
            n = max(cfg.tasks_per_iteration * cfg.group_size, 2 * cfg.continuations)
            self._pool = EnvPool(cfg.env_id, n, backend=cfg.pool_backend, **cfg.pool_options, **cfg.env_kwargs)
        return self._pool

    def advantages(self, groups):
        from judges.base import mixed_outcome
        from trainers.advantages import grpo_advantages
        from trainers.verification import verify_segment

        cfg = self.cfg
        per_turn, stats = [], {"verified": 0, "a_seg": [], "extra_steps": 0, "extra_tokens": 0}
        verified_groups = 0
        for group in groups:
            rewards = torch.tensor([1.0 if t.won else 0.0 for t in group])
            adv = grpo_advantages(rewards, std_normalize=cfg.std_normalize).tolist()
            turns = [[a] * len(t.turns) for a, t in zip(adv, group)]
            if cfg.method != "grpo" and mixed_outcome(group) and verified_groups < cfg.max_verified_groups:
                proposal = self.judge.propose(group)
                if proposal is not None:
                    verified_groups += 1
                    if cfg.method == "prover_unverified":
                        a_seg = 1.0
                    else:
                        v = verify_segment(self.env, group[proposal.trajectory], proposal, self.policy, m=cfg.continuations,
                                           pool=self.pool() if cfg.batched_rollouts else None)
                        a_seg = v.a_seg
                        stats["extra_steps"] += v.extra_env_steps
                        stats["extra_tokens"] += v.extra_tokens
                    stats["verified"] += 1
                    stats["a_seg"].append(a_seg)
                    if a_seg > 0 or cfg.sign == "both":
                        for k in range(proposal.start, proposal.end + 1):
                            turns[proposal.trajectory][k] += cfg.beta * a_seg
            per_turn.extend(turns)
        return per_turn, stats

    def reference(self):
        """A frozen copy of the policy as it was when RL started (after SFT), for the KL term."""
        if self.cfg.kl_coef <= 0:
            return None
        if getattr(self, "_reference", None) is None:
            import copy

            ref_dir = self.out / "reference"
            if (ref_dir / "config.json").is_file():
                from transformers import AutoModelForCausalLM

                self._reference = AutoModelForCausalLM.from_pretrained(str(ref_dir)).eval()
            else:
                plain = self.plain_model()  # LoRA: adapter merged into a copy
                self._reference = (copy.deepcopy(plain) if plain is self.model else plain).eval()
                self._reference.save_pretrained(str(ref_dir))  # so a resumed run uses the same reference
            for p in self._reference.parameters():
                p.requires_grad_(False)
        return self._reference

    @property
    def recompute_logprobs(self) -> bool:
        flag = self.cfg.recompute_logprobs
        return bool(self.cfg.rollout_engine) if flag is None else flag

    def learn(self, trajectories, per_turn) -> dict:
        from trainers.loss import policy_loss
        from trainers.sequences import collate, token_logprobs, turn_samples

        samples = [s for s in turn_samples(trajectories, per_turn, self.backend.tokenizer) if any(s.policy_mask)]
        if not samples:
            return {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0, "samples": 0, "updates": 0}
        cfg, pad = self.cfg, self.backend.tokenizer.pad_token_id
        micro = [samples[i:i + cfg.minibatch_size] for i in range(0, len(samples), cfg.minibatch_size)]
        batches = [collate(part, pad) for part in micro]
        if self.recompute_logprobs:  # the learner's own numbers for the sampled tokens, before any update
            with torch.no_grad():
                for batch in batches:
                    batch["old_logprobs"] = token_logprobs(self.model, batch, batch["policy_mask"]) * batch["policy_mask"]
        tokens = [int(b["policy_mask"].sum()) for b in batches]
        # ppo_epochs passes over the batch, each cut into updates_per_epoch optimizer steps (GRPO's mu
        # inner iterations); 1 x 1 = one step on the whole batch, the ratio then stays 1 (on-policy)
        n_steps = max(1, min(cfg.updates_per_epoch, len(batches)))
        groups = [list(range(len(batches)))[k::n_steps] for k in range(n_steps)]
        logs = {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0}
        ref = self.reference()
        self.model.train()
        updates = 0
        for _ in range(cfg.ppo_epochs):
            for group in groups:
                self.optimizer.zero_grad()
                total = sum(tokens[i] for i in group)
                for i in group:
                    batch = batches[i]
                    lp = token_logprobs(self.model, batch, batch["policy_mask"])
                    ref_lp = None
                    if ref is not None:
                        with torch.no_grad():
                            ref_lp = token_logprobs(ref, batch, batch["policy_mask"])
                    loss, m = policy_loss(lp, batch["old_logprobs"], batch["advantages"], batch["policy_mask"],
                                          clip_eps=cfg.clip_eps, agg=cfg.agg, ref_logprobs=ref_lp, kl_coef=cfg.kl_coef)
                    weight = tokens[i] / total  # token-mean over the update's mini-batch
                    (loss * weight).backward()
                    share = weight / (n_steps * cfg.ppo_epochs)  # logs: the mean over all updates
                    logs["loss"] += float(loss.detach()) * share
                    logs["clip_ratio"] += m["clip_ratio"] * share
                    logs["approx_kl_old"] += m["approx_kl_old"] * share
                    logs["kl"] += m.get("kl", 0.0) * share
                torch.nn.utils.clip_grad_norm_(self._trainable(), 1.0)
                self.optimizer.step()
                updates += 1
        self.model.eval()
        self.sync_generator()
        logs["samples"] = len(samples)
        logs["updates"] = updates
        return logs

    def step(self) -> dict:
        t0 = time.time()
        groups = self.collect()
        trajectories = [t for g in groups for t in g]
        per_turn, pstats = self.advantages(groups)
        logs = self.learn(trajectories, per_turn)
        steps = sum(len(t.turns) for t in trajectories)
        tokens = sum(len(turn.token_ids or []) for t in trajectories for turn in t.turns)
        digest = hashlib.sha256(json.dumps([[turn.token_ids for turn in t.turns] for t in trajectories]).encode()).hexdigest()[:16]
        self.iteration += 1
        row = {"iteration": self.iteration, "reward": sum(t.total_reward for t in trajectories) / len(trajectories),
               "success": sum(t.won for t in trajectories) / len(trajectories), **logs,
               "env_steps": steps, "tokens": tokens,
               "prover/verified_segments": pstats["verified"],
               "prover/mean_segment_advantage": (sum(pstats["a_seg"]) / len(pstats["a_seg"])) if pstats["a_seg"] else 0.0,
               "prover/extra_tokens_ratio": pstats["extra_tokens"] / max(tokens, 1),
               "prover/extra_env_steps_ratio": pstats["extra_steps"] / max(steps, 1),
               "rollout_digest": digest, "seconds": round(time.time() - t0, 3)}
        # an LLM judge's cumulative call / failure counts: a down or misbehaving judge server costs
        # ProVer its proposals (the group falls back to GRPO) but never stops training
        row.update({f"judge/{k}": v for k, v in (getattr(self.judge, "stats", None) or {}).items()})
        row["policy/failures"] = (getattr(self.policy, "stats", None) or {}).get("failures", 0)
        with open(self.out / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        for sink in self.sinks():
            sink.log(row, self.iteration)
        return row

    def sinks(self) -> list:
        if getattr(self, "_sinks", None) is None:
            self._sinks = [make_sink(kind, self.cfg, self.out) for kind in self.cfg.loggers if kind != "jsonl"]
        return self._sinks

    def run(self, desc: str | None = None) -> list[dict]:
        """SFT (when configured and not yet done), then iterations up to ``cfg.iterations``, saving a
        checkpoint every ``checkpoint_every``; ``desc`` labels the progress bar."""
        rows = []
        if self.iteration == 0 and self.cfg.sft_steps > 0 and not (self.ckpt / "state.json").is_file():
            self.sft()
        from tqdm import tqdm

        bar = tqdm(total=self.cfg.iterations, initial=self.iteration, desc=desc or self.cfg.method, unit="it",
                   disable=not self.cfg.progress or None, leave=False)
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
        if getattr(self, "_pool", None) is not None:
            self._pool.close()
            self._pool = None


class _TensorBoardSink:
    def __init__(self, out: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # torch's writer needs the tensorboard package
            raise RuntimeError("loggers: tensorboard needs `pip install tensorboard`") from exc
        self.writer = SummaryWriter(str(out / "tensorboard"))

    def log(self, row: dict, step: int) -> None:
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _WandbSink:
    def __init__(self, cfg: TrainConfig, out: Path):
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError("loggers: wandb needs `pip install wandb`") from exc
        os.environ.setdefault("WANDB_MODE", "offline")  # no network unless the user says so
        self.run = wandb.init(project=cfg.wandb_project, dir=str(out), config=cfg.to_dict(), resume="allow",
                              id=hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12])

    def log(self, row: dict, step: int) -> None:
        self.run.log({k: v for k, v in row.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        self.run.finish()


def make_sink(kind: str, cfg: TrainConfig, out: Path):
    return _TensorBoardSink(out) if kind == "tensorboard" else _WandbSink(cfg, out)


def render_action(fmt, action: str) -> str:
    """An expert action written the way the policy's format expects the model to write it."""
    from agents.formats import SearchR1Format

    if isinstance(fmt, SearchR1Format):
        verb, arg = action.split("[", 1)
        return f"<think>I should {verb} now.</think><{verb}> {arg[:-1]} </{verb}>"
    return f"<think>The next step is {action}.</think><action>{action}</action>"


def _is_peft(model) -> bool:
    return hasattr(model, "peft_config")


def _with_lora(model, spec: dict):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ImportError("lora: ... needs peft: pip install peft") from None
    config = LoraConfig(task_type="CAUSAL_LM", r=spec.get("r", 8), lora_alpha=spec.get("alpha", 16),
                        lora_dropout=spec.get("dropout", 0.0),
                        target_modules=spec.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"]))
    return get_peft_model(model, config)


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _encode(state):
    if isinstance(state, tuple):
        return {"t": [_encode(x) for x in state]}
    if isinstance(state, np.ndarray):
        return {"a": state.tolist()}
    return state


def _decode(state):
    if isinstance(state, dict) and "t" in state:
        return tuple(_decode(x) for x in state["t"])
    if isinstance(state, dict) and "a" in state:
        return np.array(state["a"], dtype=np.uint32)
    if isinstance(state, list):
        return tuple(state)
    return state


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainers.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="YAML config (configs/train/*.yaml)")
    ap.add_argument("--resume", action="store_true", help="continue from out_dir/checkpoint")
    ap.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. method=prover judge.kind=oracle")
    args = ap.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    trainer = Trainer(cfg, resume=args.resume)
    for row in trainer.run():
        print(json.dumps({k: row[k] for k in ("iteration", "reward", "success", "loss", "prover/verified_segments")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
