"""The policy loss: token-level clipped ratio (PPO/GRPO), optional KL to a reference policy.

    ratio_t = exp(log pi(a_t) - log pi_old(a_t))
    L_pg    = mean_t over policy tokens of max(-A_t * ratio_t, -A_t * clip(ratio_t, 1 - eps_low, 1 + eps_high))
    L_kl    = mean_t of k3(pi_ref || pi) = exp(ref_t - lp_t) - (ref_t - lp_t) - 1   (GRPO's estimator)
    L       = L_pg + kl_coef * L_kl

Only tokens with ``mask == 1`` (the policy's own tokens) enter the means, so observation text
(env output, prompts) never receives gradient. ``agg="token-mean"`` averages over all policy
tokens of the batch (Dr. GRPO / DAPO); ``"seq-mean"`` averages per sequence (one turn's sample)
first; ``"traj-mean"`` is GRPO's 1/|o_i| for multi-turn: every token of trajectory i weighs
1/(policy tokens of i) and trajectories count equally (``weights`` [B] carry 1/(|o_i| x trajectories)
per sample, and the sum is returned). With token-mean, a failed multi-turn episode (it runs to the
step budget) outweighs the success it is compared with token for token, so the tokens every reply
shares (the format) get a net negative push; traj-mean balances them.
"""

from __future__ import annotations

import torch

AGGS = ("token-mean", "seq-mean", "traj-mean")


def masked_mean(
    x: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean", weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``x`` over the positions of ``mask`` aggregated as ``agg``: token-mean (every token alike), seq-mean (the mean of
    each sample's mean) or traj-mean (weighted by ``weights``: 1 / (the trajectory's tokens x trajectories))."""
    mask = mask.to(x.dtype)
    if agg == "traj-mean":
        if weights is None:
            raise ValueError("agg='traj-mean' needs per-sample weights (1 / (trajectory tokens x trajectories))")
        return (x * mask * weights.to(x.dtype)[:, None]).sum()
    if agg == "token-mean":
        return (x * mask).sum() / mask.sum().clamp(min=1.0)
    if agg == "seq-mean":
        per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        has_tokens = (mask.sum(-1) > 0).to(x.dtype)
        return (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    raise ValueError(f"agg={agg!r}; use one of {AGGS}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    agg: str = "token-mean",
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """(loss, metrics) for [B, T] tensors; metrics: ``clip_ratio``, ``kl``, ``approx_kl_old``."""
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + eps_high)
    pg = torch.maximum(unclipped, clipped)
    loss = masked_mean(pg, mask, agg, weights)
    metrics = {
        "clip_ratio": float(masked_mean((clipped > unclipped).to(pg.dtype), mask).detach()),
        "approx_kl_old": float(masked_mean(-log_ratio, mask).detach()),
    }
    if ref_logprobs is not None:
        d = ref_logprobs - logprobs
        kl = torch.exp(d) - d - 1.0
        kl_mean = masked_mean(kl, mask, agg, weights)
        metrics["kl"] = float(kl_mean.detach())
        if kl_coef:
            loss = loss + kl_coef * kl_mean
    return loss, metrics
