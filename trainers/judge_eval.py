"""Judge precision measured by verification: a judge is as good as the share of its proposals that
verify positive (the only ones ProVer credits), and its agreement with the exhaustive judge's best
verified turn (the upper bound). Both use the same continuation policy and budget."""

from __future__ import annotations

from agents.trajectory import Trajectory
from judges.exhaustive import ExhaustiveJudge
from trainers.verification import ValueEstimator, verify_segment


def _same_turn(group: list[Trajectory], p, q) -> bool:
    """Whether proposal ``p``'s segment contains the turn ``q`` names, or the same decision (the same
    action from the same state, ``Snapshot.key`` and step) in another trajectory."""
    target = group[q.trajectory].turns[q.start]
    for k in range(p.start, p.end + 1):
        turn = group[p.trajectory].turns[k]
        if (p.trajectory, k) == (q.trajectory, q.start):
            return True
        if turn.snapshot.key and (turn.snapshot.key, turn.snapshot.step, turn.action) == (
            target.snapshot.key,
            target.snapshot.step,
            target.action,
        ):
            return True
    return False


def best_turns(groups: list[list[Trajectory]], estimator: ValueEstimator, side: str = "won") -> list:
    """The exhaustive judge's proposal for each group (None where it has none): the reference that
    every judge's ``agreement`` is measured against, computed once for all of them."""
    reference = ExhaustiveJudge(side=side).bind(estimator)
    return [reference.propose(group) for group in groups]


def verified_precision(
    judge, groups: list[list[Trajectory]], estimator: ValueEstimator, *, references: list | None = None
) -> dict:
    """Per group, the judge's proposal is verified (V(0) from the group's own outcomes); a hit is
    A_seg > 0. With ``references`` (``best_turns`` of the same groups), ``agreement`` is the share of
    proposals that name the reference's best turn."""
    proposals = hits = agree = compared = 0
    a_segs = []
    for g, group in enumerate(groups):
        p = judge.propose(group)
        if p is None:
            continue
        proposals += 1
        v = verify_segment(
            None, group[p.trajectory], p, None, estimator.m, estimator=estimator, group_outcomes=[t.won for t in group]
        )
        a_segs.append(v.a_seg)
        hits += v.a_seg > 0
        best = references[g] if references is not None else None
        if best is not None:
            compared += 1
            agree += _same_turn(group, p, best)
    return {
        "groups": len(groups),
        "proposals": proposals,
        "hits": hits,
        "precision": hits / proposals if proposals else None,
        "mean_a_seg": sum(a_segs) / len(a_segs) if a_segs else None,
        "agreement": agree / compared if compared else None,
    }
