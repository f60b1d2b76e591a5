"""The tiny local Qwen3 model and the hf backend: loads like any HF checkpoint, batched generation
equals one-by-one, and the returned log-probs are the model's own."""

import math

import pytest
import torch

from agents.backends import BackendError, make_backend
from agents.tiny_model import build_tiny_model, tiny_model_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    texts = [
        "Find me green tea with lemon flavor",
        "<think>ok</think><action>click[buy now]</action>",
        "Answer the given question. Question: who founded the Voukecil Institute?",
    ] * 50
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, vocab_size=600, num_hidden_layers=1)


def test_loads_as_a_qwen3_checkpoint(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    assert model.config.model_type == "qwen3" and model.config.vocab_size == len(tok)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok("Find me green tea")["input_ids"]) == "Find me green tea"


CONVS = [
    [{"role": "user", "content": "Find me green tea"}],
    [{"role": "user", "content": "Answer the given question. Question: who founded the Voukecil Institute?"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "click"}],
]


def test_batched_greedy_equals_one_by_one(model_dir):
    b = make_backend({"kind": "hf", "model_path": str(model_dir), "max_tokens": 8})
    batch = b.chat(CONVS, temperature=0)
    single = [b.chat([c], temperature=0)[0] for c in CONVS]
    assert [c.token_ids for c in batch] == [c.token_ids for c in single]
    for c in batch:
        assert len(c.token_ids) == len(c.logprobs) == c.completion_tokens <= 8
        assert all(lp <= 1e-6 and math.isfinite(lp) for lp in c.logprobs)
        assert c.text == b.tokenizer.decode(c.token_ids, skip_special_tokens=True)


def test_sampled_logprobs_are_the_models(model_dir):
    b = make_backend({"kind": "hf", "model_path": str(model_dir), "max_tokens": 6, "seed": 3})
    (c,) = b.chat(CONVS[:1], temperature=1.0)
    ids = torch.tensor([c.prompt_token_ids + c.token_ids])
    with torch.no_grad():
        logits = b.model(ids).logits[0, len(c.prompt_token_ids) - 1 : -1]
    ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(c.token_ids)[:, None])[:, 0]
    assert torch.allclose(ref, torch.tensor(c.logprobs), atol=1e-4)


def test_prefix_continues_an_assistant_transcript(model_dir):
    b = make_backend({"kind": "hf", "model_path": str(model_dir), "max_tokens": 4})
    (c,) = b.chat(CONVS[:1], prefixes=["<search> x </search>"], temperature=0)
    assert b.tokenizer.decode(c.prompt_token_ids).endswith("<|im_start|>assistant\n<search> x </search>")


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(BackendError, match="never downloaded"):
        make_backend({"kind": "hf", "model_path": str(tmp_path / "nope")})


def test_tiny_model_is_built_from_env_text_and_cached(bundled_dir):
    first = tiny_model_dir()
    assert (first / "model.safetensors").is_file() and (first / "complete.json").is_file()
    assert tiny_model_dir() == first
    b = make_backend({"kind": "hf", "model_path": str(first), "max_tokens": 2})
    ids = b.tokenizer("<think>The next step is click[buy now].</think>")["input_ids"]
    assert len(ids) < 20  # the BPE learned the formats' vocabulary


def test_vllm_backend_is_lazy_and_says_what_to_install():
    import importlib.util

    import judges

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; the GPU check exercises it")
    with pytest.raises(ImportError, match=r"prover-gym\[gpu\]"):
        make_backend({"kind": "vllm", "model_path": "Qwen/Qwen3-0.6B"})
    with pytest.raises(ImportError, match=r"prover-gym\[gpu\]"):
        judges.make({"kind": "vllm", "model_path": "Qwen/Qwen3-0.6B"})
