"""Branch an env mid-episode and compare continuations from the same state.

    python examples/branch_mid_episode.py

Plays the WebShop expert for two steps, snapshots the env, then continues three copies of that state
(``branch``) with different policies and restores the original to replay it exactly.
"""

import gymnasium as gym

import prover_gym  # noqa: F401  (registers prover/*)
from agents.baselines import ExpertPolicy, HastyExpert, RandomPolicy
from agents.rollout import rollout_from
from prover_gym import branch, restore, snapshot


def main() -> dict:
    env = gym.make("prover/WebShop-v0", split="test")
    obs, info = env.reset(seed=3)
    print("task:", info["task"])
    for _ in range(2):  # search, then click the target product
        action = env.unwrapped.expert_action()
        obs, reward, terminated, truncated, info = env.step(action)
        print(f"step {info['step']}: {action}")
    snap = snapshot(env)  # picklable; a few hundred bytes for WebShop

    outcomes = {}
    policies = {"expert": ExpertPolicy(), "hasty": HastyExpert(1.0), "random": RandomPolicy(seed=0)}
    for (name, policy), copy in zip(policies.items(), branch(snap, len(policies))):
        traj = rollout_from(copy, snapshot(copy), policy)
        outcomes[name] = (traj.won, traj.total_reward, [t.action for t in traj.turns])
        print(f"{name:>7}: won={traj.won} reward={traj.total_reward:.2f} actions={outcomes[name][2]}")
        copy.close()

    restore(env, snap)  # the original env is back at the branch point, exactly
    assert env.unwrapped.current_state()[1]["step"] == 2
    env.close()
    return outcomes


if __name__ == "__main__":
    main()
