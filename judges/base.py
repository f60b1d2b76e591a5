"""Proposal and the judge protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agents.trajectory import Trajectory


@dataclass(frozen=True)
class Proposal:
    trajectory: int  # index in the group
    start: int  # first turn of the segment
    end: int  # last turn, inclusive
    reason: str = ""

    def valid_for(self, group: list[Trajectory]) -> bool:
        if not 0 <= self.trajectory < len(group):
            return False
        return 0 <= self.start <= self.end < len(group[self.trajectory].turns)


class Judge(Protocol):
    def propose(self, group: list[Trajectory]) -> Proposal | None: ...


def mixed_outcome(group: list[Trajectory]) -> bool:
    """ProVer only acts on groups with both successes and failures."""
    return any(t.won for t in group) and any(not t.won for t in group)
