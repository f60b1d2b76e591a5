"""One validation pass at load (leaderboards/validate.py): every late or silent preset mistake found by
a new user is an error before any model loads, naming its key path, the value and the nearest valid
name, with exit code 2 and no traceback; a cell that fails in a worker is recorded and the others go on."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, str(ROOT / "leaderboards" / "run.py")]
SMOKE = yaml.safe_load((ROOT / "leaderboards" / "presets" / "smoke.yaml").read_text())


def _preset(tmp_path, edit) -> Path:
    preset = yaml.safe_load(yaml.safe_dump(SMOKE))  # a deep copy
    edit(preset)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(preset))
    return path


def _set(path: str, value):
    def edit(preset):
        *keys, last = path.split(".")
        node = preset
        for k in keys:
            node = node.setdefault(k, {})
        node[last] = value

    return edit


# each mistake of the issue, the key path the error must name, and the suggestion it must make
MISTAKES = [
    ("judge.kind", "first_divergnce", "judge.kind = 'first_divergnce'", "did you mean 'first_divergence'"),
    ("judge.side", "wn", "judge.side = 'wn'", "did you mean 'won'"),
    ("backend", "hff", "backend = 'hff'", "did you mean 'hf'"),
    ("eval", {"episode": 4}, "eval.episode: unknown key", "did you mean 'episodes'"),
    ("judge_precision", {"task": 3}, "judge_precision.task: unknown key", "did you mean 'tasks'"),
    ("seeds", 0, "seeds = 0", "a non-empty list of integers"),
    (
        "envs.webshop.format",
        {"history_lenght": 1},
        "envs.webshop.format.history_lenght",
        "did you mean 'history_length'",
    ),
    ("envs.alfworld.env_id", "prover/ALFWorl-v0", "envs.alfworld.env_id", "did you mean 'prover/ALFWorld-v0'"),
    ("envs.searchqa.train_kwargs.max_turn", 1, "envs.searchqa.train_kwargs.max_turn", "did you mean 'max_turns'"),
    ("envs.webshop.eval_kwargs.split", "tst", "envs.webshop.eval_kwargs: gym.make", "split='tst'"),
    ("train.lrr", 1.0, "train.lrr: unknown key", "did you mean 'lr'"),
    ("train.agg", "tokenmean", "agg='tokenmean'", "token-mean"),
    ("judge_precision.kinds", ["oracel"], "judge_precision.kinds[0] = 'oracel'", "did you mean 'oracle'"),
    ("methods", ["random", "gpro"], "methods[1] = 'gpro'", "did you mean 'grpo'"),
]


@pytest.mark.parametrize("key,value,where,hint", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_an_error_at_load_naming_key_and_fix(key, value, where, hint, tmp_path, capsys):
    from leaderboards.run import main

    out = tmp_path / "out"
    assert main(["--preset", str(_preset(tmp_path, _set(key, value))), "--out", str(out), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert where in err and hint in err, err
    assert not (out / "results.sqlite").exists()  # nothing ran


def test_every_mistake_of_a_preset_is_listed_in_one_message_without_traceback(tmp_path):
    def edit(preset):
        for key, value, _, _ in MISTAKES[:9]:
            _set(key, value)(preset)

    proc = subprocess.run(
        [*RUN, "--preset", str(_preset(tmp_path, edit)), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "9 problem(s)" in proc.stderr, proc.stderr
    for _, _, where, hint in MISTAKES[:9]:
        assert where in proc.stderr and hint in proc.stderr


def test_every_unset_variable_of_the_paper_preset_is_named_at_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ALFWORLD_DATA", "WEBSHOP_DATA", "SEARCHQA_DATA")}
    proc = subprocess.run(
        [*RUN, "--preset", "paper", "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for var in ("ALFWORLD_DATA", "WEBSHOP_DATA", "SEARCHQA_DATA"):
        assert f"${var}" in proc.stderr, proc.stderr


def test_a_bad_judge_flag_and_method_flag_are_named(tmp_path, capsys):
    from leaderboards.run import main

    code = main(
        ["--preset", "smoke", "--judge", "{kind: orcale}", "--methods", "grpo", "provr", "--out", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--judge.kind = 'orcale'" in err and "did you mean 'oracle'" in err
    assert "--methods: unknown method 'provr'" in err and "did you mean 'prover'" in err


def test_shipped_presets_pass_the_checks():
    from leaderboards.run import check_preset, load_preset

    for path in sorted((ROOT / "leaderboards" / "presets").glob("*.yaml")):
        preset = load_preset(str(path))  # the load-time checks
        check_preset(preset, methods=list(preset["methods"]) + list(preset["ablations"]))


def test_judge_and_backend_checks_do_not_build_models():
    import judges
    from agents.backends import check_backend

    assert judges.check({"kind": "hf", "model_path": "/nowhere", "max_turn_chars": 200, "side": "any"}) == []
    assert judges.check({"kind": "hf", "model_path": "/nowhere", "temprature": 0.5})[0].startswith(
        "judge.temprature: unknown key; did you mean 'temperature'"
    )
    assert "agentic judge needs backend" in judges.check({"kind": "agentic"})[0]
    assert check_backend({"kind": "opneai"})[0].startswith("backend.kind = 'opneai'")


def test_a_failing_cell_in_a_worker_is_recorded_and_the_others_finish(tmp_path):
    """A variant whose judge model is broken (a folder with an empty config.json: it passes the preflight,
    and fails to load) fails in its worker; random and expert still record their rows, the failure is a
    row of the errors table and a line of the report, exit code 1."""
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "config.json").write_text("{}")

    def edit(preset):
        preset["variants"] = {
            "prover_nomodel": {"method": "prover", "judge": {"kind": "hf", "model_path": str(tmp_path / "none")}}
        }
        preset["methods"] = ["random", "expert", "prover_nomodel"]
        preset["judge_precision"] = {"tasks": 0}
        preset["envs"] = {"searchqa": preset["envs"]["searchqa"]}

    out = tmp_path / "out"
    proc = subprocess.run(
        [*RUN, "--preset", str(_preset(tmp_path, edit)), "--out", str(out), "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "prover_nomodel" in proc.stderr and "FAILED" in proc.stderr
    with sqlite3.connect(out / "results.sqlite") as db:
        methods = {r[0] for r in db.execute("SELECT method FROM results")}
        errors = db.execute("SELECT method, error, trace FROM errors").fetchall()
    assert methods == {"random", "expert"}
    assert [e[0] for e in errors] == ["prover_nomodel"] and "Traceback" in errors[0][2]
    assert "Cells that failed" in (out / "leaderboard.md").read_text()


def _preflight_preset(tmp_path, url):
    def edit(preset):
        preset["model"] = "Qwen/Qwen3.5-2B"
        preset["judge"] = {"kind": "hf", "model_path": str(tmp_path / "no-judge"), "side": "won"}
        for key in ("train_kwargs", "eval_kwargs"):
            preset["envs"]["searchqa"][key].update(retriever="http", search_url=url)

    return _preset(tmp_path, edit)


def test_the_run_fails_in_seconds_naming_each_missing_model_and_server_with_its_fix(tmp_path, capsys):
    """The paper path's late failures (a hub model refused after the baselines ran, an HTTP retriever down
    as a traceback in judge precision), now all named before anything runs, each with its command."""
    import socket
    import time

    from leaderboards.run import main

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    t = time.time()
    code = main(["--preset", str(_preflight_preset(tmp_path, url)), "--out", str(tmp_path / "o"), "--jobs", "1"])
    err = capsys.readouterr().err
    assert code == 2 and time.time() - t < 30
    assert "huggingface-cli download Qwen/Qwen3.5-2B --local-dir ~/models/Qwen3.5-2B" in err
    assert f"judge.model_path = '{tmp_path / 'no-judge'}': no such directory" in err
    # one line for the server train and eval share, with the command that starts it
    assert err.count("the retrieval server does not answer") == 1 and "prover-gym-serve-retriever" in err
    assert "envs.searchqa.train_kwargs.search_url, envs.searchqa.eval_kwargs.search_url" in err
    assert not (tmp_path / "o" / "results.sqlite").exists()


def test_a_server_that_answers_and_local_models_pass_the_preflight(tmp_path):
    import threading
    from http.server import ThreadingHTTPServer

    from test_retrievers import _Flaky

    from leaderboards.run import check_preset, load_preset

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        _Flaky.plan = []
        preset = load_preset(str(_preflight_preset(tmp_path, f"http://127.0.0.1:{srv.server_address[1]}")))
        for name in ("model", "judge"):
            (tmp_path / name).mkdir()
            (tmp_path / name / "config.json").write_text("{}")
        preset["model"] = str(tmp_path / "model")
        preset["judge"]["model_path"] = str(tmp_path / "judge")
        check_preset(preset, envs=["searchqa"], methods=["prover"], make_envs=True, require_set=True)
    finally:
        srv.shutdown()


def test_vllm_users_are_told_to_install_it_or_find_a_gpu(monkeypatch):
    import importlib.util

    from leaderboards.validate import _vllm_problems

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    (problem,) = _vllm_problems(["backend", "judge"])
    assert problem.startswith("backend, judge use vLLM") and "pip install 'prover-gym[gpu]'" in problem


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    """--dry-run checks the preset and lists the cells a run would execute (and reuse), then stops."""
    out = tmp_path / "out"
    args = ["--preset", "smoke", "--envs", "searchqa", "--methods", "random", "expert", "--out", str(out)]
    proc = subprocess.run([*RUN, *args, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 cell(s) to run, 0 reused" in proc.stdout and "searchqa  seed 0  expert" in proc.stdout
    assert not out.exists()
    assert subprocess.run([*RUN, *args, "--jobs", "1"], capture_output=True, timeout=200).returncode == 0
    again = subprocess.run([*RUN, *args, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert "0 cell(s) to run, 2 reused" in again.stdout
    bad = subprocess.run([*RUN, *args, "--dry-run", "--methods", "grp"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "did you mean 'grpo'" in bad.stderr  # the checks still run
    # the plan is an object: its cells' keys are the keys of the rows the run recorded
    sys.path.insert(0, str(ROOT))
    from leaderboards.db import ResultsDB
    from leaderboards.run import make_plan, parser

    plan = make_plan(parser().parse_args(args))
    assert [(c.env, c.method) for c in plan.cells] == [("searchqa", "random"), ("searchqa", "expert")]
    db = ResultsDB(out / "results.sqlite")
    try:
        assert all(db.get(c.key) is not None for c in plan.cells) and len(db.results("smoke")) == 2
        assert make_plan(parser().parse_args(args), db).reused == [("searchqa", 0, "random"), ("searchqa", 0, "expert")]
    finally:
        db.close()
