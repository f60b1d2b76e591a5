"""Recording a run: each finished cell's row stored in the results database as it comes back (and, with
``--cells``, in a folder of one JSON file per cell that an experiment spanning sessions commits)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from leaderboards.cells import CellError
from leaderboards.db import RESULT_COLUMNS


def git_commit() -> str | None:
    """prover-gym's own commit (12 hex, ``-dirty`` with uncommitted changes to tracked files), from its
    checkout or the wheel it was installed from; never the caller's repository."""
    from prover_gym.resources import provenance

    info = provenance()
    if not info["commit"]:
        return None
    return info["commit"][:12] + ("-dirty" if info["dirty"] else "")


class Recorder:
    """Records each finished cell in the results store as it comes back (the main process is the only
    writer, so a kill loses at most the cells in flight) and prints its line; counts new and failed rows."""

    def __init__(self, db, name: str, t_start: float, cells: CellFolder | None = None):
        self.db, self.name, self.t_start, self.cells = db, name, t_start, cells
        self.done = self.failed = 0

    def __call__(self, result) -> None:
        if isinstance(result, CellError):  # recorded as a failed cell; the other cells go on
            c = result.cell
            self.db.put_error(c.key, self.name, c.env, c.method, c.seed, result.error, result.trace)
            self.failed += 1
            print(
                f"[{time.time() - self.t_start:6.0f}s] {c.env:9s} {c.method:18s} seed {c.seed}: FAILED: {result.error}",
                file=sys.stderr,
                flush=True,
            )
            return
        row, curve, line, warning = result
        if warning:
            print(warning, file=sys.stderr)
        self.db.put(row, curve)
        if self.cells is not None:  # after the store: the store is the record, the folder its portable copy
            self.cells.write(self.db.get(row["key"]) or row, curve)
        self.done += 1
        print(f"[{time.time() - self.t_start:6.0f}s] {line}", flush=True)


CELL_FORMAT = "prover-gym cell 1"


class CellFolder:
    """A folder of finished cells, one small JSON file per cell (``<env>/<method>/seed<N>.json``: the results
    row and its learning curve, no checkpoint), for an experiment that spans sessions or machines: commit
    the folder, and a later ``run.py --cells FOLDER`` loads its rows (so those cells are reused), runs only
    what is missing, writes each newly finished cell there as it comes back, and rebuilds the tables
    from all of them. A file is written atomically; a newer row of the same cell replaces it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise CellFolderError(f"--cells {str(self.path)!r} is a file; name a folder (it is created if missing)")

    def file(self, row: dict) -> Path:
        """Where ``row``'s cell lives in the folder."""
        return self.path / row["env"] / row["method"] / f"seed{int(row['seed'])}.json"

    def write(self, row: dict, curve: list[dict] | None) -> Path:
        """Store one finished cell (``row`` as the results store takes it, and its curve)."""
        row = {**row, "created": row.get("created") or time.time()}
        target = self.file(row)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"format": CELL_FORMAT, "row": row, "curve": curve or []}, indent=1, sort_keys=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, target)
        return target

    def cells(self) -> list[tuple[dict, list[dict]]]:
        """Every cell of the folder, as (row, curve); [] for a missing folder. A file that is not a cell
        raises CellFolderError naming it."""
        out = []
        for f in sorted(self.path.glob("*/*/seed*.json")) if self.path.is_dir() else []:
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError) as exc:
                raise CellFolderError(
                    f"{f}: not readable as a cell's JSON ({exc}); restore it from git or delete it"
                ) from None
            if not isinstance(data, dict) or data.get("format") != CELL_FORMAT:
                raise CellFolderError(f"{f}: not a prover-gym cell file (format {CELL_FORMAT!r} expected)")
            row: dict = data.get("row") or {}
            missing = [c for c in RESULT_COLUMNS if c not in row and c != "version"]
            if missing:
                raise CellFolderError(f"{f}: the row lacks {missing}; restore it from git or delete it")
            out.append((row, list(data.get("curve") or [])))
        return out

    def save_from(self, db, preset: str, envs: list[str]) -> int:
        """Write the store's latest row of each of ``preset``'s cells (in ``envs``) that the folder lacks or
        holds in another version (a row finished before ``--cells`` was given); how many."""
        n = 0
        for row in db.results(preset):
            if row["env"] not in envs:
                continue
            f = self.file(row)
            try:
                held = json.loads(f.read_text())["row"]["key"] if f.is_file() else None
            except (OSError, ValueError, KeyError, TypeError):
                held = None
            if held != row["key"]:
                self.write(row, db.curve(row["key"]))
                n += 1
        return n

    def load_into(self, db) -> int:
        """Put the folder's cells the results store does not hold yet into it; how many."""
        n = 0
        for row, curve in self.cells():
            if db.get(row["key"]) is None:
                db.put(row, curve)
                n += 1
        return n


class CellFolderError(ValueError):
    """A --cells folder that cannot be used (a file in its place, a file in it that is not a cell)."""
