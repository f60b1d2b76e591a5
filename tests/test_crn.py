"""Common random numbers: keyed sampling, and comparisons between methods that differ only in what
they differ in (a zero bonus is GRPO bit for bit; a probe or a batch size changes nothing)."""

import hashlib
import math

import pytest
import torch

from agents.backends import make_backend
from agents.backends.sampling import KeyedSampler, key_seed, nucleus_mask
from trainers.config import load_config
from trainers.train import Trainer

# the shipped Search-QA base: it wins about half its episodes, so groups are mixed and ProVer verifies
BASE = [
    "env_id=prover/SearchQA-v0",
    "env_kwargs={split: train, data_sources: [single_hop], max_turns: 2}",
    "model_path=bases/searchqa",
    "max_tokens=32",
    "tasks_per_iteration=3",
    "group_size=4",
    "continuations=2",
    "updates_per_epoch=2",
    "progress=false",
    "torch_threads=1",
]


def _train(tmp_path, name, *extra, iterations=3, setup=None):
    trainer = Trainer(load_config(None, [*BASE, f"iterations={iterations}", f"out_dir={tmp_path / name}", *extra]))
    if setup is not None:
        setup(trainer)
    rows = trainer.run()
    trainer.close()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in trainer.model.parameters())).hexdigest()
    return digest, rows


# ---- the sampler ------------------------------------------------------------------------------
def test_key_seed_is_stable_and_distinguishes_keys():
    assert key_seed(("rollout", 0, 1, "t", 2)) == key_seed(("rollout", 0, 1, "t", 2))
    seeds = {key_seed(("rollout", 0, it, "t", j)) for it in range(20) for j in range(20)}
    assert len(seeds) == 400 and all(0 <= s < 1 << 63 for s in seeds)
    # a fixed value: the seed must not depend on the process (no hash randomisation)
    assert key_seed(("x",)) == key_seed(("x",)) and isinstance(key_seed(("x",)), int)


@pytest.mark.parametrize("counter", [False, True], ids=["generators", "counter"])
def test_keyed_sampler_draws_the_tempered_softmax(counter):
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -3.0])
    n, temperature = 6000, 0.7
    sampler = KeyedSampler([("k", i) for i in range(n)], temperature, counter=counter)
    sampler(None, logits.expand(n, -1).clone())
    freq = torch.bincount(sampler.chosen[0], minlength=5).float() / n
    probs = torch.softmax(logits / temperature, -1)
    assert torch.allclose(freq, probs, atol=4 * math.sqrt(0.25 / n))
    # the recorded log-prob is the clean one of the chosen token, not the perturbed score
    assert torch.allclose(sampler.logprobs[0], torch.log(probs)[sampler.chosen[0]], atol=1e-5)


def test_a_finished_row_draws_no_noise_and_the_others_are_unchanged():
    """With eos_token_id, a row that chose it gets no more noise (its later tokens are padding);
    every row's tokens and log-probs up to its eos are those of the sampler without it."""
    keys = [("k", i) for i in range(8)]
    plain, fast = KeyedSampler(keys, 1.0), KeyedSampler(keys, 1.0, eos_token_id=0)
    gen = torch.Generator().manual_seed(3)
    for _ in range(12):
        logits = torch.randn(8, 6, generator=gen)
        plain(None, logits.clone())
        fast(None, logits.clone())
    assert any(fast.finished) and fast.finished == [
        bool((torch.stack(plain.chosen)[:, i] == 0).any()) for i in range(8)
    ]
    for i in range(8):
        full = [int(c[i]) for c in plain.chosen]
        n = full.index(0) + 1 if 0 in full else len(full)
        assert fast.row(i, n) == plain.row(i, n)


