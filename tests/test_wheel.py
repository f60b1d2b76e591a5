"""prover-gym as a user installs it: the wheel, built here, installed into a fresh venv, and run from a
folder outside the repo. The smoke leaderboard, the default preset's shipped-base row, training by a
shipped config's name and every example script must work there, with results in the user's folder and
nothing read from (or written into) the checkout or the installed package.

The fresh venv gets prover-gym only from the wheel; its third-party dependencies come from the test
venv's site-packages through a path entry (installing torch and friends again would need the network),
which adds that folder to sys.path without running its .pth files, so the checkout's editable install
stays invisible. The test asserts that every prover-gym package is imported from the fresh venv.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("prover_gym", "agents", "judges", "trainers", "leaderboards")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    pytest.importorskip("hatchling", reason="the wheel is built offline with hatchling (pip install -e '.[dev]')")
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("prover_gym-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    user = work / "user"  # the user's working folder, outside the repo
    user.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PROVER_GYM_BASES", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return {"python": python, "bin": env_dir / "bin", "site": site, "user": user, "env": env, "wheel": wheel}


def _run(inst, args, timeout=600):
    proc = subprocess.run(args, cwd=inst["user"], env=inst["env"], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_every_package_comes_from_the_wheel_with_its_data_and_provenance(installed):
    code = (
        "import json, prover_gym, agents, judges, trainers, leaderboards\n"
        "from prover_gym.resources import shipped, source_root\n"
        "print(json.dumps({'files': [m.__file__ for m in (prover_gym, agents, judges, trainers, leaderboards)],\n"
        "  'bases': str(shipped('bases')), 'configs': str(shipped('configs')), 'source': str(source_root()),\n"
        "  'provenance': prover_gym.provenance()}))"
    )
    import json

    info = json.loads(_run(installed, [str(installed["python"]), "-c", code]).stdout)
    site = str(installed["site"])
    assert all(f.startswith(site) for f in info["files"]), info["files"]
    assert info["source"] == "None"  # not a checkout
    assert info["bases"].startswith(site) and (Path(info["bases"]) / "searchqa" / "recipe.json").is_file()
    assert (Path(info["configs"]) / "train" / "searchqa_tiny_grpo.yaml").is_file()
    prov = info["provenance"]
    assert prov["source"] == "wheel" and prov["version"] == "0.1.0" and len(prov["commit"] or "") == 40


def test_the_smoke_leaderboard_and_a_shipped_base_row_run_from_the_users_folder(installed):
    user = installed["user"]
    lb = str(installed["bin"] / "prover-gym-leaderboard")
    # each env's engine and data from the wheel (expert), and a training cell in a worker process (grpo); the
    # other methods' paths are the same code in the package, run from the checkout by tests/test_leaderboard.py
    proc = _run(installed, [lb, "--preset", "smoke", "--methods", "expert", "grpo", "--jobs", "2"])
    out = user / "prover-gym-results"  # the default --out: where the user is
    assert (out / "leaderboard.md").is_file() and (out / "results.sqlite").is_file(), proc.stdout[-2000:]
    assert "6 new rows" in proc.stdout  # 3 envs x 2 methods
    # the default preset's `sft` row is the shipped base, found in the installed package
    proc = _run(installed, [lb, "--envs", "searchqa", "--methods", "sft", "--out", "board"])
    assert "searchqa  sft" in proc.stdout and (user / "board" / "leaderboard.md").is_file()
    import sqlite3

    with sqlite3.connect(user / "board" / "results.sqlite") as db:
        version, commit, extra = db.execute("SELECT version, commit_id, extra FROM results").fetchone()
    assert version == "0.1.0" and commit and "searchqa" in extra
    assert not list(installed["site"].glob("leaderboards/results*"))  # nothing written into the package


def test_train_by_a_shipped_config_name(installed):
    train = str(installed["bin"] / "prover-gym-train")
    proc = _run(
        installed,
        [
            train,
            "--config",
            "searchqa_tiny_grpo",
            "iterations=1",
            "tasks_per_iteration=2",
            "group_size=2",
            "max_tokens=16",
            "sft_steps=2",
            "sft_episodes=2",
            "probe_kwargs={}",
            "out_dir=run1",
        ],
    )
    assert '"iteration": 1' in proc.stdout
    assert (installed["user"] / "run1" / "metrics.jsonl").is_file()
    # the README's repo path works too, from another folder: a shipped config found by its name
    proc = subprocess.run(
        [train, "--config", "configs/train/searchqa_tiny_grpoo.yaml"],
        cwd=installed["user"],
        env=installed["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "did you mean 'searchqa_tiny_grpo'" in proc.stderr


def test_every_example_runs_from_a_copy_in_the_users_folder(installed, chat_server):
    from conftest import ChatHandler

    examples = installed["user"] / "examples"
    shutil.copytree(ROOT / "examples", examples)
    py = str(installed["python"])
    ran = set()
    for script in sorted(examples.glob("*.py")):
        args = [py, str(script)]
        if script.stem == "evaluate_openai_model":
            ChatHandler.plan = [{"content": "<answer>none</answer>"}] * 100
            args += ["--base-url", chat_server, "--model", "m", "--episodes", "1"]
        if script.stem == "train_prover_tiny":
            args += ["run_example"]
        _run(installed, args)
        ran.add(script.stem)
    assert ran == {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert (installed["user"] / "run_example" / "metrics.jsonl").is_file()
