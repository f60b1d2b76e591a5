"""Zero-shot greedy success of a named pretrained model on unseen tasks of each env (a benchmark, not a test).

    python benchmarks/pretrained_zero_shot.py --model pretrained:smollm2-135m --episodes 50 --json runs/zero_shot.json

Per setting (a base recipe's env, held-out split and prompt format, trainers/bases.py): the first ``--episodes``
held-out tasks, one greedy episode each through the env's prompt format and the model's chat template; the
success rate and the share of turns whose reply parsed into an action, each with its Wilson 95% interval, and the
wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboards.stats import wilson  # noqa: E402

SETTINGS = ("alfworld_pivot", "webshop", "searchqa")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="pretrained:smollm2-135m")
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS))
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    from agents.backends.hf_backend import HFBackend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy
    from agents.rollout import play_tasks, split_task_ids
    from trainers.bases import RECIPES

    torch.set_num_threads(args.threads)
    backend = HFBackend(args.model, max_tokens=args.max_tokens, temperature=0.0)
    report: dict = {"model": args.model, "max_tokens": args.max_tokens, "settings": {}}
    for name in args.settings:
        spec = RECIPES[name]
        policy = LLMPolicy(backend, make_format(spec["env_id"], **spec["format"]))
        ids = split_task_ids(spec["env_id"], spec["eval_kwargs"], args.episodes)
        t0 = time.time()
        trajs = play_tasks(spec["env_id"], spec["eval_kwargs"], policy, ids, batch=args.batch)
        won = sum(t.won for t in trajs)
        turns = [u for t in trajs for u in t.turns]
        parsed = sum(u.valid for u in turns)
        row = {
            "split": spec["eval_kwargs"].get("split"),
            "episodes": len(trajs),
            "success": won / len(trajs),
            "success_ci": wilson(won, len(trajs)),
            "turns": len(turns),
            "parsed": parsed / len(turns) if turns else None,
            "parsed_ci": wilson(parsed, len(turns)),
            "seconds": round(time.time() - t0, 1),
            "example": turns[0].text[:300] if turns else "",
        }
        report["settings"][name] = row
        print(name, json.dumps(row), flush=True)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
