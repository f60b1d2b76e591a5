import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gymnasium as gym
import pytest

import prover_gym  # noqa: F401


def pytest_configure(config):
    """Under pytest-xdist (``make test``): each worker takes its share of the cores for torch's threads,
    so that two workers do not run four threads on two cores."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


# The longest test files first (each runs on one worker, `--dist loadfile`), so that the two workers end together
# instead of one waiting on a long file that started last; longest first by their measured times on 2 cores
# (`pytest --durations=0`, 2026-12-08: test_leaderboard ~165 s, test_wheel ~75, test_pretrained ~60, ...). The
# other files keep their order after these.
LONGEST_FIRST = [
    "test_leaderboard.py",
    "test_wheel.py",
    "test_pretrained.py",
    "test_distributed.py",
    "test_preset_checks.py",
    "test_crn.py",
    "test_alfworld_env.py",
    "test_trainer.py",
    "test_readme.py",
    "test_credit_record.py",
    "test_bad_input.py",
    "test_scale.py",
]


def pytest_collection_modifyitems(session, config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def bundled_dir():
    from prover_gym.searchqa.bundled import bundled_data_dir

    return bundled_data_dir()


@pytest.fixture
def make_searchqa(bundled_dir):
    made = []

    def make(**kwargs):
        env = gym.make("prover/SearchQA-v0", **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def wait_for_http(proc, url: str, timeout: float = 120.0) -> None:
    """Poll ``url`` until it answers 200; fail with the server's output if ``proc`` dies or time runs out."""
    import pytest
    import requests

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(url, timeout=1).ok:
                return
        except requests.ConnectionError:
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:] if proc.stdout else "server exited"
    proc.kill()
    pytest.fail(f"server at {url} did not answer within {timeout:.0f} s")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(*args: str, profile) -> subprocess.CompletedProcess:
    """Debian's chromium, headless, with the flags this closed network needs (no background traffic),
    a fresh profile, and ``args`` (e.g. ``--screenshot=...``, ``--dump-dom``, the URL)."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChatHandler(BaseHTTPRequestHandler):
    """A loopback OpenAI chat-completions server. ``plan`` entries, consumed one per request: an int
    (answer with that HTTP status), "slow" (sleep 1 s first), "malformed" (truncated JSON body),
    {"content": text} (reply with that text) or {"tool_calls": [(name, arguments), ...]}. With the
    plan empty it echoes the last message."""

    plan: list = []
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"auth": self.headers.get("Authorization"), "body": body})
        kind = type(self).plan.pop(0) if type(self).plan else "ok"
        if isinstance(kind, int):
            self.send_response(kind)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "nope"}}')
            return
        if kind == "slow":
            time.sleep(1.0)
        content = kind.get("content") if isinstance(kind, dict) else f"echo: {body['messages'][-1]['content']}"
        message = {"role": "assistant", "content": content}
        if isinstance(kind, dict) and kind.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(kind["tool_calls"])
            ]
        payload = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            }
        ).encode()
        if kind == "malformed":
            payload = b'{"id": "c1", "choices": [{"index": 0, "mess'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except BrokenPipeError:  # the client timed out
            pass

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def loopback_server(handler):
    """Serve ``handler`` (a BaseHTTPRequestHandler class) on 127.0.0.1, a free port; yields the base URL."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


@pytest.fixture
def chat_server():
    ChatHandler.plan, ChatHandler.seen = [], []
    with loopback_server(ChatHandler) as url:
        yield url + "/v1"


class SlipPolicy:
    """The env expert, except that at its first action for which ``when(action)`` holds it does
    ``instead`` (one deliberate mistake, for judge and verification tests)."""

    def __init__(self, when, instead):
        self.when, self.instead, self.done = when, instead, False

    def act(self, env, observation, info, history=None):
        from agents.baselines import PolicyOutput

        action = env.unwrapped.expert_action()
        if not self.done and self.when(action):
            self.done = True
            action = self.instead
        return PolicyOutput(action, action)


def metric_rows(out) -> list[dict]:
    """A trainer run's metrics.jsonl rows without the wall-clock fields (comparable across runs)."""
    return [
        {k: v for k, v in json.loads(line).items() if k != "seconds" and not k.startswith("time/")}
        for line in (Path(out) / "metrics.jsonl").read_text().splitlines()
    ]


def expert_batch_rollout(pool, seeds, steps: int = 6) -> list:
    """Reset ``pool`` with ``seeds`` and step every env with its expert action ``steps`` times."""
    results = [pool.reset(seeds=seeds)]
    for _ in range(steps):
        results.append(pool.step([a or "answer[none]" for a in pool.expert_actions()]))
    return results
