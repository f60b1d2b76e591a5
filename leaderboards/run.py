"""`python leaderboards/run.py`: the benchmark tables, from the embedded default to the paper preset.

    python leaderboards/run.py                                  # preset "default": bundled data, tiny model, CPU
    python leaderboards/run.py --preset smoke                   # every stage once, under 2 minutes
    python leaderboards/run.py --preset paper                   # Qwen + vLLM + official data (GPU)
    python leaderboards/run.py --envs alfworld --methods sft grpo prover --seeds 0 1 2 --ablations
    python leaderboards/run.py --eval-only --policy my_endpoint.yaml   # put your own model on the board

For each env and seed: the `random` and `expert` baselines; one SFT warm start on expert
trajectories (`sft`); then `grpo`, `prover` (and the ablations `prover_random`,
`prover_unverified`, and `grpo_matched`: GRPO given the tokens prover spent) trained from that same
checkpoint with the same budget, under common random numbers (the same tasks and sampling keys);
each evaluated on the same eval tasks. Methods are compared paired by training seed. Finished rows
live in `<out>/results.sqlite` and trained checkpoints under `<out>/runs/`, keyed by a hash of their
config, so a re-run (or a run after a crash) only does what is missing. Tables and plots:
`<out>/leaderboard.{md,csv,json,html}` and `<out>/*.png`; `<out>` is ./prover-gym-results unless --out.

A run is ``make_plan`` (the preset checked whole, every cell and its row key; ``--dry-run`` prints it and
stops) -> ``execute`` (servers, judge precision, the cells on worker processes) -> ``Recorder`` (each row
stored as its cell comes back) -> ``write_reports``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from leaderboards.cells import (  # noqa: F401  (re-exported: the public names stay)
    CELL_COST,
    DEFAULT_OUT,
    PRESETS,
    Cell,
    CellError,
    PresetError,
    _asks_judge,
    _known_methods,
    _method_of,
    _train_config,
    _trained,
    baselines,
    config_hash,
    eval_tasks,
    matched_to,
    shipped_base,
    trained,
)
from leaderboards.execute import (  # noqa: F401  (re-exported: the public names stay)
    CellsFailed,
    _matched,
    _worker_init,
    evaluate,
    execute,
    judge_precision,
    llm_policy,
    run_cell,
    run_cell_safe,
    start_servers,
    train,
)
from leaderboards.plan import (  # noqa: F401  (re-exported: the public names stay)
    Plan,
    _expand,
    _fill_from_bases,
    _kind_config,
    _policy_config,
    _resolve_models,
    _Unset,
    check_preset,
    load_preset,
    make_plan,
    plan_methods,
    print_plan,
)
from leaderboards.record import CellFolder, CellFolderError, Recorder, git_commit  # noqa: F401  (re-exported)


def run(args) -> Path:
    """plan -> execute -> record: the plan checked before anything runs (printed and nothing else with
    ``--dry-run``), the cells run with each row recorded as it comes back, then the reports written."""
    from leaderboards.db import ResultsDB
    from leaderboards.report import write_reports

    out = Path(args.out)
    dry = bool(getattr(args, "dry_run", False))  # plan only: nothing trains, evaluates, starts or is written
    t_start = time.time()
    existing = out / "results.sqlite"
    cells = CellFolder(args.cells) if getattr(args, "cells", None) else None
    db = ResultsDB(existing) if existing.is_file() else None
    try:
        if dry:  # the folder's cells count as reused; nothing is written
            plan = make_plan(args, _WithCells(db, cells) if cells is not None else db)
            print_plan(plan)
            return out
        if cells is not None:
            out.mkdir(parents=True, exist_ok=True)
            db = db or ResultsDB(existing)
            loaded = cells.load_into(db)
            print(f"{loaded} finished cell(s) loaded from {cells.path}", flush=True)
        plan = make_plan(args, db)  # the preset checked whole before anything is made or run
        out.mkdir(parents=True, exist_ok=True)
        db = db or ResultsDB(existing)
        record = Recorder(db, plan.preset["name"], t_start, cells)
        execute(plan, db, record)
        if cells is not None:
            cells.save_from(db, plan.preset["name"], plan.envs)
        paths, comps = write_reports(db, plan.preset["name"], out, envs=plan.envs)
        for comp in comps:
            if (comp["a"], comp["b"]) in (
                ("grpo", "sft"),
                ("prover", "grpo"),
                ("prover", "grpo_matched"),
                ("gigpo", "grpo"),
            ):
                print(f"{comp['a']} vs {comp['b']} ({comp['env']}, {comp['seeds']} paired seed(s)): {comp['verdict']}")
    finally:
        if db is not None:
            db.close()
    print(
        f"{record.done} new rows, {len(plan.reused)} reused; {time.time() - t_start:.0f}s. Tables: "
        + ", ".join(str(p) for p in paths if p.suffix in (".md", ".html"))
    )
    if record.failed:
        raise CellsFailed(
            f"{record.failed} cell(s) failed (listed above; their tracebacks are in {out / 'results.sqlite'}, table "
            "errors). The other rows are recorded; fix the cause and run the same command again: only what is "
            "missing runs"
        )
    return out


class _WithCells:
    """The results store as ``--dry-run`` sees it with ``--cells``: its rows and the folder's, read only."""

    def __init__(self, db, cells: CellFolder):
        self.db, self.keys = db, {row["key"] for row, _ in cells.cells()}

    def get(self, key: str):
        """A stand-in row for a key the store or the folder holds, else None."""
        row = self.db.get(key) if self.db is not None else None
        return row if row is not None else ({"key": key} if key in self.keys else None)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The docstring's layout kept, and every option's default shown (an option without a value of its
    own states in its help what it defaults to)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def parser() -> argparse.ArgumentParser:
    """The command line of ``python leaderboards/run.py`` (``make_plan(parser().parse_args([...]))`` plans a
    run from Python)."""
    ap = argparse.ArgumentParser(
        prog="python leaderboards/run.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=_HelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument(
        "--preset",
        default="default",
        help=f"{' | '.join(sorted(p.stem for p in PRESETS.glob('*.yaml')))} | path/to/preset.yaml",
    )
    ap.add_argument(
        "--envs",
        nargs="+",
        help="subset of the preset's envs, e.g. searchqa webshop alfworld (default: all of the preset's)",
    )
    ap.add_argument(
        "--methods",
        nargs="+",
        help=f"some of {[*baselines(), *trained()]} or the preset's variants (default: the preset's methods)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, help="training seeds (default: the preset's)")
    ap.add_argument(
        "--ablations",
        action="store_true",
        help="also run the preset's ablations (prover_random, prover_unverified, grpo_matched)",
    )
    ap.add_argument(
        "--judge",
        help="judge config for the prover methods: a YAML file, a shipped name (configs/judges/) or an inline mapping "
        "(default: the preset's judge)",
    )
    ap.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help="folder of the results (results.sqlite, tables, plots, checkpoints under runs/), relative to the "
        "current folder; a re-run with the same --out reuses its finished rows",
    )
    ap.add_argument(
        "--bases",
        help="a folder of SFT bases (<name>/config.json + recipe.json) searched before the shipped ones "
        "(sets $PROVER_GYM_BASES)",
    )
    ap.add_argument(
        "--cells",
        help="a folder of finished cells, one small JSON per cell (row and learning curve; no checkpoints), for an "
        "experiment that spans sessions: its cells are loaded and reused, each cell this run finishes is written "
        "there, and the tables are rebuilt from all of them (commit the folder)",
    )
    ap.add_argument("--eval-only", action="store_true", help="evaluate --policy without training")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="check the preset and print the plan (cells to run and to reuse), then stop: nothing trains, "
        "evaluates or is written",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes for the cells (each with cpu_count/jobs torch threads; default: 2 when the "
        "machine has 2+ cores: two 1-thread processes beat one 2-thread one on the tiny model)",
    )
    ap.add_argument("--policy", help="with --eval-only: backend config of the policy to evaluate")
    return ap


def main(argv: list[str] | None = None) -> int:
    """``python leaderboards/run.py``: parse the command line and run (exit 2 on a bad preset or flag)."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.bases:
        if not Path(args.bases).is_dir():
            ap.error(f"--bases {args.bases!r}: not a folder")
        prior = os.environ.get("PROVER_GYM_BASES")
        os.environ["PROVER_GYM_BASES"] = os.pathsep.join([str(Path(args.bases).resolve()), *([prior] if prior else [])])
    if args.jobs is None:
        args.jobs = 2 if (os.cpu_count() or 1) >= 2 else 1
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    from agents.backends.base import BackendUnavailable
    from prover_gym.searchqa.serve import ServerError

    try:
        run(args)
    except (PresetError, CellFolderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CellsFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except BackendUnavailable as exc:  # no row is written for it; finished rows stay, a re-run continues
        print(
            f"error: {exc}. Rows finished so far are kept; run the same command again once the backend is up.",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
