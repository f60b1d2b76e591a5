"""CPU experiment (not a test): the tiny model on Search-QA's easy split (single-hop questions,
one search), GRPO vs ProVer vs prover_random over seeds, with success-rate curves and ProVer's
extra-generation overhead.

    python benchmarks/exp_prover_cpu.py --seeds 0 1 2 --iterations 15 --out runs/exp_cpu

One SFT warm start (``--sft-steps`` on expert trajectories) is trained once and saved to
``<out>/sft``; every method x seed starts RL from that same checkpoint with the same budget, and is
then evaluated greedily on the first ``--eval-tasks`` test questions and (the RL task
distribution) train questions. Writes ``summary.json`` (per
method: final eval success mean/std, training success curves, overhead ratios, seconds); a re-run
reuses finished runs (each resumes from its checkpoint).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prover_gym.cache import atomic_write  # noqa: E402
from trainers.config import load_config  # noqa: E402
from trainers.train import Trainer  # noqa: E402

EASY = ["env_id=prover/SearchQA-v0", "env_kwargs={split: train, max_turns: 2, data_sources: [single_hop]}"]


def sft_checkpoint(out: Path, steps: int, episodes: int, overrides: list[str]) -> Path:
    model = out / "sft"
    if (model / "config.json").is_file():
        return model
    cfg = load_config(None, EASY + [f"sft_steps={steps}", f"sft_episodes={episodes}", "iterations=0",
                                    f"out_dir={out / 'sft-run'}", "progress=false", *overrides])
    t0 = time.time()
    trainer = Trainer(cfg)
    losses = trainer.sft()
    trainer.export(out / "sft.tmp")
    (out / "sft.tmp").rename(model)
    print(f"SFT: {steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}, {time.time() - t0:.0f}s", flush=True)
    return model


def evaluate(trainer: Trainer, n: int, split: str) -> float:
    """Greedy success on the first ``n`` questions of the easy split's ``split``."""
    from agents.rollout import rollout_batch
    from prover_gym import EnvPool

    kwargs = {**trainer.cfg.env_kwargs, "split": split}
    with EnvPool(trainer.cfg.env_id, n, backend="sync", **kwargs) as pool:
        ids = pool.call("task_ids", indices=[0])[0][:n]
        trainer.generator.defaults["temperature"] = 0.0
        try:
            trajs = rollout_batch(pool, trainer.policy, task_ids=ids)
        finally:
            trainer.generator.defaults["temperature"] = trainer.cfg.temperature
    return sum(t.won for t in trajs) / len(trajs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=["grpo", "prover", "prover_random"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--sft-steps", type=int, default=1000)
    ap.add_argument("--sft-episodes", type=int, default=600)
    ap.add_argument("--eval-tasks", type=int, default=64)
    ap.add_argument("--out", default="runs/exp_cpu")
    ap.add_argument("overrides", nargs="*", help="trainer overrides for the RL runs, e.g. lr=2e-5 judge.kind=oracle")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sft = sft_checkpoint(out, args.sft_steps, args.sft_episodes, [])
    summary: dict = {"sft_steps": args.sft_steps, "iterations": args.iterations, "overrides": args.overrides}
    base = out / "sft-eval.json"  # the SFT checkpoint itself, greedy, on the same questions
    if not base.is_file():
        t = Trainer(load_config(None, EASY + [f"model_path={sft}", f"out_dir={out / 'sft-eval'}", "progress=false"]))
        atomic_write(base, json.dumps({"test": evaluate(t, args.eval_tasks, "test"),
                                       "train": evaluate(t, args.eval_tasks, "train")}))
    summary["sft"] = json.loads(base.read_text())
    print("sft", json.dumps(summary["sft"]), flush=True)
    for method in args.methods:
        runs = []
        for seed in args.seeds:
            run_dir = out / f"{method}-s{seed}"
            cfg = load_config(None, EASY + [f"model_path={sft}", "sft_steps=0", f"method={method}", f"seed={seed}",
                                            f"iterations={args.iterations}", f"out_dir={run_dir}", "progress=false",
                                            *args.overrides])
            result_file = run_dir / "result.json"
            if result_file.is_file():
                runs.append(json.loads(result_file.read_text()))
                continue
            t0 = time.time()
            trainer = Trainer(cfg, resume=True)
            trainer.run()
            rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
            result = {"seed": seed, "curve": [r["success"] for r in rows], "eval_success": evaluate(trainer, args.eval_tasks, "test"),
                      "train_eval_success": evaluate(trainer, args.eval_tasks, "train"),
                      "verified": sum(r["prover/verified_segments"] for r in rows),
                      "mean_a_seg": [r["prover/mean_segment_advantage"] for r in rows if r["prover/verified_segments"]],
                      "extra_tokens_ratio": statistics.mean(r["prover/extra_tokens_ratio"] for r in rows),
                      "extra_env_steps_ratio": statistics.mean(r["prover/extra_env_steps_ratio"] for r in rows),
                      "seconds": round(time.time() - t0, 1)}
            atomic_write(result_file, json.dumps(result))
            runs.append(result)
            print(method, seed, json.dumps({k: v for k, v in result.items() if k != "mean_a_seg"}), flush=True)
        evals = [r["eval_success"] for r in runs]
        train_evals = [r["train_eval_success"] for r in runs]
        summary[method] = {"seeds": args.seeds, "eval_success_mean": statistics.mean(evals),
                           "eval_success_std": statistics.pstdev(evals), "eval_success": evals,
                           "train_eval_success_mean": statistics.mean(train_evals),
                           "train_eval_success_std": statistics.pstdev(train_evals), "train_eval_success": train_evals,
                           "train_success_first3": statistics.mean(statistics.mean(r["curve"][:3]) for r in runs),
                           "train_success_last3": statistics.mean(statistics.mean(r["curve"][-3:]) for r in runs),
                           "verified_segments": sum(r["verified"] for r in runs),
                           "extra_tokens_ratio": statistics.mean(r["extra_tokens_ratio"] for r in runs),
                           "extra_env_steps_ratio": statistics.mean(r["extra_env_steps_ratio"] for r in runs),
                           "seconds_per_run": statistics.mean(r["seconds"] for r in runs),
                           "curves": [r["curve"] for r in runs]}
        print(method, json.dumps({k: v for k, v in summary[method].items() if k != "curves"}), flush=True)
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
