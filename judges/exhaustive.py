"""The exhaustive judge: ProVer's upper bound. It verifies every turn boundary of the group's
trajectories on its ``side`` (VinePPO-style Monte-Carlo values from each stored snapshot) and
proposes the single turn with the largest verified advantage V(k + 1) - V(k).

Values come from an estimator bound by the caller (``bind``; the trainer binds its
``trainers.verification.ValueEstimator``, so the cost lands in ``prover/extra_*``): anything with
``outcomes(points, m) -> list[list[bool]]`` for (trajectory, boundary) points. V(0) is the group's
own success rate and V(len) a trajectory's own outcome, both free; states reached by several
trajectories (same ``Snapshot.key`` and step) are estimated once. The proposal carries what was
measured (``Proposal.evidence``), so it is not verified a second time.
"""

from __future__ import annotations

from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side


class ExhaustiveJudge:
    """The measured answer: V(k) estimated by continuations of the current policy at every turn boundary of the
    trajectories on ``side``, and the turn with the largest verified jump proposed, its measurement attached (the
    trainer reuses it, or re-verifies with ``reverify``). Needs ``bind(estimator)``."""

    def __init__(self, side: str = "won", m: int | None = None, max_trajectories: int | None = None):
        self.side = check_side(side)
        self.m, self.max_trajectories = m, max_trajectories
        self.estimator = None
        self.stats = {"boundaries": 0, "estimated": 0}

    def bind(self, estimator) -> ExhaustiveJudge:
        """Use ``estimator`` (trainers.verification.ValueEstimator) for the continuations; returns the judge."""
        self.estimator = estimator
        return self

    def values(self, group: list[Trajectory], chosen: list[int]) -> dict[int, list[list[bool]]]:
        """Per chosen trajectory, the won flags behind V(0..len)."""
        if self.estimator is None:
            raise RuntimeError(
                "the exhaustive judge verifies with the current policy: call judge.bind(estimator) "
                "(trainers.verification.ValueEstimator; the trainer does this itself)"
            )
        group_outcomes = [t.won for t in group]
        # the inner boundaries 1..len-1 of each trajectory, keyed by state (same key and step = same value)
        inner = {
            i: [(t.snapshot.key or (i, k), t.snapshot.step) for k, t in enumerate(group[i].turns) if k] for i in chosen
        }
        unique: dict[tuple, tuple[Trajectory, int]] = {}
        for i, keys in inner.items():
            for k, key in enumerate(keys, 1):
                unique.setdefault(key, (group[i], k))
        keys = list(unique)
        measured = dict(zip(keys, self.estimator.outcomes([unique[key] for key in keys], self.m))) if keys else {}
        out = {}
        for i in chosen:
            out[i] = [group_outcomes] + [measured[key] for key in inner[i]] + [[group[i].won]]
            self.stats["boundaries"] += len(group[i].turns) + 1
        self.stats["estimated"] += len(keys)
        return out

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The turn of a trajectory on ``side`` with the largest measured V(k+1) - V(k), as a one-turn segment with its
        measurement, or None for a group that is not mixed."""
        if not mixed_outcome(group):
            return None
        chosen = [i for i, t in enumerate(group) if t.turns and on_side(t, self.side)]
        if self.max_trajectories is not None:
            chosen = chosen[: self.max_trajectories]
        if not chosen:
            return None
        values = self.values(group, chosen)
        best: tuple[float, int, int] | None = None
        for i in chosen:
            row = values[i]
            for k in range(len(group[i].turns)):
                gain = sum(row[k + 1]) / len(row[k + 1]) - sum(row[k]) / len(row[k])
                if best is None or gain > best[0]:
                    best = (gain, i, k)
        if best is None:  # every chosen trajectory is empty
            return None
        gain, i, k = best
        n = len(group[i].turns)
        evidence = {
            "before": values[i][k],
            "after": values[i][k + 1],
            "before_source": "group" if k == 0 else "continuations",
            "after_source": "terminal" if k + 1 == n else "continuations",
        }
        return Proposal(i, k, k, f"largest verified one-turn advantage ({gain:+.2f})", evidence)
