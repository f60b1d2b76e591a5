"""Advantages, as pure functions (check them against the equations), and the method registry.

GRPO (Shao et al. 2024), per group of G trajectories of one task with outcome rewards r_1..r_G:
    A_i = (r_i - mean(r)) / (std(r) + eps)          grpo     (std_normalize=True)
    A_i =  r_i - mean(r)                             dr_grpo  (Liu et al. 2025: no std division)
and every policy token of trajectory i gets A_i (observation tokens get 0).

GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization"), on top of the episode advantage
A^E_i above: turns of the group that start from the same state form a step group; each turn's
discounted return R_{i,t} = sum_{j>=t} gamma^(j-t) r_{i,j} is normalised inside its step group,
    A^S_{i,t} = (R_{i,t} - mean_{step group}(R)) / (std_{step group}(R) + eps)   (centred only for dr_grpo)
    A_{i,t}   = A^E_i + omega * A^S_{i,t}
A step group of one turn gets A^S = 0. States are matched by exact identity (``Snapshot.key``).

ProVer (arXiv 2609.36178), for a group with both successes and failures and a judge's proposal
(trajectory k, turns s..e):
    A_seg = success_rate(M continuations from the state after turn e)
          - success_rate(M continuations from the state before turn s)
and, if A_seg > 0 (sign="positive", the paper) or for any A_seg (sign="both"),
    A_tok += beta * scale * A_seg   for the policy tokens of turns s..e of trajectory k,
where ``scale`` = ``bonus_scale(...)``: the bonus is put in the units of the advantage it joins.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

EPS = 1e-6
GIGPO_GAMMA = 0.95  # verl-agent's default discount for GiGPO's step returns
GIGPO_OMEGA = 1.0  # the paper's weight of the step advantage


def grpo_advantages(rewards: torch.Tensor, *, std_normalize: bool = True, eps: float = EPS) -> torch.Tensor:
    """Group-normalised outcome advantages, shape [G]. A group of identical rewards gives zeros.
    ``std`` is torch's unbiased estimate, as TRL and verl use; a group of one gives zero."""
    rewards = rewards.to(torch.float32)
    if rewards.numel() < 2:
        return torch.zeros_like(rewards)
    centred = rewards - rewards.mean()
    return centred / (rewards.std() + eps) if std_normalize else centred


def bonus_scale(rewards: torch.Tensor, *, std_normalize: bool = True, eps: float = EPS) -> float:
    """The factor that puts ProVer's ``A_seg`` in the units of the group's advantages.

    A_seg is a difference of success probabilities, i.e. of expected outcome rewards: the same
    units as GRPO's numerator r_i - mean(r). GRPO divides that numerator by the group's reward std,
    so a segment bonus added to GRPO advantages is divided by the same std (1 / (std + eps)); with
    Dr. GRPO (no std division) it is added as it is (1). Without this, a bonus of beta * A_seg
    would weigh ~2-3x less than the same evidence carried by the outcome advantage in a group with
    std ~0.4 - and more than it in a near-uniform group.
    """
    rewards = rewards.to(torch.float32)
    if not std_normalize or rewards.numel() < 2:
        return 1.0
    return float(1.0 / (rewards.std() + eps))


def broadcast_to_tokens(trajectory_advantages: torch.Tensor, policy_mask: torch.Tensor) -> torch.Tensor:
    """[G] advantages onto [G, T] tokens: A_i on policy tokens (mask 1), 0 elsewhere."""
    return trajectory_advantages[:, None].to(torch.float32) * policy_mask.to(torch.float32)


def turns_to_tokens(turn_advantages: list[float], token_turns: torch.Tensor) -> torch.Tensor:
    """Per-turn advantages onto one trajectory's tokens: token t gets ``turn_advantages[token_turns[t]]``
    (0 where ``token_turns`` is -1)."""
    table = torch.tensor(list(turn_advantages) + [0.0], dtype=torch.float32)
    index = torch.where(token_turns >= 0, token_turns, torch.full_like(token_turns, len(turn_advantages)))
    return table[index]


def segment_advantage(success_after: torch.Tensor, success_before: torch.Tensor) -> float:
    """A_seg = success_rate(after) - success_rate(before), from the M continuation outcomes (0/1) each."""
    if success_after.numel() == 0 or success_before.numel() == 0:
        raise ValueError("segment_advantage needs at least one continuation on each side")
    return float(success_after.to(torch.float32).mean() - success_before.to(torch.float32).mean())


def apply_segment_bonus(
    token_advantages: torch.Tensor,
    token_turns: torch.Tensor,
    policy_mask: torch.Tensor,
    start: int,
    end: int,
    a_seg: float,
    *,
    beta: float = 1.0,
    sign: str = "positive",
) -> torch.Tensor:
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


