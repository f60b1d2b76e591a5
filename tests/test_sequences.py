"""Turn samples from real tiny-model rollouts: rollout log-probs match the learner's recomputation,
only policy tokens carry gradient, and a step with positive advantage raises their probability."""

import gymnasium as gym
import pytest
import torch

from agents.backends import make_backend
from agents.llm_policy import LLMPolicy
from agents.rollout import rollout
from agents.tiny_model import build_tiny_model
from trainers.loss import policy_loss
from trainers.sequences import collate, kept_token_count, token_logprobs, turn_samples


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    texts = ["<think>x</think><search> who </search>", "<answer> yes </answer>", "Answer the given question."] * 40
    model_dir = build_tiny_model(tmp_path_factory.mktemp("m"), texts, vocab_size=400, num_hidden_layers=1)
    backend = make_backend({"kind": "hf", "model_path": str(model_dir), "max_tokens": 10, "temperature": 1.0})
    env = gym.make("prover/SearchQA-v0", split="test", max_turns=2)
    trajs = [rollout(env, LLMPolicy(backend, env_id="prover/SearchQA-v0"), seed=s) for s in range(2)]
    return backend, trajs


def test_samples_match_rollout_logprobs(setup):
    backend, trajs = setup
    samples = turn_samples(trajs, [[1.0] * len(t.turns) for t in trajs], backend.tokenizer)
    assert len(samples) == sum(len(t.turns) for t in trajs)
    batch = collate(samples, backend.tokenizer.pad_token_id)
    with torch.no_grad():
        lp = token_logprobs(backend.model, batch)
    mask = batch["policy_mask"].bool()
    assert torch.allclose(lp[mask], batch["old_logprobs"][mask], atol=1e-4)  # same tokens, same context
    for s in samples:  # prompt tokens first, all masked; then only policy tokens
        first = s.policy_mask.index(1) if 1 in s.policy_mask else len(s.policy_mask)
        assert set(s.policy_mask[:first]) <= {0} and set(s.policy_mask[first:]) <= {1}


def test_only_policy_tokens_get_gradient_and_a_step_moves_them(setup):
    backend, trajs = setup
    model = backend.model
    samples = turn_samples(trajs, [[1.0] * len(t.turns) for t in trajs], backend.tokenizer)
    batch = collate(samples, backend.tokenizer.pad_token_id)
    logits_store = {}

    def keep(module, args, output):
        output.logits.retain_grad()
        logits_store["logits"] = output.logits

    handle = model.register_forward_hook(keep)
    model.train()
    lp = token_logprobs(model, batch)
    loss, _ = policy_loss(lp, batch["old_logprobs"], batch["advantages"], batch["policy_mask"])
    loss.backward()
    handle.remove()
    grad = logits_store["logits"].grad.abs().sum(-1)  # the logits at position t predict token t+1
    predicts_policy = torch.zeros_like(batch["policy_mask"], dtype=torch.bool)
    predicts_policy[:, :-1] = batch["policy_mask"][:, 1:].bool()
    assert torch.all(grad[~predicts_policy] == 0) and torch.all(grad[predicts_policy] > 0)
    before = lp[batch["policy_mask"].bool()].mean().item()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    model.zero_grad()
    with torch.no_grad():
        after = token_logprobs(model, batch)[batch["policy_mask"].bool()].mean().item()
    model.eval()
    assert after > before


def test_kept_token_count_cuts_discarded_generation(setup):
    backend, _ = setup
    tok = backend.tokenizer
    ids = tok("<search> who </search> extra words", add_special_tokens=False)["input_ids"]
    n = kept_token_count(tok, ids, "<search> who </search>")
    assert tok.decode(ids[:n]).startswith("<search> who </search>") and n < len(ids)
    assert kept_token_count(tok, ids, "something else") == len(ids)
    # a reply kept whole trains its EOS too (the stop is the policy's decision); a cut one does not
    reply = tok("<think>go</think><action>look</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert kept_token_count(tok, reply, "<think>go</think><action>look</action>") == len(reply)
    cut = tok("<search> who </search> more", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert kept_token_count(tok, cut, "<search> who </search>") < len(cut) - 1
    with pytest.raises(ValueError, match="advantages"):
        turn_samples(setup[1], [[1.0]], tok)


def test_masked_logprobs_equal_the_full_computation(setup):
    """The trainer's fast path (LM head on policy positions only) gives the same log-probs and the
    same gradient as the full-logits path."""
    backend, trajs = setup
    model = backend.model
    samples = turn_samples(trajs, [[1.0] * len(t.turns) for t in trajs], backend.tokenizer)
    batch = collate(samples, backend.tokenizer.pad_token_id)
    mask = batch["policy_mask"]
    full = token_logprobs(model, batch)
    fast = token_logprobs(model, batch, mask)
    assert torch.allclose(full * mask, fast, atol=1e-5)
    assert torch.all(fast[mask == 0] == 0) and mask.sum() > 0
    grads = []
    for m in (None, mask):
        model.zero_grad()
        lp = token_logprobs(model, batch, m)
        (lp * mask).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    model.zero_grad()
    assert torch.allclose(grads[0], grads[1], atol=1e-4, rtol=1e-3)
