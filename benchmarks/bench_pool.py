"""EnvPool scaling, side by side in one run (a benchmark, not a test).

Steps/s of each env stepped as a batch by ``EnvPool`` with 1, 2, 4 and 8 envs (process backend) on
this machine, against the same envs stepped one after another in this process (the obvious
alternative, and what the pool costs nothing over), and the pool's added latency per batched step
(a step of a trivial action on 1 env, through the pool vs direct).

    python benchmarks/bench_pool.py [--sizes 1 2 4 8] [--steps 200] [--ray] [--json out.json]

``--ray`` adds the same figures for ``backend="ray"`` (a local 2-CPU cluster on loopback, the envs
spread over 2 actors) and Ray's per-call latency.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import prover_gym  # noqa: E402,F401
from prover_gym import EnvPool  # noqa: E402

ENVS = {
    "prover/SearchQA-v0": {"split": "test"},
    "prover/WebShop-v0": {"split": "test"},
    "prover/ALFWorld-v0": {"split": "valid_unseen", "max_receptacles": 8, "num_distractors": 3, "expert": False},
}


WARMUP = 30  # steps per env before timing


def _action(info: dict, rng: random.Random, env_id: str) -> str:
    adm = info.get("admissible_actions")
    if adm:
        a = rng.choice(adm)
        return "search[red shoes]" if a == "search[<query>]" else a
    return (
        "search[" + " ".join(rng.sample(info.get("task", "a b c").split(), 2)) + "]"
        if rng.random() < 0.8
        else "answer[x]"
    )


def _pool(env_id: str, n: int, backend: str, kwargs: dict) -> EnvPool:
    extra = {"envs_per_worker": max(1, (n + 1) // 2)} if backend == "ray" else {}
    return EnvPool(env_id, n, backend=backend, **extra, **kwargs)


def pool_rate(env_id: str, kwargs: dict, n: int, steps: int, seed: int = 0, backend: str = "process") -> float:
    rng = random.Random(seed)
    with _pool(env_id, n, backend, kwargs) as pool:
        out = pool.reset(seeds=list(range(n)))
        infos = [i for _, i in out]
        done, t = -WARMUP * n, None
        while done < steps:
            if done >= 0 and t is None:  # after the warm-up (lazy indexes, first game loads)
                t = time.perf_counter()
            res = pool.step([_action(i, rng, env_id) for i in infos])
            done += n
            for k, (_obs, _reward, term, trunc, info) in enumerate(res):
                if term or trunc:
                    _, info = pool.reset(seeds=[done + WARMUP * n + n + k], indices=[k])[0]
                infos[k] = info
        return done / (time.perf_counter() - t)


def direct_rate(env_id: str, kwargs: dict, steps: int, seed: int = 0) -> float:
    rng = random.Random(seed)
    env = gym.make(env_id, **kwargs)
    _, info = env.reset(seed=0)
    for k in range(-WARMUP, steps):
        if k == 0:
            t = time.perf_counter()
        _, _, term, trunc, info = env.step(_action(info, rng, env_id))
        if term or trunc:
            _, info = env.reset(seed=k + 1 + WARMUP)
    rate = steps / (time.perf_counter() - t)
    env.close()
    return rate


def overhead_us(env_id: str, kwargs: dict, n: int = 200, backend: str = "process") -> dict:
    env = gym.make(env_id, **kwargs)
    env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(n):
        env.unwrapped.task()
    direct = (time.perf_counter() - t) / n
    with _pool(env_id, 1, backend, kwargs) as pool:
        pool.reset(seeds=[0])
        t = time.perf_counter()
        for _ in range(n):
            pool.call("task")
        pooled = (time.perf_counter() - t) / n
    env.close()
    return {
        "direct_call_us": round(direct * 1e6, 1),
        "pool_call_us": round(pooled * 1e6, 1),
        "pool_overhead_us": round((pooled - direct) * 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--envs", nargs="+", default=list(ENVS))
    ap.add_argument("--ray", action="store_true", help="also measure backend='ray' (needs ray)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.ray:
        import ray

        ray.init(
            num_cpus=2,
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    results = {}
    for env_id in args.envs:
        kwargs = ENVS[env_id]
        row = {"direct_steps_per_s": round(direct_rate(env_id, kwargs, args.steps), 1)}
        for n in args.sizes:
            row[f"pool{n}_steps_per_s"] = round(pool_rate(env_id, kwargs, n, args.steps), 1)
        best = max(row[f"pool{n}_steps_per_s"] for n in args.sizes)
        row["best_pool_over_direct"] = round(best / row["direct_steps_per_s"], 2)
        row.update(overhead_us(env_id, kwargs))
        if args.ray:
            for n in args.sizes:
                row[f"ray{n}_steps_per_s"] = round(pool_rate(env_id, kwargs, n, args.steps, backend="ray"), 1)
            row["ray_call_us"] = overhead_us(env_id, kwargs, backend="ray")["pool_call_us"]
        results[env_id] = row
        print(json.dumps({env_id: row}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
