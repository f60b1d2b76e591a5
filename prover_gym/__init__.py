"""prover-gym: text environments with exact snapshot/restore for agentic RL.

``import prover_gym`` makes the environment ids (``prover/SearchQA-v0`` and the others whose
engines are installed) known to gymnasium, and exposes the snapshot protocol::

    from prover_gym import snapshot, restore, branch

The package import itself is light: the core (gymnasium, numpy) loads on first attribute use.
"""

from __future__ import annotations

import importlib
import sys

__version__ = "0.1.0"

_CORE = ("Snapshot", "SnapshotError", "TextEnv", "branch", "restore", "snapshot")
__all__ = [*_CORE, "ENV_IDS", "register_envs", "EnvPool", "provenance", "check_snapshot", "SnapshotCheckError"]


def __getattr__(name: str):
    if name in _CORE:
        return getattr(importlib.import_module("prover_gym.core"), name)
    if name in ("ENV_IDS", "register_envs"):
        return getattr(importlib.import_module("prover_gym.registration"), name)
    if name == "EnvPool":
        return importlib.import_module("prover_gym.pool").EnvPool
    if name in ("check_snapshot", "SnapshotCheckError"):
        return getattr(importlib.import_module("prover_gym.snapshot_check"), name)
    if name == "provenance":
        return importlib.import_module("prover_gym.resources").provenance
    raise AttributeError(f"module 'prover_gym' has no attribute {name!r}")


def _register_now_or_when_gymnasium_loads() -> None:
    from prover_gym import _autoregister

    _autoregister.install()


_register_now_or_when_gymnasium_loads()
del sys
