"""Judge precision measured by verification, on generated one-slip groups (a benchmark, not a test).

For each task: one expert trajectory (success) and `--failures` trajectories that follow the expert
but take one random other action at a random turn (kept only if they fail; under a step budget of
`--slack` extra turns). Each judge's proposals are verified with M continuations of a noisy expert
(the expert with `--eps` random turns), the same policy and seeds for every judge:
- precision: the share of proposals whose A_seg > 0 (the only ones ProVer credits);
- mean A_seg; agreement: the share naming the exhaustive judge's best verified turn;
- oracle_hit (for comparison only): the share containing the failed run's first departure from the
  scripted expert, which has privileged information (e.g. WebShop's expert knows the target item).

    python benchmarks/bench_judges.py --env prover/WebShop-v0 --tasks 50
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import judges  # noqa: E402
from trainers.judge_eval import (  # noqa: E402
    NoisyExpert,
    best_turns,
    precision_against_oracle,
    slip_groups,
    verified_precision,
)
from trainers.verification import ValueEstimator  # noqa: E402

KINDS = [
    {"kind": "random"},
    {"kind": "random", "side": "any"},
    {"kind": "first_divergence"},
    {"kind": "first_divergence", "side": "failed"},
    {"kind": "oracle"},
    {"kind": "exhaustive"},
]
EASY_ALFWORLD = {"task_types": ["pick_and_place_simple"], "max_receptacles": 5, "num_distractors": 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", nargs="+", default=["prover/SearchQA-v0", "prover/WebShop-v0", "prover/ALFWorld-v0"])
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--failures", type=int, default=3)
    ap.add_argument("--slack", type=int, default=1)
    ap.add_argument("--eps", type=float, default=0.3)
    ap.add_argument("--m", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    report = {}
    for env_id in args.env:
        kwargs = {"split": "test", **(EASY_ALFWORLD if "ALFWorld" in env_id else {})}
        groups = slip_groups(env_id, kwargs, args.tasks, args.failures, args.seed, slack=args.slack)
        env = gym.make(env_id, **kwargs)
        report[env_id] = {}
        references = best_turns(groups, ValueEstimator(env, NoisyExpert(args.eps, seed=args.seed + 1), args.m))
        for spec in KINDS:
            name = spec["kind"] + (f"[{spec['side']}]" if "side" in spec else "")
            t0 = time.time()

            def fresh(spec=spec):
                judge = judges.make(spec)
                if hasattr(judge, "bind"):
                    judge.bind(ValueEstimator(env, NoisyExpert(args.eps, seed=args.seed + 2), args.m))  # noqa: B023 - called in this iteration
                return judge

            judge = fresh()
            estimator = ValueEstimator(env, NoisyExpert(args.eps, seed=args.seed), args.m)
            stats = verified_precision(judge, groups, estimator, references=references)
            stats["oracle_hit"] = precision_against_oracle(fresh(), groups)["precision"]
            stats["seconds"] = round(time.time() - t0, 2)
            report[env_id][name] = stats
            print(env_id, name, json.dumps(stats), flush=True)
        env.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
