"""Precision of each judge against the oracle on generated groups (a benchmark, not a test).

For each task: one expert trajectory (success) and `--failures` trajectories that follow the expert
but take one random other action at a random turn and then continue with the expert (kept only if
they fail). The oracle's pivotal turn is where the expert's advice was first ignored.

    python benchmarks/bench_judges.py --env prover/WebShop-v0 --tasks 50
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import judges  # noqa: E402
from judges.evaluate import precision_against_oracle, slip_groups  # noqa: E402


def groups_for(env_id: str, tasks: int, failures: int, seed: int) -> list:
    return slip_groups(env_id, {"split": "test"}, tasks, failures, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", nargs="+", default=["prover/SearchQA-v0", "prover/WebShop-v0", "prover/ALFWorld-v0"])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--failures", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    report = {}
    for env_id in args.env:
        groups = groups_for(env_id, args.tasks, args.failures, args.seed)
        report[env_id] = {kind: precision_against_oracle(judges.make({"kind": kind}), groups)
                          for kind in ("random", "first_divergence", "oracle")}
        print(env_id, json.dumps(report[env_id]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
