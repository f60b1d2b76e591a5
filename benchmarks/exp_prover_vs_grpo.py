"""CPU experiment (not a test): does ProVer beat GRPO with the tiny model? In any base's setting
(trainers/bases.py): Search-QA single-hop (the query copied from the question decides whether the
answer can be read), WebShop from the item page (each option click), ALFWorld from the object (the
take and the carry).

    python benchmarks/exp_prover_vs_grpo.py --base webshop --seeds 0 1 2 --iterations 20 --out runs/exp_webshop

1. The shared SFT checkpoint is the setting's shipped base (bases/<name>: SFT on expert episodes of
   every train task, so SFT covers what RL trains on; `python -m trainers.bases build <name>`).
2. Every method x seed starts RL from it with the same budget; runs with the same seed see the same
   tasks in the same order (task sampling is the only use of the trainer's RNG).
3. Common random numbers: runs with the same seed see the same tasks and draw the same sampling
   keys (agents.backends.sampling), so two methods' rollouts are identical until their updates
   differ; ``prover beta=0`` is GRPO bit for bit (tests/test_crn.py).
4. Greedy evaluation on held-out tasks (``--eval-tasks``, default the whole eval split). Methods
   are compared *paired by training seed*: per seed the success difference on the same tasks, a
   paired-t 95% interval over seeds (leaderboards/stats.py); a difference is claimed only when it
   excludes 0. The eval-task bootstrap is printed beside it as eval noise only. With the per-seed
   SD the summary states the difference detectable at 80% power with these seeds.
5. ``grpo_matched``: GRPO given, as extra tasks, the generation prover spent in the same seed
   (its measured (continuation + judge) tokens per rollout token); it runs after prover.
Also: training success curves, the share of verified segments with A_seg > 0, credited segments,
and the cost in tokens by who spent them. Writes ``summary.json``; finished runs are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboards.stats import (  # noqa: E402
    bootstrap_ci,
    detectable_difference,
    paired_difference_ci,
    seed_paired_difference,
    seed_verdict,
    verdict,
)
from prover_gym.cache import atomic_write  # noqa: E402
from trainers import methods as registry  # noqa: E402
from trainers.config import load_config  # noqa: E402
from trainers.train import COST_METRICS as COST  # noqa: E402
from trainers.train import (
    Trainer,  # noqa: E402
    run_cost,  # noqa: E402
)

# a label -> trainer overrides; prover_exhaustive is ProVer with the exhaustive judge (the upper bound)
METHODS = {name: [f"method={name}"] for name in registry.names("rl")}  # grpo_matched: + the prover run's ratio
METHODS["prover_exhaustive"] = ["method=prover", "judge={kind: exhaustive}"]


def setting(name: str) -> tuple[list[str], dict]:
    """Trainer overrides of the base's setting (env, kwargs, prompt format, token budget) and its eval kwargs."""
    from trainers.bases import base_dir, recipe

    spec = recipe(name)
    overrides = [
        f"env_id={spec['env_id']}",
        f"env_kwargs={json.dumps(spec['train_kwargs'])}",
        f"policy_format={json.dumps(spec['format'])}",
        f"max_tokens={spec['sft']['max_tokens']}",
        f"model_path={base_dir(name)}",
    ]
    return overrides, spec["eval_kwargs"]


def preset_budget() -> list[str]:
    """The default leaderboard preset's RL budget (group size, lr, aggregation, ...) as trainer overrides, so
    the experiment and `make run` train alike; iterations come from --iterations."""
    import yaml

    preset = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "leaderboards" / "presets" / "default.yaml").read_text()
    )
    return [
        f"{k}={json.dumps(v)}" for k, v in preset["train"].items() if k != "iterations" and not k.startswith("sft_")
    ]


def evaluate(trainer: Trainer, n: int, kwargs: dict) -> dict[str, int]:
    """Greedy outcome (0/1) per held-out task (env ``kwargs``), the first ``n`` of the split (all when n = 0)."""
    from agents.rollout import split_outcomes

    with trainer.greedy():
        return split_outcomes(trainer.cfg.env_id, kwargs, trainer.policy, episodes=n)