def test_counter_noise_is_uniform_and_a_function_of_seed_step_and_index():
    from agents.backends.sampling import counter_uniform

    seeds = torch.tensor([12345, 2**62 + 7, 99], dtype=torch.int64)
    u = counter_uniform(seeds, 0, 50_000)
    assert 0 < float(u.min()) and float(u.max()) < 1
    assert torch.allclose(u.mean(1), torch.full((3,), 0.5, dtype=torch.float64), atol=0.01)
    assert torch.allclose(u.var(1) * 12, torch.ones(3, dtype=torch.float64), atol=0.03)
    # a row's numbers do not depend on the other rows, and steps and seeds are uncorrelated
    assert torch.equal(counter_uniform(seeds[1:2], 0, 50_000)[0], u[1])
    corr = torch.corrcoef(torch.stack([u[0], counter_uniform(seeds, 1, 50_000)[0], u[2]]))
    assert float((corr - torch.eye(3, dtype=torch.float64)).abs().max()) < 0.02


def test_keyed_sampler_respects_the_nucleus():
    logits = torch.tensor([[3.0, 2.5, 0.0, -2.0]])
    keep = nucleus_mask(torch.log_softmax(logits, -1), 0.8)
    assert keep.tolist() == [[True, True, False, False]]
    n = 3000
    sampler = KeyedSampler([("k", i) for i in range(n)], 1.0, top_p=0.8)
    sampler(None, logits.expand(n, -1).clone())
    chosen = sampler.chosen[0]
    assert set(chosen.tolist()) == {0, 1}
    p0 = math.exp(3.0) / (math.exp(3.0) + math.exp(2.5))  # renormalised inside the nucleus
    assert abs(float((chosen == 0).float().mean()) - p0) < 4 * math.sqrt(0.25 / n)
    with pytest.raises(ValueError, match="temperature"):
        KeyedSampler([("k",)], 0.0)


CONVS = [
    [{"role": "user", "content": "Find me green tea"}],
    [{"role": "user", "content": "Answer the given question. Question: who founded the Voukecil Institute?"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "click"}],
    [{"role": "user", "content": "Find me green tea"}],
]
KEYS = [("rollout", 0, 0, "a", 0), ("rollout", 0, 0, "b", 0), ("rollout", 0, 0, "c", 0), ("rollout", 0, 0, "a", 1)]


def test_a_keyed_row_does_not_depend_on_its_batch(bundled_dir):
    from agents.tiny_model import tiny_model_dir

    b = make_backend({"kind": "hf", "model_path": str(tiny_model_dir()), "max_tokens": 12, "seed": 5})
    whole = b.chat(CONVS, keys=KEYS, temperature=1.0)
    alone = [b.chat([c], keys=[k], temperature=1.0)[0] for c, k in zip(CONVS, KEYS)]
    b.batch_size = 3
    cut = b.chat(CONVS, keys=KEYS, temperature=1.0)
    shuffled = b.chat(CONVS[::-1], keys=KEYS[::-1], temperature=1.0)[::-1]
    torch.manual_seed(123)  # the global RNG plays no part
    again = b.chat(CONVS, keys=KEYS, temperature=1.0)
    for run in (alone, cut, shuffled, again):
        assert [c.token_ids for c in run] == [c.token_ids for c in whole]
        for x, y in zip(run, whole):
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)
    # the same prompt under two keys (a GRPO group) samples two completions; no key: rows still differ
    assert whole[0].token_ids != whole[3].token_ids
    unkeyed = b.chat([CONVS[0]] * 4, temperature=1.0)
    assert len({tuple(c.token_ids) for c in unkeyed}) > 1
    with pytest.raises(ValueError, match="sampling keys"):
        b.chat(CONVS, keys=KEYS[:2])


# ---- the trainer ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory, bundled_dir):
    return _train(tmp_path_factory.mktemp("grpo"), "grpo", "method=grpo")


def test_every_method_starts_from_the_same_rollouts(tmp_path, grpo_run):
    first = grpo_run[1][0]["rollout_digest"]
    for method in ("gigpo", "prover", "prover_random", "prover_unverified"):
        _, rows = _train(tmp_path, method, f"method={method}", iterations=1)
        assert rows[0]["rollout_digest"] == first, method


