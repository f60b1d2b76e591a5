"""The results database: one SQLite file, one row per run x env x split x seed.

Every finished evaluation is committed in its own transaction, so a crash loses only the work in
progress; a re-run finds finished rows by their key (preset, env, method, split, seed, config hash)
and reuses them.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    preset TEXT NOT NULL,
    env TEXT NOT NULL,
    env_id TEXT NOT NULL,
    method TEXT NOT NULL,
    split TEXT NOT NULL,
    seed INTEGER NOT NULL,
    config_hash TEXT NOT NULL,
    commit_id TEXT,                -- prover-gym's own commit (12 hex; "-dirty" with uncommitted changes)
    episodes INTEGER NOT NULL,
    success REAL NOT NULL,
    score REAL NOT NULL,
    groups TEXT NOT NULL,          -- JSON {group: success rate}
    env_steps INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    invalid_actions INTEGER NOT NULL,
    train_seconds REAL NOT NULL,
    eval_seconds REAL NOT NULL,
    extra TEXT NOT NULL,           -- JSON: prover overhead ratios, model path, ...
    created REAL NOT NULL,
    version TEXT                   -- prover_gym.__version__ that produced the row
);
CREATE TABLE IF NOT EXISTS curves (
    key TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    metrics TEXT NOT NULL,         -- JSON row of the trainer's metrics.jsonl
    PRIMARY KEY (key, iteration)
);
CREATE TABLE IF NOT EXISTS judge_precision (
    key TEXT PRIMARY KEY,
    preset TEXT NOT NULL,
    env TEXT NOT NULL,
    judge TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    groups INTEGER NOT NULL,
    proposals INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    precision REAL,
    created REAL NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}'  -- JSON: mean_a_seg, agreement (with the exhaustive judge), continuation policy
);
CREATE TABLE IF NOT EXISTS errors (   -- a cell that raised: not a result; a re-run tries it again
    key TEXT PRIMARY KEY,
    preset TEXT NOT NULL,
    env TEXT NOT NULL,
    method TEXT NOT NULL,
    seed INTEGER NOT NULL,
    error TEXT NOT NULL,           -- the exception, one line
    trace TEXT NOT NULL,           -- its traceback, for the bug report
    created REAL NOT NULL
);
"""
PRECISION_COLUMNS = ("env", "judge", "groups", "proposals", "hits", "precision", "extra")

RESULT_COLUMNS = (
    "key",
    "preset",
    "env",
    "env_id",
    "method",
    "split",
    "seed",
    "config_hash",
    "commit_id",
    "episodes",
    "success",
    "score",
    "groups",
    "env_steps",
    "tokens",
    "invalid_actions",
    "train_seconds",
    "eval_seconds",
    "extra",
    "created",
    "version",
)


