"""leaderboards/run.py end to end through the CLI (smoke preset), its tables, resume after a kill,
bad presets, and eval-only against a loopback OpenAI-compatible server."""

import csv
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, str(ROOT / "leaderboards" / "run.py")]
METHODS = ["random", "expert", "sft", "grpo", "gigpo", "prover"]
ENVS = ["searchqa", "webshop", "alfworld"]


def _run(args, out, timeout=600, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        RUN + args + ["--out", str(out)], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env, **kw
    )


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("lb")
    t = time.time()
    proc = _run(["--preset", "smoke", "--jobs", "2"], out)  # cells on 2 worker processes
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc, time.time() - t


def test_smoke_tables(smoke):
    out, proc, seconds = smoke
    for name in (
        "leaderboard.md",
        "leaderboard.csv",
        "leaderboard.json",
        "leaderboard.html",
        "results.sqlite",
        "learning_curves.png",
        "task_types.png",
        "judge_precision.png",
    ):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert {(r["env"], r["method"]) for r in rows} == {(e, m) for e in ENVS for m in METHODS}
    for r in rows:
        for col in ("success_mean", "score_mean"):
            v = float(r[col])
            assert math.isfinite(v) and 0.0 <= v <= 1.0, (r["env"], r["method"], col, v)
        assert int(r["episodes"]) == 4
    expert = {r["env"]: float(r["success_mean"]) for r in rows if r["method"] == "expert"}
    assert expert == {"searchqa": 1.0, "webshop": 1.0, "alfworld": 1.0}
    doc = json.loads((out / "leaderboard.json").read_text())
    assert doc["preset"] == "smoke" and set(doc["envs"]) == set(ENVS)
    prover = [a for a in doc["leaderboard"] if a["method"] == "prover"]
    assert all(a["extra_tokens_ratio"] is not None and a["extra_tokens_ratio"] >= 0 for a in prover)
    md = (out / "leaderboard.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| method"))
    for col in (
        "searchqa success",
        "webshop score",
        "webshop success",
        "alfworld success",
        "average success",
        "vs GRPO (relative)",
        "ProVer extra tokens",
    ):
        assert col in header
    # judge precision is measured by verification, for every kind of the preset, the exhaustive bound included
    assert (
        "## Judge precision by verification" in md
        and "| env | judge | groups | proposals | precision | mean A_seg | agreement |" in md
    )
    judges_seen = {p["judge"] for p in doc["judge_precision"]}
    assert judges_seen == {"random", "first_divergence", "oracle", "exhaustive"}
    assert all(p["continuation"].startswith("noisy expert") for p in doc["judge_precision"])
    assert "pick_and_place_simple" in md  # ALFWorld's per-task-type table
    # paired differences with intervals and a verdict in words, ProVer vs GRPO among them
    assert "## Differences between methods, paired by training seed" in md
    # one training seed: a difference is stated, but no between-method interval and no claim
    assert any(
        line.startswith("- prover vs grpo (") and "no claim: 1 training seed" in line for line in md.splitlines()
    )
    assert "none (1 seed)" in md and "eval noise only" in md
    assert "prover vs grpo" in proc.stdout
    # every trained prover cell links its credit inspector, and the page is there
    links = [line.split("](")[1].rstrip(")") for line in md.splitlines() if "prover seed 0: [" in line]
    assert "## Where the credit went" in md and links and all((out / link).is_file() for link in links)
    assert "| env | method | seeds | judged | verified | A_seg > 0 | credited | mean A_seg | hit pivot |" in md
    assert all(
        set(r["extra"]["outcomes"].values()) <= {0, 1} and len(r["extra"]["outcomes"]) == 4 for r in doc["results"]
    )
    page = (out / "leaderboard.html").read_text()
    assert 'class="sortable"' in page and "data:image/png;base64," in page and "<script>" in page
    with sqlite3.connect(out / "results.sqlite") as db:
        n = db.execute("SELECT COUNT(*) FROM results WHERE preset='smoke'").fetchone()[0]
        assert n == len(ENVS) * len(METHODS)
        cols = [c[1] for c in db.execute("PRAGMA table_info(results)")]
        for c in ("config_hash", "commit_id", "train_seconds", "eval_seconds", "tokens", "env_steps", "seed", "split"):
            assert c in cols
        assert db.execute("SELECT COUNT(*) FROM curves").fetchone()[0] >= 2 * len(ENVS)  # grpo + prover curves
    # a guard against a runaway budget in the preset (every stage is meant to run once, tiny), not a speed test:
    # ~2 min on an idle 2-core machine, 4+ min when the machine is busy
    assert seconds < 600, f"smoke preset took {seconds:.0f}s"


