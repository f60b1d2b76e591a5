"""Search-QA speed, measured side by side in one run (a benchmark, not a test).

1. Retrieval: queries/s of the embedded BM25 (bm25s index, our postings-only top-k; batched and one
   query at a time) vs
   rank_bm25's BM25Okapi on the same tokens and the same queries, on the bundled corpus and on a
   generated corpus of ``--passages`` passages (default 1M).
2. Restore vs replay: putting an env back at depth d by ``restore(snapshot)`` vs ``reset`` +
   re-running the d actions (what you would do without snapshots).

    python benchmarks/bench_searchqa.py                 # bundled + 1M passages
    python benchmarks/bench_searchqa.py --passages 0    # bundled only (fast)
    python benchmarks/bench_searchqa.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import prover_gym  # noqa: E402,F401
from prover_gym import restore, snapshot  # noqa: E402
from prover_gym.bm25 import BM25Index
from prover_gym.searchqa import generator as gen  # noqa: E402
from prover_gym.searchqa.bundled import bundled_data_dir  # noqa: E402
from prover_gym.searchqa.data import Corpus, load_corpus_jsonl, load_flashrag_jsonl  # noqa: E402
from prover_gym.searchqa.retrievers import BM25Retriever  # noqa: E402


def _timeit(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_retrieval(corpus: Corpus, queries: list[str], n_rank_bm25: int, label: str) -> dict:
    import tempfile

    from rank_bm25 import BM25Okapi

    print(
        f"\n== retrieval on {label}: {len(corpus):,} passages, {len(queries)} queries (rank_bm25 on {n_rank_bm25}) =="
    )
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        ours = BM25Retriever(corpus, cache_root=Path(tmp))
        build_ours = time.perf_counter() - t
        t = time.perf_counter()
        BM25Retriever(corpus, cache_root=Path(tmp))
        load_ours = time.perf_counter() - t
    ours.search(queries[:5], 3)  # warm-up
    batch_s = _timeit(lambda: ours.search(queries, 3), repeat=3)
    single_s = _timeit(lambda: [ours.search([q], 3) for q in queries])

    tok = BM25Index._make_tokenizer("en", "english", r"(?u)\b\w\w+\b")
    t = time.perf_counter()
    docs = tok.tokenize(corpus.contents, return_as="string", show_progress=False)
    theirs = BM25Okapi(docs, k1=0.9, b=0.4)
    build_theirs = time.perf_counter() - t
    sub = queries[:n_rank_bm25]
    qtok = [[w for w in q if w] for q in tok.tokenize(sub, update_vocab=False, return_as="string", show_progress=False)]

    def rank_bm25_search():
        for q in qtok:
            scores = theirs.get_scores(q)
            top = np.argpartition(-scores, 3)[:3]
            top[np.argsort(-scores[top])]

    theirs_s = _timeit(rank_bm25_search)
    # the same queries give the same top-1 (both are BM25 with k1=0.9, b=0.4; IDF variants differ)
    agree = (
        sum(
            1
            for q, hits in zip(qtok, ours.search(sub, 1))
            if hits and int(np.argmax(theirs.get_scores(q))) == corpus.ids.index(hits[0].id)
        )
        if len(corpus) <= 50_000
        else None
    )
    row = {
        "passages": len(corpus),
        "index_build_s": {"ours": round(build_ours, 2), "rank_bm25": round(build_theirs, 2)},
        "index_load_from_cache_s": round(load_ours, 3),
        "qps": {
            "ours_batched": round(len(queries) / batch_s, 1),
            "ours_one_by_one": round(len(queries) / single_s, 1),
            "rank_bm25": round(len(sub) / theirs_s, 2),
        },
        "latency_ms_one_query": {
            "ours": round(1000 * single_s / len(queries), 3),
            "rank_bm25": round(1000 * theirs_s / len(sub), 2),
        },
    }
    row["speedup_vs_rank_bm25"] = {
        "batched": round(row["qps"]["ours_batched"] / row["qps"]["rank_bm25"], 1),
        "one_by_one": round(row["qps"]["ours_one_by_one"] / row["qps"]["rank_bm25"], 1),
    }
    if agree is not None:
        row["top1_agreement_with_rank_bm25"] = f"{agree}/{len(sub)}"
    print(json.dumps(row, indent=1))
    return row


def bench_restore_vs_replay(n_episodes: int = 200) -> dict:
    print("\n== restore vs replay from reset (prover/SearchQA-v0, expert actions) ==")
    env = gym.make("prover/SearchQA-v0", split="test")
    base = env.unwrapped
    rng = random.Random(0)
    out = {}
    for depth in (1, 2, 3):
        restore_t, replay_t, snap_t = [], [], []
        for _ in range(n_episodes):
            seed = rng.randrange(10_000)
            env.reset(seed=seed)
            actions = []
            for _ in range(depth):
                a = base.expert_action()
                if a is None or a.startswith("answer"):
                    break
                env.step(a)
                actions.append(a)
            if len(actions) < depth:
                continue
            t = time.perf_counter()
            snap = snapshot(env)
            snap_t.append(time.perf_counter() - t)
            env.step("search[something else entirely]")
            t = time.perf_counter()
            restore(env, snap)
            restore_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.reset(seed=seed)
            for a in actions:
                env.step(a)
            replay_t.append(time.perf_counter() - t)
        med = {
            k: statistics.median(v) * 1e6
            for k, v in (("snapshot", snap_t), ("restore", restore_t), ("replay", replay_t))
        }
        out[f"depth_{depth}"] = {
            "episodes": len(restore_t),
            "snapshot_us": round(med["snapshot"], 1),
            "restore_us": round(med["restore"], 1),
            "replay_us": round(med["replay"], 1),
            "replay_over_restore": round(med["replay"] / med["restore"], 1),
        }
        print(f"depth {depth}: {out[f'depth_{depth}']}")
    return out


def scaled_corpus(passages: int) -> Corpus:
    f = passages / 17_800  # the default world renders ~18.9k passages; scaling by f gives >= `passages`
    t = time.perf_counter()
    world = gen.build_world(
        1,
        n_people=int(5000 * f),
        n_orgs=int(1200 * f),
        n_works=int(4500 * f),
        n_cities=int(500 * f),
        n_countries=max(40, int(40 * f**0.5)),
    )
    rows, _ = gen.render_corpus(world, 1)
    print(f"\ngenerated {len(rows):,} passages in {time.perf_counter() - t:.1f}s")
    return Corpus([r["id"] for r in rows], [r["contents"] for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=1_000_000, help="size of the large generated corpus (0: skip)")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--rank-bm25-queries", type=int, default=50, help="queries for rank_bm25 at the large scale")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()

    directory = bundled_data_dir()
    corpus = load_corpus_jsonl(directory / "corpus.jsonl")
    questions = load_flashrag_jsonl(directory / "test.jsonl")
    rng = random.Random(0)
    pool = [q for ex in questions for q in ex.gold_queries] + [ex.question for ex in questions]
    queries = rng.sample(pool, min(args.queries, len(pool)))
    results = {"bundled": bench_retrieval(corpus, queries, len(queries), "the bundled corpus")}
    results["restore_vs_replay"] = bench_restore_vs_replay()
    if args.passages:
        big = scaled_corpus(args.passages)
        results["large"] = bench_retrieval(
            big, queries, args.rank_bm25_queries, f"a generated {len(big):,}-passage corpus"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
