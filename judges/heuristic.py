"""Judges that need no model: ``random`` (the ablation's segment) and ``first_divergence``."""

from __future__ import annotations

import random

from agents.trajectory import Trajectory
from judges.base import Proposal, mixed_outcome


class RandomJudge:
    """A uniformly random segment (length 1..max_length) of a random failed trajectory."""

    def __init__(self, seed: int = 0, max_length: int = 3):
        self.rng = random.Random(seed)
        self.max_length = max_length

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        if not mixed_outcome(group):
            return None
        failed = [i for i, t in enumerate(group) if not t.won and t.turns]
        i = self.rng.choice(failed)
        n = len(group[i].turns)
        start = self.rng.randrange(n)
        end = min(n - 1, start + self.rng.randrange(self.max_length))
        return Proposal(i, start, end, "random segment")


class FirstDivergenceJudge:
    """The earliest turn where a failed trajectory, having seen the same observation as a successful
    one, took a different action."""

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        if not mixed_outcome(group):
            return None
        best: tuple[int, int] | None = None
        for fi, failed in enumerate(group):
            if failed.won:
                continue
            for won in (t for t in group if t.won):
                for k, (a, b) in enumerate(zip(failed.turns, won.turns)):
                    if a.observation != b.observation:
                        break
                    if a.action != b.action:
                        if best is None or k < best[1]:
                            best = (fi, k)
                        break
        if best is None:
            return None
        return Proposal(best[0], best[1], best[1], "first action that departs from a successful run at the same observation")
