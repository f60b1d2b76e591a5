"""ProVer's verification: estimate a proposed segment's advantage from observed outcomes.

A turn boundary ``k`` of a trajectory is the state before its turn ``k`` (the snapshot stored
with that turn); boundary ``len(turns)`` is the state the episode ended in. Its value V(k) is
estimated by the success rate of M continuations of the current policy from that state, except
where it is free:
- V(terminal) is the trajectory's own outcome, exactly (no continuations);
- V(0), the task's initial state, is already estimated by the group's own G rollouts, sampled
  from that state by the same policy (``group_outcomes``).
Then, for a proposal of turns s..e,
    A_seg = V(e + 1) - V(s)
together with a one-sided p-value of "V(e + 1) > V(s)" (Fisher's exact test, or a binomial tail
when one side is exact) for the optional significance gate. The extra env steps and generated
tokens are counted for ``prover/extra_*_ratio``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from agents.rollout import rollout_chunks, rollout_from
from agents.trajectory import Trajectory
from judges.base import Proposal
from trainers.advantages import improvement_p_value, segment_advantage


@dataclass
class Verification:
    """ProVer's measurement of one segment: A_seg = V(after) - V(before) from the continuations' outcomes on each side
    (or the group's own rollouts / the trajectory's outcome where the config says so), its one-sided p-value, and
    what it cost in env steps and tokens."""

    a_seg: float
    success_before: list[bool]
    success_after: list[bool]
    extra_env_steps: int
    extra_tokens: int
    continuations: list[Trajectory]
    before_source: str = "continuations"  # continuations | group (the group's own rollouts) | terminal
    after_source: str = "continuations"  # continuations | terminal (the trajectory's own outcome)
    p_value: float = 1.0
    continuations_before: list[Trajectory] = field(default_factory=list, repr=False)
    continuations_after: list[Trajectory] = field(default_factory=list, repr=False)
    extra_prompt_tokens: int = 0

    @property
    def a_seg_se(self) -> float:
        """Standard error of A_seg: sqrt(p(1-p)/n) of each sampled side added in quadrature (an exact
        side, a terminal outcome, has none; the group's own rollouts count as sampled)."""
        var = 0.0
        for values, source in ((self.success_before, self.before_source), (self.success_after, self.after_source)):
            if source != "terminal" and len(values) > 0:
                p = sum(values) / len(values)
                var += p * (1 - p) / len(values)
        return var**0.5

    @classmethod
    def measured(
        cls,
        before: list[bool],
        after: list[bool],
        *,
        before_source: str,
        after_source: str,
        extra_env_steps: int = 0,
        extra_tokens: int = 0,
        continuations=None,
        continuations_before=None,
        continuations_after=None,
        extra_prompt_tokens: int = 0,
    ) -> Verification:
        """A_seg and its p-value from the two sides' outcomes (an exact terminal side is a point)."""
        a_seg = segment_advantage(torch.tensor(after, dtype=torch.float32), torch.tensor(before, dtype=torch.float32))
        p = improvement_p_value(after, before, after_known=after_source == "terminal")
        return cls(
            a_seg,
            list(before),
            list(after),
            extra_env_steps,
            extra_tokens,
            list(continuations or []),
            before_source,
            after_source,
            p,
            list(continuations_before or []),
            list(continuations_after or []),
            extra_prompt_tokens,
        )


@dataclass
class ValueEstimator:
    """Success rates of ``m`` continuations of ``policy`` from turn boundaries of trajectories.

    With ``pool`` (an ``EnvPool``), every continuation asked for in one call runs in lock-step
    batches through ``rollout_batch`` (one generation batch per turn); otherwise one after another
    in ``env``. Cost counters accumulate over calls.

    Common random numbers: continuation j from boundary k of a trajectory drawn with sampling key
    ``K`` is keyed ``(namespace, K, k, j)`` (agents.backends.sampling), so it draws the same tokens
    whichever judge asked for it, whatever else runs in its batch, and whatever the rollouts drew;
    another ``namespace`` (e.g. a re-verification) gives fresh, independent continuations.
    """

    env: object
    policy: object
    m: int = 4
    pool: Any = None
    namespace: str = "continuation"
    extra_env_steps: int = 0
    extra_tokens: int = 0
    extra_prompt_tokens: int = 0
    continuations: list = field(default_factory=list, repr=False)  # the last call's runs
    runs_by_point: list = field(default_factory=list, repr=False)  # the last call's runs, per point asked

    def __post_init__(self):
        if self.m < 1:
            raise ValueError(f"m must be >= 1, got {self.m}")

    def outcomes(self, points: list[tuple[Trajectory, int]], m: int | None = None) -> list[list[bool]]:
        """For each (trajectory, boundary k): the won flags of ``m`` continuations from the state
        before turn k, or ``[trajectory.won]`` for the terminal boundary ``k == len(turns)``."""
        m = self.m if m is None else m
        starts: list[tuple[Any, list, str, str]] = []
        owners: list[int] = []
        keys: list[tuple | None] = []
        for p, (traj, k) in enumerate(points):
            if not 0 <= k <= len(traj.turns):
                raise ValueError(f"boundary {k} is outside 0..{len(traj.turns)}")
            if k < len(traj.turns):
                starts += [(traj.turns[k].snapshot, traj.turns[:k], traj.task_id, traj.task)] * m
                owners += [p] * m
                keys += [(self.namespace, traj.key, k, j) if traj.key is not None else None for j in range(m)]
        runs: list[Trajectory] = []
        if self.pool is not None and starts:
            runs = rollout_chunks(self.pool, self.policy, starts=starts, keys=keys)
        else:
            for (snap, history, task_id, task), key in zip(starts, keys):
                runs.append(rollout_from(self.env, snap, self.policy, history, task_id=task_id, task=task, key=key))
        out: list[list[bool]] = [[traj.won] if k == len(traj.turns) else [] for traj, k in points]
        self.runs_by_point = [[] for _ in points]
        for p, run in zip(owners, runs):
            out[p].append(run.won)
            self.runs_by_point[p].append(run)
        self.extra_env_steps += sum(len(r.turns) for r in runs)
        self.extra_tokens += sum(len(t.token_ids or []) for r in runs for t in r.turns)
        self.extra_prompt_tokens += sum(len(t.prompt_token_ids or []) for r in runs for t in r.turns)
        self.continuations = runs
        return out


def verify_segment(
    env,
    traj: Trajectory,
    proposal: Proposal,
    policy,
    m: int = 4,
    *,
    pool=None,
    group_outcomes: list[bool] | None = None,
    estimator: ValueEstimator | None = None,
) -> Verification:
    """A_seg of turns ``proposal.start..proposal.end`` of ``traj`` (see the module docstring).

    ``group_outcomes``: the won flags of the group's rollouts of this task, which estimate V(0) for
    free when the segment starts at turn 0. ``estimator``: reuse one (its counters accumulate);
    else one is made from ``env``, ``policy``, ``m`` and ``pool``.
    """
    if not 0 <= proposal.start <= proposal.end < len(traj.turns):
        raise ValueError(f"proposal turns {proposal.start}..{proposal.end} are outside 0..{len(traj.turns) - 1}")
    est = estimator or ValueEstimator(env, policy, m, pool)
    steps0, tokens0, prompts0 = est.extra_env_steps, est.extra_tokens, est.extra_prompt_tokens
    after_k = proposal.end + 1
    reuse_before = proposal.start == 0 and bool(group_outcomes)
    assert group_outcomes is not None or not reuse_before
    points = [] if reuse_before else [(traj, proposal.start)]
    points.append((traj, after_k))
    values = est.outcomes(points, m)
    return Verification.measured(
        list(group_outcomes or []) if reuse_before else values[0],
        values[-1],
        before_source="group" if reuse_before else "continuations",
        after_source="terminal" if after_k == len(traj.turns) else "continuations",
        extra_env_steps=est.extra_env_steps - steps0,
        extra_tokens=est.extra_tokens - tokens0,
        continuations=est.continuations,
        continuations_before=[] if reuse_before else est.runs_by_point[0],
        continuations_after=est.runs_by_point[-1],
        extra_prompt_tokens=est.extra_prompt_tokens - prompts0,
    )
