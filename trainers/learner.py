"""The learner step: turn samples -> clipped policy loss (trainers/loss.py) -> optimizer steps.

``ppo_epochs`` passes over the iteration's batch, each cut into ``updates_per_epoch`` optimizer
steps (GRPO's mu inner iterations); old log-probs are fixed before the first step (recomputed by
the learner when a separate engine sampled them). The loss is a token mean over each update's
mini-batch, accumulated over micro-batches of ``minibatch_size`` samples.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import torch

from trainers.loss import policy_loss
from trainers.sequences import collate, token_logprobs, turn_samples

EMPTY = {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0, "samples": 0, "updates": 0}


class Learner:
    """The policy update of one iteration: turn samples built from the trajectories and their token advantages,
    the clipped loss (trainers/loss.py) over ``ppo_epochs`` x ``updates_per_epoch`` optimizer steps, each on a
    mini-batch of whole groups accumulated over micro-batches of ``minibatch_size`` samples, with a KL to a
    reference model when ``kl_coef`` > 0; returns the update's logs."""

    def __init__(
        self,
        cfg,
        model,
        tokenizer,
        optimizer,
        out: Path,
        plain_model,
        recompute_logprobs: bool,
        dist=None,
        forward_model=None,
    ):
        """``forward_model``: ``LogprobModule(model)`` as the data-parallel wrapper (``dist.prepare``)
        returned it; None for one process."""
        from trainers.distributed import Dist

        self.cfg, self.model, self.tokenizer, self.optimizer = cfg, model, tokenizer, optimizer
        self.out, self.plain_model, self.recompute_logprobs = out, plain_model, recompute_logprobs
        self.dist = dist or Dist()
        self.forward_model = forward_model
        self._reference = None

    def forward_logprobs(self, batch: dict, mask):
        """The learner's log-probs with gradient: through the DDP / FSDP wrapper when there is one."""
        if self.forward_model is None:
            return token_logprobs(self.model, batch, mask)
        return self.forward_model(batch["input_ids"], batch["attention_mask"], mask)

    def reference(self):
        """A frozen copy of the policy as it was when RL started (after SFT), for the KL term; saved
        beside the run so a resumed run uses the same one."""
        if self.cfg.kl_coef <= 0:
            return None
        if self._reference is None:
            ref_dir = self.out / "reference"
            if (ref_dir / "config.json").is_file():
                from transformers import AutoModelForCausalLM

                reference = AutoModelForCausalLM.from_pretrained(str(ref_dir)).eval()
            else:
                plain = self.plain_model()  # LoRA: adapter merged into a copy
                reference = (copy.deepcopy(plain) if plain is self.model else plain).eval()
                reference.save_pretrained(str(ref_dir))
            for p in reference.parameters():
                p.requires_grad_(False)
            self._reference = reference
        return self._reference

    def learn(self, trajectories, advantages, groups: list | None = None) -> dict:
        """``advantages[i]``: trajectory i's token advantages (or per-turn list); None leaves it out.
        ``groups[i]``: trajectory i's GRPO group; with several updates per pass each group stays whole
        in one update, so its advantages (which sum to 0) meet in the same step.

        Data-parallel (``self.dist`` with N ranks): each rank passes its own trajectories with the
        groups' global ids; the groups are dealt to updates over all ranks as one process deals them,
        each update's loss is normalised by its global token (trajectory) count and DDP sums the
        ranks' gradients (its mean x N), so an update is the single-process update."""
        dist = self.dist
        kept = [(i, t, a) for i, (t, a) in enumerate(zip(trajectories, advantages)) if a is not None]
        samples = [
            s
            for s in turn_samples([t for _, t, _ in kept], [a for _, _, a in kept], self.tokenizer)
            if any(s.policy_mask)
        ]
        group_of = [groups[i] if groups is not None else i for i, _, _ in kept]
        sizes = group_sizes(samples, group_of)
        if dist.enabled:  # the global groups, in global order (a group lives on one rank)
            merged = {}
            for part in dist.gather(sizes):
                merged.update(part)
            sizes = dict(sorted(merged.items()))
        if not sizes:
            return dict(EMPTY)
        cfg, pad = self.cfg, self.tokenizer.pad_token_id
        parts = update_parts(samples, group_of, cfg.updates_per_epoch, sizes)  # this rank's share of each update
        n_updates = len(parts)
        micro: list[list] = []
        steps: list[list[int]] = []
        for part in parts:
            part = sorted(part, key=lambda s: len(s.input_ids))  # similar lengths per micro-batch: less padding
            chunks = [part[i : i + cfg.minibatch_size] for i in range(0, len(part), cfg.minibatch_size)]
            steps.append(list(range(len(micro), len(micro) + len(chunks))))
            micro += chunks
        device = next(self.model.parameters()).device
        batches = [{k: v.to(device) for k, v in collate(part, pad).items()} for part in micro]
        gap = [0.0, 0, 0.0]  # |sampler's - learner's log-prob| over sampled tokens: sum, count, max
        if self.recompute_logprobs:  # the learner's own numbers for the sampled tokens, before any update
            with torch.no_grad():
                for batch in batches:
                    mask = batch["policy_mask"]
                    ours = token_logprobs(self.model, batch, mask) * mask
                    diff = (ours - batch["old_logprobs"]).abs() * mask  # a separate engine's weights checked
                    gap = [gap[0] + float(diff.sum()), gap[1] + int(mask.sum()), max(gap[2], float(diff.max()))]
                    batch["old_logprobs"] = ours
        tokens = [int(b["policy_mask"].sum()) for b in batches]
        local = [[sum(tokens[i] for i in step), len({s.trajectory for i in step for s in micro[i]})] for step in steps]
        totals = _sum_rows(dist, local)  # per update: policy tokens and trajectories over all ranks
        logs = {"loss": 0.0, "clip_ratio": 0.0, "approx_kl_old": 0.0, "kl": 0.0}
        ref = self.reference()
        self.model.train()
        updates = 0
        scale = float(dist.world)  # DDP averages the ranks' gradients; the loss is a sum over ranks
        for _ in range(cfg.ppo_epochs):
            for k, step in enumerate(steps):
                self.optimizer.zero_grad()
                total, n_trajs = totals[k]
                weights = traj_weights([micro[i] for i in step], n_trajs) if cfg.agg == "traj-mean" else None
                if not step:  # no sample of this update here: a zero-weight pass keeps the ranks' all-reduce in step
                    self._idle_backward(scale)
                for j, i in enumerate(step):
                    batch = batches[i]
                    sync = j == len(step) - 1
                    with contextlib.nullcontext() if sync else dist.no_sync(self.forward_model):
                        lp = self.forward_logprobs(batch, batch["policy_mask"])
                        ref_lp = None
                        if ref is not None:
                            with torch.no_grad():
                                ref_lp = token_logprobs(ref, batch, batch["policy_mask"])
                        loss, m = policy_loss(
                            lp,
                            batch["old_logprobs"],
                            batch["advantages"],
                            batch["policy_mask"],
                            clip_eps=cfg.clip_eps,
                            clip_eps_high=cfg.clip_eps_high,
                            agg=cfg.agg,
                            ref_logprobs=ref_lp,
                            kl_coef=cfg.kl_coef,
                            weights=None if weights is None else weights[j],
                        )
                        # token-mean over the update's mini-batch; traj-mean's weights already normalise the sum
                        token_share = tokens[i] / total
                        weight = 1.0 if weights is not None else token_share
                        (loss * (weight * scale)).backward()
                    per_update = 1.0 / (n_updates * cfg.ppo_epochs)  # logs: the mean over all updates
                    logs["loss"] += float(loss.detach()) * weight * per_update
                    logs["kl"] += m.get("kl", 0.0) * weight * per_update
                    logs["clip_ratio"] += m["clip_ratio"] * token_share * per_update  # token means: by token share
                    logs["approx_kl_old"] += m["approx_kl_old"] * token_share * per_update
                dist.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]], 1.0)
                self.optimizer.step()
                updates += 1
        self.model.eval()
        logs["samples"] = len(samples)
        if dist.enabled:  # each rank holds its share of every sum
            logs = {k: sum(r[k] for r in dist.gather(logs)) for k in logs}
            gaps = dist.gather(gap)
            gap = [sum(g[0] for g in gaps), sum(g[1] for g in gaps), max(g[2] for g in gaps)]
        logs["updates"] = updates
        if self.recompute_logprobs:  # how far the generating engine's log-probs are from the learner's
            logs["rollout_logprob_gap"] = gap[0] / max(gap[1], 1)
            logs["rollout_logprob_gap_max"] = gap[2]
        return logs

    def _idle_backward(self, scale: float) -> None:
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        device = next(self.model.parameters()).device
        ids = torch.tensor([[pad, pad]], device=device)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        mask = torch.tensor([[0, 1]], device=device)
        (self.forward_logprobs(batch, mask).sum() * 0.0 * scale).backward()


