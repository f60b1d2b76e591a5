"""LLMPolicy: prompt rendering from the trajectory so far, parsing, and token bookkeeping."""

import gymnasium as gym
import pytest

from agents.backends import Completion, make_backend
from agents.formats import INVALID_ACTION
from agents.llm_policy import LLMPolicy
from agents.rollout import rollout


class TaggedExpert:
    """A fake backend that answers with the env expert's action written in the model's format."""

    def __init__(self, env):
        self.env, self.calls = env, []

    def chat(self, conversations, prefixes=None, **kw):
        self.calls.append((conversations, prefixes))
        action = self.env.unwrapped.expert_action()
        verb, arg = action.split("[", 1)
        if self.env.unwrapped.env_id == "prover/SearchQA-v0":
            text = f"<think>go</think><{verb}> {arg[:-1]} </{verb}><information>made up</information>"
        else:
            text = f"<think>go</think><action>{action}</action>"
        return [Completion(text, "stop", 1, 3, None, [5, 6, 7], [-0.1, -0.2, -0.3])]


@pytest.mark.parametrize("env_id", ["prover/SearchQA-v0", "prover/WebShop-v0"])
def test_round_trip_through_the_format_wins(env_id):
    env = gym.make(env_id, split="test")
    backend = TaggedExpert(env)
    traj = rollout(env, LLMPolicy(backend, env_id=env_id), seed=5)
    assert traj.won and all(
        t.valid and t.policy_mask == [1, 1, 1] and t.logprobs == [-0.1, -0.2, -0.3] for t in traj.turns
    )
    if env_id == "prover/SearchQA-v0":
        # Search-R1: one growing transcript; the fake <information> the model wrote is cut away
        messages, prefixes = backend.calls[1]
        assert messages[0][0]["content"].startswith("Answer the given question.")
        assert prefixes[0] == traj.turns[0].text + traj.turns[1].observation
        assert "made up" not in prefixes[0] and prefixes[0].endswith("</information>\n\n")
    else:
        content = backend.calls[1][0][0][0]["content"]
        assert "already taken 1 step(s)" in content and "click[" in content  # history and admissible actions


def test_tiny_hf_model_rollout_records_tokens(tmp_path):
    from agents.tiny_model import build_tiny_model

    model = build_tiny_model(
        tmp_path / "m", ["<think>x</think><action>click[buy now]</action>"] * 30, vocab_size=300, num_hidden_layers=1
    )
    env = gym.make("prover/WebShop-v0", split="test", max_steps=4)
    policy = LLMPolicy(
        make_backend({"kind": "hf", "model_path": str(model), "max_tokens": 6}), env_id="prover/WebShop-v0"
    )
    traj = rollout(env, policy, seed=0)
    assert traj.truncated or traj.terminated
    for t in traj.turns:
        assert len(t.token_ids) == len(t.logprobs) == len(t.policy_mask) >= 1
        assert t.valid or t.action == INVALID_ACTION


def test_policy_needs_a_format_or_env_id():
    with pytest.raises(ValueError, match="format"):
        LLMPolicy(object())