@pytest.mark.parametrize(
    "extra",
    [
        ["method=prover"],
        ["method=prover_random"],
        ["method=prover_unverified"],
        ["method=prover", "judge={kind: exhaustive}"],
    ],
    ids=["prover", "prover_random", "prover_unverified", "exhaustive"],
)
def test_a_zero_bonus_is_grpo_bit_for_bit(tmp_path, grpo_run, extra):
    digest, rows = _train(tmp_path, "zero", *extra, "beta=0")
    # the credit path ran (continuations generated between the rollouts), yet nothing else moved
    assert sum(r["prover/proposed_segments"] for r in rows) > 0
    if extra != ["method=prover_unverified"]:
        assert sum(r["prover/verified_segments"] for r in rows) > 0 and sum(r["cost/credit_tokens"] for r in rows) > 0
    assert [r["rollout_digest"] for r in rows] == [r["rollout_digest"] for r in grpo_run[1]]
    assert digest == grpo_run[0]


def test_the_bonus_is_what_changes_the_weights(tmp_path, grpo_run):
    digest, rows = _train(tmp_path, "prover", "method=prover", "beta=1")
    assert sum(r["prover/credited_segments"] for r in rows) > 0
    assert rows[0]["rollout_digest"] == grpo_run[1][0]["rollout_digest"] and digest != grpo_run[0]


def test_the_probe_leaves_training_bit_identical(tmp_path, grpo_run):
    probe = ["probe_kwargs={split: test, data_sources: [single_hop], max_turns: 2}", "probe_tasks=4", "probe_every=1"]
    digest, rows = _train(tmp_path, "probe", "method=grpo", *probe)
    assert "probe/success" in rows[0] and "probe/success_start" in rows[0]
    assert [r["rollout_digest"] for r in rows] == [r["rollout_digest"] for r in grpo_run[1]]
    assert digest == grpo_run[0]


def test_the_generation_batch_size_leaves_rollouts_unchanged(tmp_path, grpo_run):
    def small_batches(trainer):
        trainer.backend.batch_size = 5  # 12 rollouts a turn: batches of 5, 5 and 2 instead of 12

    _, rows = _train(tmp_path, "batch5", "method=grpo", setup=small_batches)
    # the same tokens in every iteration; the weights agree to float rounding only (the recorded
    # rollout log-probs come from matmuls of another shape), so no bit-for-bit claim here
    assert [r["rollout_digest"] for r in rows] == [r["rollout_digest"] for r in grpo_run[1]]


def test_grpo_matched_adds_tasks_and_keeps_grpos_groups(tmp_path, bundled_dir):
    grpo = Trainer(load_config(None, [*BASE, "method=grpo", f"out_dir={tmp_path / 'g'}"]))
    matched = Trainer(load_config(None, [*BASE, "method=grpo_matched", "match_ratio=0.5", f"out_dir={tmp_path / 'm'}"]))
    ours, theirs = matched.collect(), grpo.collect()
    # 3 tasks x 0.5 = 1.5 extra: 1 now, the half carried over
    assert len(ours) == 4 and len(theirs) == 3 and matched.extra_owed == pytest.approx(0.5)
    assert [[u.token_ids for t in g for u in t.turns] for g in ours[:3]] == [
        [u.token_ids for t in g for u in t.turns] for g in theirs
    ]
    assert ours[3][0].task_id not in {g[0].task_id for g in theirs}
    grpo.close()
    matched.close()
    with pytest.raises(ValueError, match="match_ratio"):
        load_config(None, ["method=grpo_matched"])


def test_cost_is_counted_by_who_spent_it(grpo_run, tmp_path):
    _, rows = _train(tmp_path, "cost", "method=prover", iterations=1)
    (row,) = rows
    assert row["cost/rollout_tokens"] == row["tokens"] > 0 and row["cost/rollout_prompt_tokens"] > row["tokens"]
    assert row["cost/credit_tokens"] > 0 and row["cost/credit_prompt_tokens"] > 0
    assert row["cost/generated_tokens"] == row["cost/rollout_tokens"] + row["cost/credit_tokens"]
    assert grpo_run[1][0]["cost/credit_tokens"] == 0 and grpo_run[1][0]["tasks"] == 3
