"""Evaluate any OpenAI-compatible model (vLLM, SGLang, a hosted API) on all three envs.

    python examples/evaluate_openai_model.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-4B --episodes 20

The API key, if the server needs one, is read from $OPENAI_API_KEY. Success rates are printed with their
standard error; for a leaderboard row use `prover-gym-leaderboard --eval-only --policy ...`.
"""

import argparse
import math

import prover_gym  # noqa: F401
from agents.backends import make_backend
from agents.formats import make_format
from agents.llm_policy import LLMPolicy
from agents.rollout import play_tasks, split_task_ids

ENVS = {
    "prover/SearchQA-v0": {"split": "test"},
    "prover/WebShop-v0": {"split": "test"},
    "prover/ALFWorld-v0": {"split": "valid_unseen"},
}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args(argv)
    backend = make_backend(
        {
            "kind": "openai",
            "model": args.model,
            "base_url": args.base_url,
            "max_tokens": args.max_tokens,
            "temperature": 0.0,
        }
    )
    results = {}
    for env_id, kwargs in ENVS.items():
        policy = LLMPolicy(backend, make_format(env_id))
        trajs = play_tasks(env_id, kwargs, policy, split_task_ids(env_id, kwargs, args.episodes))
        p = sum(t.won for t in trajs) / len(trajs)
        se = math.sqrt(p * (1 - p) / len(trajs))
        results[env_id] = p
        print(f"{env_id}: success {100 * p:.1f}% +- {100 * se:.1f} ({len(trajs)} episodes)")
    return results


if __name__ == "__main__":
    main()