def _sum_rows(dist, rows: list[list[int]]) -> list[list[int]]:
    """Element-wise sum of every rank's ``rows`` (the same shape on every rank)."""
    if not dist.enabled:
        return rows
    gathered = dist.gather(rows)
    return [[sum(r[k][j] for r in gathered) for j in range(len(rows[k]))] for k in range(len(rows))]


class LogprobModule(torch.nn.Module):
    """``token_logprobs`` as a module's forward, so DDP / FSDP wrap the fast masked path."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, mask):
        """Each masked position's log-probability of its token (``token_logprobs``)."""
        return token_logprobs(self.model, {"input_ids": input_ids, "attention_mask": attention_mask}, mask)


def deal_groups(sizes: dict, n: int) -> dict:
    """group -> update index: at most ``n`` updates (never more than groups), groups (in ``sizes``'
    order) dealt to the update with the fewest samples so far."""
    n = max(1, min(n, len(sizes)))
    load, where = [0] * n, {}
    for g, size in sizes.items():
        k = load.index(min(load))
        where[g] = k
        load[k] += size
    return where


def group_sizes(samples: list, group_of: list) -> dict:
    """group -> its number of samples, groups in order of first appearance."""
    sizes: dict = {}
    for s in samples:
        g = group_of[s.trajectory]
        sizes[g] = sizes.get(g, 0) + 1
    return sizes


