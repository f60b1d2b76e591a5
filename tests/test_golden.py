"""Golden runs: a short fixed ProVer run per env gives the metrics recorded in
``tests/fixtures/golden_runs.json``, so a speed change that alters results is caught.

What must match, and why:
- the rollout digest of every iteration (a hash of every generated token id) and the sampled success:
  exactly. Tokens are integer choices (argmax of logits plus keyed noise); a change that moves them
  changes the experiment, whatever its size.
- the loss and ProVer's verified / credited segment counts: the loss to a relative 1e-5 or an absolute
  1e-7, the counts exactly. The tolerance is for a kernel that sums in another order (a prompt prefix
  encoded once for a group, packed sequences, a fused attention): float32 reassociation moves the
  sampler's log-probs by ~3e-6 (agents/backends/decode.py). At an update whose ratios are ~1 the loss
  is ~-mean(A * ratio), a cancellation of terms of size |A| ~ 1 to ~1e-5, so its error is absolute
  (~1e-8 measured), not relative.
- how far training moved the weights (the L2 norm of trained - base after the run), to a relative
  1e-4: another summation order moves it by ~1e-6 relative, a real change to the advantages or the
  objective by whole updates (lr 1e-4 a step).

Float results are bitwise only for the same kernels: the fixture records the torch version and CPU
capability it was made with, and the test compares on a machine with both (the development and CI
machines); elsewhere it says why it does not apply. Re-record, after a change that is meant to alter
results, with ``python tests/test_golden.py --record`` and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "golden_runs.json"
ENVS = ("searchqa", "webshop", "alfworld")
SMALL = {
    "iterations": 2,
    "tasks_per_iteration": 2,
    "group_size": 4,
    "continuations": 2,
    "max_verified_groups": 2,
    "probe_tasks": 0,
    "progress": False,
    "checkpoint_every": 100,
}


def machine() -> dict:
    import torch

    return {"torch": torch.__version__, "cpu": torch.backends.cpu.get_cpu_capability(), "threads": 1}


def golden_run(env_name: str, out_dir: Path) -> list[dict]:
    """2 iterations of `prover` from the env's shipped base, the default preset's settings made small."""
    import torch

    from leaderboards.run import _train_config, load_preset, shipped_base
    from trainers.train import Trainer

    torch.set_num_threads(1)
    preset = load_preset("default")
    preset = {**preset, "train": {**preset["train"], **SMALL}}
    env_cfg = preset["envs"][env_name]
    base = shipped_base(env_name, env_cfg)
    cfg = _train_config(preset, env_cfg, "prover", 0, out_dir, base["model_dir"], preset["judge"])
    trainer = Trainer(cfg)
    rows = trainer.run()
    moved = update_norm(trainer.model, base["model_dir"])
    trainer.close()
    out = [
        {
            "rollout_digest": r["rollout_digest"],
            "success": r["success"],
            "loss": r["loss"],
            "verified": r["prover/verified_segments"],
            "credited": r["prover/credited_segments"],
        }
        for r in rows
    ]
    out[-1]["update_norm"] = moved
    return out


def update_norm(model, base_dir) -> float:
    """How far training moved the weights: the L2 norm of (trained - base) over every parameter."""
    import torch
    from transformers import AutoModelForCausalLM

    base = dict(AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).named_parameters())
    total = 0.0
    for name, p in model.named_parameters():
        total += float(((p.detach().double() - base[name].detach().double()) ** 2).sum())
    return total**0.5


@pytest.mark.parametrize("env_name", ENVS)
def test_golden_run_gives_the_recorded_metrics(env_name, tmp_path):
    recorded = json.loads(FIXTURE.read_text())
    if recorded["machine"]["torch"] != machine()["torch"] or recorded["machine"]["cpu"] != machine()["cpu"]:
        pytest.skip(f"golden runs were recorded with {recorded['machine']}; this machine is {machine()}")
    rows = golden_run(env_name, tmp_path / "run")
    want = recorded["runs"][env_name]
    assert [r["rollout_digest"] for r in rows] == [w["rollout_digest"] for w in want]
    for got, exp in zip(rows, want):
        assert got["success"] == exp["success"]
        assert (got["verified"], got["credited"]) == (exp["verified"], exp["credited"])
        assert got["loss"] == pytest.approx(exp["loss"], rel=1e-5, abs=1e-7)
    # the learner's whole effect: a change to advantages or the objective moves the weights by ~lr (1e-4)
    # per update; another summation order by ~1e-6 of that
    assert rows[-1]["update_norm"] == pytest.approx(want[-1]["update_norm"], rel=1e-4)


def test_golden_runs_cover_every_env_and_verify_something():
    recorded = json.loads(FIXTURE.read_text())
    assert set(recorded["runs"]) == set(ENVS)
    assert sum(r["verified"] for runs in recorded["runs"].values() for r in runs) > 0  # ProVer's path is exercised


if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        runs = {e: golden_run(e, Path(tmp) / e) for e in ENVS}
    FIXTURE.write_text(json.dumps({"machine": machine(), "settings": SMALL, "runs": runs}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
