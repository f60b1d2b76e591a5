"""ALFWorld speed, side by side in one run (a benchmark, not a test).

1. env steps/s (random admissible policy, episodes of at most 50 steps, a new game each episode,
   resets included, handcoded expert on as in AlfredTWEnv) for
   - ``prover/ALFWorld-v0`` (memo patches, translation cache, reset = restore of the initial state),
   - the stock engine stack of AlfredTWEnv in-process (PddlEnv + AlfredDemangler + AlfredInfos +
     AlfredExpert, no patches), and
   - stock ``AlfredTWEnv(config).init_env(batch_size=1)`` (textworld.gym, as alfworld ships it);
2. snapshot + restore vs replay from reset, at depths 1, 10, 30 (ours, and replay on the stock stack);
3. the portable restore (operator replay in a fresh env) and the pickled snapshot size;
4. loading a game: ours with its translation stored in the user cache, ours on a game's first load, stock.

Games: the first N generated valid_unseen games (all six task types), and the official sample
when ../shared/data/alfworld-official-sample exists.

    python benchmarks/bench_alfworld.py [--games 6] [--episodes 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import prover_gym  # noqa: E402,F401
from prover_gym import branch, restore, snapshot  # noqa: E402
from prover_gym.alfworld.engine import stock_stack  # noqa: E402

OFFICIAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "alfworld-official-sample"
MAX_STEPS = 50


def run_ours(env, task_ids, episodes, seed=0) -> dict:
    rng = random.Random(seed)
    steps, t0 = 0, time.perf_counter()
    for ep in range(episodes):
        obs, info = env.reset(options={"task_id": task_ids[ep % len(task_ids)]})
        for _ in range(MAX_STEPS):
            obs, r, term, trunc, info = env.step(rng.choice(info["admissible_actions"]))
            steps += 1
            if term or trunc:
                break
    dt = time.perf_counter() - t0
    return {"steps": steps, "seconds": round(dt, 2), "steps_per_s": round(steps / dt, 1)}


def run_stock_stack(games, episodes, seed=0) -> dict:
    rng = random.Random(seed)
    steps, t0 = 0, time.perf_counter()
    env = stock_stack(games[0])
    for ep in range(episodes):
        env.load(games[ep % len(games)])  # as textworld.gym does: the next game file on each reset
        state = env.reset()
        for _ in range(MAX_STEPS):
            state, _, done = env.step(rng.choice(state["admissible_commands"]))
            steps += 1
            if done:
                break
    dt = time.perf_counter() - t0
    return {"steps": steps, "seconds": round(dt, 2), "steps_per_s": round(steps / dt, 1)}


def run_alfred_tw_env(root: Path, episodes, seed=0) -> dict:
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    config = {
        "env": {
            "goal_desc_human_anns_prob": 0,
            "task_types": [1, 2, 3, 4, 5, 6],
            "expert_type": "handcoded",
            "domain_randomization": False,
        },
        "dataset": {
            "data_path": str(root),
            "eval_id_data_path": str(root),
            "eval_ood_data_path": str(root),
            "num_train_games": -1,
            "num_eval_games": -1,
        },
        "rl": {"training": {"max_nb_steps_per_episode": MAX_STEPS}},
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": MAX_STEPS}},
    }
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        tw = AlfredTWEnv(config, train_eval="eval_out_of_distribution")
        env = tw.init_env(batch_size=1)
    rng = random.Random(seed)
    steps, t0 = 0, time.perf_counter()
    for _ in range(episodes):
        obs, infos = env.reset()
        for _ in range(MAX_STEPS):
            obs, scores, dones, infos = env.step([rng.choice(infos["admissible_commands"][0])])
            steps += 1
            if dones[0]:
                break
    dt = time.perf_counter() - t0
    env.close()
    return {"games": tw.num_games, "steps": steps, "seconds": round(dt, 2), "steps_per_s": round(steps / dt, 1)}


def load_ms(games: list[str]) -> dict:
    """Milliseconds to load each game once (a new game: load + reset to its opening text), in-process
    memos emptied first: ours with the translations in the user cache (every load after a game's first,
    in any process), ours with an empty translation cache (a game's first load anywhere), and the stock
    stack. Stock runs first so that no memo of ours helps it (it has none)."""
    import tempfile

    from prover_gym.alfworld import engine as eng

    def timed(load) -> list[float]:
        out = []
        for g in games:
            t = time.perf_counter()
            load(g)
            out.append((time.perf_counter() - t) * 1e3)
        return out

    def stock(g):
        stock_stack(g).reset()

    stock_ms = timed(stock)
    engine = eng.AlfredEngine()
    real_path = eng._translation_path
    with tempfile.TemporaryDirectory() as tmp:  # cold: nothing stored yet
        eng._translation_path = lambda d, p: Path(tmp) / (str(abs(hash((d, p)))) + ".pkl.z")
        eng._LOGIC_MEMO.clear()
        eng._TRANSLATION_MEMO.clear()
        cold = timed(engine.load)
        eng._translation_path = real_path
    for g in games:  # make sure the user cache holds them, then measure the warm loads
        engine.load(g)
    eng._LOGIC_MEMO.clear()
    eng._TRANSLATION_MEMO.clear()
    warm = timed(engine.load)

    def summary(ms):
        return {"min": round(min(ms), 1), "median": round(statistics.median(ms), 1), "max": round(max(ms), 1)}

    return {
        "games": len(games),
        "stock_ms": summary(stock_ms),
        "ours_cold_ms": summary(cold),
        "ours_warm_ms": summary(warm),
        "stock_over_warm": round(statistics.median(stock_ms) / statistics.median(warm), 1),
    }


def restore_vs_replay(env, task_id, game: str, depths=(1, 10, 30), seed=0) -> dict:
    rng = random.Random(seed)
    obs, info = env.reset(options={"task_id": task_id})
    actions, snaps = [], {}
    for d in range(1, max(depths) + 1):
        adm = [a for a in env.unwrapped.admissible_actions() if a not in ("help",)]
        a = rng.choice(adm)
        actions.append(a)
        if env.step(a)[2]:
            break
        if d in depths:
            snaps[d] = snapshot(env)
    out = {}
    for d, snap in snaps.items():
        n = 20
        t = time.perf_counter()
        for _ in range(n):
            s = snapshot(env)
        snap_ms = (time.perf_counter() - t) / n * 1e3
        t = time.perf_counter()
        for _ in range(n):
            restore(env, snap)
        restore_ms = (time.perf_counter() - t) / n * 1e3
        t = time.perf_counter()
        for _ in range(3):
            env.reset(options={"task_id": task_id})
            for a in actions[:d]:
                env.step(a)
        replay_ours_ms = (time.perf_counter() - t) / 3 * 1e3
        stock = stock_stack(game)
        t = time.perf_counter()
        stock.reset()
        for a in actions[:d]:
            stock.step(a)
        replay_stock_ms = (time.perf_counter() - t) * 1e3
        blob = pickle.dumps(snap)
        fresh = branch(snap, 1)  # includes a load of the game in a new engine
        t = time.perf_counter()
        restore(fresh[0], pickle.loads(blob))
        portable_ms = (time.perf_counter() - t) * 1e3
        fresh[0].close()
        out[d] = {
            "snapshot_ms": round(snap_ms, 3),
            "restore_ms": round(restore_ms, 3),
            "replay_ours_ms": round(replay_ours_ms, 1),
            "replay_stock_ms": round(replay_stock_ms, 1),
            "portable_restore_ms": round(portable_ms, 1),
            "snapshot_bytes": len(blob),
            "replay_stock_over_restore": round(replay_stock_ms / restore_ms, 1),
        }
        del s
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=12)
    ap.add_argument("--json")
    args = ap.parse_args()
    results = {}
    sets = [("generated", None)] + ([("official", str(OFFICIAL))] if OFFICIAL.is_dir() else [])
    for name, data in sets:
        env = gym.make("prover/ALFWorld-v0", split="valid_unseen", data=data)
        ids = env.unwrapped.task_ids()[: args.games]
        games = [str(env.unwrapped.game_path(t)) for t in ids]  # generates (and checks) them first
        root = Path(games[0]).parents[1] if data is None else Path(data) / "valid_unseen"
        row = {"games": len(ids)}
        row["ours"] = run_ours(env, ids, args.episodes)
        row["stock_stack"] = run_stock_stack(games, args.episodes)
        if data is None:  # AlfredTWEnv walks the whole directory; point it at these games only
            import shutil
            import tempfile

            tmp = Path(tempfile.mkdtemp())
            for g in games:
                shutil.copytree(Path(g).parent, tmp / Path(g).parent.name)
            row["alfred_tw_env"] = run_alfred_tw_env(tmp, args.episodes)
            shutil.rmtree(tmp)
        else:
            row["alfred_tw_env"] = run_alfred_tw_env(root, args.episodes)
        row["speedup_vs_stock_stack"] = round(row["ours"]["steps_per_s"] / row["stock_stack"]["steps_per_s"], 2)
        row["speedup_vs_alfred_tw_env"] = round(row["ours"]["steps_per_s"] / row["alfred_tw_env"]["steps_per_s"], 2)
        row["restore_vs_replay"] = restore_vs_replay(env, ids[0], games[0])
        row["load"] = load_ms(games)
        env.close()
        results[name] = row
        print(json.dumps({name: row}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}")
    for name, row in results.items():
        print(
            f"{name}: {row['ours']['steps_per_s']} steps/s vs stock stack {row['stock_stack']['steps_per_s']} "
            f"({row['speedup_vs_stock_stack']}x) vs AlfredTWEnv {row['alfred_tw_env']['steps_per_s']} "
            f"({row['speedup_vs_alfred_tw_env']}x); restore at depth 30: "
            f"{statistics.fmean([v['restore_ms'] for v in row['restore_vs_replay'].values()]):.2f} ms mean"
        )
        ld = row["load"]
        print(
            f"{name}: loading a game (median of {ld['games']}): ours {ld['ours_warm_ms']['median']} ms with its stored "
            f"translation, {ld['ours_cold_ms']['median']} ms on its first load anywhere, stock "
            f"{ld['stock_ms']['median']} ms ({ld['stock_over_warm']}x)"
        )


if __name__ == "__main__":
    main()
