"""Pilot of a setting with a known pivot (not a test): is it one where credit assignment can decide?

    python benchmarks/pilot_pivot.py --base alfworld_pivot --groups 48 --out runs/pilot_pivot

On the base's own training setting (trainers/bases.py), the go/no-go of the issue "Where credit
assignment decides", each figure with its 95% interval:
1. sampled base success (temperature 1, the trainer's keyed sampling) in 20-60%;
2. >= 60% of groups of G rollouts mixed (both outcomes: where GRPO and ProVer have a signal);
3. >= 60% of failures decided at the pivot: the failed episode's action at ``info["pivot_step"]``
   is not the expert's move there (the env's privileged plan, from the snapshot);
4. the judges' localisation on the mixed groups: the share of proposals that contain the won
   trajectory's recorded pivot (first_divergence, last_shared_state, random won-side, the pivot
   oracle), and the share that contain the pivot or the transform right after it (heat / cool / clean:
   the second half of the decision, which a run that reached the appliance can still miss);
5. with ``--grpo-iterations N``: GRPO for N iterations from the base (the default preset's budget, with
   ``--set`` overrides such as ``lr=5e-5``), greedy on ``--eval-tasks`` held-out tasks against the base's
   (paired by task), which should be higher.
Writes ``pilot.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboards.stats import wilson  # noqa: E402

TRANSFORM = ("heat", "cool", "clean")  # the verb of the action that applies the goal's transform

# the default preset's RL budget per iteration (6 tasks, 4 whole-group updates, lr 1e-4, traj-mean)
BUDGET = ["tasks_per_iteration=6", "updates_per_epoch=4", "agg=traj-mean", "lr=1e-4"]


def rate(k: int, n: int) -> dict:
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else math.nan, "low": lo, "high": hi}


def base_groups(base: str, groups: int, group_size: int, seed: int, out: Path, model_path: str | None = None):
    """``groups`` tasks of ``base``'s training setting, ``group_size`` rollouts each, sampled as the trainer
    samples (temperature 1, keyed); returns (trainer, pool, groups, the trainer overrides used)."""
    from agents.rollout import rollout_chunks
    from prover_gym import EnvPool
    from trainers.bases import base_dir, recipe
    from trainers.config import load_config
    from trainers.train import Trainer

    spec = recipe(base)
    out.mkdir(parents=True, exist_ok=True)
    common = [
        f"env_id={spec['env_id']}",
        f"env_kwargs={json.dumps(spec['train_kwargs'])}",
        f"policy_format={json.dumps(spec['format'])}",
        f"max_tokens={spec['sft']['max_tokens']}",
        f"model_path={model_path or base_dir(base)}",
        f"group_size={group_size}",
        "progress=false",
        "torch_threads=1",
        f"seed={seed}",
    ]
    trainer = Trainer(load_config(None, [*common, f"out_dir={out / 'base'}", f"tasks_per_iteration={groups}"]))
    tasks = trainer.draw_tasks()
    keys = [trainer.sample_key(t, j) for t in tasks for j in range(group_size)]
    # a pool of 36 envs, reused chunk by chunk (each ALFWorld env holds its own copy of the planner's library)
    pool = EnvPool(spec["env_id"], min(36, len(keys)), backend="sync", **spec["train_kwargs"])
    trajs = rollout_chunks(pool, trainer.policy, task_ids=[k[3] for k in keys], keys=keys)
    return trainer, pool, [trajs[i * group_size : (i + 1) * group_size] for i in range(len(tasks))], common


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="alfworld_pivot")
    ap.add_argument("--groups", type=int, default=48, help="groups (tasks) to roll out for figures 1-4")
    ap.add_argument("--group-size", type=int, default=6)
    ap.add_argument("--grpo-iterations", type=int, default=0, help="figure 5: GRPO iterations (0: skip)")
    ap.add_argument("--eval-tasks", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/pilot_pivot")
    ap.add_argument("--set", nargs="*", default=[], help="trainer overrides for figure 5's GRPO, e.g. lr=5e-5")
    args = ap.parse_args()

    import judges
    from agents.rollout import split_outcomes
    from judges.base import mixed_outcome
    from judges.oracle import recorded_pivot
    from leaderboards.stats import paired_difference_ci, verdict
    from prover_gym import restore
    from trainers.bases import recipe
    from trainers.config import load_config
    from trainers.judge_eval import localised
    from trainers.train import Trainer

    spec = recipe(args.base)
    out = Path(args.out)
    t0 = time.time()
    trainer, pool, groups, common = base_groups(args.base, args.groups, args.group_size, args.seed, out)
    trajs = [t for grp in groups for t in grp]
    g = args.group_size
    seconds_rollouts = time.time() - t0
    won = sum(t.won for t in trajs)
    mixed = [grp for grp in groups if mixed_outcome(grp)]
    # 3. failures decided at the pivot: the action there is not the expert's (restored from the snapshot)
    failed = [t for t in trajs if not t.won]
    decided = 0
    env = trainer.env
    for t in failed:
        k = recorded_pivot(t)
        if k is None:
            continue
        restore(env, t.turns[k].snapshot)
        if t.turns[k].action != env.unwrapped.expert_action():
            decided += 1
    # 4. localisation of each judge against the won trajectory's recorded pivot
    localisation = {}
    for name, cfg in (
        ("first_divergence", {"kind": "first_divergence", "side": "won"}),
        ("last_shared_state", {"kind": "last_shared_state", "side": "won"}),
        ("random (won side)", {"kind": "random", "side": "won", "seed": args.seed}),
        ("pivot oracle", {"kind": "pivot", "side": "won"}),
    ):
        judge, hits, decisions, proposals = judges.make(cfg), 0, 0, 0
        for grp in mixed:
            p = judge.propose(grp)
            if p is None:
                continue
            proposals += 1
            traj = grp[p.trajectory]
            k = recorded_pivot(traj)
            hits += bool(localised(grp, p))
            # the decision pair: the move at the pivot, or the transform (heat / cool / clean) right after it
            after = traj.turns[k + 1].action.split(" ")[0] if k is not None and k + 1 < len(traj.turns) else ""
            transform = after in TRANSFORM
            decisions += int(k is not None and (p.start <= k <= p.end or (transform and p.start <= k + 1 <= p.end)))
        localisation[name] = rate(hits, proposals)
        localisation[f"{name}: the pivot or its transform"] = rate(decisions, proposals)
    turns_after = [len(t.turns) - 1 - recorded_pivot(t) for t in failed if recorded_pivot(t) is not None]
    result: dict = {
        "base": args.base,
        "groups": len(groups),
        "group_size": g,
        "sampled_success": rate(won, len(trajs)),
        "mixed_groups": rate(len(mixed), len(groups)),
        "failures_decided_at_pivot": rate(decided, len(failed)),
        "turns_from_pivot_to_outcome_failed": sum(turns_after) / len(turns_after) if turns_after else None,
        "episode_turns": sum(len(t.turns) for t in trajs) / len(trajs),
        "localisation": localisation,
        "seconds_rollouts": round(seconds_rollouts, 1),
    }
    trainer.close()
    pool.close()
    if args.grpo_iterations:
        t1 = time.time()
        grpo = Trainer(
            load_config(
                None,
                [
                    *common,
                    *BUDGET,
                    *args.set,
                    f"out_dir={out / 'grpo'}",
                    f"iterations={args.grpo_iterations}",
                    "method=grpo",
                ],
            )
        )
        grpo.run()
        eval_kwargs = spec["eval_kwargs"]
        with grpo.greedy():
            after = split_outcomes(spec["env_id"], eval_kwargs, grpo.policy, episodes=args.eval_tasks)
        base = Trainer(load_config(None, [*common, f"out_dir={out / 'base-eval'}"]))
        with base.greedy():
            before = split_outcomes(spec["env_id"], eval_kwargs, base.policy, episodes=args.eval_tasks)
        ids = sorted(before)
        diff = paired_difference_ci([after[t] for t in ids], [before[t] for t in ids])
        result["grpo"] = {
            "iterations": args.grpo_iterations,
            "overrides": args.set,
            "base_greedy": rate(sum(before.values()), len(before)),
            "grpo_greedy": rate(sum(after.values()), len(after)),
            "grpo_minus_base": verdict(diff),
            "seconds": round(time.time() - t1, 1),
        }
        grpo.close()
        base.close()
    checks = {
        "sampled success in 20-60%": 0.2 <= result["sampled_success"]["rate"] <= 0.6,
        ">= 60% of groups mixed": result["mixed_groups"]["rate"] >= 0.6,
        ">= 60% of failures decided at the pivot": result["failures_decided_at_pivot"]["rate"] >= 0.6,
    }
    if "grpo" in result:
        checks["GRPO beats the base"] = result["grpo"]["grpo_minus_base"].startswith("higher")
    result["go"] = all(checks.values())
    result["checks"] = checks
    (out / "pilot.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
