"""The console commands of [project.scripts] and the `python ...` forms they stand for, from any directory."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCRIPTS = [
    "prover-gym-leaderboard",
    "prover-gym-train",
    "prover-gym-build-base",
    "prover-gym-serve-retriever",
    "prover-gym-dense-index",
    "prover-gym-webshop-view",
    "prover-gym-alfworld-generate",
    "prover-gym-inspect",
    "prover-gym-data",
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_console_scripts_run(script, tmp_path):
    exe = BIN / script
    if not exe.exists():
        pytest.skip(f"{script} is not installed in this environment (pip install -e . creates it)")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout


@pytest.mark.parametrize("cmd", [["leaderboards/run.py"], ["-m", "trainers.train"]])
def test_python_forms_work_from_anywhere_without_path_edits(cmd, tmp_path):
    """No sys.path edits in the packages: the installed project is what the scripts import."""
    target = [str(ROOT / cmd[0])] if cmd[0].endswith(".py") else cmd
    args = [sys.executable, *target, "--help"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    for package in ("trainers/train.py", "leaderboards/run.py"):
        assert "sys.path.insert" not in (ROOT / package).read_text()
