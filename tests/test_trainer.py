"""The training loop: exact resume, kill -9 mid-run, config handling, and the ProVer advantage path."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import SlipPolicy, metric_rows

from agents.baselines import ExpertPolicy
from agents.rollout import rollout
from trainers.config import load_config
from trainers.train import Trainer

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["env_kwargs={split: train, max_turns: 1}", "tasks_per_iteration=2", "group_size=2", "max_tokens=6"]


def _weights(out):
    from safetensors.torch import load_file

    return load_file(str(Path(out) / "checkpoint" / "model" / "model.safetensors"))


def test_resume_continues_exactly(tmp_path, bundled_dir):
    a, b = tmp_path / "a", tmp_path / "b"
    Trainer(load_config(None, SMALL + ["iterations=3", "sft_steps=3", "sft_episodes=2", f"out_dir={a}"])).run()
    Trainer(load_config(None, SMALL + ["iterations=2", "sft_steps=3", "sft_episodes=2", f"out_dir={b}"])).run()
    Trainer(
        load_config(None, SMALL + ["iterations=3", "sft_steps=3", "sft_episodes=2", f"out_dir={b}"]), resume=True
    ).run()
    assert metric_rows(a) == metric_rows(b) and len(metric_rows(a)) == 3
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_kill_9_loses_at_most_one_interval(tmp_path, bundled_dir):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "trainers.train", *SMALL, "iterations=6", "checkpoint_every=1", f"out_dir={out}"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = out / "checkpoint" / "state.json"
    deadline = time.time() + 240
    while time.time() < deadline and not (state.is_file() and json.loads(state.read_text())["iteration"] >= 2):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = json.loads(state.read_text())["iteration"]
    assert 2 <= done < 6
    subprocess.run(cmd + ["--resume"], cwd=ROOT, check=True, capture_output=True, timeout=600)
    assert [r["iteration"] for r in metric_rows(out)] == [1, 2, 3, 4, 5, 6]


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="unknown config keys \\['itterations'\\]"):
        load_config(None, ["itterations=3"])
    with pytest.raises(ValueError, match="method="):
        load_config(None, ["method=ppo"])
    with pytest.raises(ValueError, match="key=value"):
        load_config(None, ["method"])
    with pytest.raises(FileNotFoundError, match="configs/train"):
        load_config("configs/train/nope.yaml")
    cfg = load_config(ROOT / "configs/train/searchqa_tiny_prover.yaml", ["judge.kind=oracle", "beta=0.5"])
    assert cfg.method == "prover" and cfg.judge == {"kind": "oracle"} and cfg.beta == 0.5


@pytest.mark.parametrize(
    "method, judge, credited",
    [
        ("prover", "first_divergence", 1),
        ("prover", "oracle", 1),
        ("prover_unverified", "first_divergence", 1),
        ("grpo", "first_divergence", 0),
    ],
)
def test_trainer_advantages_credit_the_won_runs_decision(tmp_path, bundled_dir, method, judge, credited):
    """Through the Trainer: the default (won-side) judge names the successful run's search; the expert's
    continuations verify it positive (V(after) = 1 > the group's 1/2) and the bonus is credited."""
    trainer = Trainer(
        load_config(
            None,
            [
                f"method={method}",
                f"judge.kind={judge}",
                "continuations=2",
                "env_kwargs={split: test, data_sources: [single_hop]}",
                f"out_dir={tmp_path}",
            ],
        )
    )
    env = trainer.env
    good = rollout(env, ExpertPolicy(), seed=1)
    bad = rollout(env, SlipPolicy(lambda a: a.startswith("search["), "answer[wrong]"), seed=1)
    trainer.policy = ExpertPolicy()  # continuations by the expert
    _, stats = trainer.advantages([[good, bad]])
    assert stats.credited == credited and stats.proposed == (0 if method == "grpo" else 1)
    if method == "prover":
        assert stats.a_seg == [0.5] and stats.extra_env_steps > 0


def test_kl_to_the_reference_is_logged_and_the_reference_persists(tmp_path, bundled_dir):
    out = tmp_path / "kl"
    t = Trainer(
        load_config(None, SMALL + ["iterations=1", "kl_coef=0.1", "sft_steps=2", "sft_episodes=1", f"out_dir={out}"])
    )
    rows = t.run()
    assert "kl" in rows[0] and rows[0]["kl"] >= 0.0
    assert (out / "reference" / "config.json").is_file()


def test_a_failing_judge_server_costs_proposals_not_training_and_keys_stay_secret(
    tmp_path, bundled_dir, chat_server, monkeypatch
):
    """The judge's server answers 500 to everything: ProVer credits nothing for that group, GRPO
    advantages stand, the failures are counted in the metrics, and the API key is in no file written."""
    from conftest import ChatHandler

    secret = "sk-trainer-SECRET-987"
    monkeypatch.setenv("JUDGE_TEST_KEY", secret)
    ChatHandler.plan = [500] * 50
    out = tmp_path / "run"
    judge = f"judge={{kind: openai, model: j, base_url: '{chat_server}', api_key_env: JUDGE_TEST_KEY, max_retries: 1, backoff: 0.0}}"
    trainer = Trainer(
        load_config(
            None,
            [
                "method=prover",
                "continuations=1",
                "env_kwargs={split: test}",
                judge,
                "iterations=1",
                "tasks_per_iteration=1",
                "group_size=2",
                "max_tokens=6",
                f"out_dir={out}",
            ],
        )
    )
    env = trainer.env
    good = rollout(env, ExpertPolicy(), seed=1)
    bad = rollout(env, SlipPolicy(lambda a: a.startswith("search["), "answer[wrong]"), seed=1)
    tokens, stats = trainer.advantages([[good, bad]])
    assert stats.proposed == 0 and stats.verified == 0 and stats.credited == 0  # plain GRPO advantages
    assert trainer.judge.stats["backend_errors"] >= 1
    assert any(s["auth"] == f"Bearer {secret}" for s in ChatHandler.seen)
    row = trainer.step()
    assert "judge/backend_errors" in row
    trainer.save()
    for f in out.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


def test_numbers_written_without_a_dot_are_numbers():
    cfg = load_config(None, ["lr=2e-4", "sft_lr=1e-3", "beta=1"])
    assert (cfg.lr, cfg.sft_lr, cfg.beta) == (2e-4, 1e-3, 1.0) and isinstance(cfg.beta, float)
    with pytest.raises(ValueError, match="lr='fast': expected a number"):
        load_config(None, ["lr=fast"])


@pytest.mark.parametrize("path", sorted((ROOT / "configs/train").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_train_config_loads_and_matches_its_name(path):
    cfg = load_config(path)
    env, _model, method = path.stem.split("_", 2)
    assert cfg.method == method and env in cfg.env_id.lower().replace("-", "")
    assert Path(cfg.out_dir).name == Path(cfg.out_dir).name.strip() and cfg.out_dir.startswith("runs/")


def test_several_updates_per_iteration_move_the_ratio(tmp_path, bundled_dir):
    """ppo_epochs x updates_per_epoch optimizer steps per batch: after the first, the policy differs
    from the sampler, so the clipped ratio (approx_kl_old) is no longer trivially 0.

    Runs on the shipped Search-QA base, which wins about half its episodes: with an untrained model
    every group fails, every advantage is 0, the policy never moves and approx_kl_old is float noise
    of either sign (this test used to pass on that noise)."""
    base = [
        "env_id=prover/SearchQA-v0",
        "env_kwargs={split: train, data_sources: [single_hop], max_turns: 2}",
        "model_path=bases/searchqa",
        "max_tokens=32",
        "tasks_per_iteration=4",
        "group_size=4",
        "iterations=1",
        "progress=false",
    ]
    extra = ["ppo_epochs=2", "updates_per_epoch=2", "minibatch_size=4", "lr=1e-2"]
    row = Trainer(load_config(None, base + extra + [f"out_dir={tmp_path / 'mu'}"])).run()[0]
    assert row["groups/mixed"] > 0 and row["loss"] != 0.0
    assert row["updates"] == 4 and row["approx_kl_old"] > 1e-3 and row["clip_ratio"] > 0
    one = Trainer(load_config(None, base + [f"out_dir={tmp_path / 'one'}"])).run()[0]
    assert one["groups/mixed"] > 0 and one["updates"] == 1
    assert abs(one["approx_kl_old"]) < 1e-6 and one["clip_ratio"] == 0.0


def test_sft_covers_every_task_rl_trains_on(tmp_path, bundled_dir):
    """sft_episodes=null: one expert episode per task of the train split, so RL never samples a task SFT
    has not seen; a smaller number covers that many consecutive tasks (logged in sft.jsonl)."""
    import gymnasium as gym

    from trainers.sft import sft_task_ids

    env = gym.make("prover/SearchQA-v0", split="train", data_sources=["single_hop"], max_turns=2)
    ids = env.unwrapped.task_ids()
    assert sorted(sft_task_ids(env, None, seed=3)) == sorted(ids)
    assert len(set(sft_task_ids(env, 10, seed=0))) == 10 and set(sft_task_ids(env, len(ids), seed=1)) == set(ids)
    out = tmp_path / "cov"
    Trainer(
        load_config(
            None,
            [
                "env_kwargs={split: test, data_sources: [single_hop], max_turns: 2}",
                "sft_episodes=null",
                "sft_steps=1",
                "iterations=0",
                f"out_dir={out}",
            ],
        )
    ).run()
    row = json.loads((out / "sft.jsonl").read_text())
    assert row["tasks_covered"] == row["train_tasks"] > 0 and row["examples"] == 2 * row["train_tasks"]
    assert (out / "checkpoint" / "state.json").is_file()  # iterations=0 keeps the SFT model


def test_probe_logs_held_out_greedy_success_before_and_during_training(tmp_path, bundled_dir):
    """probe_kwargs: greedy success on the same first held-out tasks before RL (probe/success_start)
    and after every probe_every iterations (and the last), for a learning curve that tasks drawn per
    iteration do not blur."""
    out = tmp_path / "probe"
    args = SMALL + [
        "iterations=3",
        "probe_every=2",
        "probe_tasks=6",
        "probe_kwargs={split: test, max_turns: 1}",
        "lr=1e-2",
    ]
    trainer = Trainer(load_config(None, args + [f"out_dir={out}"]))
    calls = []
    for name in ("probe", "collect", "learn"):
        original = getattr(trainer, name)
        setattr(trainer, name, lambda *a, _f=original, _n=name, **k: calls.append(_n) or _f(*a, **k))
    rows = trainer.run()
    # the start probe sees the policy before any rollout or update; then one after iterations 2 and 3
    assert calls == ["probe", "collect", "learn", "collect", "learn", "probe", "collect", "learn", "probe"]
    assert "probe/success_start" in rows[0] and "probe/success" not in rows[0]
    assert [("probe/success" in r) for r in rows] == [False, True, True]
    assert all(0.0 <= r.get("probe/success", 0.0) <= 1.0 and "time/probe" in r for r in rows[1:])
    with pytest.raises(ValueError, match="probe_every"):
        load_config(None, ["probe_kwargs={split: test}", "probe_every=0"])


def test_a_fresh_start_drops_rows_an_earlier_attempt_left_before_its_first_checkpoint(tmp_path, bundled_dir):
    """A run killed after writing iteration 1's row but before its checkpoint restarts from scratch: its
    metrics must not keep the dead attempt's row (the leaderboard's curve table refused the duplicate)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "success": 0.123}) + "\n")
    (out / "credit.jsonl").write_text(json.dumps({"iteration": 1}) + "\n")
    Trainer(load_config(None, SMALL + ["iterations=2", f"out_dir={out}"]), resume=True).run()
    rows = metric_rows(out)
    assert [r["iteration"] for r in rows] == [1, 2] and rows[0]["success"] != 0.123
    assert not (out / "credit.jsonl").read_text().strip()  # grpo writes no credit; the stale line is gone


def test_a_kill_between_the_checkpoint_renames_keeps_the_previous_checkpoint(tmp_path):
    """save() renames checkpoint -> checkpoint.old, then the new one into place: a kill between the two leaves
    only checkpoint.old, which has_checkpoint puts back (the resume starts from the previous iteration)."""
    from trainers import checkpoint

    (tmp_path / "checkpoint.old").mkdir()
    (tmp_path / "checkpoint.old" / "state.json").write_text('{"iteration": 2}')
    assert checkpoint.has_checkpoint(tmp_path)
    assert json.loads((tmp_path / "checkpoint" / "state.json").read_text())["iteration"] == 2
    assert not (tmp_path / "checkpoint.old").exists()
    assert not checkpoint.has_checkpoint(tmp_path / "empty")


def test_only_the_prover_methods_build_a_judge(tmp_path, bundled_dir):
    """A GRPO run builds no judge, so a preset's LLM judge (a second model) is loaded only by the runs
    that ask it; a ProVer run with the same judge config loads it (here: fails on the missing model)."""
    judge = "judge={kind: hf, model_path: /nonexistent/judge-model}"
    grpo = Trainer(load_config(None, SMALL + ["iterations=1", judge, f"out_dir={tmp_path / 'g'}"]))
    assert grpo.judge is None
    grpo.close()
    with pytest.raises(Exception, match="/nonexistent/judge-model"):
        Trainer(load_config(None, SMALL + ["iterations=1", "method=prover", judge, f"out_dir={tmp_path / 'p'}"]))


def test_grpo_matched_to_a_prover_run_that_spent_nothing_is_grpo(tmp_path):
    from leaderboards.run import _train_config, load_preset

    preset = load_preset("smoke")
    env_cfg = preset["envs"]["searchqa"]
    args = (preset, env_cfg, "grpo_matched", 0, tmp_path, None, preset["judge"])
    assert _train_config(*args, match_ratio=0.0).method == "grpo"
    matched = _train_config(*args, match_ratio=0.125)
    assert (matched.method, matched.match_ratio) == ("grpo_matched", 0.125)
