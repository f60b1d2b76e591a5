"""Judges that need no model: ``random`` (the ablation's segment), ``first_divergence`` and the
decision-seeking ``last_shared_state``."""

from __future__ import annotations

import random

from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side


class RandomJudge:
    """A uniformly random segment (length 1..max_length) of a random trajectory on ``side``
    (``prover_random`` uses ``side=any``: any trajectory of the group, whatever its outcome)."""

    def __init__(self, seed: int = 0, max_length: int = 3, side: str = "won"):
        self.rng = random.Random(seed)
        self.max_length = max_length
        self.side = check_side(side)

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """A random segment (of up to ``max_length`` turns) of a random trajectory on ``side`` of a mixed group: the
        placebo of ``prover_random``."""
        if not mixed_outcome(group):
            return None
        candidates = [i for i, t in enumerate(group) if t.turns and on_side(t, self.side)]
        if not candidates:
            return None
        i = self.rng.choice(candidates)
        n = len(group[i].turns)
        start = self.rng.randrange(n)
        end = min(n - 1, start + self.rng.randrange(self.max_length))
        return Proposal(i, start, end, "random segment")


def first_divergence(won: Trajectory, failed: Trajectory) -> int | None:
    """The first turn at which the two trajectories saw the same observation (after the same
    history) and took different actions; None if they never do."""
    for k, (a, b) in enumerate(zip(won.turns, failed.turns)):
        if a.observation != b.observation:
            return None
        if a.action != b.action:
            return k
    return None


class FirstDivergenceJudge:
    """Over every (successful, failed) pair of the group, the earliest turn where both had seen the
    same observations and their actions differ: the successful trajectory's decision there
    (``side=won``, the default; ``any`` does the same) or the failed one's (``side=failed``).
    Ties go to the pair whose divergence the most failed trajectories share."""

    def __init__(self, side: str = "won"):
        self.side = check_side(side)

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The first turn where a trajectory on ``side`` acts differently from the trajectories of the other outcome in
        the same state, or None for a group that is not mixed."""
        if not mixed_outcome(group):
            return None
        won = [i for i, t in enumerate(group) if t.won]
        failed = [i for i, t in enumerate(group) if not t.won]
        found: dict[tuple[int, int, int], int] = {}  # (turn, won index, failed index) -> failures sharing it
        for w in won:
            turns = {f: first_divergence(group[w], group[f]) for f in failed}
            for f, k in turns.items():
                if k is not None:
                    found[(k, w, f)] = sum(other == k for other in turns.values())
        if not found:
            return None
        k, w, f = min(found, key=lambda key: (key[0], -found[key], key[1], key[2]))
        if self.side == "failed":
            return Proposal(f, k, k, "the failed attempt's action where it first departed from a successful one")
        return Proposal(w, k, k, "the successful attempt's action where a failed one first departed from it")


def last_shared_divergence(won: Trajectory, failed: Trajectory) -> tuple[int, int] | None:
    """(won turn, failed turn) of the last state the two trajectories shared (same ``snapshot.key``,
    the env's state identity, whatever the turn index) where the failed one did not take the won
    one's action; None when they share no such state. After it the two never meet again in a state
    where they chose differently: the decision that set the winner apart, not a cosmetic first
    difference that both later undo (a ``look`` before the ``take``)."""
    actions: dict[str, set[str]] = {}  # state key -> the failed run's actions there
    last_turn: dict[str, int] = {}
    for j, turn in enumerate(failed.turns):
        if turn.snapshot.key:  # "" when the env gives no state identity
            actions.setdefault(turn.snapshot.key, set()).add(turn.action)
            last_turn[turn.snapshot.key] = j
    found = None
    for i, turn in enumerate(won.turns):
        key = turn.snapshot.key
        if key in actions and turn.action not in actions[key]:
            found = (i, last_turn[key])
    return found


class LastSharedStateJudge:
    """Decision-seeking: over every (successful, failed) pair, the last state both visited (the env's
    state key) where their actions differ (``last_shared_divergence``); the successful trajectory's
    turn there (``side=won``, the default; ``any`` does the same) or the failed one's last turn in that
    state (``side=failed``). Among the pairs, the won turn the most failed trajectories point to,
    then the later turn, then the earlier trajectory. Needs the env's snapshots (every rollout of
    this harness has them); a pair of runs that share no state names nothing."""

    def __init__(self, side: str = "won"):
        self.side = check_side(side)

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The turn after the last state a successful and a failed trajectory share (voted over the pairs), on ``side``,
        or None for a group that is not mixed."""
        if not mixed_outcome(group):
            return None
        votes: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (won index, won turn) -> [(failed, turn)]
        for w, won in enumerate(group):
            if not won.won:
                continue
            for f, failed in enumerate(group):
                if failed.won:
                    continue
                hit = last_shared_divergence(won, failed)
                if hit is not None:
                    votes.setdefault((w, hit[0]), []).append((f, hit[1]))
        if not votes:
            return None
        w, k = min(votes, key=lambda wk: (-len(votes[wk]), -wk[1], wk[0]))
        if self.side == "failed":
            f, j = votes[(w, k)][0]
            return Proposal(f, j, j, "the failed attempt's action in the last state it shared with a successful one")
        return Proposal(w, k, k, "the successful attempt's action in the last state a failed one shared with it")
