"""Where a leaderboard cell's time goes, per env: one table of stages, measured on one core.

For each env of a preset (default: ``default``, the cells of ``make run``), a short RL run of each
method (default grpo and prover) from the env's shipped base with the preset's settings, then a greedy
evaluation, each stage timed separately:

- ``load``: building the trainer (model, tokenizer, env pool);
- ``generate`` / ``env``: rollouts (the policy's generation, the envs' steps and resets);
- ``verify gen`` / ``verify env``: ProVer's continuations (judge included in ``credit other``);
- ``learn``: the learner's forward/backward and optimizer steps (and the weight sync);
- ``other``: checkpoints, metrics, bookkeeping (iteration wall time minus the stages above);
- ``eval``: greedy evaluation of ``--eval`` held-out tasks, as the leaderboard does;
- ``game load``: one new task's reset (for ALFWorld, loading the game), median over 20 tasks.

    python benchmarks/profile_stages.py                          # 3 iterations, 50 eval tasks, all envs
    python benchmarks/profile_stages.py --envs alfworld --iterations 5 --json prof.json

Prints the table (seconds, and each stage's share of the cell) and, with --json, writes the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STAGES = ("load", "generate", "env", "verify gen", "verify env", "credit other", "learn", "other", "eval")


def game_load_ms(env_id: str, kwargs: dict, n: int = 20) -> float:
    import gymnasium as gym

    import prover_gym  # noqa: F401

    env = gym.make(env_id, **kwargs)
    ids = env.unwrapped.task_ids()[: n + 1]
    env.reset(options={"task_id": ids[0]})
    times = []
    for t in ids[1:]:
        t0 = time.perf_counter()
        env.reset(options={"task_id": t})
        times.append((time.perf_counter() - t0) * 1e3)
    env.close()
    return round(statistics.median(times), 1)


def profile_cell(preset: dict, env_name: str, method: str, iterations: int, eval_tasks: int) -> dict:
    from leaderboards.run import _train_config, evaluate, llm_policy, shipped_base
    from leaderboards.run import eval_tasks as pick_tasks
    from trainers.train import Trainer

    env_cfg = preset["envs"][env_name]
    base = shipped_base(env_name, env_cfg)
    preset = {**preset, "train": {**preset["train"], "iterations": iterations, "probe_tasks": 0, "progress": False}}
    with tempfile.TemporaryDirectory() as tmp:
        model = base["model_dir"] if base else None
        cfg = _train_config(preset, env_cfg, method, 0, Path(tmp) / "run", model, preset["judge"])
        t0 = time.perf_counter()
        trainer = Trainer(cfg)
        load = time.perf_counter() - t0
        walls, rows = [], []
        for _ in range(iterations):
            t = time.perf_counter()
            rows.append(trainer.step())
            trainer.save()
            walls.append(time.perf_counter() - t)
        trainer.close()
        s = {k: sum(r.get(f"time/{k}", 0.0) for r in rows) for k in ("rollout_generate", "rollout_env", "credit")}
        s.update({k: sum(r.get(f"time/{k}", 0.0) for r in rows) for k in ("credit_generate", "credit_env", "learn")})
        out = {
            "load": load,
            "generate": s["rollout_generate"],
            "env": s["rollout_env"],
            "verify gen": s["credit_generate"],
            "verify env": s["credit_env"],
            "credit other": s["credit"] - s["credit_generate"] - s["credit_env"],
            "learn": s["learn"],
        }
        out["other"] = sum(walls) - sum(v for k, v in out.items() if k != "load")
        tasks = pick_tasks(env_cfg["env_id"], env_cfg["eval_kwargs"], eval_tasks, 0)
        policy = llm_policy(preset, str(Path(tmp) / "run" / "checkpoint" / "model"), env_cfg, 0)
        t = time.perf_counter()
        evaluate(
            env_cfg["env_id"],
            env_cfg["eval_kwargs"],
            policy,
            tasks,
            batch=preset["eval"].get("batch", 8),
            group_by=None,
            desc="eval",
        )
        out["eval"] = time.perf_counter() - t
    out = {k: round(v, 2) for k, v in out.items()}
    out["tokens"] = sum(r["tokens"] for r in rows)
    out["iteration_s"] = round(statistics.median(walls), 2)
    return out


def main(argv=None) -> dict:
    import torch

    from leaderboards.run import load_preset

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="default")
    ap.add_argument("--envs", nargs="+")
    ap.add_argument("--methods", nargs="+", default=["grpo", "prover"])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--eval", type=int, default=50, help="held-out tasks evaluated greedily")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # as each leaderboard worker
    preset = load_preset(args.preset)
    table = {}
    for env_name in args.envs or list(preset["envs"]):
        env_cfg = preset["envs"][env_name]
        loading = game_load_ms(env_cfg["env_id"], env_cfg["train_kwargs"])
        for method in args.methods:
            row = profile_cell(preset, env_name, method, args.iterations, args.eval)
            row["game load ms"] = loading
            table[f"{env_name} {method}"] = row
            print(json.dumps({f"{env_name} {method}": row}), flush=True)
    print(f"\nseconds per stage ({args.iterations} iterations, {args.eval} eval tasks, 1 thread); share of the cell")
    print(f"| cell | {' | '.join(STAGES)} | total | s/iteration | game load ms |")
    print(f"| --- |{' --- |' * (len(STAGES) + 3)}")
    for name, row in table.items():
        total = sum(row[k] for k in STAGES)
        cells = " | ".join(f"{row[k]:.1f} ({100 * row[k] / total:.0f}%)" for k in STAGES)
        print(f"| {name} | {cells} | {total:.1f} | {row['iteration_s']} | {row['game load ms']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return table


if __name__ == "__main__":
    main()
