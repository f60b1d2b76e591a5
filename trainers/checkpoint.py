"""Atomic checkpoints (model, tokenizer, optimizer, RNG states, iteration) and exact resume.

A checkpoint directory is written under a temporary name and switched in with one rename, so a
kill at any moment leaves the previous checkpoint whole. Metrics rows written after the last
checkpoint are dropped on resume, so a resumed run writes exactly the rows of an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from prover_gym.cache import atomic_write


def save(out: Path, model, tokenizer, optimizer, state: dict) -> Path:
    """``state``: JSON-able extras (iteration, counters); the RNG states are added here."""
    ckpt = out / "checkpoint"
    tmp = Path(tempfile.mkdtemp(prefix="checkpoint.tmp", dir=out))
    model.save_pretrained(str(tmp / "model"))
    tokenizer.save_pretrained(str(tmp / "model"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(
        json.dumps({**state, "torch_rng": torch.get_rng_state().tolist(), "numpy_rng": _encode(np.random.get_state())})
    )
    old = out / "checkpoint.old"
    if ckpt.exists():
        os.rename(ckpt, old)
    os.rename(tmp, ckpt)  # the switch is one rename; a kill before it leaves the previous one
    shutil.rmtree(old, ignore_errors=True)
    return ckpt


def load(ckpt: Path, optimizer) -> dict:
    """Restores the optimizer and the global torch / numpy RNGs; returns the saved state."""
    state = json.loads((ckpt / "state.json").read_text())
    optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
    torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
    np.random.set_state(_decode(state["numpy_rng"]))
    return state


def has_checkpoint(out: Path) -> bool:
    """Whether ``out`` holds a complete checkpoint; a kill between ``save``'s two renames left only
    ``checkpoint.old`` (the previous, complete one), which is put back first."""
    old = out / "checkpoint.old"
    if not (out / "checkpoint").exists() and (old / "state.json").is_file():
        os.rename(old, out / "checkpoint")
    return (out / "checkpoint" / "state.json").is_file()


def truncate_metrics(path: Path, iteration: int) -> None:
    """Rows written after the last checkpoint (a run killed mid-interval) are dropped, atomically."""
    if not path.is_file():
        return
    rows = [line for line in path.read_text().splitlines() if line.strip()]
    keep = [r for r in rows if json.loads(r).get("iteration", 0) <= iteration]
    atomic_write(path, "".join(r + "\n" for r in keep))


def encode_python_rng(rng: random.Random):
    """A ``random.Random``'s state as JSON-able data."""
    return _encode(rng.getstate())


def decode_python_rng(rng: random.Random, data) -> None:
    """Restore ``rng`` from ``encode_python_rng``'s data."""
    rng.setstate(_decode(data))


def rng_state(backend_calls: int) -> dict:
    """This process's torch / numpy RNG states and generation counter (one rank's part of a checkpoint)."""
    return {
        "torch_rng": torch.get_rng_state().tolist(),
        "numpy_rng": _encode(np.random.get_state()),
        "backend_calls": backend_calls,
    }


def set_rng_state(state: dict) -> int:
    """Restore ``rng_state``'s RNGs; returns its generation counter."""
    torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
    np.random.set_state(_decode(state["numpy_rng"]))
    return state["backend_calls"]


def seed_all(seed: int) -> None:
    """Seed Python's, numpy's and torch's global RNGs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _encode(state):
    if isinstance(state, tuple):
        return {"t": [_encode(x) for x in state]}
    if isinstance(state, np.ndarray):
        return {"a": state.tolist()}
    return state


def _decode(state):
    if isinstance(state, dict) and "t" in state:
        return tuple(_decode(x) for x in state["t"])
    if isinstance(state, dict) and "a" in state:
        return np.array(state["a"], dtype=np.uint32)
    if isinstance(state, list):
        return tuple(state)
    return state
