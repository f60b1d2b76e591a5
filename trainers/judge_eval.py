"""Measuring judges, in one place: the material and the three measures.

Material: groups with a known slip (``slip_groups``: per task the expert's success and failed runs that
follow the expert but slip once) and a cheap stochastic continuation policy (``NoisyExpert``).

Measures:
- ``verified_precision``: the share of a judge's proposals that verify positive (A_seg > 0, the only ones
  ProVer credits), their mean A_seg, the agreement with the exhaustive judge's best verified turn
  (``best_turns``; the same continuation policy and budget), and its localisation where the env records
  the deciding step;
- ``localisation``: the share of proposals whose segment contains the named trajectory's recorded pivot
  (``info["pivot_step"]``, judges.oracle.recorded_pivot), from proposals or from a run's credit records
  (credit.jsonl: the inspector and the report's "Where the credit went" use it);
- ``precision_against_oracle``: against the scripted expert's first departure. Privileged (WebShop's
  expert searches the hidden product title): kept for comparison, not as the measure.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from agents.baselines import ExpertPolicy, PolicyOutput, RandomPolicy
from agents.trajectory import Trajectory
from judges.oracle import OracleJudge, recorded_pivot

if TYPE_CHECKING:  # torch-free at import: the credit inspector reads localisation from here
    from trainers.verification import ValueEstimator


# ---- material -----------------------------------------------------------------------------------
class NoisyExpert(ExpertPolicy):
    """The env's expert, except that with probability ``eps`` a turn takes a random action: a
    continuation policy whose success rate depends on the state it starts from (the expert alone
    wins from nearly everywhere, so it would verify every segment as 0)."""

    name = "noisy_expert"

    def __init__(self, eps: float = 0.3, seed: int = 0):
        self.eps, self.rng, self.random = eps, random.Random(seed), RandomPolicy(seed + 1)

    def act(self, env, observation, info, history=None):
        """The expert's action, or with probability ``eps`` a random one."""
        if self.rng.random() < self.eps:
            return self.random.act(env, observation, info)
        return super().act(env, observation, info)

    def act_batch(self, pool, indices, observations, infos, histories=None):
        """``act`` for each env of ``pool`` at ``indices``."""
        experts = super().act_batch(pool, indices, observations, infos)
        noisy = self.random.act_batch(pool, indices, observations, infos)
        return [n if self.rng.random() < self.eps else e for e, n in zip(experts, noisy)]


class OneSlip(ExpertPolicy):
    """The expert, except at turn ``turn`` where it takes one random other action."""

    def __init__(self, turn: int, rng: random.Random):
        self.turn, self.k, self.random = turn, 0, RandomPolicy(rng.randrange(1 << 30))

    def act(self, env, observation, info, history=None):
        """The expert's action, except at turn ``turn``: one random other action."""
        out = super().act(env, observation, info)
        k, self.k = self.k, self.k + 1
        if k == self.turn:
            alt = self.random.act(env, observation, info)
            if alt.action != out.action:
                return PolicyOutput(alt.action, alt.action)
        return out


def slip_groups(
    env_id: str, env_kwargs: dict | None, tasks: int, failures: int, seed: int = 0, slack: int | None = None
) -> list[list[Trajectory]]:
    """Groups with a known pivot: per task one expert trajectory (a success) and up to ``failures``
    trajectories that follow the expert but slip once at a random turn and then fail. The oracle's
    pivotal turn is where the expert's advice was first ignored.

    ``slack``: a step budget of the expert's length + ``slack`` turns. Where every slip can be undone
    (ALFWorld), a slip only fails under a budget; a slipped run is cut at the budget and fails if it
    had not won by then (as if ``max_steps`` had been that budget)."""
    import gymnasium as gym

    from agents.rollout import rollout

    env = gym.make(env_id, **(env_kwargs or {"split": "test"}))
    ids = env.unwrapped.task_ids()  # type: ignore[attr-defined]  # a prover-gym TextEnv
    rng = random.Random(seed)
    out = []
    for s in range(min(tasks, len(ids))):
        good = rollout(env, ExpertPolicy(), task_id=ids[s])
        if not good.won:
            continue
        bad = []
        for _ in range(failures * 3):
            t = rollout(env, OneSlip(rng.randrange(len(good.turns)), rng), task_id=ids[s])
            if slack is not None and len(t.turns) > len(good.turns) + slack:
                t.turns = t.turns[: len(good.turns) + slack]
                t.won, t.terminated, t.truncated = False, False, True
            if not t.won:
                bad.append(t)
            if len(bad) == failures:
                break
        if bad:
            out.append([good, *bad])
    env.close()
    return out


# ---- localisation against the env's recorded pivot ------------------------------------------------
def localised(group: list[Trajectory], proposal) -> bool | None:
    """Whether ``proposal``'s segment contains the recorded pivot of the trajectory it names; None when
    that trajectory records none (``info["pivot_step"]`` of its last step)."""
    pivot = recorded_pivot(group[proposal.trajectory])
    return None if pivot is None else proposal.start <= pivot <= proposal.end


def localisation(records: list[dict]) -> dict:
    """Localisation over a run's credit records (trainers/credit_record.py): ``known`` proposals whose
    trajectory records a pivot, ``hits`` of them containing it, and the share (None when none is known)."""
    known = [r for r in records if r.get("pivot_step") is not None]
    hits = sum(bool(r.get("hit_pivot")) for r in known)
    return {"known": len(known), "hits": hits, "localisation": hits / len(known) if known else None}


# ---- precision by verification -------------------------------------------------------------------
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
    from judges.exhaustive import ExhaustiveJudge

    reference = ExhaustiveJudge(side=side).bind(estimator)
    return [reference.propose(group) for group in groups]


def verified_precision(
    judge, groups: list[list[Trajectory]], estimator: ValueEstimator, *, references: list | None = None
) -> dict:
    """Per group, the judge's proposal is verified (V(0) from the group's own outcomes); a hit is
    A_seg > 0. With ``references`` (``best_turns`` of the same groups), ``agreement`` is the share of
    proposals that name the reference's best turn; ``localisation``: the share of the proposals whose
    trajectory records a pivot (``pivot_known`` of them) that contain it."""
    from trainers.verification import verify_segment

    proposals = hits = agree = compared = pivots_known = pivot_hits = 0
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
        hit = localised(group, p)
        if hit is not None:
            pivots_known += 1
            pivot_hits += hit
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
        "pivot_known": pivots_known,
        "localisation": pivot_hits / pivots_known if pivots_known else None,
    }


# ---- privileged: against the scripted expert -------------------------------------------------------
def precision_against_oracle(judge, groups: list[list[Trajectory]], oracle: OracleJudge | None = None) -> dict:
    """The share of proposals whose segment contains the oracle's pivotal turn (the first departure
    from the scripted expert): of the failed trajectory they name, or, for a successful one, of a
    failed trajectory that had shared its observations up to that turn. Privileged: for comparison."""
    from judges.heuristic import first_divergence

    oracle = oracle or OracleJudge(side="failed")
    proposals = hits = 0
    for group in groups:
        p = judge.propose(group)
        if p is None:
            continue
        proposals += 1
        named = group[p.trajectory]
        if named.won:
            pivots = {oracle.pivotal_turn(f) for f in group if not f.won and first_divergence(named, f) is not None}
        else:
            pivots = {oracle.pivotal_turn(named)}
        hits += any(k is not None and p.start <= k <= p.end for k in pivots)
    return {
        "groups": len(groups),
        "proposals": proposals,
        "hits": hits,
        "precision": hits / proposals if proposals else None,
    }
