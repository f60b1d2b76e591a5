"""Chat backends shared by policies and judges. ``make_backend(cfg)`` builds one from a dict:
``{"kind": "openai", "model": ..., "base_url": ..., "api_key_env": ...}`` or
``{"kind": "hf", "model_path": ...}`` or ``{"kind": "vllm", "model_path": ...}`` (GPU extra, imported lazily)."""

from __future__ import annotations

from agents.backends.base import BackendError, BackendUnavailable, ChatBackend, Completion  # noqa: F401

BACKEND_KINDS = ("openai", "hf", "vllm")


def _backend_class(kind: str):
    if kind == "openai":
        from agents.backends.openai_backend import OpenAIBackend

        return OpenAIBackend
    if kind == "hf":
        from agents.backends.hf_backend import HFBackend

        return HFBackend
    from agents.backends.vllm_backend import VLLMBackend  # (imports vllm only when it builds an engine)

    return VLLMBackend


def check_backend(cfg: dict, where: str = "backend", extra=()) -> list[str]:
    """The problems of a backend config (kind and keys, each with its key path), without building it;
    ``extra``: keys the caller takes out before the backend sees the rest."""
    from prover_gym.checks import bad_choice, params_of, unknown_keys

    kind = cfg.get("kind")
    problems = bad_choice(f"{where}.kind", kind, BACKEND_KINDS, "backend kind")
    if problems:
        return problems
    valid = params_of(_backend_class(str(kind)))
    keys = [k for k in cfg if k != "kind"]
    return unknown_keys(where, keys, None if valid is None else [*valid, *extra])


def make_backend(cfg: dict) -> ChatBackend:
    """A chat backend from config: ``{kind: openai | hf | vllm, ...}`` with that backend's options; an error naming the
    kind and the valid ones otherwise."""
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


__all__ = [
    "BACKEND_KINDS",
    "BackendError",
    "BackendUnavailable",
    "ChatBackend",
    "Completion",
    "check_backend",
    "make_backend",
]
