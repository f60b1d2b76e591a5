"""`python leaderboards/run.py`: the benchmark tables (suites x methods -> results -> tables).

The leaderboard needs the trainer (GRPO + ProVer) and the agents, which land in their own issues.
Until then this entry point checks that the environments it will evaluate are available and says
what is missing, exiting 0 so the README's run command stays true.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import gymnasium as gym

    import prover_gym

    print("prover-gym leaderboard")
    for env_id in sorted(prover_gym.ENV_IDS):
        available = env_id in gym.registry
        print(f"  {env_id:24s} {'available' if available else 'not installed'}")
    for env_id in sorted(prover_gym.ENV_IDS):
        if env_id not in gym.registry:
            continue
        env = gym.make(env_id, split="test")
        wins, n = 0, 50
        for seed in range(n):
            env.reset(seed=seed)
            done, info = False, {}
            while not done:
                _, _, term, trunc, info = env.step(env.unwrapped.expert_action())
                done = term or trunc
            wins += bool(info["won"])
        print(f"  sanity: the {env_id} expert solves {wins}/{n} bundled test tasks")
    print("The training methods (sft, grpo, prover) and the tables need the trainer, which is not built yet; "
          "see the open issues. Nothing else to run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
