"""The oracle judge: the env's expert is ground truth. In a failed trajectory, the pivotal turn is
the first one whose action differs from what the expert would do from that turn's snapshot. Used
to measure other judges' precision on generated data."""

from __future__ import annotations

import gymnasium as gym

from agents.trajectory import Trajectory
from judges.base import Proposal, mixed_outcome
from prover_gym import restore


class OracleJudge:
    def __init__(self, **make_kwargs):
        self._envs: dict = {}
        self._make_kwargs = make_kwargs

    def _env(self, snap):
        key = (snap.env_id, repr(sorted(snap.make_kwargs.items())))
        if key not in self._envs:
            self._envs[key] = gym.make(snap.env_id, **{**snap.make_kwargs, **self._make_kwargs})
        return self._envs[key]

    def pivotal_turn(self, traj: Trajectory) -> int | None:
        for k, turn in enumerate(traj.turns):
            env = self._env(turn.snapshot)
            restore(env, turn.snapshot)
            if env.unwrapped.expert_action() != turn.action:
                return k
        return None

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        if not mixed_outcome(group):
            return None
        for i, traj in enumerate(group):
            if traj.won:
                continue
            k = self.pivotal_turn(traj)
            if k is not None:
                return Proposal(i, k, k, "first turn that departs from the expert")
        return None
