"""Proposal, the judge protocol, and the ``side`` a judge proposes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.trajectory import Trajectory

SIDES = ("won", "failed", "any")


@dataclass(frozen=True)
class Proposal:
    """A judge's answer for one group: turns ``start..end`` (inclusive) of trajectory ``trajectory``, the segment it
    holds responsible for the divergent outcomes, and why."""

    trajectory: int  # index in the group
    start: int  # first turn of the segment
    end: int  # last turn, inclusive
    reason: str = ""
    # what a judge that verified its own proposal measured (the exhaustive judge): a Verification,
    # reused by the trainer instead of verifying again
    evidence: Any = field(default=None, compare=False, repr=False)

    def valid_for(self, group: list[Trajectory]) -> bool:
        """Whether the proposal names an existing trajectory of ``group`` and turns it has."""
        if not 0 <= self.trajectory < len(group):
            return False
        return 0 <= self.start <= self.end < len(group[self.trajectory].turns)


class Judge(Protocol):
    """What the trainer asks of a judge: ``propose(group)`` -> a segment (Proposal) or None; ``side``: which
    trajectories it may name (won / failed / any)."""

    side: str

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The segment of one trajectory of ``group`` most likely responsible for its mixed outcomes, or None."""


def mixed_outcome(group: list[Trajectory]) -> bool:
    """ProVer only acts on groups with both successes and failures."""
    return any(t.won for t in group) and any(not t.won for t in group)


def check_side(side: str) -> str:
    """``side`` if it is one of SIDES, else a ValueError saying what each means."""
    if side not in SIDES:
        raise ValueError(
            f"judge side={side!r}; use 'won' (a segment of a successful trajectory: the only kind "
            "ProVer's positive-only credit can reward), 'failed' or 'any'"
        )
    return side


def on_side(traj: Trajectory, side: str) -> bool:
    """Whether a proposal may name ``traj`` under ``side``."""
    return side == "any" or traj.won == (side == "won")


def side_words(side: str) -> tuple[str, str]:
    """(which attempts, what the segment did) for prompts and tool descriptions."""
    return {
        "won": ("SUCCESSFUL", "most likely made it succeed where the failed attempts did not"),
        "failed": ("FAILED", "most likely made it fail where the successful attempts did not"),
        "any": ("", "most likely decided the difference between the successful and the failed attempts"),
    }[side]
