"""Segment verification from snapshots, on both envs, against outcomes computed by hand."""

import gymnasium as gym
import pytest
from conftest import SlipPolicy

from agents.baselines import ExpertPolicy, RandomPolicy
from agents.rollout import rollout
from judges import Proposal
from trainers.verification import verify_segment

CASES = {
    "prover/SearchQA-v0": (lambda a: a.startswith("search["), "answer[certainly not this]"),
    "prover/WebShop-v0": (lambda a: a.startswith("click[b0"), "click[back to search]"),
}


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("env_id", sorted(CASES))
def test_fatal_or_recoverable_slip(env_id, batched):
    from prover_gym import EnvPool

    env = gym.make(env_id, split="test")
    when, instead = CASES[env_id]
    failed = rollout(env, SlipPolicy(when, instead), seed=2)
    k = next(i for i, t in enumerate(failed.turns) if t.action == instead)
    pool = EnvPool(env_id, 4, backend="sync", split="test") if batched else None
    v = verify_segment(env, failed, Proposal(0, k, k), ExpertPolicy(), m=2, pool=pool)
    assert v.success_before == [True, True]  # the expert wins from just before the slip
    if env_id == "prover/SearchQA-v0":  # a wrong answer ends the episode: the state after it is lost
        assert not failed.won and v.success_after == [False] and v.after_source == "terminal" and v.a_seg == -1.0
    else:  # going back to search is recoverable: the expert still wins after it
        assert v.success_after == [True, True] and v.a_seg == 0.0
    assert v.extra_env_steps == sum(len(c.turns) for c in v.continuations) > 0


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_a_decisive_segment_gets_positive_credit(env_id):
    """On a successful run, the segment that completes the task: random continuations from before it
    rarely win, and the state after it is the won terminal state."""
    env = gym.make(env_id, split="test")
    good = rollout(env, ExpertPolicy(), seed=2)
    last = len(good.turns) - 1
    v = verify_segment(env, good, Proposal(0, 0, last), RandomPolicy(0), m=4)
    assert v.success_after == [True] and v.after_source == "terminal" and v.a_seg >= 0.75


def test_bad_proposals_are_rejected():
    env = gym.make("prover/SearchQA-v0", split="test")
    traj = rollout(env, ExpertPolicy(), seed=0)
    with pytest.raises(ValueError, match="outside"):
        verify_segment(env, traj, Proposal(0, 0, 99), ExpertPolicy())
    with pytest.raises(ValueError, match="m must"):
        verify_segment(env, traj, Proposal(0, 0, 0), ExpertPolicy(), m=0)


def test_free_estimates_are_reused():
    """A segment at turn 0 takes V(before) from the group's own rollouts; one that ends the episode
    takes V(after) from the trajectory's outcome: a whole-episode segment costs no continuations."""
    env = gym.make("prover/SearchQA-v0", split="test")
    good = rollout(env, ExpertPolicy(), seed=2)
    v = verify_segment(
        env, good, Proposal(0, 0, len(good.turns) - 1), RandomPolicy(0), m=4, group_outcomes=[True, False, False, False]
    )
    assert v.before_source == "group" and v.after_source == "terminal" and v.extra_env_steps == 0
    assert v.a_seg == 0.75 and v.success_before == [True, False, False, False]
    v0 = verify_segment(env, good, Proposal(0, 0, 0), ExpertPolicy(), m=3, group_outcomes=[True, False])
    assert v0.before_source == "group" and v0.success_after == [True] * 3 and v0.a_seg == 0.5
    assert v0.extra_env_steps == sum(len(c.turns) for c in v0.continuations) > 0


def test_p_values_by_hand():
    from trainers.advantages import improvement_p_value

    # Fisher, 4/4 after vs 0/4 before: 1 / C(8, 4)
    assert improvement_p_value([True] * 4, [False] * 4) == pytest.approx(1 / 70)
    # 2/4 vs 2/4: P(X >= 2) for the hypergeometric(8, 4, 4) = (36 + 16 + 1) / 70
    assert improvement_p_value([True, True, False, False], [True, False, True, False]) == pytest.approx(53 / 70)
    # after known to be a win, 1 of 4 before won: H0 V(before) >= 1 is refuted by any failure
    assert improvement_p_value([True], [True, False, False, False], after_known=True) == 0.0
    assert improvement_p_value([True], [True] * 4, after_known=True) == 1.0
    # after known 0.5 (not possible for a terminal, but the tail is the binomial one): P(Bin(4, .5) <= 1) = 5/16
    assert improvement_p_value([0.5], [True, False, False, False], after_known=True) == pytest.approx(5 / 16)
