"""Judge quality against the oracle: a proposal is a hit when its segment contains the oracle's
pivotal turn of the trajectory it names."""

from __future__ import annotations

from agents.trajectory import Trajectory
from judges.oracle import OracleJudge


def precision_against_oracle(judge, groups: list[list[Trajectory]], oracle: OracleJudge | None = None) -> dict:
    oracle = oracle or OracleJudge()
    proposals = hits = 0
    for group in groups:
        p = judge.propose(group)
        if p is None:
            continue
        proposals += 1
        pivot = oracle.pivotal_turn(group[p.trajectory])
        hits += pivot is not None and p.start <= pivot <= p.end
    return {"groups": len(groups), "proposals": proposals, "hits": hits,
            "precision": hits / proposals if proposals else None}
