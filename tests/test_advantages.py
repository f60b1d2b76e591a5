"""Advantage math against hand-computed cases."""

import math

import pytest
import torch

from trainers.advantages import apply_segment_bonus, broadcast_to_tokens, grpo_advantages, segment_advantage


def test_grpo_hand_computed():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    # mean 0.5, unbiased std sqrt(1/3)
    expected = torch.tensor([0.5, -0.5, -0.5, 0.5]) / (math.sqrt(1 / 3) + 1e-6)
    assert torch.allclose(grpo_advantages(r), expected)
    assert torch.allclose(grpo_advantages(r, std_normalize=False), torch.tensor([0.5, -0.5, -0.5, 0.5]))
    r3 = torch.tensor([1.0, 0.0, 0.0])
    assert torch.allclose(grpo_advantages(r3, std_normalize=False), torch.tensor([2 / 3, -1 / 3, -1 / 3]))


@pytest.mark.parametrize("rewards", [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.7], []])
def test_all_success_all_failure_and_tiny_groups_give_zero(rewards):
    adv = grpo_advantages(torch.tensor(rewards))
    assert torch.all(adv == 0) and adv.shape == (len(rewards),)


def test_broadcast_only_to_policy_tokens():
    mask = torch.tensor([[0, 1, 1, 0, 1], [1, 0, 0, 0, 0]])
    out = broadcast_to_tokens(torch.tensor([2.0, -1.0]), mask)
    assert out.tolist() == [[0, 2, 2, 0, 2], [-1, 0, 0, 0, 0]]


def test_segment_advantage():
    assert segment_advantage(torch.tensor([1, 1, 0, 1]), torch.tensor([0, 1, 0, 0])) == pytest.approx(0.5)
    assert segment_advantage(torch.tensor([0, 0]), torch.tensor([1, 1])) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        segment_advantage(torch.tensor([]), torch.tensor([1]))


def test_segment_bonus_positive_only_and_masked():
    adv = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    turns = torch.tensor([0, 0, 1, 1, 2, -1])
    mask = torch.tensor([1, 0, 1, 1, 1, 0])  # token 1 is an observation token
    out = apply_segment_bonus(adv, turns, mask, 0, 1, a_seg=0.5, beta=0.4)
    assert torch.allclose(out, torch.tensor([0.7, 0.5, 0.7, 0.7, 0.5, 0.5]))
    assert torch.equal(apply_segment_bonus(adv, turns, mask, 0, 1, a_seg=-0.5), adv)  # the paper: positive only
    both = apply_segment_bonus(adv, turns, mask, 2, 2, a_seg=-0.5, beta=1.0, sign="both")
    assert torch.allclose(both, torch.tensor([0.5, 0.5, 0.5, 0.5, 0.0, 0.5]))
    assert torch.equal(adv, torch.full((6,), 0.5))  # input untouched
    with pytest.raises(ValueError, match="sign"):
        apply_segment_bonus(adv, turns, mask, 0, 0, 1.0, sign="negative")
