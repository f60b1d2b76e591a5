"""The OpenAI-compatible backend against a loopback chat-completions server that misbehaves on cue."""

import pytest
from conftest import ChatHandler as _Chat
from conftest import free_port

from agents.backends import BackendError, BackendUnavailable, make_backend

SECRET = "sk-test-SECRET-do-not-log-0123456789"


def backend(url, monkeypatch, **kw):
    monkeypatch.setenv("PG_TEST_KEY", SECRET)
    return make_backend(
        {"kind": "openai", "model": "tiny", "base_url": url, "api_key_env": "PG_TEST_KEY", "backoff": 0.01, **kw}
    )


def test_batch_of_conversations_and_auth(chat_server, monkeypatch):
    server = chat_server
    b = backend(server, monkeypatch)
    out = b.chat([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]], max_tokens=7)
    assert [c.text for c in out] == ["echo: a", "echo: b"] and out[0].completion_tokens == 2
    assert all(s["auth"] == f"Bearer {SECRET}" and s["body"]["max_tokens"] == 7 for s in _Chat.seen)
    assert SECRET not in repr(b)


@pytest.mark.parametrize("plan", [[500], [429], [503, 500], ["malformed"]])
def test_retries_then_succeeds(chat_server, monkeypatch, plan):
    server = chat_server
    _Chat.plan = list(plan)
    b = backend(server, monkeypatch, max_retries=3)
    (c,) = b.chat([[{"role": "user", "content": "x"}]])
    assert c.text == "echo: x" and b.stats["retries"] == len(plan) and b.stats["failures"] == 0


def test_gives_up_with_a_clear_error_that_hides_the_key(chat_server, monkeypatch):
    server = chat_server
    _Chat.plan = [500, 500, 500]
    b = backend(server, monkeypatch, max_retries=3)
    with pytest.raises(BackendUnavailable, match=r"failed after 3 attempts \(HTTP 500\)") as err:
        b.chat([[{"role": "user", "content": "x"}]])
    assert SECRET not in str(err.value) and b.stats["failures"] == 1
    _Chat.plan = [401]
    with pytest.raises(BackendError, match="HTTP 401"):
        b.chat([[{"role": "user", "content": "x"}]])


def test_timeout_and_server_down(chat_server, monkeypatch):
    server = chat_server
    _Chat.plan = ["slow", "slow"]
    b = backend(server, monkeypatch, timeout=0.2, max_retries=2)
    with pytest.raises(BackendUnavailable, match="APITimeoutError"):
        b.chat([[{"role": "user", "content": "x"}]])
    dead = backend(f"http://127.0.0.1:{free_port()}/v1", monkeypatch, max_retries=2)
    with pytest.raises(BackendUnavailable, match="APIConnectionError"):
        dead.chat([[{"role": "user", "content": "x"}]])


def test_remote_url_without_key_is_refused(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR"):
        make_backend(
            {
                "kind": "openai",
                "model": "m",
                "base_url": "https://api.example.invalid/v1",
                "api_key_env": "NO_SUCH_KEY_VAR",
            }
        )
    with pytest.raises(ValueError, match="backend kind"):
        make_backend({"kind": "gpt5"})
