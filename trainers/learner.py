"""The learner step: turn samples -> clipped policy loss (trainers/loss.py) -> optimizer steps.

``ppo_epochs`` passes over the iteration's batch, each cut into ``updates_per_epoch`` optimizer
steps (GRPO's mu inner iterations); old log-probs are fixed before the first step (recomputed by
the learner when a separate engine sampled them). The loss is a token mean over each update's
mini-batch, accumulated over micro-batches of ``minibatch_size`` samples.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from trainers.loss import policy_loss
from trainers.sequences import collate, token_logprobs, turn_samples

EMPTY = {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0, "samples": 0, "updates": 0}


class Learner:
    def __init__(self, cfg, model, tokenizer, optimizer, out: Path, plain_model, recompute_logprobs: bool):
        self.cfg, self.model, self.tokenizer, self.optimizer = cfg, model, tokenizer, optimizer
        self.out, self.plain_model, self.recompute_logprobs = out, plain_model, recompute_logprobs
        self._reference = None

    def reference(self):
        """A frozen copy of the policy as it was when RL started (after SFT), for the KL term; saved
        beside the run so a resumed run uses the same one."""
        if self.cfg.kl_coef <= 0:
            return None
        if self._reference is None:
            ref_dir = self.out / "reference"
            if (ref_dir / "config.json").is_file():
                from transformers import AutoModelForCausalLM

                self._reference = AutoModelForCausalLM.from_pretrained(str(ref_dir)).eval()
            else:
                plain = self.plain_model()  # LoRA: adapter merged into a copy
                self._reference = (copy.deepcopy(plain) if plain is self.model else plain).eval()
                self._reference.save_pretrained(str(ref_dir))
            for p in self._reference.parameters():
                p.requires_grad_(False)
        return self._reference

    def learn(self, trajectories, advantages, groups: list | None = None) -> dict:
        """``advantages[i]``: trajectory i's token advantages (or per-turn list); None leaves it out.
        ``groups[i]``: trajectory i's GRPO group; with several updates per pass each group stays whole
        in one update, so its advantages (which sum to 0) meet in the same step."""
        kept = [(i, t, a) for i, (t, a) in enumerate(zip(trajectories, advantages)) if a is not None]
        samples = [s for s in turn_samples([t for _, t, _ in kept], [a for _, _, a in kept], self.tokenizer)
                   if any(s.policy_mask)]
        if not samples:
            return dict(EMPTY)
        cfg, pad = self.cfg, self.tokenizer.pad_token_id
        group_of = [groups[i] if groups is not None else i for i, _, _ in kept]
        parts = update_parts(samples, group_of, cfg.updates_per_epoch)
        micro, steps = [], []
        for part in parts:
            part = sorted(part, key=lambda s: len(s.input_ids))  # similar lengths per micro-batch: less padding
            chunks = [part[i:i + cfg.minibatch_size] for i in range(0, len(part), cfg.minibatch_size)]
            steps.append(list(range(len(micro), len(micro) + len(chunks))))
            micro += chunks
        batches = [collate(part, pad) for part in micro]
        if self.recompute_logprobs:  # the learner's own numbers for the sampled tokens, before any update
            with torch.no_grad():
                for batch in batches:
                    batch["old_logprobs"] = token_logprobs(self.model, batch, batch["policy_mask"]) * batch["policy_mask"]
        tokens = [int(b["policy_mask"].sum()) for b in batches]
        n_steps = len(steps)
        logs = {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0}
        ref = self.reference()
        self.model.train()
        updates = 0
        for _ in range(cfg.ppo_epochs):
            for step in steps:
                self.optimizer.zero_grad()
                total = sum(tokens[i] for i in step)
                weights = traj_weights([micro[i] for i in step]) if cfg.agg == "traj-mean" else None
                for j, i in enumerate(step):
                    batch = batches[i]
                    lp = token_logprobs(self.model, batch, batch["policy_mask"])
                    ref_lp = None
                    if ref is not None:
                        with torch.no_grad():
                            ref_lp = token_logprobs(ref, batch, batch["policy_mask"])
                    loss, m = policy_loss(lp, batch["old_logprobs"], batch["advantages"], batch["policy_mask"],
                                          clip_eps=cfg.clip_eps, clip_eps_high=cfg.clip_eps_high, agg=cfg.agg,
                                          ref_logprobs=ref_lp, kl_coef=cfg.kl_coef,
                                          weights=None if weights is None else weights[j])
                    # token-mean over the update's mini-batch; traj-mean's weights already normalise the sum
                    weight = 1.0 if weights is not None else tokens[i] / total
                    (loss * weight).backward()
                    share = weight / (n_steps * cfg.ppo_epochs)  # logs: the mean over all updates
                    logs["loss"] += float(loss.detach()) * share
                    logs["clip_ratio"] += m["clip_ratio"] * share
                    logs["approx_kl_old"] += m["approx_kl_old"] * share
                    logs["kl"] += m.get("kl", 0.0) * share
                torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]], 1.0)
                self.optimizer.step()
                updates += 1
        self.model.eval()
        logs["samples"] = len(samples)
        logs["updates"] = updates
        return logs


def update_parts(samples: list, group_of: list, n: int) -> list[list]:
    """The samples cut into at most ``n`` updates of whole groups (``group_of[s.trajectory]``), groups
    dealt in order to the update with the fewest samples so far; the samples keep their order."""
    sizes: dict = {}
    for s in samples:
        g = group_of[s.trajectory]
        sizes[g] = sizes.get(g, 0) + 1
    n = max(1, min(n, len(sizes)))
    load, where = [0] * n, {}
    for g, size in sizes.items():
        k = load.index(min(load))
        where[g] = k
        load[k] += size
    parts = [[s for s in samples if where[group_of[s.trajectory]] == k] for k in range(n)]
    return [p for p in parts if p]


def traj_weights(parts: list[list]) -> list[torch.Tensor]:
    """Per sample of each micro-batch of one update: 1 / (the policy tokens its trajectory has in the
    update x the trajectories in the update), so the summed loss is GRPO's mean over trajectories of
    each trajectory's token mean."""
    tokens: dict[int, int] = {}
    for part in parts:
        for s in part:
            tokens[s.trajectory] = tokens.get(s.trajectory, 0) + sum(s.policy_mask)
    n = len(tokens)
    return [torch.tensor([1.0 / (max(tokens[s.trajectory], 1) * n) for s in part]) for part in parts]