class ResultsDB:
    """The results store (``<out>/results.sqlite``): one row per finished cell keyed by its config hash, the learning
    curves, failed cells and judge-precision measurements. WAL and synchronous writes: a killed run keeps every row
    it finished; older files are migrated on open."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.executescript(SCHEMA)
        columns = {r[1] for r in self.conn.execute("PRAGMA table_info(judge_precision)")}
        if "extra" not in columns:  # a results file from before judge precision was measured by verification
            self.conn.execute("ALTER TABLE judge_precision ADD COLUMN extra TEXT NOT NULL DEFAULT '{}'")
        if "version" not in {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}:  # before provenance
            self.conn.execute("ALTER TABLE results ADD COLUMN version TEXT")
        self.conn.commit()

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    # ---- results ------------------------------------------------------------------------------
    def get(self, key: str) -> dict | None:
        """The row stored under ``key``, or None."""
        cur = self.conn.execute(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE key = ?", (key,))
        row = cur.fetchone()
        return _decode(dict(zip(RESULT_COLUMNS, row))) if row else None

    def put(self, row: dict, curve: list[dict] | None = None) -> None:
        """Insert one finished result (and its learning curve) in a single transaction."""
        data = dict(row)
        data.setdefault("created", time.time())
        data["groups"] = json.dumps(data.get("groups") or {})
        data["extra"] = json.dumps(data.get("extra") or {})
        data.setdefault("version", None)
        values = [data[c] for c in RESULT_COLUMNS]
        with self.conn:  # BEGIN ... COMMIT, or ROLLBACK on error
            self.conn.execute(
                f"INSERT OR REPLACE INTO results ({', '.join(RESULT_COLUMNS)}) VALUES "
                f"({', '.join('?' * len(RESULT_COLUMNS))})",
                values,
            )
            self.conn.execute("DELETE FROM curves WHERE key = ?", (data["key"],))
            self.conn.execute("DELETE FROM errors WHERE key = ?", (data["key"],))
            for m in curve or []:
                self.conn.execute(
                    "INSERT INTO curves (key, iteration, metrics) VALUES (?, ?, ?)",
                    (data["key"], int(m["iteration"]), json.dumps(m)),
                )

    def results(self, preset: str | None = None) -> list[dict]:
        """Every row (of ``preset``), oldest first."""
        sql = f"SELECT {', '.join(RESULT_COLUMNS)} FROM results"
        args: tuple = ()
        if preset is not None:
            sql += " WHERE preset = ?"
            args = (preset,)
        rows = [_decode(dict(zip(RESULT_COLUMNS, r))) for r in self.conn.execute(sql + " ORDER BY created", args)]
        latest: dict[tuple, dict] = {}
        for r in rows:  # a row of an older config (other eval tasks, budget, model) is superseded, not averaged in
            latest[(r["preset"], r["env"], r["method"], r["split"], r["seed"])] = r
        return sorted(latest.values(), key=lambda r: (r["env"], r["method"], r["seed"]))

    def curve(self, key: str) -> list[dict]:
        """The learning curve stored with row ``key``, by iteration."""
        rows = self.conn.execute("SELECT metrics FROM curves WHERE key = ? ORDER BY iteration", (key,))
        return [json.loads(r[0]) for r in rows]

    # ---- cells that failed --------------------------------------------------------------------
    def put_error(self, key: str, preset: str, env: str, method: str, seed: int, error: str, trace: str) -> None:
        """Record a failed cell (its error and traceback); a later successful row with the same key supersedes it."""
        with self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO errors (key, preset, env, method, seed, error, trace, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, preset, env, method, int(seed), error, trace, time.time()),
            )

    def errors(self, preset: str) -> list[dict]:
        """The cells of ``preset`` whose last attempt raised and that have no result since."""
        cols = ("key", "env", "method", "seed", "error", "trace")
        rows = self.conn.execute(
            f"SELECT {', '.join(cols)} FROM errors WHERE preset = ? AND key NOT IN (SELECT key FROM results) "
            "ORDER BY env, method, seed",
            (preset,),
        )
        return [dict(zip(cols, r)) for r in rows]

    # ---- judge precision ----------------------------------------------------------------------
    def get_precision(self, key: str) -> dict | None:
        """The judge-precision measurement stored under ``key``, or None."""
        row = self.conn.execute(
            f"SELECT {', '.join(PRECISION_COLUMNS)} FROM judge_precision WHERE key = ?", (key,)
        ).fetchone()
        return _precision(row) if row else None

    def put_precision(self, key: str, preset: str, env: str, judge: str, config_hash: str, stats: dict) -> None:
        """``stats``: groups, proposals, hits, precision, and any extras (kept as JSON)."""
        extra = {k: v for k, v in stats.items() if k not in ("groups", "proposals", "hits", "precision")}
        with self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO judge_precision (key, preset, env, judge, config_hash, groups, proposals, "
                "hits, precision, created, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    preset,
                    env,
                    judge,
                    config_hash,
                    stats["groups"],
                    stats["proposals"],
                    stats["hits"],
                    stats["precision"],
                    time.time(),
                    json.dumps(extra),
                ),
            )

    def precisions(self, preset: str) -> list[dict]:
        """Every judge-precision measurement of ``preset``, oldest first."""
        rows = self.conn.execute(
            f"SELECT {', '.join(PRECISION_COLUMNS)} FROM judge_precision WHERE preset = ? ORDER BY created", (preset,)
        )
        latest = {}
        for r in rows:  # the newest measurement per env and judge
            latest[(r[0], r[1])] = _precision(r)
        return [latest[k] for k in sorted(latest)]


def _precision(row) -> dict:
    out = dict(zip(PRECISION_COLUMNS, row))
    out.update(json.loads(out.pop("extra") or "{}"))
    return out


def _decode(row: dict) -> dict:
    row["groups"] = json.loads(row["groups"])
    row["extra"] = json.loads(row["extra"])
    return row
