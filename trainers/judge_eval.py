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
        if turn.snapshot.key and (turn.snapshot.key, turn.snapshot.step, turn.action) == \
                (target.snapshot.key, target.snapshot.step, target.action):
            return True
    return False


def verified_precision(judge, groups: list[list[Trajectory]], estimator: ValueEstimator, *,
                       reference: ExhaustiveJudge | None = None) -> dict:
    """Per group, the judge's proposal is verified (V(0) from the group's own outcomes); a hit is
    A_seg > 0. With ``reference`` (an exhaustive judge bound to an estimator), ``agreement`` is the
    share of proposals that name the reference's best turn."""
    proposals = hits = agree = compared = 0
    a_segs = []
    for group in groups:
        p = judge.propose(group)
        if p is None:
            continue
        proposals += 1
        v = verify_segment(None, group[p.trajectory], p, None, estimator.m, estimator=estimator,
                           group_outcomes=[t.won for t in group])
        a_segs.append(v.a_seg)
        hits += v.a_seg > 0
        if reference is not None:
            best = reference.propose(group)
            if best is not None:
                compared += 1
                agree += _same_turn(group, p, best)
    return {"groups": len(groups), "proposals": proposals, "hits": hits,
            "precision": hits / proposals if proposals else None,
            "mean_a_seg": sum(a_segs) / len(a_segs) if a_segs else None,
            "agreement": agree / compared if compared else None}
