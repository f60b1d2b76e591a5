"""CPU experiment (not a test): the tiny model on one env's easy split, GRPO vs ProVer vs
prover_random over seeds, with success-rate curves and ProVer's extra-generation overhead.

    python benchmarks/exp_prover_cpu.py --seeds 0 1 2 --iterations 20 --out runs/exp_cpu

Each run: SFT warm start on expert trajectories, then RL with the given method. Writes
``summary.json`` (per method: mean final success, curve, overhead ratios) next to the runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.config import load_config  # noqa: E402
from trainers.train import Trainer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "configs/train/searchqa_tiny_grpo.yaml"))
    ap.add_argument("--methods", nargs="+", default=["grpo", "prover", "prover_random"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--out", default="runs/exp_cpu")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    summary = {}
    for method in args.methods:
        curves, extra_tokens, extra_steps = [], [], []
        for seed in args.seeds:
            out = Path(args.out) / f"{method}-s{seed}"
            cfg = load_config(args.config, [f"method={method}", f"seed={seed}", f"iterations={args.iterations}",
                                            f"out_dir={out}", *args.overrides])
            Trainer(cfg, resume=True).run()
            rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
            curves.append([r["success"] for r in rows])
            extra_tokens.append(statistics.mean(r["prover/extra_tokens_ratio"] for r in rows))
            extra_steps.append(statistics.mean(r["prover/extra_env_steps_ratio"] for r in rows))
            print(method, seed, "success curve", curves[-1], flush=True)
        last = [statistics.mean(c[-3:]) for c in curves]
        summary[method] = {"seeds": args.seeds, "final_success_mean": statistics.mean(last),
                           "final_success_std": statistics.pstdev(last), "curves": curves,
                           "extra_tokens_ratio": statistics.mean(extra_tokens),
                           "extra_env_steps_ratio": statistics.mean(extra_steps)}
        print(method, json.dumps({k: v for k, v in summary[method].items() if k != "curves"}), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
