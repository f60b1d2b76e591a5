import json

from prover_gym.searchqa import generator as gen
from prover_gym.searchqa.bundled import BundledConfig, bundled_data_dir


def _rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_generation_is_deterministic_in_the_seed():
    small = dict(n_people=300, n_orgs=60, n_works=200, n_cities=40, n_countries=8)
    a = gen.render_corpus(gen.build_world(5, **small), 5)
    b = gen.render_corpus(gen.build_world(5, **small), 5)
    c = gen.render_corpus(gen.build_world(6, **small), 6)
    assert a == b and a[0] != c[0]
    qa = gen.candidate_questions(gen.build_world(5, **small), 5)
    qb = gen.candidate_questions(gen.build_world(5, **small), 5)
    assert qa == qb and {q.family for q in qa} == set(gen.FAMILIES)


def test_bundled_data_size_formats_and_no_entity_leakage(bundled_dir):
    stats = json.loads((bundled_dir / "complete.json").read_text())
    assert 15_000 <= stats["passages"] <= 25_000
    assert stats["questions"]["train"] >= 2500 and stats["questions"]["test"] >= 600
    corpus = _rows(bundled_dir / "corpus.jsonl")
    assert all(set(r) == {"id", "contents"} and r["contents"].startswith('"') and "\n" in r["contents"] for r in corpus)
    train, test = _rows(bundled_dir / "train.jsonl"), _rows(bundled_dir / "test.jsonl")
    for row in train + test:
        assert set(row) >= {"id", "question", "golden_answers", "metadata"} and row["golden_answers"]
        assert row["metadata"]["data_source"] in gen.FAMILIES
        assert len(row["metadata"]["gold_queries"]) == len(row["metadata"]["support_ids"]) >= 1
    hops = {"single_hop": 1, "bridge": 2, "comparison": 2, "three_hop": 3}
    assert all(len(r["metadata"]["gold_queries"]) == hops[r["metadata"]["data_source"]] for r in test)

    def entities(rows):
        return {e for r in rows for e in r["metadata"]["entities"] if not e.startswith("country")}

    assert not entities(train) & entities(test)
    assert not {r["question"] for r in train} & {r["question"] for r in test}


def test_multi_hop_answers_are_not_in_the_first_passage(bundled_dir):
    """A bridge/three-hop answer must need the later hops: the first gold passage does not state it."""
    corpus = {r["id"]: r["contents"] for r in _rows(bundled_dir / "corpus.jsonl")}
    test = _rows(bundled_dir / "test.jsonl")
    leaks = 0
    multi = [r for r in test if r["metadata"]["data_source"] in ("bridge", "three_hop")]
    for r in multi:
        first = corpus[r["metadata"]["support_ids"][0][0]]
        leaks += any(a in first for a in r["golden_answers"])
    assert leaks / len(multi) < 0.05, leaks


def test_bundled_cache_is_reused(tmp_path, monkeypatch, bundled_dir):
    # a second call returns the same directory without rebuilding
    assert bundled_data_dir() == bundled_dir
    assert BundledConfig().key in bundled_dir.name