# ---- the significance gate ---------------------------------------------------------------------
def _binom_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(0, k + 1))


def improvement_p_value(
    after: list[bool], before: list[bool], *, after_known: bool = False, before_known: bool = False
) -> float:
    """One-sided p-value of "V(after) > V(before)" from 0/1 continuation outcomes.

    Both sides sampled: Fisher's exact test (hypergeometric tail of the after-side successes, given
    the margins). A side whose value is known exactly (a terminal state's outcome, ``*_known``) is a
    point: a one-sample binomial tail of the other side. Small p = the improvement is unlikely to be
    sampling noise. Two known sides give 0 when after > before, else 1.
    """
    if after_known and before_known:
        return 0.0 if float(after[0]) > float(before[0]) else 1.0
    if after_known:  # H0: V(before) >= v_after; evidence = few successes before
        v = float(after[0])
        k = sum(before)
        return 1.0 if v <= 0 else _binom_cdf(k, len(before), v) if v < 1 else float(k == len(before))
    if before_known:  # H0: V(after) <= v_before; evidence = many successes after
        v = float(before[0])
        k = sum(after)
        return 1.0 if v >= 1 else 1.0 - (_binom_cdf(k - 1, len(after), v) if k > 0 else 0.0)
    a, b = sum(after), sum(before)
    n_a, n_b = len(after), len(before)
    total = a + b
    denom = math.comb(n_a + n_b, total)
    return sum(math.comb(n_a, x) * math.comb(n_b, total - x) for x in range(a, min(n_a, total) + 1)) / denom


# ---- GiGPO ---------------------------------------------------------------------------------------
def discounted_returns(turn_rewards: list[float], gamma: float = GIGPO_GAMMA) -> list[float]:
    """R_t = sum_{j>=t} gamma^(j-t) r_j for one trajectory."""
    out, running = [0.0] * len(turn_rewards), 0.0
    for t in range(len(turn_rewards) - 1, -1, -1):
        running = turn_rewards[t] + gamma * running
        out[t] = running
    return out


def step_group_advantages(
    returns: list[list[float]], state_keys: list[list[str]], *, std_normalize: bool = True, eps: float = EPS
) -> list[list[float]]:
    """GiGPO's A^S: each turn's return normalised inside the group of turns (of any trajectory of the
    episode group) that start from the same state. Singleton step groups get 0."""
    members: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, keys in enumerate(state_keys):
        for t, key in enumerate(keys):
            members[key].append((i, t))
    out = [[0.0] * len(r) for r in returns]
    for turns in members.values():
        if len(turns) < 2:
            continue
        values = torch.tensor([returns[i][t] for i, t in turns], dtype=torch.float32)
        adv = grpo_advantages(values, std_normalize=std_normalize, eps=eps)
        for (i, t), a in zip(turns, adv.tolist()):
            out[i][t] = a
    return out


# ---- the registry: one pure function per method ------------------------------------------------
# A method's function maps a group (outcome rewards [G], per-turn rewards, per-turn state keys) to
# per-turn advantages; ProVer's methods add their verified bonus on top of their base afterwards.
def _episode(rewards, turn_rewards, std_normalize):
    adv = grpo_advantages(torch.tensor(rewards, dtype=torch.float32), std_normalize=std_normalize).tolist()
    return [[a] * len(tr) for a, tr in zip(adv, turn_rewards)]


def grpo(
    rewards: list[float],
    turn_rewards: list[list[float]],
    state_keys: list[list[str]],
    *,
    std_normalize: bool = True,
    **_,
) -> list[list[float]]:
    """Every turn of trajectory i gets GRPO's A_i (``std_normalize=False``: Dr. GRPO's)."""
    return _episode(rewards, turn_rewards, std_normalize)


def dr_grpo(
    rewards: list[float], turn_rewards: list[list[float]], state_keys: list[list[str]], **_
) -> list[list[float]]:
    """Every turn of trajectory i gets Dr. GRPO's r_i - mean(r)."""
    return _episode(rewards, turn_rewards, False)


def gigpo(
    rewards: list[float],
    turn_rewards: list[list[float]],
    state_keys: list[list[str]],
    *,
    std_normalize: bool = True,
    gamma: float = GIGPO_GAMMA,
    omega: float = GIGPO_OMEGA,
    **_,
) -> list[list[float]]:
    """A^E_i + omega * A^S_{i,t} (see the module docstring)."""
    episode = _episode(rewards, turn_rewards, std_normalize)
    returns = [discounted_returns(tr, gamma) for tr in turn_rewards]
    step = step_group_advantages(returns, state_keys, std_normalize=std_normalize)
    return [[e + omega * s for e, s in zip(es, ss)] for es, ss in zip(episode, step)]