def _threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def run_one(label: str, seed: int, common: list[str], out: str, eval_tasks: int, eval_kwargs: dict) -> str:
    """Train one method x seed from the shared base and evaluate it; writes <out>/<label>-s<seed>/result.json."""
    run_dir = Path(out) / f"{label}-s{seed}"
    extra = []
    if label == "grpo_matched":
        prover = Path(out) / f"prover-s{seed}" / "result.json"
        if not prover.is_file():
            raise SystemExit(f"grpo_matched seed {seed} is matched to prover's spending: run prover first ({prover})")
        extra = [f"match_ratio={json.loads(prover.read_text())['match_ratio']}"]
    cfg = load_config(None, common + METHODS[label] + extra + [f"seed={seed}", f"out_dir={run_dir}"])
    t0 = time.time()
    trainer = Trainer(cfg, resume=True)
    trainer.run()
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    a_seg = [a for r in rows for a in r.get("prover/segment_advantages", [])]
    from leaderboards.report import probe_points

    result = {
        "seed": seed,
        "curve": [r["success"] for r in rows],
        "probe": probe_points(rows),
        "outcomes": evaluate(trainer, eval_tasks, eval_kwargs),
        "proposed": sum(r["prover/proposed_segments"] for r in rows),
        "verified": sum(r["prover/verified_segments"] for r in rows),
        "credited": sum(r["prover/credited_segments"] for r in rows),
        "positive": sum(a > 0 for a in a_seg),
        "a_seg_mean": statistics.mean(a_seg) if a_seg else None,
        "extra_tokens_ratio": statistics.mean(r["prover/extra_tokens_ratio"] for r in rows),
        "extra_env_steps_ratio": statistics.mean(r["prover/extra_env_steps_ratio"] for r in rows),
        **run_cost(rows),
        "seconds": round(time.time() - t0, 1),
    }
    trainer.close()
    atomic_write(run_dir / "result.json", json.dumps(result))
    return f"{label}-s{seed}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--methods",
        nargs="+",
        default=["grpo", "prover", "grpo_matched", "gigpo", "prover_random", "prover_unverified"],
        choices=sorted(METHODS),
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument(
        "--base", default="searchqa", help="the setting and its shipped SFT base: searchqa | webshop | alfworld"
    )
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--eval-tasks", type=int, default=0, help="held-out tasks to evaluate (0 = all)")
    ap.add_argument("--out", default="runs/exp_prover")
    ap.add_argument(
        "--jobs", type=int, default=1, help="runs in parallel worker processes (cpu_count/jobs threads each)"
    )
    ap.add_argument(
        "--probe-tasks",
        type=int,
        default=0,
        help="held-out learning curve: greedy on the first N eval tasks every 2 iterations (0 = none)",
    )
    ap.add_argument("overrides", nargs="*", help="trainer overrides for every RL run, e.g. lr=2e-4 beta=0.5")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base_overrides, eval_kwargs = setting(args.base)
    common = (
        preset_budget()
        + base_overrides
        + ["sft_steps=0", f"iterations={args.iterations}", "progress=false", *args.overrides]
    )
    if args.probe_tasks:
        common += [f"probe_tasks={args.probe_tasks}", f"probe_kwargs={json.dumps(eval_kwargs)}"]
    summary: dict = {
        "base": args.base,
        "setting": base_overrides,
        "eval_kwargs": eval_kwargs,
        "iterations": args.iterations,
        "overrides": args.overrides,
        "seeds": args.seeds,
    }
    base = out / "sft-eval.json"
    if not base.is_file():
        t = Trainer(load_config(None, common + [f"out_dir={out / 'sft-eval'}"]))
        atomic_write(base, json.dumps(evaluate(t, args.eval_tasks, eval_kwargs)))
    sft_outcomes = json.loads(base.read_text())
    summary["sft"] = dict(zip(("mean", "low", "high"), bootstrap_ci(list(sft_outcomes.values()))))
    print("sft", json.dumps(summary["sft"]), flush=True)
    todo = [
        (label, seed)
        for label in args.methods
        for seed in args.seeds
        if not (out / f"{label}-s{seed}" / "result.json").is_file()
    ]
    # grpo_matched reads its seed's prover spending: a second wave
    later = [t for t in todo if t[0] == "grpo_matched"]
    todo = [t for t in todo if t[0] != "grpo_matched"]
    for wave in (todo, later):
        if args.jobs > 1 and len(wave) > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            threads = max(1, (os.cpu_count() or 1) // args.jobs)
            with ProcessPoolExecutor(
                max_workers=args.jobs, mp_context=mp.get_context("spawn"), initializer=_threads, initargs=(threads,)
            ) as ex:
                jobs = [(label, seed, common, str(out), args.eval_tasks, eval_kwargs) for label, seed in wave]
                for done in ex.map(run_one, *zip(*jobs)):
                    print("finished", done, flush=True)
        else:
            for label, seed in wave:
                run_one(label, seed, common, str(out), args.eval_tasks, eval_kwargs)
    outcomes: dict[str, dict[int, dict[str, int]]] = {}
    for label in args.methods:
        runs = []
        for seed in args.seeds:
            run_dir = out / f"{label}-s{seed}"
            result_file = run_dir / "result.json"
            result = json.loads(result_file.read_text())
            runs.append(result)
            succ = sum(result["outcomes"].values()) / len(result["outcomes"])
            print(
                label,
                seed,
                f"test {succ:.3f}",
                json.dumps({k: v for k, v in result.items() if k not in ("outcomes", "curve")}),
                flush=True,
            )
        outcomes[label] = {r["seed"]: r["outcomes"] for r in runs}
        flat = [o for r in runs for o in r["outcomes"].values()]
        per_seed = [sum(r["outcomes"].values()) / len(r["outcomes"]) for r in runs]
        k = max(1, args.iterations // 4)
        summary[label] = {
            "test_success": dict(zip(("mean", "low", "high"), bootstrap_ci(flat))),
            "per_seed": per_seed,
            "vs_sft": verdict(paired_difference_ci(flat, [sft_outcomes[t] for r in runs for t in r["outcomes"]])),
            "train_success_first": statistics.mean(statistics.mean(r["curve"][:k]) for r in runs),
            "train_success_last": statistics.mean(statistics.mean(r["curve"][-k:]) for r in runs),
            "curve": [statistics.mean(c) for c in zip(*(r["curve"] for r in runs))],
            "probe": [[p[0][0], statistics.mean(x[1] for x in p)] for p in zip(*(r.get("probe", []) for r in runs))],
            "proposed": sum(r["proposed"] for r in runs),
            "verified": sum(r["verified"] for r in runs),
            "credited": sum(r["credited"] for r in runs),
            "positive": sum(r["positive"] for r in runs),
            "extra_tokens_ratio": statistics.mean(r["extra_tokens_ratio"] for r in runs),
            "extra_env_steps_ratio": statistics.mean(r["extra_env_steps_ratio"] for r in runs),
            **{k: statistics.mean(r.get(k, 0) for r in runs) for k in COST},
            "seconds_per_run": statistics.mean(r["seconds"] for r in runs),
        }
    for a, b in (("prover", "grpo"), ("prover", "grpo_matched"), ("grpo_matched", "grpo"), ("gigpo", "grpo")) + tuple(
        (m, "grpo") for m in ("prover_random", "prover_unverified", "prover_exhaustive")
    ):
        if a not in outcomes or b not in outcomes:
            continue
        seeds = sorted(set(outcomes[a]) & set(outcomes[b]))
        rate = {m: {s: statistics.mean(outcomes[m][s][t] for t in outcomes[b][s]) for s in seeds} for m in (a, b)}
        diff = seed_paired_difference(rate[a], rate[b])
        xa = [outcomes[a][s][t] for s in seeds for t in outcomes[b][s]]
        xb = [outcomes[b][s][t] for s in seeds for t in outcomes[b][s]]
        summary[f"{a} - {b}"] = {
            **diff,
            "verdict": seed_verdict(diff),
            "eval_noise_only": verdict(paired_difference_ci(xa, xb)),
            "detectable_80pct": detectable_difference(diff["sd"], len(seeds)) if diff["sd"] is not None else None,
        }
        if a in summary and b == "grpo":
            summary[a]["vs_grpo"] = seed_verdict(diff)
        print(
            f"{a} - {b}: {summary[f'{a} - {b}']['verdict']}; per seed {[round(100 * x, 1) for x in diff['per_seed']]}; "
            f"eval noise only: {summary[f'{a} - {b}']['eval_noise_only']}",
            flush=True,
        )
    for label in args.methods:
        s = summary[label]
        print(
            f"{label:18s} test {100 * s['test_success']['mean']:.1f}% [{100 * s['test_success']['low']:.1f}, "
            f"{100 * s['test_success']['high']:.1f}]  vs SFT: {s['vs_sft']}  vs GRPO: {s.get('vs_grpo', '-')}",
            flush=True,
        )
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
