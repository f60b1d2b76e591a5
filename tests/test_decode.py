"""agents/backends/decode.py and the learner's shared-prefix forward: prompts that repeat are encoded
once, and what comes out is what transformers' generate() and a plain forward give (the same tokens,
log-probabilities and gradients up to float32 summation order)."""

import pytest
import torch

from agents.backends.decode import Cluster, Decoder, padded_cost, plan_prefixes, share_prefixes, supports
from agents.backends.sampling import KeyedSampler
from agents.tiny_model import build_tiny_model
from trainers import sequences


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def backend(tmp_path_factory, request):
    """The tiny Qwen3 model, and a Llama of the same size with its tokenizer (SmolLM2's architecture: no q/k norm)."""
    from agents.backends import make_backend

    texts = ["Find me green tea with lemon flavor", "<think>ok</think><action>click[buy now]</action>"] * 50
    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, vocab_size=600)  # 2 layers, GQA 4/2
    if request.param == "llama":
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=128,
            intermediate_size=384,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            tie_word_embeddings=True,
        )
        path = tmp_path_factory.mktemp("llama")
        LlamaForCausalLM(config).save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))
    return make_backend({"kind": "hf", "model_path": str(path), "max_tokens": 12})


def _prompts(seed=0):
    """A batch as a GRPO turn makes it: a group repeating one prompt, a second group whose prompts share a
    long prefix and differ in their last tokens, and rows sharing nothing, of other lengths."""
    g = torch.Generator().manual_seed(seed)

    def r(n):
        return torch.randint(3, 250, (n,), generator=g).tolist()

    a, b = r(40), r(30)
    return [a] * 3 + [b + r(3), b + r(5), b + r(4)] + [r(17), r(52)]


def test_clusters_cover_every_row_once_within_limits():
    rows = _prompts()
    limits = [len(p) - 1 for p in rows]
    for cap in (4, 16, 64):
        clusters = share_prefixes(rows, limits, max_suffix=cap)
        assert sorted(r for c in clusters for r in c.rows) == list(range(len(rows)))
        for c in clusters:
            assert all(c.length <= limits[r] for r in c.rows)
            assert all(rows[r][: c.length] == rows[c.rows[0]][: c.length] for r in c.rows)
            if len(c.rows) > 1:
                assert all(len(rows[r]) - c.length <= cap for r in c.rows)
    plan = plan_prefixes(rows, limits)
    assert plan is not None
    groups = sorted(sorted(c.rows) for c in plan)
    assert [0, 1, 2] in groups and [3, 4, 5] in groups  # the repeated prompt and the shared prefix
    assert padded_cost(rows, plan) < len(rows) * max(map(len, rows))


def test_nothing_shared_means_no_plan():
    assert plan_prefixes([[1, 2, 3], [4, 5, 6, 7]], [2, 3]) is None
    assert plan_prefixes([[1, 2, 3]], [2]) is None
    assert padded_cost([[1, 2, 3], [1, 2, 4]], [Cluster(2, [0, 1])]) == 2 + 2


@pytest.mark.parametrize("temperature", [1.0, 0.0])
@pytest.mark.parametrize("shared", [True, False])
def test_decoder_gives_generates_tokens_and_logprobs(backend, temperature, shared):
    assert supports(backend.model)
    prompts = _prompts(1) if shared else _prompts(1)[5:]  # the last three share nothing: one padded pass
    limits = [len(p) - 1 for p in prompts]
    assert (plan_prefixes(prompts, limits) is not None) == shared
    params = {"max_tokens": 12, "temperature": temperature, "top_p": 1.0}
    keys = [("t", i) for i in range(len(prompts))]
    backend.fast_decode = False
    want = backend._generate(prompts, params, keys)
    backend.fast_decode = True
    got = backend._generate(prompts, params, keys)
    for w, c in zip(want, got):
        assert c.token_ids == w.token_ids and c.finish_reason == w.finish_reason and c.text == w.text
        assert c.prompt_token_ids == w.prompt_token_ids
        # generate()'s greedy scores come from compute_transition_scores (1e-4 off the learner's); the
        # decoder's are the learner's to ~1e-6
        assert c.logprobs == pytest.approx(w.logprobs, abs=2e-4 if temperature == 0 else 1e-5)


def test_decoder_logprobs_are_the_learners(backend):
    prompts = _prompts(2)
    out = backend._generate(prompts, {"max_tokens": 12, "temperature": 1.0, "top_p": 1.0}, [("l", i) for i in range(8)])
    for c in out:
        ids = torch.tensor([c.prompt_token_ids + c.token_ids])
        with torch.no_grad():
            lp = sequences.token_logprobs(backend.model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
        assert lp[0, len(c.prompt_token_ids) :].tolist() == pytest.approx(c.logprobs, abs=1e-5)


def test_decoder_stops_rows_at_eos_and_pads_after(backend):
    eos = backend.tokenizer.eos_token_id
    calls = {"n": 0}

    def choose(logits):  # row 0 ends at once, row 1 at its third token, row 2 never
        calls["n"] += 1
        token = logits.argmax(-1)
        token[0] = eos
        if calls["n"] == 3:
            token[1] = eos
        token[2] = 5
        return token

    rows = Decoder(backend.model, backend.tokenizer.pad_token_id, eos).generate(_prompts(3)[:3], 6, choose)
    assert rows[0] == [eos] and len(rows[1]) == 3 and rows[1][-1] == eos and rows[2] == [5] * 6


def test_keyed_sampler_choose_is_the_processor():
    logits = torch.randn(3, 50)
    a, b = KeyedSampler([("k", i) for i in range(3)], 1.0), KeyedSampler([("k", i) for i in range(3)], 1.0)
    chosen = a.choose(logits)
    processed = b(None, logits)
    assert processed.argmax(-1).tolist() == chosen.tolist() and a.row(1, 1) == b.row(1, 1)


def _learner_batch(prompts, gen=6):
    g = torch.Generator().manual_seed(7)
    seqs = [p + torch.randint(3, 250, (gen + i % 3,), generator=g).tolist() for i, p in enumerate(prompts)]
    seqs.append(prompts[0] + [9])  # a row whose only policy token is its last
    width = max(map(len, seqs))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    attn = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    policy = torch.zeros_like(ids)
    for i, (s, p) in enumerate(zip(seqs, prompts + [prompts[0]])):
        policy[i, len(p) : len(s)] = 1
    policy[1] = 0  # and a row without policy tokens
    return {"input_ids": ids, "attention_mask": attn}, policy


def test_learner_forward_with_shared_prefixes_equals_the_plain_one(backend, monkeypatch):
    model = backend.model
    batch, policy = _learner_batch(_prompts(4))
    model.train()
    try:
        results = []
        for shared in (True, False):
            if not shared:
                monkeypatch.setattr(sequences, "_shared_hidden", lambda *a: None)
            else:
                assert sequences._shared_hidden(model.model, batch["input_ids"], batch["attention_mask"], policy)
            model.zero_grad()
            lp = sequences.token_logprobs(model, batch, policy)
            (lp * torch.linspace(-1, 1, lp.shape[1])).sum().backward()
            results.append((lp.detach(), [p.grad.clone() for p in model.parameters()]))
    finally:
        model.eval()
        model.zero_grad()
    (lp_shared, g_shared), (lp_plain, g_plain) = results
    assert torch.equal(lp_shared == 0, lp_plain == 0)  # the same positions scored
    assert torch.allclose(lp_shared, lp_plain, atol=1e-5)
    for a, b in zip(g_shared, g_plain):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6 * float(b.abs().max()))
