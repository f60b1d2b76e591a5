"""ProVer's verification: estimate a proposed segment's advantage from observed outcomes.

The state before turn ``start`` is the snapshot the trajectory stored with that turn; the state
after turn ``end`` is the snapshot stored with turn ``end + 1`` — or, when the segment ends the
episode, the terminal state, whose outcome is the trajectory's own. From each, M continuations of
the current policy are run and
    A_seg = success_rate(after) - success_rate(before).
The extra env steps and generated tokens are counted for ``prover/extra_*_ratio``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agents.rollout import rollout_batch, rollout_from
from agents.trajectory import Trajectory
from judges.base import Proposal
from trainers.advantages import segment_advantage


@dataclass
class Verification:
    a_seg: float
    success_before: list[bool]
    success_after: list[bool]
    extra_env_steps: int
    extra_tokens: int
    continuations: list[Trajectory]


def verify_segment(env, traj: Trajectory, proposal: Proposal, policy, m: int = 4, *, pool=None) -> Verification:
    """With ``pool`` (an ``EnvPool`` of at least ``m`` envs, ideally ``2m``), the continuations run
    in lock-step batches through ``rollout_batch``; otherwise one after another in ``env``."""
    if not 0 <= proposal.start <= proposal.end < len(traj.turns):
        raise ValueError(f"proposal turns {proposal.start}..{proposal.end} are outside 0..{len(traj.turns) - 1}")
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    runs: list[Trajectory] = []
    sides = [proposal.start] + ([proposal.end + 1] if proposal.end + 1 < len(traj.turns) else [])
    starts = [(traj.turns[k].snapshot, traj.turns[:k], traj.task_id, traj.task) for k in sides for _ in range(m)]
    if pool is not None and len(pool) >= m:
        width = len(pool) - len(pool) % m  # whole sides per batch
        for first in range(0, len(starts), width):
            chunk = starts[first:first + width]
            runs += rollout_batch(pool, policy, starts=chunk, indices=list(range(len(chunk))))
    else:
        for snap, history, task_id, task in starts:
            runs.append(rollout_from(env, snap, policy, history, task_id=task_id, task=task))
    before = [r.won for r in runs[:m]]
    after = [r.won for r in runs[m:2 * m]] if len(sides) == 2 else [traj.won] * m
    a_seg = segment_advantage(torch.tensor(after, dtype=torch.float32), torch.tensor(before, dtype=torch.float32))
    steps = sum(len(r.turns) for r in runs)
    tokens = sum(len(t.token_ids or []) for r in runs for t in r.turns)
    return Verification(a_seg, before, after, steps, tokens, runs)
