"""Precision of each judge against the oracle on generated groups (a benchmark, not a test).

For each task: one expert trajectory (success) and `--failures` trajectories that follow the expert
but take one random other action at a random turn and then continue with the expert (kept only if
they fail). The oracle's pivotal turn is where the expert's advice was first ignored.

    python benchmarks/bench_judges.py --env prover/WebShop-v0 --tasks 50
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import judges  # noqa: E402
from agents.baselines import ExpertPolicy, PolicyOutput, RandomPolicy  # noqa: E402
from agents.rollout import rollout  # noqa: E402
from judges.evaluate import precision_against_oracle  # noqa: E402


class OneSlip(ExpertPolicy):
    def __init__(self, turn: int, rng: random.Random):
        self.turn, self.k, self.random = turn, 0, RandomPolicy(rng.randrange(1 << 30))

    def act(self, env, observation, info, history=None):
        out = super().act(env, observation, info)
        k, self.k = self.k, self.k + 1
        if k == self.turn:
            alt = self.random.act(env, observation, info)
            if alt.action != out.action:
                return PolicyOutput(alt.action, alt.action)
        return out


def groups_for(env_id: str, tasks: int, failures: int, seed: int) -> list:
    env = gym.make(env_id, split="test")
    rng = random.Random(seed)
    out = []
    for s in range(tasks):
        good = rollout(env, ExpertPolicy(), seed=s)
        bad = []
        for _ in range(failures * 3):
            t = rollout(env, OneSlip(rng.randrange(len(good.turns)), rng), seed=s)
            if not t.won:
                bad.append(t)
            if len(bad) == failures:
                break
        if bad:
            out.append([good, *bad])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", nargs="+", default=["prover/SearchQA-v0", "prover/WebShop-v0"])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--failures", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    report = {}
    for env_id in args.env:
        groups = groups_for(env_id, args.tasks, args.failures, args.seed)
        report[env_id] = {kind: precision_against_oracle(judges.make({"kind": kind}), groups)
                          for kind in ("random", "first_divergence", "oracle")}
        print(env_id, json.dumps(report[env_id]), flush=True)


if __name__ == "__main__":
    main()
