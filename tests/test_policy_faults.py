"""A misbehaving policy backend (429, 500, malformed JSON, timeouts, a dead server): episodes go on,
each failed request costs one turn and is counted; a server that fails everything stops the run
with a clear error instead of being scored as a 0% agent."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ChatHandler, free_port

from agents.backends import BackendUnavailable, make_backend
from agents.formats import INVALID_ACTION
from agents.llm_policy import LLMPolicy
from agents.rollout import rollout_batch
from prover_gym import EnvPool

ROOT = Path(__file__).resolve().parents[1]


def _policy(url, **kw):
    backend = make_backend(
        {
            "kind": "openai",
            "model": "m",
            "base_url": url,
            "max_retries": 1,
            "backoff": 0.0,
            "timeout": 0.5,
            "concurrency": 4,
        }
    )
    return LLMPolicy(backend, env_id="prover/SearchQA-v0", **kw)


def test_failed_requests_cost_one_turn_each_and_are_counted(chat_server, bundled_dir):
    search = {"content": "<think>look it up</think><search> University </search>"}
    answer = {"content": "<answer> 1735 </answer>"}
    # turn 1: four requests, three fail (429, 500, truncated JSON) and one searches; turn 2: a slow
    # reply past the client's timeout, and answers for the others
    ChatHandler.plan = [429, 500, "malformed", search, "slow", answer, answer, answer]
    policy = _policy(chat_server)
    with EnvPool("prover/SearchQA-v0", 4, backend="sync", split="test", max_turns=1) as pool:
        trajs = rollout_batch(pool, policy, seeds=[0, 1, 2, 3])
    assert all(t.terminated or t.truncated for t in trajs) and len(trajs) == 4
    assert policy.stats == {"requests": 8, "failures": 4}
    first = sorted(t.turns[0].action for t in trajs)
    assert first.count(INVALID_ACTION) == 3 and "search[University]" in first
    failed_turns = [turn for t in trajs for turn in t.turns if turn.text == "" and turn.action == INVALID_ACTION]
    assert len(failed_turns) == 4 and all(not turn.valid for turn in failed_turns)
    assert "failed after 1 attempts" in policy.last_error
    # turn 2 continues the Search-R1 transcript: the assistant prefix goes as a final assistant message
    second = [s["body"] for s in ChatHandler.seen[4:]]
    assert len(second) == 4 and all(b["messages"][-1]["role"] == "assistant" for b in second)
    assert all(b["continue_final_message"] is True and b["add_generation_prompt"] is False for b in second)
    assert all(
        b["messages"][-1]["role"] == "user" and "continue_final_message" not in b
        for b in [s["body"] for s in ChatHandler.seen[:4]]
    )


def test_a_server_that_fails_everything_stops_the_policy(chat_server, bundled_dir):
    ChatHandler.plan = [500] * 100
    policy = _policy(chat_server, max_consecutive_failures=3)
    with EnvPool("prover/SearchQA-v0", 2, backend="sync", split="test", max_turns=4) as pool:
        with pytest.raises(BackendUnavailable, match="3 calls in a row.*HTTP 500"):
            rollout_batch(pool, policy, seeds=[0, 1])
    assert policy.stats["failures"] == 6


def test_leaderboard_eval_against_a_dead_server_exits_3_and_writes_no_row(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"kind: openai\nname: dead\nmodel: dead\nbase_url: {url}\nmax_retries: 1\nbackoff: 0\ntimeout: 2\n"
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "leaderboards/run.py",
            "--preset",
            "smoke",
            "--envs",
            "searchqa",
            "--eval-only",
            "--policy",
            str(policy),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=dict(os.environ),
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "failed all 8 requests" in proc.stderr and "run the same command again" in proc.stderr
    import sqlite3

    db = out / "results.sqlite"
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from results").fetchone()[0] == 0
