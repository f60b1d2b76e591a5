"""Pre-generate the bundled ALFWorld games of a split into the cache (they are otherwise generated
on first use, one per reset), in parallel, with a progress bar.

    python -m prover_gym.alfworld.generate --split valid_unseen --workers 2
    python -m prover_gym.alfworld.generate --split train --num-games 600 --max-receptacles 8 --num-distractors 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time

_ENGINE = None


def _one(args):
    task_id, knobs = args
    global _ENGINE
    from prover_gym.alfworld.data import generated_game
    from prover_gym.alfworld.engine import AlfredEngine
    from prover_gym.cache import MARKER

    if _ENGINE is None:
        _ENGINE = AlfredEngine()
    t = time.perf_counter()
    path = generated_game(task_id, _ENGINE, **knobs)
    marker = json.loads((path.parent / MARKER).read_text())
    return task_id, time.perf_counter() - t, marker["attempt"], marker["walkthrough_len"]


def main(argv=None) -> None:
    """``prover-gym-alfworld-generate``: generate games of a split into the cache ahead of a run."""
    from tqdm import tqdm

    from prover_gym.alfworld.data import generated_root, generated_task_ids

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--num-games", type=int, default=None)
    ap.add_argument("--task-types", nargs="*", default=None)
    ap.add_argument("--max-receptacles", type=int, default=None)
    ap.add_argument("--num-distractors", type=int, default=10)
    ap.add_argument("--workers", type=int, default=max(1, (mp.cpu_count() or 2)))
    args = ap.parse_args(argv)
    knobs = dict(max_receptacles=args.max_receptacles, num_distractors=args.num_distractors)
    ids = generated_task_ids(args.split, args.task_types, args.num_games)
    jobs = [(t, knobs) for t in ids]
    stats = []
    t0 = time.perf_counter()
    if args.workers > 1:
        with mp.get_context("spawn").Pool(args.workers) as pool:
            for row in tqdm(pool.imap_unordered(_one, jobs), total=len(jobs), desc=f"alfworld {args.split}"):
                stats.append(row)
    else:
        for job in tqdm(jobs, desc=f"alfworld {args.split}"):
            stats.append(_one(job))
    attempts = [s[2] for s in stats]
    print(
        json.dumps(
            {
                "split": args.split,
                "games": len(stats),
                "seconds": round(time.perf_counter() - t0, 1),
                "mean_attempts": round(1 + sum(attempts) / max(1, len(attempts)), 2),
                "mean_walkthrough": round(sum(s[3] for s in stats) / max(1, len(stats)), 1),
                "root": str(generated_root(**knobs)),
            }
        )
    )


if __name__ == "__main__":
    main()
