"""The on-disk cache: where generated data, indexes and models live, and how they are written.

Everything is built into a temporary directory beside its final place, marked complete, then
renamed into place, so a reader sees a whole directory or none, and a build killed half-way is
rebuilt on the next call rather than used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

MARKER = "complete.json"


def cache_dir() -> Path:
    """``$PROVER_GYM_CACHE``, else ``$XDG_CACHE_HOME/prover_gym``, else ``~/.cache/prover_gym``."""
    root = os.environ.get("PROVER_GYM_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "prover_gym"


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_once(directory: Path, build: Callable[[Path], dict]) -> Path:
    """``directory``, built by ``build(tmp_dir) -> marker dict`` unless it is already complete.

    A directory without its marker (an interrupted build) is replaced; when a concurrent builder
    finishes first, its result is kept and ours discarded.
    """
    if (directory / MARKER).is_file():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(directory):  # a concurrent builder (another test worker, another run) waits, then reuses
        if (directory / MARKER).is_file():
            return directory
        return _build(directory, build)


@contextlib.contextmanager
def _build_lock(directory: Path):
    """An exclusive advisory lock on ``<directory>.lock`` beside it (POSIX ``flock``; none elsewhere, where
    concurrent builders each build and the first rename wins)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(directory.parent / f".{directory.name}.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(directory: Path, build: Callable[[Path], dict]) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=directory.name + ".tmp", dir=directory.parent))
    try:
        marker = build(tmp)
        (tmp / MARKER).write_text(json.dumps(marker, indent=1))
        if directory.exists() and not (directory / MARKER).is_file():
            shutil.rmtree(directory, ignore_errors=True)
        try:
            os.rename(tmp, directory)
        except OSError:  # a concurrent builder won; keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def atomic_write(path: Path, data: str | bytes) -> Path:
    """Write ``path`` through a temporary file beside it and one rename: readers see the old file or
    the new one, never a part."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)
    return path
