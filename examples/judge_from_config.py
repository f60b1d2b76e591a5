"""Plug a judge from a config file, let it propose the segment behind a group's different outcomes,
and verify that segment as ProVer does (continuations before and after it).

    python examples/judge_from_config.py                    # the shipped config first_divergence
    python examples/judge_from_config.py openai_local       # an LLM judge (OpenAI-compatible), shipped too
    python examples/judge_from_config.py my_judge.yaml      # or a YAML file of your own

Shipped configs are found by name (configs/judges/<name>.yaml, package data when installed).
"""

import sys

import gymnasium as gym

import judges
import prover_gym  # noqa: F401
from agents.baselines import ExpertPolicy, HastyExpert
from agents.rollout import rollout
from trainers.verification import verify_segment


def main(config: str = "first_divergence") -> dict:
    judge = judges.make(config)
    # WebShop from the target's page with no spare step: buying before choosing every option fails
    env = gym.make("prover/WebShop-v0", split="test", start="item", budget_slack=0)
    task = env.unwrapped.task_ids()[1]
    group = [rollout(env, ExpertPolicy(), task_id=task), rollout(env, HastyExpert(1.0), task_id=task)]
    print("outcomes:", [t.won for t in group], "| actions:", [[turn.action for turn in t.turns] for t in group])
    proposal = judge.propose(group)
    print("proposal:", proposal)
    if proposal is None:
        return {"proposal": None}
    # A_seg = success rate of continuations after the segment - before it (a hasty continuation policy)
    result = verify_segment(env, group[proposal.trajectory], proposal, HastyExpert(0.5, seed=1), m=8)
    before = sum(result.success_before) / len(result.success_before)
    after = sum(result.success_after) / len(result.success_after)
    print(f"verified A_seg = {result.a_seg:+.2f} (success after {after:.2f} - before {before:.2f})")
    env.close()
    return {"proposal": proposal, "a_seg": result.a_seg}


if __name__ == "__main__":
    main(*sys.argv[1:2])
