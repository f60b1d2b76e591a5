"""The bundled Search-QA data: generated, verified, written in the official formats and cached.

``bundled_data_dir()`` returns a directory with ``corpus.jsonl`` (wiki-18 format) and
``train.jsonl`` / ``test.jsonl`` (FlashRAG format), building it on first use (a few seconds)
and reusing it afterwards. A question is kept only if every search on its gold path puts the
passage stating the needed fact in the top ``VERIFY_TOPK`` of the embedded BM25, so the expert
(which follows that path) is guaranteed to see the evidence.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from prover_gym.cache import build_once, cache_dir
from prover_gym.searchqa import generator as gen
from prover_gym.searchqa.data import Corpus
from prover_gym.searchqa.retrievers import BM25Retriever

VERIFY_TOPK = 3


@dataclass(frozen=True)
class BundledConfig:
    """The bundled Search-QA world's seed and sizes (people, organisations, works, cities, countries) and its test
    fraction; generated locally, cached under ``key()``."""

    seed: int = 0
    n_people: int = 5000
    n_orgs: int = 1200
    n_works: int = 4500
    n_cities: int = 500
    n_countries: int = 40
    test_fraction: float = 0.25
    # questions per family and split (fewer are kept where too few candidates pass verification)
    train_per_family: tuple[tuple[str, int], ...] = (
        ("single_hop", 1200),
        ("bridge", 800),
        ("comparison", 600),
        ("three_hop", 500),
    )
    test_per_family: tuple[tuple[str, int], ...] = (
        ("single_hop", 250),
        ("bridge", 200),
        ("comparison", 150),
        ("three_hop", 150),
    )

    @property
    def key(self) -> str:
        """The cache name of this world (generator version, seed, sizes)."""
        sizes = f"p{self.n_people}-o{self.n_orgs}-w{self.n_works}-c{self.n_cities}"
        return f"searchqa-bundled-g{gen.GENERATOR_VERSION}-s{self.seed}-{sizes}"


DEFAULT = BundledConfig()


def bundled_data_dir(config: BundledConfig = DEFAULT, root: Path | None = None) -> Path:
    """Directory of the bundled data for ``config``, generated on first call."""
    return build_once((root or cache_dir()) / config.key, lambda out: _build(config, out, root))


def _build(config: BundledConfig, out: Path, root: Path | None) -> dict:
    world = gen.build_world(
        config.seed,
        n_people=config.n_people,
        n_orgs=config.n_orgs,
        n_works=config.n_works,
        n_cities=config.n_cities,
        n_countries=config.n_countries,
    )
    rows, facts = gen.render_corpus(world, config.seed)
    corpus = Corpus([r["id"] for r in rows], [r["contents"] for r in rows])
    retriever = BM25Retriever(corpus, cache_root=root)
    candidates = gen.candidate_questions(world, config.seed)
    rng = random.Random(config.seed + 3)
    rng.shuffle(candidates)

    by_bucket: dict[tuple[str, str], list[gen.Candidate]] = {}
    for c in candidates:
        split = gen.assign_split(c, config.seed, config.test_fraction)
        if split is not None:
            by_bucket.setdefault((split, c.family), []).append(c)

    wanted = {("train", f): n for f, n in config.train_per_family} | {("test", f): n for f, n in config.test_per_family}
    kept: dict[str, list[dict]] = {"train": [], "test": []}
    rejected = 0
    for (split, family), n in sorted(wanted.items()):
        pool = by_bucket.get((split, family), [])
        chosen: list[tuple[gen.Candidate, list[str]]] = []
        seen_questions: set[str] = set()
        batch = 256
        for start in range(0, len(pool), batch):
            group = [c for c in pool[start : start + batch] if c.question not in seen_questions]
            queries = [q for c in group for _, q, _ in c.path]
            hits = retriever.search(queries, VERIFY_TOPK)
            pos = 0
            for c in group:
                support, ok = [], True
                for entity, _q, fact in c.path:
                    need = facts[entity][fact]
                    ok &= any(p.id == need for p in hits[pos])
                    support.append(need)
                    pos += 1
                if ok and len(chosen) < n:
                    chosen.append((c, support))
                    seen_questions.add(c.question)
                elif not ok:
                    rejected += 1
            if len(chosen) >= n:
                break
        for i, (c, support) in enumerate(chosen):
            kept[split].append(
                {
                    "id": f"{split}-{family}-{i}",
                    "question": c.question,
                    "golden_answers": list(c.answers),
                    "metadata": {
                        "data_source": family,
                        "gold_queries": [q for _, q, _ in c.path],
                        "support_ids": [[s] for s in support],
                        "entities": [e for e, _, _ in c.path],
                    },
                }
            )
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    for split, items in kept.items():
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for item in items:
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
    return {
        "config": config.key,
        "passages": len(rows),
        "questions": {s: len(v) for s, v in kept.items()},
        "per_family": {
            s: {f: sum(1 for x in v if x["metadata"]["data_source"] == f) for f in gen.FAMILIES}
            for s, v in kept.items()
        },
        "rejected_unverifiable": rejected,
        "corpus_fingerprint": corpus.fingerprint,
    }
