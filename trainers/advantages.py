"""Advantages, as pure functions over tensors (check them against the equations).

GRPO (Shao et al. 2024), per group of G trajectories of one task with outcome rewards r_1..r_G:
    A_i = (r_i - mean(r)) / (std(r) + eps)          std_normalize=True  (GRPO)
    A_i =  r_i - mean(r)                             std_normalize=False (Dr. GRPO)
and every policy token of trajectory i gets A_i (observation tokens get 0).

ProVer (arXiv 2609.36178), for a group with both successes and failures and a judge's proposal
(trajectory k, turns s..e):
    A_seg = success_rate(M continuations from the state after turn e)
          - success_rate(M continuations from the state before turn s)
and, if A_seg > 0 (sign="positive", the paper) or for any A_seg (sign="both"),
    A_tok += beta * A_seg   for the policy tokens of turns s..e of trajectory k.
"""

from __future__ import annotations

import torch


def grpo_advantages(rewards: torch.Tensor, *, std_normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalised outcome advantages, shape [G]. A group of identical rewards gives zeros.
    ``std`` is torch's unbiased estimate, as TRL and verl use; a group of one gives zero."""
    rewards = rewards.to(torch.float32)
    if rewards.numel() < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean()
    return centred / (rewards.std() + eps) if std_normalize else centred


def broadcast_to_tokens(trajectory_advantages: torch.Tensor, policy_mask: torch.Tensor) -> torch.Tensor:
    """[G] advantages onto [G, T] tokens: A_i on policy tokens (mask 1), 0 elsewhere."""
    return trajectory_advantages[:, None].to(torch.float32) * policy_mask.to(torch.float32)


def segment_advantage(success_after: torch.Tensor, success_before: torch.Tensor) -> float:
    """A_seg = success_rate(after) - success_rate(before), from the M continuation outcomes (0/1) each."""
    if success_after.numel() == 0 or success_before.numel() == 0:
        raise ValueError("segment_advantage needs at least one continuation on each side")
    return float(success_after.to(torch.float32).mean() - success_before.to(torch.float32).mean())


def apply_segment_bonus(token_advantages: torch.Tensor, token_turns: torch.Tensor, policy_mask: torch.Tensor,
                        start: int, end: int, a_seg: float, *, beta: float = 1.0, sign: str = "positive") -> torch.Tensor:
    """Add ``beta * a_seg`` to the policy tokens of turns ``start..end`` of ONE trajectory.

    ``token_advantages``, ``token_turns`` (the turn index of each token, -1 for none) and
    ``policy_mask`` are [T]. Returns a new tensor; the input is not modified.
    """
    if sign not in ("positive", "both"):
        raise ValueError(f"sign={sign!r}; use 'positive' (the paper) or 'both'")
    if start > end:
        raise ValueError(f"segment start {start} > end {end}")
    out = token_advantages.clone().to(torch.float32)
    if sign == "positive" and a_seg <= 0:
        return out
    in_segment = (token_turns >= start) & (token_turns <= end) & policy_mask.bool()
    out[in_segment] += beta * a_seg
    return out
