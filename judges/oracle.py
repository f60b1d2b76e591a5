"""The oracle judge: the env's scripted expert as privileged ground truth (it may know hidden
task details: WebShop's expert knows the target product). ``side=failed``: the first turn of a
failed trajectory whose action differs from what the expert would do from that turn's snapshot.
``side=won`` (default): the successful trajectory's turn where a failed one first departed from
it, when the successful one followed the expert there. A privileged heuristic to compare judges
with, not the measure of their precision (see ``trainers.judge_eval``)."""

from __future__ import annotations

import gymnasium as gym

from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side
from judges.heuristic import first_divergence
from prover_gym import restore


class OracleJudge:
    """A privileged judge: the first turn where a trajectory on ``side`` left the env's expert's plan (found by
    restoring each turn's snapshot and asking the expert). An upper bound on targeting, not a judge a real run has."""

    def __init__(self, side: str = "won", **make_kwargs):
        self.side = check_side(side)
        self._envs: dict = {}
        self._make_kwargs = make_kwargs

    def _env(self, snap):
        key = (snap.env_id, repr(sorted(snap.make_kwargs.items())))
        if key not in self._envs:
            self._envs[key] = gym.make(snap.env_id, **{**snap.make_kwargs, **self._make_kwargs})
        return self._envs[key]

    def expert_at(self, traj: Trajectory, k: int) -> str | None:
        """The expert's action at turn ``k`` of ``traj`` (the turn's snapshot restored)."""
        env = self._env(traj.turns[k].snapshot)
        restore(env, traj.turns[k].snapshot)
        return env.unwrapped.expert_action()

    def pivotal_turn(self, traj: Trajectory) -> int | None:
        """The first turn whose action differs from the expert's."""
        for k, turn in enumerate(traj.turns):
            if self.expert_at(traj, k) != turn.action:
                return k
        return None

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The first turn off the expert's plan of a trajectory on ``side`` (for the failed side: the first failed
        trajectory that has one), or None."""
        if not mixed_outcome(group):
            return None
        if self.side == "failed":
            for i, traj in enumerate(group):
                if not traj.won:
                    k = self.pivotal_turn(traj)
                    if k is not None:
                        return Proposal(i, k, k, "first turn that departs from the expert")
            return None
        best = None
        for w, won in enumerate(group):
            if not won.won:
                continue
            for failed in (t for t in group if not t.won):
                k = first_divergence(won, failed)
                if k is not None and (best is None or k < best[1]) and self.expert_at(won, k) == won.turns[k].action:
                    best = (w, k)
        if best is None:
            return None
        return Proposal(best[0], best[1], best[1], "the expert's action where a failed attempt departed from it")


def recorded_pivot(traj: Trajectory) -> int | None:
    """The env's ``info["pivot_step"]`` at the trajectory's last step (the deciding action), if any."""
    if not traj.turns:
        return None
    k = (traj.turns[-1].info or {}).get("pivot_step")
    return k if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(traj.turns) else None


class PivotJudge:
    """The targeting upper bound: the turn the env itself records as the deciding one
    (``info["pivot_step"]``, set by the settings with a known pivot), of the first trajectory on
    ``side`` that has one. Privileged: it reads what no real judge can see. None when the env
    records no pivot."""

    def __init__(self, side: str = "won"):
        self.side = check_side(side)

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The recorded pivot turn of the first trajectory on ``side`` whose env records one, or None."""
        if not mixed_outcome(group):
            return None
        for i, traj in enumerate(group):
            if not on_side(traj, self.side):
                continue
            k = recorded_pivot(traj)
            if k is not None:
                return Proposal(i, k, k, "the env's recorded pivot step (privileged)")
        return None
