"""Chat backends shared by policies and judges. ``make_backend(cfg)`` builds one from a dict:
``{"kind": "openai", "model": ..., "base_url": ..., "api_key_env": ...}``. The ``hf`` and ``vllm``
backends land with the rest of issue 5."""

from __future__ import annotations

from agents.backends.base import BackendError, BackendUnavailable, ChatBackend, Completion


def make_backend(cfg: dict) -> ChatBackend:
    cfg = dict(cfg)
    kind = cfg.pop("kind", None)
    if kind == "openai":
        from agents.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(**cfg)
    raise ValueError(f"backend kind={kind!r} is not available; use 'openai'")


__all__ = ["BackendError", "BackendUnavailable", "ChatBackend", "Completion", "make_backend"]
