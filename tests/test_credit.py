"""Credit assignment on hand-built groups: where ProVer's bonus lands and how big it is, the
ablations' semantics, GiGPO's step groups, the significance gate and the hygiene options."""

import math

import gymnasium as gym
import pytest
import torch
from conftest import SlipPolicy

import judges
from agents.baselines import ExpertPolicy
from agents.rollout import rollout
from trainers.advantages import bonus_scale, discounted_returns, step_group_advantages
from trainers.config import load_config
from trainers.credit import CreditAssigner
from trainers.verification import ValueEstimator

A = 0.5 / (math.sqrt(0.5) + 1e-6)  # GRPO's advantage in a group with rewards [1, 0]
SCALE = 1 / (math.sqrt(0.5) + 1e-6)  # bonus_scale of that group


def with_tokens(traj, per_turn=3):
    """Give every turn ``per_turn`` fake policy tokens (as a model policy's turns have)."""
    for k, turn in enumerate(traj.turns):
        turn.token_ids, turn.logprobs = [10 + k] * per_turn, [0.0] * per_turn
    return traj


@pytest.fixture(scope="module")
def slip_group():
    """Search-QA: the expert searches then answers (won); the slip answers wrongly at turn 0 (lost)."""
    env = gym.make("prover/SearchQA-v0", split="test", data_sources=["single_hop"])
    good = with_tokens(rollout(env, ExpertPolicy(), seed=1))
    bad = with_tokens(rollout(env, SlipPolicy(lambda a: a.startswith("search["), "answer[wrong]"), seed=1))
    assert good.won and not bad.won and len(good.turns) == 2 and len(bad.turns) == 1
    return env, [good, bad]


def assign(env, group, overrides, judge=None, policy=None):
    cfg = load_config(None, ["continuations=2", *overrides])
    judge = judge or judges.make(cfg.judge if cfg.method != "prover_random" else {"kind": "random", "side": "any"})
    factory = lambda: ValueEstimator(env, policy or ExpertPolicy(), cfg.continuations)  # noqa: E731
    return CreditAssigner(cfg, judge, factory)([group])


def test_a_verified_positive_won_segment_gets_the_bonus_on_exactly_its_tokens(slip_group):
    env, group = slip_group
    (good, bad), stats = assign(env, group, ["method=prover", "beta=0.5"])
    # the judge names the won run's turn 0 (its search); V(before) = the group's 1/2 (free), V(after) = the
    # expert's continuations from the won run's turn-1 state = 1, so A_seg = +0.5
    assert stats.a_seg == [0.5] and (stats.proposed, stats.verified, stats.credited) == (1, 1, 1)
    bonus = 0.5 * SCALE * 0.5
    assert torch.allclose(good, torch.tensor([A + bonus] * 3 + [A] * 3), atol=1e-5)
    assert torch.allclose(bad, torch.tensor([-A] * 3), atol=1e-5)
    assert stats.credited_tokens == 3 and stats.extra_env_steps == 2  # 2 continuations of one answer turn
    # the bonus's share of the advantage mass: 3 tokens of +bonus over 9 tokens of |A| (6 + 3) before it
    assert stats.metrics()["prover/bonus_share"] == pytest.approx(3 * bonus / (9 * A), rel=1e-5)


def test_a_failed_side_proposal_verifies_negative_and_gets_nothing(slip_group):
    env, group = slip_group
    judge = judges.make({"kind": "first_divergence", "side": "failed"})
    (good, bad), stats = assign(env, group, ["method=prover"], judge=judge)
    assert stats.a_seg == [-0.5] and stats.credited == 0  # V(after) = its lost terminal, V(before) = 1/2
    assert torch.allclose(bad, torch.tensor([-A] * 3), atol=1e-5) and stats.extra_env_steps == 0
    (_, bad2), both = assign(env, group, ["method=prover", "sign=both"], judge=judge)
    assert both.credited == 1 and torch.allclose(bad2, torch.tensor([-A - 0.5 * SCALE] * 3), atol=1e-5)


def test_prover_unverified_trusts_the_judge(slip_group):
    env, group = slip_group
    (good, _), stats = assign(env, group, ["method=prover_unverified", "beta=0.5"])
    assert (stats.proposed, stats.verified, stats.credited, stats.extra_env_steps) == (1, 0, 1, 0)
    assert torch.allclose(good, torch.tensor([A + 0.5 * SCALE] * 3 + [A] * 3), atol=1e-5)


def test_prover_random_verifies_a_random_segment_of_any_trajectory(slip_group):
    env, group = slip_group
    named = set()
    for seed in range(10):
        judge = judges.make({"kind": "random", "side": "any", "seed": seed})
        _, stats = assign(env, group, ["method=prover_random"], judge=judge)
        assert stats.proposed == stats.verified == 1
        named.add(round(stats.a_seg[0], 3))
    assert len(named) >= 2  # segments of both trajectories were drawn (their A_seg differ)


