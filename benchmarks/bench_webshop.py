"""WebShop speed, side by side in one run (a benchmark, not a test).

For catalogues of 1k, 100k and 1M generated products:
1. search latency of our engine (bm25s index, postings-only top-k) vs rank_bm25's BM25Okapi on the
   same analyzer tokens and the same queries;
2. env steps/s of ``prover/WebShop-v0`` driven by the expert, vs the same env whose search is a
   naive re-search with rank_bm25 on every results page (no index, no memo);
3. snapshot/restore vs replay from reset at depths 1, 2, 4.

    python benchmarks/bench_webshop.py                    # 1k, 100k, 1M
    python benchmarks/bench_webshop.py --sizes 1000 100000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import prover_gym  # noqa: E402,F401
from prover_gym import restore, snapshot  # noqa: E402
from prover_gym.bm25 import LUCENE_STOPWORDS, BM25Index  # noqa: E402
from prover_gym.webshop import generator as gen  # noqa: E402
from prover_gym.webshop.search import SEARCH_RETURN_N, TOKEN_PATTERN, ProductSearch, _prep, product_text  # noqa: E402


class RankBM25Search:
    """The obvious alternative: rank_bm25 over the same tokens, searched afresh on every call."""

    def __init__(self, products: list[dict]):
        from rank_bm25 import BM25Okapi

        self.tok = BM25Index._make_tokenizer(LUCENE_STOPWORDS, "porter", TOKEN_PATTERN)
        docs = self.tok.tokenize([_prep(product_text(p)) for p in products], return_as="string", show_progress=False)
        self.bm25 = BM25Okapi(docs, k1=0.9, b=0.4)
        self.asins = [p["asin"] for p in products]

    def search(self, keywords: str) -> tuple[str, ...]:
        q = [
            t
            for t in self.tok.tokenize([_prep(keywords)], update_vocab=False, return_as="string", show_progress=False)[
                0
            ]
            if t
        ]
        scores = self.bm25.get_scores(q)
        n = min(SEARCH_RETURN_N, len(scores) - 1)
        top = np.argpartition(-scores, n)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return tuple(self.asins[i] for i in top if scores[i] > 0)


def _queries(goals: list[dict], n: int) -> list[str]:
    out = []
    for g in goals[:n]:
        text = g["instruction_text"].split(", and price lower")[0].split(" with ")[0]
        out.append(text.replace("Find me ", "").replace("I need ", "").lower())
    return out


def _latencies(fn, queries) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _summary(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3)}


def bench_size(n: int, n_queries: int, n_rank_queries: int, episodes: int) -> dict:
    print(f"\n== {n:,} products ==", flush=True)
    row: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        items, attrs = gen.generate(n, seed=7)
        (Path(tmp) / "items_shuffle.json").write_text(json.dumps(items))
        (Path(tmp) / "items_ins_v2.json").write_text(json.dumps(attrs))
        del items, attrs  # one copy of the catalogue in memory: the env's
        env = gym.make("prover/WebShop-v0", data=tmp, split="test", max_steps=15)
        catalog, goals = env.unwrapped.catalog, env.unwrapped.goals
        print(
            f"generated and loaded in {time.perf_counter() - t:.1f}s: {len(catalog):,} products, {len(goals):,} goals",
            flush=True,
        )
        row["products"] = len(catalog)
        t = time.perf_counter()
        fresh = ProductSearch(catalog.products, cache_root=Path(tmp) / "cache")
        row["index_build_s"] = round(time.perf_counter() - t, 2)
        del fresh
        t = time.perf_counter()
        ProductSearch(catalog.products, cache_root=Path(tmp) / "cache")
        row["index_load_from_cache_s"] = round(time.perf_counter() - t, 3)
        ours = env.unwrapped.shop.search_engine
        queries = _queries(goals, n_queries)
        ours.index.search([_prep(queries[0])], SEARCH_RETURN_N)
        row["ours"] = _summary(_latencies(lambda q: ours.index.search([_prep(q)], SEARCH_RETURN_N), queries))
        t = time.perf_counter()
        naive = RankBM25Search(catalog.products)
        row["rank_bm25_build_s"] = round(time.perf_counter() - t, 2)
        row["rank_bm25"] = _summary(_latencies(naive.search, queries[:n_rank_queries]))
        row["search_speedup_median"] = round(row["rank_bm25"]["median_ms"] / row["ours"]["median_ms"], 1)
        agree = sum(1 for q in queries[:n_rank_queries] if ours.search(q)[:1] == naive.search(q)[:1])
        row["top1_agreement"] = f"{agree}/{min(n_rank_queries, len(queries))}"
        print(json.dumps(row), flush=True)
        if episodes:
            row["env"] = _env_rates(env, naive, episodes)
            row["restore_vs_replay"] = _restore_vs_replay(env)
            print(json.dumps({k: row[k] for k in ("env", "restore_vs_replay")}), flush=True)
    return row


def _run_expert(env, seeds) -> int:
    steps = 0
    for seed in seeds:
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.unwrapped.expert_action())
            steps += 1
            done = term or trunc
    return steps


def _env_rates(env, naive: RankBM25Search, episodes: int) -> dict:
    seeds = list(range(episodes))
    shop = env.unwrapped.shop
    fast_engine = shop.search_engine
    fast_engine._memo.clear()
    t = time.perf_counter()
    steps = _run_expert(env, seeds)
    ours = steps / (time.perf_counter() - t)
    shop.search_engine = naive
    t = time.perf_counter()
    naive_steps = _run_expert(env, seeds)
    theirs = naive_steps / (time.perf_counter() - t)
    shop.search_engine = fast_engine
    # the expert's step counts can differ where the two BM25 variants rank ties differently
    return {
        "episodes": episodes,
        "steps": steps,
        "naive_steps": naive_steps,
        "steps_per_s": round(ours, 1),
        "naive_rank_bm25_steps_per_s": round(theirs, 2),
        "ratio": round(ours / theirs, 1),
    }


def _restore_vs_replay(env) -> dict:
    out = {}
    base = env.unwrapped
    for depth in (1, 2, 4):
        restore_t, replay_t = [], []
        for seed in range(100):
            env.reset(seed=seed)
            actions = []
            for _ in range(depth):
                a = base.expert_action()
                if a is None or a == "click[buy now]":
                    break
                env.step(a)
                actions.append(a)
            if len(actions) < depth:
                continue
            snap = snapshot(env)
            env.step("click[back to search]")
            t = time.perf_counter()
            restore(env, snap)
            restore_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.reset(seed=seed)
            for a in actions:
                env.step(a)
            replay_t.append(time.perf_counter() - t)
        if restore_t:
            r, p = statistics.median(restore_t) * 1e6, statistics.median(replay_t) * 1e6
            out[f"depth_{depth}"] = {"restore_us": round(r, 1), "replay_us": round(p, 1), "ratio": round(p / r, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rank-bm25-queries", type=int, default=30)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--json")
    args = ap.parse_args()
    results = {}
    for n in args.sizes:
        results[str(n)] = bench_size(
            n, args.queries, args.rank_bm25_queries if n > 1000 else args.queries, args.episodes if n <= 100_000 else 20
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
