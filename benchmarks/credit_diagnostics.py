"""Where the credit went, per env and method, from a leaderboard run's folders (not a test):

    python benchmarks/credit_diagnostics.py runs/credit [--target-a 0.2] [--json out.json]

Reads ``OUT/runs/<preset>/<env>/<method>/seed*/`` (``credit.jsonl`` and ``metrics.jsonl``, written by
``leaderboards/run.py``) and prints, with Wilson 95% intervals where a figure is a proportion:
1. localisation: the share of the judge's proposals that contain the env's recorded pivot;
2. verification: the share of verified segments with A_seg > 0, at the pivot and off it;
3. A_seg: mean, median standard error, and the pooled variance of a continuation pair, from which
   ``continuations_for`` gives the M at which a segment of true advantage ``--target-a`` (default:
   the pivot oracle's mean A_seg, where it ran) verifies positive with probability 0.8 / 0.9;
4. the bonus: per credited token, relative to the credited trajectory's own GRPO advantage
   (beta A_seg / (1 - group mean), from the records), and its share of the iteration's advantage mass
   (``prover/bonus_share``, in runs from the commit that logs it);
5. cost: generated tokens per run (rollouts, continuations, judge) against grpo's on the same seeds.
These are the links of the credit chain the issue "Where credit assignment decides" asks to name:
localisation, verification noise, bonus size (and, beside the leaderboard's differences, whether
GRPO already solves the setting).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboards.credit_view import continuations_for, load_records, summary  # noqa: E402
from leaderboards.stats import wilson  # noqa: E402


def _rate(k: int, n: int) -> str:
    if not n:
        return "-"
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.0f}% ({100 * lo:.0f}-{100 * hi:.0f}; {k}/{n})"


def _metrics(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def _beta(run: Path) -> float:
    """The run's ProVer bonus weight (its config.json; the trainer's default 1.0 when absent)."""
    path = run / "config.json"
    return float(json.loads(path.read_text()).get("beta", 1.0)) if path.is_file() else 1.0


def cell_runs(out: Path) -> dict[tuple[str, str], dict[int, Path]]:
    """(env, method) -> seed -> run folder, for every finished run under ``out/runs``."""
    cells: dict[tuple[str, str], dict[int, Path]] = {}
    for meta in sorted(out.glob("runs/*/*/*/seed*/leaderboard_meta.json")):
        if not json.loads(meta.read_text()).get("finished"):
            continue
        run = meta.parent
        env, method, seed = run.parent.parent.name, run.parent.name, int(run.name.removeprefix("seed"))
        cells.setdefault((env, method), {})[seed] = run
    return cells


def diagnose(out: Path, target_a: float | None = None) -> list[dict]:
    cells = cell_runs(out)
    if not cells:
        raise SystemExit(f"{out}: no finished runs under runs/*/*/*/seed*/ (is it a leaderboard --out folder?)")
    tokens = {
        key: {s: sum(m.get("cost/generated_tokens", m.get("tokens", 0)) for m in _metrics(r)) for s, r in runs.items()}
        for key, runs in cells.items()
    }
    rows = []
    for (env, method), runs in sorted(cells.items()):
        records = [r for run in runs.values() if (run / "credit.jsonl").is_file() for r in load_records(run)]
        row: dict = {"env": env, "method": method, "seeds": sorted(runs)}
        grpo = tokens.get((env, "grpo"), {})
        common = [s for s in runs if s in grpo and grpo[s]]
        if common:
            row["tokens_vs_grpo"] = sum(tokens[(env, method)][s] for s in common) / sum(grpo[s] for s in common)
        if records:
            s = summary(records)  # the inspector's figures: localisation, verification at / off the pivot, SE
            verified = [r for r in records if r.get("verification")]
            relative = []  # bonus / scale = beta A_seg; the credited trajectory's advantage / scale = r - mean
            for r in verified:
                if r["credited"]:
                    rewards = [t["reward"] for t in r["trajectories"]]
                    own = r["trajectories"][r["proposal"]["trajectory"]]["reward"] - sum(rewards) / len(rewards)
                    if own > 0:
                        relative.append(r["verification"]["a_seg"] / own)
            shares = [
                m["prover/bonus_share"] for run in runs.values() for m in _metrics(run) if "prover/bonus_share" in m
            ]
            a = [r["verification"]["a_seg"] for r in verified]
            row.update(
                judged=s["records"],
                verified=s["verified"],
                hit_pivot=(s["pivot_hits"], s["pivot_known"]),
                positive_at_pivot=(s["at_pivot"]["positive"], s["at_pivot"]["verified"]),
                positive_off_pivot=(s["off_pivot"]["positive"], s["off_pivot"]["verified"]),
                positive=(s["positive"], s["verified"]),
                mean_a_seg=statistics.fmean(a) if a else None,
                median_se=statistics.median(s["a_seg_se"]) if s["a_seg_se"] else None,
                continuations=statistics.median(len(r["verification"]["before"]["outcomes"]) for r in verified)
                if verified
                else None,
                pair_variance=s["pair_variance"],
                bonus_vs_own_advantage=_beta(next(iter(runs.values()))) * statistics.median(relative)
                if relative
                else None,
                bonus_share=statistics.fmean(shares) if shares else None,
            )
        rows.append(row)
    oracle = [r for r in rows if r["method"] == "prover_oracle" and r.get("mean_a_seg")]
    for r in rows:
        target = target_a or next((o["mean_a_seg"] for o in oracle if o["env"] == r["env"]), None)
        if target is not None and target < 0.05:  # the oracle's segments carry no advantage: use the method's own
            target = r.get("mean_a_seg")
        if r.get("pair_variance") and target and target > 0:
            r["target_a"] = target
            r["m_for_power"] = {p: continuations_for(r["pair_variance"], target, power=p) for p in (0.8, 0.9)}
    return rows


def print_table(rows: list[dict]) -> None:
    head = [
        "env",
        "method",
        "seeds",
        "tokens vs grpo",
        "hit pivot",
        "A_seg > 0 at pivot",
        "A_seg > 0 off pivot",
        "mean A_seg",
        "median SE (M)",
        "M for 80% / 90%",
        "bonus / own adv.",
        "bonus share",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for r in rows:
        m = r.get("m_for_power")
        cells = [
            r["env"],
            r["method"],
            str(len(r["seeds"])),
            f"{r['tokens_vs_grpo']:.2f}x" if "tokens_vs_grpo" in r else "-",
            _rate(*r["hit_pivot"]) if "hit_pivot" in r else "-",
            _rate(*r["positive_at_pivot"]) if "positive_at_pivot" in r else "-",
            _rate(*r["positive_off_pivot"]) if "positive_off_pivot" in r else "-",
            f"{r['mean_a_seg']:+.3f}" if r.get("mean_a_seg") is not None else "-",
            f"{r['median_se']:.2f} ({r['continuations']:.0f})" if r.get("median_se") is not None else "-",
            f"{m[0.8]} / {m[0.9]} (A = {r['target_a']:.2f})" if m else "-",
            f"{r['bonus_vs_own_advantage']:.2f}" if r.get("bonus_vs_own_advantage") is not None else "-",
            f"{100 * r['bonus_share']:.1f}%" if r.get("bonus_share") is not None else "-",
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="a leaderboard --out folder (holds runs/<preset>/<env>/<method>/seed*)")
    ap.add_argument("--target-a", type=float, help="the true A_seg to detect (default: the oracle's mean)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    rows = diagnose(args.out, args.target_a)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