def test_the_gate_and_min_a_seg(slip_group):
    env, group = slip_group
    # A_seg = +0.5 from 2 of 2 continuations after vs the group's 1 of 2 before: Fisher p = C(2,2)C(2,1)/C(4,3) = 1/2
    _, gated = assign(env, group, ["method=prover", "gate_alpha=0.2"])
    assert gated.verified == 1 and gated.credited == 0 and gated.p_values[0] == pytest.approx(0.5)
    _, passed = assign(env, group, ["method=prover", "gate_alpha=0.5"])
    assert passed.credited == 1
    _, high_bar = assign(env, group, ["method=prover", "min_a_seg=0.5"])
    assert high_bar.credited == 0


def test_the_exhaustive_judge_verifies_every_boundary_and_its_evidence_is_reused(slip_group):
    env, group = slip_group
    judge = judges.make({"kind": "exhaustive"})
    with pytest.raises(RuntimeError, match="bind"):
        judge.propose(group)
    (good, _), stats = assign(env, group, ["method=prover"], judge=judge)
    # boundaries of the won run: V(0) = 1/2 (group), V(1) = 1 (2 expert continuations), V(2) = 1 (won): best = turn 0
    assert stats.a_seg == [0.5] and stats.credited == 1 and stats.extra_env_steps == 2
    assert judge.stats["estimated"] == 1


def test_zero_variance_groups_are_dropped_when_asked(slip_group):
    env, (good, _) = slip_group
    out, stats = assign(env, [good, good], ["method=grpo", "drop_zero_std_groups=true"])
    assert out == [None, None] and stats.dropped_groups == 1 and stats.metrics()["groups/dropped_fraction"] == 1.0
    kept, _ = assign(env, [good, good], ["method=grpo"])
    assert all(torch.equal(t, torch.zeros(6)) for t in kept)


def test_invalid_action_penalty_lowers_the_reward(slip_group):
    env, (good, bad) = slip_group
    good.turns[0].valid = False
    try:
        (g, b), _ = assign(env, [good, bad], ["method=dr_grpo", "invalid_action_penalty=0.1"])
    finally:
        good.turns[0].valid = True
    # rewards [0.9, 0]: Dr. GRPO centres them, +-0.45
    assert torch.allclose(g, torch.full((6,), 0.45)) and torch.allclose(b, torch.full((3,), -0.45))


def test_gigpo_step_groups_by_exact_state(slip_group):
    env, (good, bad) = slip_group
    assert good.turns[0].snapshot.key == bad.turns[0].snapshot.key  # both start from the task's initial state
    assert good.turns[1].snapshot.key != good.turns[0].snapshot.key
    (g, b), _ = assign(env, [good, bad], ["method=gigpo"])
    # returns: won run [0.95, 1], lost run [0]; step group {0.95, 0} at the initial state -> +-0.7071; turn 1 alone -> 0
    step = 0.475 / (math.sqrt(0.95**2 / 2) + 1e-6)
    assert torch.allclose(g, torch.tensor([A + step] * 3 + [A] * 3), atol=1e-4)
    assert torch.allclose(b, torch.tensor([-A - step] * 3), atol=1e-4)


def test_gigpo_pure_functions_by_hand():
    assert discounted_returns([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    returns = [[1.0, 2.0], [3.0], [5.0, 0.0]]
    keys = [["s0", "s1"], ["s0"], ["s0", "s1"]]
    out = step_group_advantages(returns, keys, std_normalize=False)
    assert out == [[-2.0, 1.0], [0.0], [2.0, -1.0]]  # s0: {1, 3, 5} centred; s1: {2, 0} centred


def test_bonus_scale_matches_the_advantage_units():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert bonus_scale(r) == pytest.approx(1 / (r.std().item() + 1e-6))
    assert bonus_scale(r, std_normalize=False) == 1.0
    # the scaled bonus of a segment that carries a whole success (A_seg = 1 - mean) equals the winner's GRPO advantage
    from trainers.advantages import grpo_advantages

    assert bonus_scale(r) * (1 - r.mean().item()) == pytest.approx(grpo_advantages(r)[0].item(), rel=1e-5)


def test_judge_precision_by_verification(slip_group):
    """The won-side proposal verifies positive (A_seg +0.5 under expert continuations) and names the
    exhaustive judge's best turn; the failed-side one verifies negative."""
    from trainers.judge_eval import best_turns, verified_precision

    env, group = slip_group
    references = best_turns([group], ValueEstimator(env, ExpertPolicy(), 2))
    won = verified_precision(
        judges.make({"kind": "first_divergence"}),
        [group],
        ValueEstimator(env, ExpertPolicy(), 2),
        references=references,
    )
    assert (won["proposals"], won["hits"], won["precision"], won["mean_a_seg"], won["agreement"]) == (
        1,
        1,
        1.0,
        0.5,
        1.0,
    )
    failed = verified_precision(
        judges.make({"kind": "first_divergence", "side": "failed"}),
        [group],
        ValueEstimator(env, ExpertPolicy(), 2),
        references=references,
    )
    assert (failed["precision"], failed["mean_a_seg"], failed["agreement"]) == (0.0, -0.5, 0.0)
