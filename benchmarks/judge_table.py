"""The judge table on a setting with a known pivot (a benchmark, not a test): every judge on the same
recorded groups, with its parse rate, localisation against ``info["pivot_step"]`` and verified precision.

    python benchmarks/judge_table.py --base alfworld_pivot --groups 48 --out runs/judge_table

Material: ``--groups`` tasks of the base's training setting, ``--group-size`` rollouts each, sampled as the
trainer samples (benchmarks/pilot_pivot.py's ``base_groups``); the mixed groups are judged. Per judge:
- parse rate: the share of mixed groups it returned a proposal for (an LLM judge's malformed replies and
  backend errors are the rest);
- localisation: the share of proposals whose segment contains the named trajectory's recorded pivot;
- verified precision: the share of proposals whose A_seg > 0, verified with ``--m`` continuations of the
  base policy (trainers.judge_eval.verified_precision; the same continuations for every judge: keyed);
- seconds per judged group.
Every rate with its Wilson 95% interval. Writes ``judge_table.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pilot_pivot import base_groups, rate  # noqa: E402

PRETRAINED = "pretrained:smollm2-135m"
JUDGES = {
    "first_divergence": {"kind": "first_divergence", "side": "won"},
    "last_shared_state": {"kind": "last_shared_state", "side": "won"},
    "random (won side)": {"kind": "random", "side": "won", "seed": 0},
    "pivot oracle": {"kind": "pivot", "side": "won"},
    "smollm2 free-form (paper prompt)": {
        "kind": "hf",
        "model_path": PRETRAINED,
        "max_tokens": 96,
        "temperature": 0.0,
        "side": "won",
    },
    "smollm2 scoring, yes/no": {"kind": "hf_score", "model_path": PRETRAINED, "mode": "yes_no", "side": "won"},
    "smollm2 scoring, name the turn": {"kind": "hf_score", "model_path": PRETRAINED, "mode": "name", "side": "won"},
}


def fmt(r: dict) -> str:
    return "n/a" if not r["n"] else f"{100 * r['rate']:.0f}% ({100 * r['low']:.0f}-{100 * r['high']:.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="alfworld_pivot")
    ap.add_argument("--groups", type=int, default=48)
    ap.add_argument("--group-size", type=int, default=6)
    ap.add_argument("--m", type=int, default=4, help="continuations per boundary for verification")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judges", nargs="*", default=list(JUDGES), help=f"which of: {', '.join(JUDGES)}")
    ap.add_argument("--out", default="runs/judge_table")
    args = ap.parse_args()

    import judges
    from judges.base import mixed_outcome
    from trainers.judge_eval import verified_precision
    from trainers.verification import ValueEstimator

    out = Path(args.out)
    t0 = time.time()
    trainer, pool, groups, _ = base_groups(args.base, args.groups, args.group_size, args.seed, out)
    mixed = [g for g in groups if mixed_outcome(g)]
    report: dict = {
        "base": args.base,
        "groups": len(groups),
        "mixed": len(mixed),
        "m": args.m,
        "seconds_rollouts": round(time.time() - t0, 1),
        "judges": {},
    }
    print(f"{len(mixed)} mixed groups of {len(groups)} ({report['seconds_rollouts']} s)", flush=True)
    for name in args.judges:
        t1 = time.time()
        judge = judges.make(JUDGES[name])
        load = time.time() - t1
        # continuations keyed by (namespace, trajectory key, boundary, j): the same for every judge
        estimator = ValueEstimator(trainer.env, trainer.policy, args.m, pool)
        t2 = time.time()
        stats = verified_precision(judge, mixed, estimator)
        seconds = time.time() - t2
        row = {
            "parse": rate(stats["proposals"], len(mixed)),
            "localisation": rate(round((stats["localisation"] or 0) * stats["pivot_known"]), stats["pivot_known"]),
            "precision": rate(stats["hits"], stats["proposals"]),
            "mean_a_seg": stats["mean_a_seg"],
            "judge_stats": dict(getattr(judge, "stats", {}) or {}),
            "seconds_load": round(load, 1),
            "seconds_per_group": round(seconds / max(1, len(mixed)), 2),
        }
        report["judges"][name] = row
        print(name, json.dumps(row), flush=True)
        (out / "judge_table.json").write_text(json.dumps(report, indent=1))
    trainer.close()
    pool.close()
    print("\n| judge | parsed | localisation (contains the pivot) | verified precision (A_seg > 0) | s / group |")
    print("| --- | --- | --- | --- | --- |")
    for name, row in report["judges"].items():
        print(
            f"| {name} | {fmt(row['parse'])} | {fmt(row['localisation'])} | {fmt(row['precision'])} "
            f"| {row['seconds_per_group']} |"
        )


if __name__ == "__main__":
    main()
