"""prover-gym envs in TRL's GRPOTrainer (environment_factory): the adapter's protocol, TRL's own tool-call
parser dispatching to it, and two GRPO steps of the tiny model through TRL on CPU."""

import os

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'prover-gym[trl]')")

from prover_gym.integrations.trl import environment_factory, task_dataset  # noqa: E402

KW = {"split": "train", "max_turns": 1, "data_sources": ["single_hop"]}


def _qwen3_tokenizer():
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    from agents.tiny_model import tiny_model_dir

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    tok.chat_template = qwen3_chat_template  # a tool-calling template TRL knows how to parse
    return add_response_schema(tok)


def test_the_environment_plays_a_task_through_its_tool(bundled_dir):
    Env = environment_factory("prover/SearchQA-v0", **KW)
    env = Env()
    row = task_dataset("prover/SearchQA-v0", KW, n=2)[1]
    first = env.reset(**row)
    assert row["task_id"] and isinstance(first, str) and env.get_reward() == 0.0
    expert = env._env.unwrapped.expert_action()
    while not env._done:
        env.act(expert)
        expert = env._env.unwrapped.expert_action() or "answer[none]"
    assert env.get_reward() == 1.0 and len(env.snapshots) >= 1
    assert env.act("search[more]").endswith("no more actions are accepted.")
    with pytest.raises(ValueError, match="prover/Nope-v0"):
        environment_factory("prover/Nope-v0")


def test_trl_parses_a_tool_call_into_the_environments_act(bundled_dir):
    """TRL's parser (the qwen3 response schema) turns a tool-call completion into a call of `act`, as its
    rollout loop does; the tool's JSON schema (from the docstring) names the argument."""
    from transformers.utils import get_json_schema
    from trl.chat_template_utils import parse_response

    tok = _qwen3_tokenizer()
    Env = environment_factory("prover/SearchQA-v0", **KW)
    env = Env()
    env.reset(**task_dataset("prover/SearchQA-v0", KW, n=1)[0])
    schema = get_json_schema(env.act)
    assert schema["function"]["name"] == "act" and "action" in schema["function"]["parameters"]["properties"]
    action = env._env.unwrapped.expert_action()
    text = f'<tool_call>\n{{"name": "act", "arguments": {{"action": "{action}"}}}}\n</tool_call><|im_end|>'
    anchor = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]  # the schema's start anchor
    parsed = parse_response(tok, tok(text, add_special_tokens=False)["input_ids"], prefix=anchor, tools=[env.act])
    (call,) = parsed["tool_calls"]
    assert call["function"]["name"] == "act"
    observation = env.act(**call["function"]["arguments"])
    assert "<information>" in observation or "Task complete" in observation


def test_two_grpo_steps_of_the_tiny_model_through_trl(tmp_path, bundled_dir):
    from trl import GRPOConfig, GRPOTrainer

    from agents.tiny_model import tiny_model_dir

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    Env = environment_factory("prover/SearchQA-v0", **KW)
    seen = []
    orig_reset = Env.reset
    Env.reset = lambda self, **row: seen.append(row["task_id"]) or orig_reset(self, **row)

    def brevity(completions, **kwargs):  # a second reward with variance, so the steps have a gradient
        return [-len(str(c)) / 100.0 for c in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=16,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        learning_rate=1e-3,
    )
    data = task_dataset("prover/SearchQA-v0", KW, n=8)
    trainer = GRPOTrainer(
        model=str(tiny_model_dir()),
        args=args,
        processing_class=_qwen3_tokenizer(),
        reward_funcs=[brevity],
        train_dataset=data,
        environment_factory=Env,
    )
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    logs = [r for r in trainer.state.log_history if "loss" in r]
    assert len(logs) == 2 and all("rewards/SearchQA_v0Environment/mean" in r for r in logs)
    assert set(seen) <= set(data["task_id"]) and len(seen) >= 4  # every rollout reset its row's task
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
