"""prover_gym.cache.build_once: a folder built once, atomically, also by concurrent builders."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest

from prover_gym.cache import MARKER, build_once


def _slow_build(target: str, log: str) -> None:
    def build(tmp: Path) -> dict:
        with open(log, "a") as fh:  # one line per build that actually ran
            fh.write("built\n")
        time.sleep(1.0)
        (tmp / "payload").write_text("x")
        return {"ok": True}

    build_once(Path(target), build)


def test_concurrent_builders_build_once_and_all_see_the_whole_folder(tmp_path):
    target, log = tmp_path / "thing", tmp_path / "log"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_slow_build, args=(str(target), str(log))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert log.read_text().splitlines() == ["built"]  # the others waited on the lock and reused it
    assert (target / MARKER).is_file() and (target / "payload").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_a_failed_build_leaves_nothing_and_the_next_call_builds(tmp_path):
    target = tmp_path / "thing"

    def broken(tmp: Path) -> dict:
        (tmp / "half").write_text("?")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_once(target, broken)
    assert not target.exists() and [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
    build_once(target, lambda tmp: {"ok": True})
    assert (target / MARKER).is_file()