def test_rerun_reuses_every_row(smoke):
    out, _, _ = smoke
    t = time.time()
    proc = _run(["--preset", "smoke", "--jobs", "2"], out)  # cells on 2 worker processes
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"0 new rows, {len(ENVS) * len(METHODS)} reused" in proc.stdout
    assert time.time() - t < 60


def test_a_cells_folder_carries_an_experiment_to_a_fresh_out(smoke, tmp_path):
    """--cells: the finished rows of a run written as one JSON per cell; a fresh --out loads them, plans and
    runs nothing, and rebuilds the same tables; a broken cell file is refused by name."""
    out, _, _ = smoke
    cells = tmp_path / "cells"
    n = len(ENVS) * len(METHODS)
    proc = _run(["--preset", "smoke", "--cells", str(cells)], out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted(cells.glob("*/*/seed*.json"))
    assert len(files) == n
    cell = json.loads(files[0].read_text())
    assert cell["format"] == "prover-gym cell 1" and cell["row"]["preset"] == "smoke"
    assert all("checkpoint" not in p.name for p in cells.rglob("*"))
    fresh = tmp_path / "fresh"
    dry = _run(["--preset", "smoke", "--cells", str(cells), "--dry-run"], fresh)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert f"0 cell(s) to run, {n} reused" in dry.stdout and not fresh.exists()
    again = _run(["--preset", "smoke", "--cells", str(cells)], fresh)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{n} finished cell(s) loaded" in again.stdout and f"0 new rows, {n} reused" in again.stdout
    table = json.loads((out / "leaderboard.json").read_text())
    rebuilt = json.loads((fresh / "leaderboard.json").read_text())
    for d in (table, rebuilt):
        d.pop("generated", None)
    assert rebuilt["leaderboard"] == table["leaderboard"] and rebuilt["comparisons"] == table["comparisons"]
    assert rebuilt["results"] == table["results"] and rebuilt["curves"] == table["curves"]
    files[0].write_text("{not json")
    bad = _run(["--preset", "smoke", "--cells", str(cells)], tmp_path / "third")
    assert bad.returncode == 2 and str(files[0]) in bad.stderr


def test_resume_after_kill(tmp_path):
    """kill -9 in the middle of a run; the rows committed before survive and are reused, the
    run completes, and the total equals an uninterrupted run's."""
    out = tmp_path / "lb"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = RUN + ["--preset", "smoke", "--envs", "webshop", "--out", str(out), "--jobs", "2"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env, start_new_session=True
    )
    db_path = out / "results.sqlite"
    deadline = time.time() + 300
    first = 0
    while time.time() < deadline and proc.poll() is None:
        if db_path.is_file():
            try:
                with sqlite3.connect(db_path, timeout=5) as db:
                    first = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.OperationalError:
                first = 0
            if first >= 3:  # random, expert, sft finished; grpo training under way
                break
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with sqlite3.connect(db_path) as db:
        before = dict(db.execute("SELECT key, created FROM results").fetchall())
    assert len(before) >= 3
    done = _run(["--preset", "smoke", "--envs", "webshop", "--jobs", "1"], out)  # the first run: 2 worker processes
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{len(before)} reused" in done.stdout
    with sqlite3.connect(db_path) as db:
        after = dict(db.execute("SELECT key, created FROM results").fetchall())
    assert len(after) == len(METHODS)
    assert all(after[k] == v for k, v in before.items())  # committed rows were not redone


def test_bad_preset_and_flags(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nenvs: {}\nmethods: [random]\ncolour: blue\n")
    proc = _run(["--preset", str(bad)], tmp_path / "o1")
    assert proc.returncode == 2 and "preset.colour: unknown key" in proc.stderr
    proc = _run(["--preset", "nope"], tmp_path / "o2")
    assert proc.returncode == 2 and "preset 'nope' not found" in proc.stderr
    proc = _run(["--preset", "smoke", "--methods", "dance"], tmp_path / "o3")
    assert proc.returncode == 2 and "unknown method 'dance'" in proc.stderr
    env = {k: v for k, v in os.environ.items() if k != "SEARCHQA_DATA"}
    proc = subprocess.run(
        RUN + ["--preset", "paper", "--envs", "searchqa", "--out", str(tmp_path / "o4")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 2 and "SEARCHQA_DATA" in proc.stderr


def test_eval_only_with_an_openai_compatible_endpoint(tmp_path, chat_server):
    """Any endpoint can go on the board; its API key never reaches the results."""
    from conftest import ChatHandler as handler

    url = chat_server
    handler.plan = [{"content": "<think>x</think><action>look</action>"}] * 200
    secret = "sk-test-SECRET-123"
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"kind: openai\nname: my-model\nmodel: my-model\nbase_url: {url}\napi_key_env: LB_TEST_KEY\n")
    env = {**os.environ, "LB_TEST_KEY": secret}
    out = tmp_path / "out"
    proc = subprocess.run(
        RUN + ["--preset", "smoke", "--envs", "alfworld", "--eval-only", "--policy", str(policy), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert [(r["env"], r["method"]) for r in rows] == [("alfworld", "my-model")]
    assert float(rows[0]["success_mean"]) == 0.0  # 'look' forever never wins
    assert any(s["auth"] == f"Bearer {secret}" for s in handler.seen)
    for f in out.iterdir():
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("name", ["smoke", "default", "paper"])
def test_presets_load(name, monkeypatch):
    sys.path.insert(0, str(ROOT))
    from leaderboards.run import load_preset

    monkeypatch.setenv("ALFWORLD_DATA", "/data/alfworld")
    p = load_preset(name)
    assert p["name"] == name and set(p["envs"]) == set(ENVS)
    assert {e["env_id"] for e in p["envs"].values()} == {
        "prover/SearchQA-v0",
        "prover/WebShop-v0",
        "prover/ALFWorld-v0",
    }
    if name == "paper":
        assert p["envs"]["alfworld"]["eval_kwargs"]["data"] == "/data/alfworld/json_2.1.1"


def test_superseded_rows_are_not_averaged_in(tmp_path):
    sys.path.insert(0, str(ROOT))
    from leaderboards.db import ResultsDB

    db = ResultsDB(tmp_path / "r.sqlite")
    base = {
        "preset": "p",
        "env": "alfworld",
        "env_id": "prover/ALFWorld-v0",
        "method": "grpo",
        "split": "test",
        "seed": 0,
        "commit_id": None,
        "episodes": 4,
        "score": 0.0,
        "groups": {},
        "env_steps": 1,
        "tokens": 1,
        "invalid_actions": 0,
        "train_seconds": 0.0,
        "eval_seconds": 0.0,
        "extra": {},
    }
    db.put({**base, "key": "old", "config_hash": "a", "success": 0.25, "created": 1.0})
    db.put({**base, "key": "new", "config_hash": "b", "success": 0.75, "created": 2.0})
    rows = db.results("p")
    assert [(r["key"], r["success"]) for r in rows] == [("new", 0.75)]
    stats = {"groups": 3, "proposals": 3, "hits": 1, "precision": 1 / 3}
    db.put_precision("k1", "p", "alfworld", "random", "a", stats)
    db.put_precision("k2", "p", "alfworld", "random", "b", {**stats, "hits": 3, "precision": 1.0})
    assert [p["precision"] for p in db.precisions("p")] == [1.0]
    db.put_precision("k3", "p", "alfworld", "random", "c", {**stats, "mean_a_seg": 0.25, "agreement": 0.5})
    assert db.precisions("p")[0]["mean_a_seg"] == 0.25 and db.precisions("p")[0]["agreement"] == 0.5
    db.close()


def test_a_results_file_from_before_verified_precision_opens_and_takes_new_rows(tmp_path):
    sys.path.insert(0, str(ROOT))
    from leaderboards.db import ResultsDB

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(str(path))
    conn.execute(
        "CREATE TABLE judge_precision (key TEXT PRIMARY KEY, preset TEXT NOT NULL, env TEXT NOT NULL, "
        "judge TEXT NOT NULL, config_hash TEXT NOT NULL, groups INTEGER NOT NULL, proposals INTEGER NOT NULL, "
        "hits INTEGER NOT NULL, precision REAL, created REAL NOT NULL)"
    )
    conn.execute("INSERT INTO judge_precision VALUES ('old', 'p', 'webshop', 'oracle', 'h', 2, 2, 2, 1.0, 1.0)")
    conn.commit()
    conn.close()
    db = ResultsDB(path)
    assert db.precisions("p") == [
        {"env": "webshop", "judge": "oracle", "groups": 2, "proposals": 2, "hits": 2, "precision": 1.0}
    ]
    db.put_precision(
        "new",
        "p",
        "webshop",
        "oracle",
        "h2",
        {"groups": 2, "proposals": 2, "hits": 1, "precision": 0.5, "agreement": 1.0},
    )
    assert db.precisions("p")[0]["agreement"] == 1.0
    db.close()


def test_report_states_paired_differences_with_intervals_and_says_when_within_noise():
    sys.path.insert(0, str(ROOT))
    from leaderboards.report import aggregate, comparisons

    def row(env, method, wins, seed=0):
        outcomes = {f"t{i}": w for i, w in enumerate(wins)}
        return {
            "env": env,
            "method": method,
            "seed": seed,
            "success": sum(wins) / len(wins),
            "score": 0.0,
            "groups": {},
            "episodes": len(wins),
            "extra": {"outcomes": outcomes},
            "train_seconds": 0.0,
            "eval_seconds": 0.0,
            "tokens": 0,
            "env_steps": 0,
        }

    n = 200
    rows = [
        row("a", "sft", [i % 2 for i in range(n)]),
        row("a", "grpo", [1] * n),  # +50 points, but one seed
        row("a", "prover", [1] * (n - 1) + [0]),
        row("b", "grpo", [i % 2 for i in range(n)]),
        row("b", "prover", [i % 2 for i in range(n)]),
    ]
    comps = {(c["a"], c["b"], c["env"]): c for c in comparisons(rows, ["a", "b"])}
    one = comps[("grpo", "sft", "a")]
    # 200 tasks say the two checkpoints differ (eval noise) but nothing about another training run
    assert one["verdict"].startswith("no claim: 1 training seed (+50.0 points)") and one["low"] is None
    assert one["eval_low"] > 0.4
    # three seeds each: the interval is over seeds
    rows3 = []
    for seed, (g, p) in enumerate([(100, 110), (104, 110), (98, 109)]):
        rows3 += [row("a", "grpo", [1] * g + [0] * (n - g), seed), row("a", "prover", [1] * p + [0] * (n - p), seed)]
        rows3 += [row("b", "grpo", [1] * g + [0] * (n - g), seed), row("b", "prover", [1] * g + [0] * (n - g), seed)]
    comps3 = {(c["a"], c["b"], c["env"]): c for c in comparisons(rows3, ["a", "b"])}
    assert comps3[("prover", "grpo", "a")]["seeds"] == 3 and comps3[("prover", "grpo", "a")]["verdict"].startswith(
        "higher"
    )
    assert comps3[("prover", "grpo", "b")]["diff"] == 0.0 and comps3[("prover", "grpo", "b")]["verdict"].startswith(
        "within noise"
    )
    pooled = comps3[("prover", "grpo", "all envs")]  # a seed's difference: the mean over its envs
    assert pooled["seeds"] == 3 and pooled["per_seed"][0] == pytest.approx(0.025)
    assert ("grpo", "sft", "all envs") not in comps  # pooled only over >= 2 envs
    agg = {(a["env"], a["method"]): a for a in aggregate(rows)}
    assert agg[("a", "sft")]["success_se"] == pytest.approx(math.sqrt(0.25 / n))
    assert agg[("a", "grpo")]["success_se"] == 0.0


def test_preset_variants_name_a_method_with_its_own_judge_and_overrides(tmp_path):
    import argparse

    import yaml

    sys.path.insert(0, str(ROOT))
    from leaderboards.run import PresetError, _train_config, load_preset, plan_methods

    preset = yaml.safe_load((ROOT / "leaderboards" / "presets" / "smoke.yaml").read_text())
    preset["variants"] = {
        "prover_oracle": {"method": "prover", "judge": {"kind": "pivot", "side": "won"}},
        "prover_exhaustive": {"method": "prover", "judge": {"kind": "exhaustive"}, "train": {"reverify": True}},
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    loaded = load_preset(str(path))
    args = argparse.Namespace(methods=["grpo", "prover_oracle", "prover_exhaustive"], ablations=False)
    assert plan_methods(loaded, args) == ["grpo", "prover_oracle", "prover_exhaustive"]
    env = loaded["envs"]["searchqa"]
    cfg = _train_config(loaded, env, "prover_exhaustive", 0, tmp_path / "r", None, {"kind": "first_divergence"})
    assert cfg.method == "prover" and cfg.judge == {"kind": "exhaustive"} and cfg.reverify is True
    cfg = _train_config(loaded, env, "prover_oracle", 0, tmp_path / "r", None, {"kind": "first_divergence"})
    assert cfg.judge["kind"] == "pivot" and cfg.reverify is False
    for bad, match in (
        ({"x": {"method": "nope"}}, r"variants.x.method = 'nope': not a trained method"),
        ({"x": {"method": "prover", "judgee": {}}}, "variants.x.judgee: unknown key; did you mean 'judge'"),
        ({"grpo": {"method": "prover"}}, "the name is a method's"),
    ):
        path.write_text(yaml.safe_dump({**preset, "variants": bad}))
        with pytest.raises(PresetError, match=match):
            load_preset(str(path))


def test_the_credit_preset_plans_every_arm_from_its_shipped_bases(tmp_path):
    import argparse

    sys.path.insert(0, str(ROOT))
    from leaderboards.run import _train_config, load_preset, plan_methods, shipped_base

    preset = load_preset("credit")
    methods = plan_methods(preset, argparse.Namespace(methods=None, ablations=False))
    assert {"grpo", "grpo_matched", "prover", "prover_oracle", "prover_random", "prover_exhaustive"} <= set(methods)
    for env_name, env in preset["envs"].items():
        assert shipped_base(env_name, env)["model_dir"]  # the block's setting is its base's
        oracle = _train_config(preset, env, "prover_oracle", 0, tmp_path, None, preset["judge"])
        assert oracle.judge["kind"] == "pivot" and oracle.max_verified_groups is None
        assert oracle.value_before == "continuations"
        assert _train_config(preset, env, "prover_oracle_b4", 0, tmp_path, None, preset["judge"]).beta == 4.0


def test_the_credit_long_preset_plans_its_arms_from_its_shipped_base(tmp_path):
    import argparse

    sys.path.insert(0, str(ROOT))
    from leaderboards.run import _train_config, load_preset, plan_methods, shipped_base

    preset = load_preset("credit_long")
    methods = plan_methods(preset, argparse.Namespace(methods=None, ablations=False))
    assert {"sft", "grpo", "grpo_matched", "prover", "prover_oracle"} <= set(methods)
    for env_name, env in preset["envs"].items():
        assert shipped_base(env_name, env)["model_dir"]  # the block's setting is its base's
        prover = _train_config(preset, env, "prover", 0, tmp_path, None, preset["judge"])
        assert prover.judge["kind"] == "last_shared_state" and prover.beta == 4.0
        assert prover.lr == 5e-5  # the pilot's go (GRPO collapsed at 1e-4)
        oracle = _train_config(preset, env, "prover_oracle", 0, tmp_path, None, preset["judge"])
        assert oracle.judge["kind"] == "pivot" and oracle.max_verified_groups is None
        assert oracle.value_before == "continuations"


CREDIT_BLOCKS = [
    ("credit", "alfworld_pivot"),
    ("credit", "webshop"),
    ("credit_long", "alfworld_pivot_long"),
]


@pytest.mark.parametrize("preset, block", CREDIT_BLOCKS)
def test_every_env_block_of_the_credit_presets_records_its_pivot(preset, block):
    """The credit presets' settings, through gym.make with the block's own kwargs: the expert's episode ends
    with info["pivot_step"], the index of a step it took (train and eval kwargs alike)."""
    sys.path.insert(0, str(ROOT))
    import gymnasium as gym

    from leaderboards.run import load_preset

    assert set(load_preset(preset)["envs"]) == {b for p, b in CREDIT_BLOCKS if p == preset}  # every block
    env_cfg = load_preset(preset)["envs"][block]
    for kwargs in (env_cfg["train_kwargs"], env_cfg["eval_kwargs"]):
        env = gym.make(env_cfg["env_id"], **kwargs)
        env.reset(seed=0)
        steps, done, info = 0, False, {}
        while not done:
            _, _, term, trunc, info = env.step(env.unwrapped.expert_action())
            steps, done = steps + 1, term or trunc
        assert info["won"] and isinstance(info["pivot_step"], int) and 0 <= info["pivot_step"] < steps
        env.close()
