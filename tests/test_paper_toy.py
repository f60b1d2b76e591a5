"""The paper preset's toy twin (leaderboards/presets/paper-toy.yaml): the same keys and settings as
paper.yaml except sizes and paths (checked here key by key, in the default suite), and the whole
protocol run end to end under vLLM on CPU (`make test-vllm`, in CI): official-format data through the
paper's env vars, the retrieval server the run starts and stops, every method and ablation (on
Search-QA; the per-env paths on all three), every judge-precision kind, and the full report."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "leaderboards" / "presets"
# what the twin may change: how much runs (sizes) and where things are (paths); nothing else
SIZES = {
    "name",
    "seeds",
    "iterations",
    "tasks_per_iteration",
    "group_size",
    "max_tokens",
    "continuations",
    "max_verified_groups",
    "tasks",
    "failures",
    "episodes",
    "batch",
    "max_steps",
    "max_model_len",
    "startup_timeout",
}
PATHS = {"model", "model_path", "search_url"}


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    else:
        yield path, obj


def twin_differences(paper: dict, toy: dict) -> list[str]:
    """Every difference between the two presets other than sizes and paths."""
    out = []
    a, b = dict(_leaves(paper)), dict(_leaves(toy))
    for path in sorted(set(a) | set(b)):
        where = ".".join(map(str, path))
        if path not in a or path not in b:
            out.append(f"{where}: only in {'paper-toy' if path not in a else 'paper'}")
        elif a[path] != b[path] and path[-1] not in SIZES | PATHS:
            out.append(f"{where}: {a[path]!r} vs {b[path]!r}")
    return out


def test_the_toy_twin_differs_from_the_paper_preset_only_in_sizes_and_paths():
    paper = yaml.safe_load((PRESETS / "paper.yaml").read_text())
    toy = yaml.safe_load((PRESETS / "paper-toy.yaml").read_text())
    assert twin_differences(paper, toy) == []
    # the comparison itself can fail: another judge kind, a missing block, an extra key
    assert twin_differences(paper, {**toy, "judge": {**toy["judge"], "kind": "hf"}}) == ["judge.kind: 'vllm' vs 'hf'"]
    assert twin_differences(paper, {k: v for k, v in toy.items() if k != "ablations"}) == ["ablations: only in paper"]
    extra = {**toy, "train": {**toy["train"], "lora": {"r": 8}}}
    assert twin_differences(paper, extra) == ["train.lora.r: only in paper-toy"]
    # the data go through the same env vars
    for name in ("alfworld", "webshop", "searchqa"):
        assert toy["envs"][name]["train_kwargs"]["data"] == paper["envs"][name]["train_kwargs"]["data"]


def test_the_toy_twin_passes_the_preset_checks(tmp_path):
    """Loaded with its data in place, the twin has no problem a run would find before the cells
    (vLLM and the GPU aside, which the default venv does not have)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from paper_toy import write_toy_data

    from leaderboards.run import load_preset
    from leaderboards.validate import problems

    env = write_toy_data(tmp_path / "data")
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        preset = load_preset("paper-toy", check=False)
        found = problems(
            {k: v for k, v in preset.items() if k != "_path"},
            methods=[*preset["methods"], *preset["ablations"]],
            make_envs=True,
            require_set=True,
        )
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    assert [p for p in found if "vLLM" not in p] == []


@pytest.mark.vllm
@pytest.mark.timeout(1500)  # ~1.5 min on 2 idle cores
def test_the_paper_protocol_runs_end_to_end_at_toy_scale(tmp_path):
    pytest.importorskip("vllm", reason="vLLM is not installed here: `make test-vllm` builds its venv")
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import free_port
    from paper_toy import write_toy_data

    from prover_gym.searchqa.serve import answers

    env = {**os.environ, **write_toy_data(tmp_path / "data"), "VLLM_CPU_KVCACHE_SPACE": "1"}
    url = f"http://127.0.0.1:{free_port()}"
    preset = (PRESETS / "paper-toy.yaml").read_text().replace("http://127.0.0.1:8071", url)
    assert url in preset
    (tmp_path / "paper-toy.yaml").write_text(preset)
    out = tmp_path / "out"
    cmd = [sys.executable, "leaderboards/run.py", "--preset", str(tmp_path / "paper-toy.yaml"), "--out", str(out)]

    def run(*args: str) -> str:
        proc = subprocess.run(
            [*cmd, *args, "--jobs", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        return proc.stdout

    # The rows that exercise distinct paths: Search-QA (the retrieval server the run starts and stops) with
    # every method and ablation on vLLM; ALFWorld and WebShop (their official-format data) with the baselines,
    # the base's eval, and prover: vLLM rollouts with weight sync after each update, the vLLM judge and the
    # continuations. The other methods' paths do not depend on the env (each runs on every env in the default
    # suite under HF; grpo's vLLM path is prover's without the judge).
    first = run("--envs", "searchqa", "--ablations")
    assert "retrieval server: started pid" in first
    assert not answers(url)  # the run stopped the server it started
    assert (out / "retrieval_server_searchqa.log").is_file()
    per_env = ["random", "expert", "sft", "prover"]
    run("--methods", *per_env)  # every env: Search-QA's rows reused, the report over all three
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    methods = [*per_env, "grpo", "gigpo", "prover_random", "prover_unverified", "grpo_matched"]
    assert sorted((r["env"], r["method"]) for r in rows) == sorted(
        [("searchqa", m) for m in methods] + [(e, m) for e in ("alfworld", "webshop") for m in per_env]
    )
    for name in ("leaderboard.md", "leaderboard.html", "learning_curves.png", "credit.png", "judge_precision.png"):
        assert (out / name).is_file(), name
    report = (out / "leaderboard.md").read_text()
    assert "Judge precision by verification" in report and "Cells that failed" not in report
    runs = out / "runs" / "paper-toy"
    # rollouts on the vLLM engine, its weights synced from the learner after each update
    gaps = [json.loads(line)["rollout_logprob_gap_max"] for line in (runs / "searchqa/grpo/seed0/metrics.jsonl").open()]
    assert gaps and max(gaps) < 1e-3, gaps
    # the LLM judge (vLLM) was asked; the placebo's random segments were verified and recorded
    prover = [json.loads(line) for line in (runs / "searchqa/prover/seed0/metrics.jsonl").open()]
    assert sum(r.get("judge/calls", 0) for r in prover) > 0
    records = (runs / "searchqa/prover_random/seed0/credit.jsonl").read_text().splitlines()
    assert records and all("verification" in json.loads(r) for r in records)
