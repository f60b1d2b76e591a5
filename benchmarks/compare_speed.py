"""Before/after: ``profile_stages.py`` run from two checkouts, interleaved, on the same machine.

    git worktree add /tmp/before <commit>                       # the checkout to compare against
    python benchmarks/compare_speed.py --before /tmp/before --runs 3 --envs webshop alfworld searchqa

Each run profiles every cell (env x method) once in each checkout, before then after (so drift in the
machine's load hits both), each in its own process with one torch thread. Prints, per cell and stage,
min / median / max seconds over the runs for both, and the ratio of the medians (rollout tok/s: the
rollout tokens over the generation seconds, so its ratio is after / before); ``--json`` writes all
figures. Both trees should generate the same number of tokens per cell (the same rollouts); where
they do not, a line says so (tests/test_golden.py is the check of the results). The two checkouts must share this
environment's installed packages (the same venv).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("generate", "rollout tok/s", "verify gen", "learn", "eval", "iteration_s")


def profile(tree: Path, envs: list[str], methods: list[str], iterations: int, eval_tasks: int) -> dict:
    """One profile_stages.py run inside ``tree`` (its own code first on the path)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "prof.json"
        cmd = [sys.executable, str(tree / "benchmarks" / "profile_stages.py"), "--envs", *envs, "--methods", *methods]
        cmd += ["--iterations", str(iterations), "--eval", str(eval_tasks), "--json", str(out)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="a checkout of the commit to compare against")
    ap.add_argument("--after", default=str(ROOT), help="default: this checkout")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--envs", nargs="+", default=["searchqa", "webshop", "alfworld"])
    ap.add_argument("--methods", nargs="+", default=["grpo", "prover"])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--eval", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    for name, tree in trees.items():
        if not (tree / "benchmarks" / "profile_stages.py").is_file():
            ap.error(f"--{name} {tree}: not a prover-gym checkout (no benchmarks/profile_stages.py)")
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for k in range(args.runs):
        for name, tree in trees.items():
            runs[name].append(profile(tree, args.envs, args.methods, args.iterations, args.eval))
            print(f"run {k + 1}/{args.runs} {name} done", file=sys.stderr, flush=True)
    cells = list(runs["after"][0])
    for cell in cells:
        counts = {name: {r[cell]["tokens"] for r in rs} for name, rs in runs.items()}
        if counts["before"] != counts["after"] or len(counts["after"]) != 1:
            print(f"NOTE {cell}: rollout token counts differ between runs or trees: {counts}")
        for rs in runs.values():
            for r in rs:
                r[cell]["rollout tok/s"] = r[cell]["tokens"] / r[cell]["generate"]
    print(f"\nseconds ({args.iterations} iterations, {args.eval} eval tasks, 1 thread, {args.runs} interleaved runs)")
    print("| cell | stage | before min / median / max | after min / median / max | speed-up (medians) |")
    print("| --- | --- | --- | --- | --- |")
    table = {}
    for cell in cells:
        for stage in STAGES:
            b = [r[cell][stage] for r in runs["before"]]
            a = [r[cell][stage] for r in runs["after"]]
            if not any(b):
                continue
            mb, ma = statistics.median(b), statistics.median(a)
            ratio = (ma / mb if stage == "rollout tok/s" else mb / ma) if ma and mb else float("nan")
            table[f"{cell} {stage}"] = {"before": b, "after": a, "ratio": ratio}
            fmt = "{:.0f}" if stage == "rollout tok/s" else "{:.2f}"
            fb = " / ".join(fmt.format(x) for x in (min(b), mb, max(b)))
            fa = " / ".join(fmt.format(x) for x in (min(a), ma, max(a)))
            print(f"| {cell} | {stage} | {fb} | {fa} | {ratio:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "table": table}, indent=1))
    return table


if __name__ == "__main__":
    main()