def update_parts(samples: list, group_of: list, n: int, sizes: dict | None = None) -> list[list]:
    """The samples cut into at most ``n`` updates of whole groups (``group_of[s.trajectory]``), groups
    dealt in order to the update with the fewest samples so far; the samples keep their order.
    ``sizes``: the groups to deal (default: these samples'); data-parallel, every rank's groups, so a
    rank gets its share of each global update, empty where none of its groups landed."""
    where = deal_groups(group_sizes(samples, group_of) if sizes is None else sizes, n)
    n_parts = max(where.values(), default=-1) + 1
    return [[s for s in samples if where[group_of[s.trajectory]] == k] for k in range(n_parts)]


def traj_weights(parts: list[list], n_trajectories: int | None = None) -> list[torch.Tensor]:
    """Per sample of each micro-batch of one update: 1 / (the policy tokens its trajectory has in the
    update x the trajectories in the update), so the summed loss is GRPO's mean over trajectories of
    each trajectory's token mean. ``n_trajectories``: the update's count over all ranks (default: these)."""
    tokens: dict[int, int] = {}
    for part in parts:
        for s in part:
            tokens[s.trajectory] = tokens.get(s.trajectory, 0) + sum(s.policy_mask)
    n = n_trajectories or len(tokens)
    return [torch.tensor([1.0 / (max(tokens[s.trajectory], 1) * n) for s in part]) for part in parts]
