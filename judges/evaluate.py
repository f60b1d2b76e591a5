"""Material for measuring judges: groups with a known slip (``slip_groups``) and a cheap stochastic
continuation policy (``NoisyExpert``). A judge's precision is measured by verification
(``trainers.judge_eval.verified_precision``: the share of its proposals that verify positive, and
its agreement with the exhaustive judge), not against the scripted expert, which has privileged
information (WebShop's expert searches the hidden product title).
``precision_against_oracle`` is kept for comparison with that privileged view."""

from __future__ import annotations

import random

from agents.baselines import ExpertPolicy, PolicyOutput, RandomPolicy
from agents.trajectory import Trajectory
from judges.oracle import OracleJudge


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
