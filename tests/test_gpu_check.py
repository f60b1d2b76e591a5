"""benchmarks/gpu_check.py at tiny scale on CPU, so the prepared GPU check cannot rot: it runs with only
what the lent GPU machine has (torch, transformers, peft, accelerate and their requirements) and the
wheelhouse's wheels importable, prints the projection table, and its
projection arithmetic and wheelhouse check hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402


def closure(names) -> set[str]:
    """The distributions ``names`` need, their requirements' requirements included (no extras)."""
    import re
    from importlib import metadata

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in reqs if "extra ==" not in r]
    return seen


def gpu_machine_site(folder: Path) -> Path:
    """A site folder holding only what the lent GPU machine has plus the wheelhouse's packages: links
    to their installed files (packages and metadata), nothing else of this venv."""
    from importlib import metadata

    allowed = closure([*gpu_check.MACHINE_HAS, *gpu_check.WHEELHOUSE])
    folder.mkdir()
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name not in allowed or name == "prover-gym":
            continue
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or []}:
            src, dst = base / top, folder / top
            if src.exists() and not dst.exists() and top not in ("..", "__pycache__", "bin"):
                dst.symlink_to(src)
    return folder


SMALL = ["--generation", "4x8,8x4", "--prompt-len", "16", "--seqs", "2", "--seq-len", "32", "--response", "8"]
SMALL += ["--group", "2", "--m", "1", "--verify-tokens", "8", "--shapes", "tiny", "--device", "cpu"]


def test_the_gpu_check_runs_with_only_what_the_gpu_machine_and_the_wheelhouse_have(tmp_path):
    import os

    site = gpu_machine_site(tmp_path / "site")
    out = tmp_path / "figures.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    proc = subprocess.run(  # -s -S: no site-packages of this venv, only the folder above (and the checkout)
        [sys.executable, "-s", "-S", str(ROOT / "benchmarks/gpu_check.py"), *SMALL, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    for absent in ("pyarrow", "textworld", "fastapi"):  # the isolation is real: the rest of this venv is out of reach
        probe = subprocess.run([sys.executable, "-s", "-S", "-c", f"import {absent}"], env=env, capture_output=True)
        assert probe.returncode != 0, absent
    assert "projected GPU-hours of paper.yaml" in proc.stdout
    paper = __import__("yaml").safe_load((ROOT / "leaderboards/presets/paper.yaml").read_text())
    for method in gpu_check.project_methods(paper):
        assert f"| {method} |" in proc.stdout
    (res,) = json.loads(out.read_text())["results"]
    assert all(g["tok_s"] > 0 and g["generated"] > 0 for g in res["generation"])
    assert res["learner"]["seconds"] > 0 and "error" not in res["learner"]
    assert res["verification"]["continuations"] >= 1 and res["verification"]["generated"] > 0


def test_the_projection_adds_what_each_method_spends():
    paper = {
        "seeds": [0],
        "methods": ["random", "sft", "grpo", "prover"],
        "ablations": ["prover_random", "grpo_matched"],
        "train": {
            "iterations": 10,
            "tasks_per_iteration": 2,
            "group_size": 4,
            "continuations": 2,
            "max_verified_groups": 1,
        },
    }
    rows = gpu_check.project(paper, {"generation": 100.0, "learner": 1000.0, "verification": 50.0})
    h = {(r["env"], r["method"]): r for r in rows}
    a = gpu_check.ASSUMED["webshop"]
    rollout = 2 * 4 * a["turns"] * a["gen"]
    learn = 2 * 4 * a["turns"] * (a["prompt"] + a["gen"])
    grpo = 10 * (rollout / 100 + learn / 1000) / 3600
    assert h["webshop", "grpo"]["train_h"] == pytest.approx(grpo, abs=0.01)
    verify = 1 * 2 * 2 * (a["turns"] // 2) * a["gen"] / 50
    judge = gpu_check.JUDGE_TOKENS / 100
    assert h["webshop", "prover"]["train_h"] == pytest.approx(grpo + 10 * (verify + judge) / 3600, abs=0.01)
    assert h["webshop", "prover_random"]["train_h"] == pytest.approx(grpo + 10 * verify / 3600, abs=0.01)
    assert h["webshop", "sft"]["train_h"] == 0 and h["webshop", "sft"]["eval_h"] == h["webshop", "grpo"]["eval_h"] > 0
    assert h["webshop", "grpo_matched"]["train_h"] > h["webshop", "grpo"]["train_h"]


def test_the_wheelhouse_check_names_what_is_wrong(tmp_path):
    for name in ("prover_gym-0.1.0-py3-none-any.whl", "gymnasium-1.4.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "pystemmer-3.1.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"x" * (61 << 20))
    problems = gpu_check.check_wheelhouse(tmp_path)
    assert "no wheel of bm25s" in problems and "no wheel of cloudpickle" in problems
    assert any("cp311" in p and "CPython 3.12" in p for p in problems)
    assert any("over 60 MB" in p for p in problems)
    assert all(r.split("==")[0] in gpu_check.WHEELHOUSE for r in gpu_check.wheelhouse_requirements())
