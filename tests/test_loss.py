"""The clipped policy loss: values by hand, clipping, KL, and that masked (env) tokens get no gradient."""

import math

import pytest
import torch

from trainers.loss import masked_mean, policy_loss


def test_value_on_policy_is_minus_mean_advantage():
    lp = torch.log(torch.tensor([[0.5, 0.25, 0.1]]))
    adv = torch.tensor([[1.0, -2.0, 3.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, m = policy_loss(lp, lp.clone(), adv, mask)
    assert loss.item() == pytest.approx(-(1.0 - 2.0) / 2) and m["clip_ratio"] == 0.0


def test_clipping_hand_computed():
    old = torch.log(torch.tensor([[0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.8, 0.2]]))  # ratios 1.6 and 0.4
    adv = torch.tensor([[1.0, -1.0]])
    loss, m = policy_loss(new, old, adv, torch.ones(1, 2), clip_eps=0.2)
    # token 0: max(-1.6, -1.2) = -1.2 (clipped); token 1: max(0.4, 0.8) = 0.8 (clipped)
    assert loss.item() == pytest.approx((-1.2 + 0.8) / 2) and m["clip_ratio"] == 1.0
    loss_hi, _ = policy_loss(new, old, adv, torch.ones(1, 2), clip_eps=0.2, clip_eps_high=0.28)
    assert loss_hi.item() == pytest.approx((-1.28 + 0.8) / 2)


def test_env_tokens_receive_no_gradient_and_clipped_tokens_neither():
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]])  # zeros = observation/env tokens
    targets = torch.randint(0, 11, (2, 6))
    for kl_coef in (0.0, 0.1):
        logits = torch.randn(2, 6, 11, requires_grad=True)
        lp = torch.log_softmax(logits, -1).gather(-1, targets[..., None])[..., 0]
        old = lp.detach().clone()
        old[0, 1] = lp[0, 1].detach() - 1.0  # token (0,1): ratio e > 1.2 with A > 0 -> clipped
        loss, _ = policy_loss(lp, old, torch.ones(2, 6), mask, ref_logprobs=old - 0.5, kl_coef=kl_coef)
        loss.backward()
        grad = logits.grad.abs().sum(-1)
        assert torch.all(grad[mask == 0] == 0)  # env text never receives gradient, with or without KL
        others = (mask == 1).clone()
        others[0, 1] = False
        assert torch.all(grad[others] > 0)
        if kl_coef == 0.0:
            assert grad[0, 1] == 0  # the clipped token contributes no policy gradient
        else:
            assert grad[0, 1] > 0  # ...but the KL term still pulls it


def test_kl_k3_estimator():
    lp = torch.log(torch.tensor([[0.5]]))
    ref = torch.log(torch.tensor([[0.25]]))
    _, m = policy_loss(lp, lp.clone(), torch.zeros(1, 1), torch.ones(1, 1), ref_logprobs=ref)
    d = math.log(0.25) - math.log(0.5)
    assert m["kl"] == pytest.approx(math.exp(d) - d - 1)


def test_seq_mean_vs_token_mean():
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [5.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert masked_mean(x, mask).item() == pytest.approx(9 / 5)
    assert masked_mean(x, mask, "seq-mean").item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="agg"):
        masked_mean(x, mask, "median")


def test_traj_mean_balances_the_tokens_a_success_and_a_longer_failure_share():
    """A won 1-turn episode (A = +1) and a failed 3-turn episode (A = -1) writing the same reply each turn:
    token-mean pushes the shared reply's log-prob down (3 failing copies against 1), traj-mean (GRPO's
    1/|o_i| per trajectory) leaves it balanced, and its weights make each trajectory count 1/2."""
    from trainers.learner import traj_weights
    from trainers.sequences import TurnSample

    reply = [5, 6, 7]
    samples = [TurnSample([1] + reply, [0, 1, 1, 1], [0.0] * 4, [0.0, 1.0, 1.0, 1.0], 0, 0)]
    samples += [TurnSample([1] + reply, [0, 1, 1, 1], [0.0] * 4, [0.0, -1.0, -1.0, -1.0], 1, k) for k in range(3)]
    (w,) = traj_weights([samples])
    assert w.tolist() == pytest.approx([1 / 6, 1 / 18, 1 / 18, 1 / 18])  # 1 / (3 tokens x 2) and 1 / (9 x 2)
    mask = torch.tensor([s.policy_mask for s in samples])
    adv = torch.tensor([s.advantages for s in samples])
    lp = torch.zeros(4, 4, requires_grad=True)  # the same reply: one shared log-prob per position
    # d loss / d log-prob of the reply's first token, summed over its 4 copies: -sum_b A_b x (token weight)
    for agg, kw, expected in (("token-mean", {}, -(1 - 3) / 12), ("traj-mean", {"weights": w}, 0.0)):
        lp.grad = None
        loss, _ = policy_loss(lp, lp.detach(), adv, mask, agg=agg, **kw)
        loss.backward()
        shared = float(lp.grad[:, 1].sum())  # > 0: gradient descent lowers the shared reply's probability
        assert shared == pytest.approx(expected, abs=1e-7)
    with pytest.raises(ValueError, match="needs per-sample weights"):
        policy_loss(lp, lp.detach(), adv, mask, agg="traj-mean")


def test_updates_keep_each_group_whole_and_balanced():
    """Several updates per pass: a GRPO group's advantages sum to 0 only together, so each group
    lands whole in one update (a split group pushed its shared tokens down in one step and up in the
    next: Search-QA collapsed to 0% sampled success at lr 3e-4 with 4 updates before this)."""
    from types import SimpleNamespace

    from trainers.learner import update_parts

    sizes = [5, 3, 3, 2, 2, 1, 1, 1]  # turn samples per trajectory
    groups = [0, 0, 1, 1, 2, 2, 3, 3]
    samples = [SimpleNamespace(trajectory=i, k=k) for i, n in enumerate(sizes) for k in range(n)]
    parts = update_parts(samples, groups, 2)
    assert len(parts) == 2 and sum(map(len, parts)) == len(samples)
    for part in parts:
        assert [(s.trajectory, s.k) for s in part] == sorted((s.trajectory, s.k) for s in part)  # order kept
    where = {groups[s.trajectory]: k for k, part in enumerate(parts) for s in part}
    for k, part in enumerate(parts):
        assert all(where[groups[s.trajectory]] == k for s in part)  # no group in two updates
    assert sorted(map(len, parts)) == [8, 10]  # groups of 8, 5, 3, 2 samples dealt to the lighter update: 8+2 | 5+3
    assert len(update_parts(samples, groups, 10)) == 4  # never more updates than groups
    assert len(update_parts(samples, groups, 1)) == 1
