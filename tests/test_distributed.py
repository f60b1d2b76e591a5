"""Data-parallel training (trainers/distributed.py) with 2 CPU processes (torchrun, gloo): one learner
update equals the single-process update; a 2-process run writes one metrics stream and a checkpoint
that resumes exactly after kill -9."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import metric_rows

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "env_kwargs={split: train, max_turns: 1}",
    "tasks_per_iteration=4",
    "group_size=2",
    "max_tokens=6",
    "sft_steps=3",
    "sft_episodes=2",
]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
PARAM_TOL = 1e-5  # float32 sums in another order (two ranks' gradients all-reduced)


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def fixed_batch(tmp_path_factory, bundled_dir):
    """Rollouts of the tiny model on 4 tasks x 2 (4 GRPO groups) with fixed advantages (+1 / -1 in each
    group, one trajectory left out), pickled with a learner config per case."""
    from agents.tiny_model import tiny_model_dir
    from trainers.config import load_config
    from trainers.train import Trainer

    root = tmp_path_factory.mktemp("dist")
    trainer = Trainer(load_config(None, SMALL + ["sft_steps=0", "temperature=1.5", f"out_dir={root / 'collect'}"]))
    groups = trainer.collect()
    trainer.close()
    trajectories = [t for g in groups for t in g]
    advantages = [[1.0 if j % 2 == 0 else -1.0] * len(t.turns) for g in groups for j, t in enumerate(g)]
    advantages[3] = None  # left out, as a zero-variance group's trajectory is
    out = {}
    for agg, updates in CASES:
        cfg = load_config(
            None,
            SMALL
            + [
                "method=grpo",
                f"updates_per_epoch={updates}",
                f"agg={agg}",
                "lr=1e-3",
                "minibatch_size=1",
                f"out_dir={root / 'learn'}",
            ],
        )
        path = root / f"batch-{agg}-{updates}.pkl"
        path.write_bytes(
            pickle.dumps(
                {
                    "cfg": cfg,
                    "trajectories": trajectories,
                    "advantages": advantages,
                    "groups": [k for k, g in enumerate(groups) for _ in g],
                    "model_dir": str(tiny_model_dir()),
                }
            )
        )
        out[agg, updates] = path
    return out


# (agg, updates per pass): with 4 updates each group is its own update, so each rank sits out half of
# them (a zero-weight pass keeps the all-reduce in step); minibatch_size=1 accumulates over micro-batches
CASES = [("token-mean", 2), ("traj-mean", 2), ("token-mean", 4)]


@pytest.fixture(scope="module")
def updated(fixed_batch, tmp_path_factory):
    """Every case's update in one process and on two (one worker invocation each: the start-up once)."""
    worker = str(ROOT / "tests" / "helpers" / "dist_learner_worker.py")
    root = tmp_path_factory.mktemp("updated")
    outs = {case: (root / f"one-{k}.pt", root / f"two-{k}.pt") for k, case in enumerate(CASES)}
    ones = [str(a) for case in CASES for a in (fixed_batch[case], outs[case][0])]
    twos = [str(a) for case in CASES for a in (fixed_batch[case], outs[case][1])]
    one = subprocess.run(
        [sys.executable, worker, *ones], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert one.returncode == 0, one.stderr[-3000:]
    run = subprocess.run(TORCHRUN + [worker, *twos], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return outs


@pytest.mark.parametrize("agg, updates", CASES)
def test_one_update_on_two_processes_equals_one_process(updated, agg, updates):
    one, two = updated[agg, updates]
    a, b = torch.load(one), torch.load(two)
    assert a["world"] == 1 and b["world"] == 2
    from transformers import AutoModelForCausalLM

    from agents.tiny_model import tiny_model_dir

    start = {k: v.detach() for k, v in AutoModelForCausalLM.from_pretrained(str(tiny_model_dir())).named_parameters()}
    moved = max(float((a["params"][k] - start[k]).abs().max()) for k in a["params"])
    diff = max(float((a["params"][k] - b["params"][k]).abs().max()) for k in a["params"])
    assert moved > 100 * PARAM_TOL  # the update did something
    assert diff < PARAM_TOL, (diff, moved)
    assert a["logs"]["updates"] == b["logs"]["updates"] == updates and a["logs"]["samples"] == b["logs"]["samples"]
    for key in ("loss", "clip_ratio", "approx_kl_old"):
        assert abs(a["logs"][key] - b["logs"][key]) < 1e-5, key


def _train(out, *extra, resume=False, nproc=2, popen=False):
    cmd = (TORCHRUN if nproc == 2 else [sys.executable]) + ["-m", "trainers.train", *SMALL, f"out_dir={out}", *extra]
    cmd += ["--resume"] if resume else []
    if popen:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
    run = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_two_process_run_writes_one_stream_and_resumes_exactly_after_kill_9(tmp_path, bundled_dir):
    """One metrics stream (rank 0's, with both ranks' groups), each rank's own state in the checkpoint, and a
    run killed with -9 mid-way that resumes to the uninterrupted run's rows exactly."""
    a, b = tmp_path / "a", tmp_path / "b"
    _train(a, "iterations=4", "method=prover")
    rows = metric_rows(a)
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]  # one stream, written by rank 0
    assert rows[0]["samples"] > 0 and rows[0]["env_steps"] >= 4 * 2  # both ranks' groups are in the row
    state = json.loads((a / "checkpoint" / "state.json").read_text())
    assert len(state["ranks"]) == 2 and all("backend_calls" in r for r in state["ranks"])  # each rank's own state
    proc = _train(b, "iterations=4", "method=prover", "checkpoint_every=1", popen=True)
    state_b = b / "checkpoint" / "state.json"
    deadline = time.time() + 300
    while time.time() < deadline and not (state_b.is_file() and json.loads(state_b.read_text())["iteration"] >= 1):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = json.loads(state_b.read_text())["iteration"]
    assert 1 <= done < 4, done  # killed mid-way
    _train(b, "iterations=4", "method=prover", "checkpoint_every=1", resume=True)
    assert metric_rows(b) == rows
    with pytest.raises(AssertionError, match="written by 2 process"):  # resuming with another world size is refused
        _train(b, "iterations=5", "method=prover", resume=True, nproc=1)


@pytest.mark.parametrize("flag", ["ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"])
def test_sharded_configs_are_refused_with_the_reason(monkeypatch, flag):
    from trainers.distributed import Dist

    monkeypatch.setenv(flag, "true")
    with pytest.raises(NotImplementedError, match=f"{flag} is set: sharded training is not built.*DDP"):
        Dist()


def test_one_process_touches_no_process_group(monkeypatch):
    from trainers.distributed import Dist

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    d = Dist()
    assert (
        not d.enabled
        and d.is_main
        and d.gather(3) == [3]
        and d.broadcast("x") == "x"
        and d.shard([1, 2, 3]) == [1, 2, 3]
    )
    assert not torch.distributed.is_initialized()
