"""Every benchmark in one run, one JSON of all figures, to compare across commits.

    python benchmarks/run_all.py                  # quick sizes (a few minutes on 2 cores)
    python benchmarks/run_all.py --full           # the sizes quoted in docs/benchmarks.md (tens of minutes)
    python benchmarks/run_all.py --only alfworld pool

Writes ``benchmarks/results/<commit>.json`` (and ``latest.json``) atomically: per benchmark its
figures, its command line, wall time and exit status. Benchmarks run one after another, never
side by side, so their timings do not disturb each other.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from prover_gym.cache import atomic_write  # noqa: E402

QUICK = {
    "searchqa": ["bench_searchqa.py", "--passages", "100000", "--queries", "200", "--rank-bm25-queries", "20"],
    "webshop": [
        "bench_webshop.py",
        "--sizes",
        "1000",
        "100000",
        "--queries",
        "100",
        "--rank-bm25-queries",
        "10",
        "--episodes",
        "30",
    ],
    "alfworld": ["bench_alfworld.py", "--games", "6", "--episodes", "6"],
    "pool": ["bench_pool.py", "--sizes", "1", "2", "4", "8", "--steps", "160"],
    "judges": ["bench_judges.py", "--tasks", "20", "--failures", "2"],
    "sampling": ["check_keyed_sampling.py", "--rows", "48", "--tokens", "48", "--repeats", "3"],
    "prover_overhead": [
        "exp_prover_vs_grpo.py",
        "--methods",
        "grpo",
        "prover",
        "--seeds",
        "0",
        "--iterations",
        "2",
        "--eval-tasks",
        "8",
        "--out",
        "runs/exp_quick",
        "tasks_per_iteration=2",
    ],
}
FULL = {
    "searchqa": ["bench_searchqa.py"],
    "webshop": ["bench_webshop.py"],
    "alfworld": ["bench_alfworld.py"],
    "pool": ["bench_pool.py", "--steps", "400", "--ray"],
    "judges": ["bench_judges.py"],
    "sampling": ["check_keyed_sampling.py", "--rows", "48", "--tokens", "48", "--repeats", "5"],
    # the ProVer-vs-GRPO experiment on each shipped base; finished runs under runs/ are reused
    "prover_overhead": ["exp_prover_vs_grpo.py", "--out", "runs/exp_prover"],
    "prover_webshop": ["exp_prover_vs_grpo.py", "--base", "webshop", "--out", "runs/exp_webshop"],
    "prover_alfworld": ["exp_prover_vs_grpo.py", "--base", "alfworld", "--out", "runs/exp_alfworld"],
}


def commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=ROOT, timeout=10
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_one(name: str, argv: list[str], tmp: Path) -> dict:
    out_json = tmp / f"{name}.json"
    cmd = [sys.executable, str(HERE / argv[0]), *argv[1:]]
    exp_dir = Path(argv[argv.index("--out") + 1]) if "--out" in argv else tmp / "exp"
    if name == "prover_overhead":
        cmd += [] if "--out" in argv else ["--out", str(exp_dir)]
    else:
        cmd += ["--json", str(out_json)]
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row = {"command": " ".join(argv), "seconds": round(time.time() - t, 1), "returncode": proc.returncode}
    source = ROOT / exp_dir / "summary.json" if name == "prover_overhead" else out_json
    if source.is_file():
        row["figures"] = json.loads(source.read_text())
    else:
        row["figures"] = {"stdout": [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]}
    if proc.returncode != 0:
        row["stderr_tail"] = proc.stderr[-2000:]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--only", nargs="+", choices=sorted(QUICK))
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    plan = FULL if args.full else QUICK
    names = args.only or list(plan)
    report = {"commit": commit(), "mode": "full" if args.full else "quick", "started": time.time(), "benchmarks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(f"== {name}: {' '.join(plan[name])}", flush=True)
            report["benchmarks"][name] = row = run_one(name, plan[name], Path(tmp))
            print(f"   {row['returncode']=} in {row['seconds']}s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=1)
    for target in (out / f"{report['commit']}.json", out / "latest.json"):
        atomic_write(target, text)
    print(f"wrote {out / (report['commit'] + '.json')}")
    return 0 if all(r["returncode"] == 0 for r in report["benchmarks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
