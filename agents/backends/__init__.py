"""Chat backends shared by policies and judges. ``make_backend(cfg)`` builds one from a dict:
``{"kind": "openai", "model": ..., "base_url": ..., "api_key_env": ...}`` or
``{"kind": "hf", "model_path": ...}`` or ``{"kind": "vllm", "model_path": ...}`` (GPU extra, imported lazily)."""

from __future__ import annotations

from agents.backends.base import BackendError, BackendUnavailable, ChatBackend, Completion  # noqa: F401


def make_backend(cfg: dict) -> ChatBackend:
    cfg = dict(cfg)
    kind = cfg.pop("kind", None)
    if kind == "openai":
        from agents.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(**cfg)
    if kind == "hf":
        from agents.backends.hf_backend import HFBackend

        return HFBackend(**cfg)
    if kind == "vllm":
        from agents.backends.vllm_backend import VLLMBackend

        return VLLMBackend(**cfg)
    raise ValueError(f"backend kind={kind!r} is not available; use 'openai', 'hf' or 'vllm'")


__all__ = ["BackendError", "BackendUnavailable", "ChatBackend", "Completion", "make_backend"]
