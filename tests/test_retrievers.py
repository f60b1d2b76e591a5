"""Embedded BM25 (cache, correctness vs a direct BM25 computation) and the HTTP retriever against
the bundled server and against a misbehaving loopback server."""

import json
import math
import subprocess
import sys
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

import gymnasium as gym
import pytest
import requests
from conftest import free_port, loopback_server, wait_for_http

from prover_gym.bm25 import BM25Index
from prover_gym.searchqa.data import Corpus, load_corpus_jsonl
from prover_gym.searchqa.retrievers import BM25Retriever, HTTPRetriever, RetrieverError, RetrieverUnavailable

DOCS = [
    '"Alpha"\nAlpha is a river in the north of Veloria.',
    '"Beta"\nBeta was founded by Alpha Gamma in 1801.',
    '"Gamma"\nGamma Gamma Gamma painter.',
    '"Delta"\nNothing to see here.',
    '"Epsilon"\nRivers and rivers of the river delta.',
]


def lucene_bm25(query, docs, k1=0.9, b=0.4):
    """Reference Lucene BM25 over the same tokenisation, computed directly."""
    tok = BM25Index._make_tokenizer("en", "english", r"(?u)\b\w\w+\b")
    ids = tok.tokenize(docs, return_as="string", show_progress=False)
    q = [t for t in tok.tokenize([query], update_vocab=False, return_as="string", show_progress=False)[0] if t]
    n = len(docs)
    avgdl = sum(len(d) for d in ids) / n
    scores = []
    for d in ids:
        tf = Counter(d)
        s = 0.0
        for t in set(q):
            df = sum(1 for x in ids if t in x)
            if not df or not tf[t]:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return scores


def test_bm25_matches_reference_scores_and_ranks(tmp_path):
    corpus = Corpus([str(i) for i in range(len(DOCS))], DOCS)
    r = BM25Retriever(corpus, cache_root=tmp_path)
    for query in ["alpha river", "gamma", "founded 1801", "rivers"]:
        ref = lucene_bm25(query, DOCS)
        hits = r.search([query], 5)[0]
        expected = sorted((s, i) for i, s in enumerate(ref) if s > 0)
        assert [round(p.score, 4) for p in hits] == [round(s, 4) for s, _ in sorted(expected, reverse=True)]
        assert {p.id for p in hits} == {str(i) for s, i in expected}
    assert r.search(["unknownword qqq", ""], 3) == [[], []]


def test_bm25_index_cache_is_reused_and_corrupt_cache_rebuilt(tmp_path):
    corpus = Corpus([str(i) for i in range(len(DOCS))], DOCS)
    first = BM25Retriever(corpus, cache_root=tmp_path)
    index_dir = first.index_dir
    assert (index_dir / "complete.json").is_file()
    expected = first.search(["alpha river"], 3)
    second = BM25Retriever(corpus, cache_root=tmp_path)
    assert second.search(["alpha river"], 3) == expected
    # corrupt the stored matrix: the cache must be rebuilt, not used
    (index_dir / "data.csc.index.npy").write_bytes(b"garbage")
    third = BM25Retriever(corpus, cache_root=tmp_path)
    assert third.search(["alpha river"], 3) == expected
    assert (index_dir / "complete.json").is_file()
    # a different corpus never picks up this index
    other = Corpus(["0"], ['"Zeta"\nalpha river'])
    assert BM25Retriever(other, cache_root=tmp_path).index_dir != index_dir


@pytest.fixture(scope="module")
def server(bundled_dir):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "prover_gym.searchqa.serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for_http(proc, url + "/health")
    yield url
    proc.terminate()
    proc.wait(10)


def test_http_retriever_matches_embedded_bm25(server, bundled_dir):
    embedded = BM25Retriever(load_corpus_jsonl(bundled_dir / "corpus.jsonl"))
    client = HTTPRetriever(server)
    queries = ["University founded", "painter born 1901", "the Silent Harbour", "zzzz", "Institute"]
    remote = client.search(queries, 3)
    local = embedded.search(queries, 3)
    assert [[p.id for p in ps] for ps in remote] == [[p.id for p in ps] for ps in local]
    assert [[round(p.score, 4) for p in ps] for ps in remote] == [[round(p.score, 4) for p in ps] for ps in local]
    assert remote[3] == []
    # cached: no new request
    before = client.stats["requests"]
    client.search(queries, 3)
    assert client.stats["requests"] == before and client.stats["cache_hits"] >= len(queries)


def test_server_speaks_both_request_shapes(server):
    r = requests.post(server + "/retrieve", json={"query": "University", "topk": 2, "return_scores": True}).json()
    assert len(r["result"]) == 1 and len(r["result"][0]) == 2 and "score" in r["result"][0][0]
    r = requests.post(server + "/retrieve", json={"queries": ["University", "Press"], "topk": 1}).json()
    assert len(r["result"]) == 2 and set(r["result"][0][0]) == {"id", "contents"}
    assert requests.post(server + "/retrieve", json={}).status_code == 422
    assert requests.post(server + "/retrieve", json={"queries": ["x"], "topk": 100000}).status_code == 422


def test_env_over_http_equals_env_in_process(server, bundled_dir):
    local = gym.make("prover/SearchQA-v0", split="test")
    remote = gym.make("prover/SearchQA-v0", split="test", retriever="http", search_url=server)
    for env in (local, remote):
        env.reset(seed=9)
    for _ in range(3):
        a = local.unwrapped.expert_action()
        lo, ro = local.step(a), remote.step(a)
        assert lo[:4] == ro[:4]
        if lo[2] or lo[3]:
            break


def test_server_refuses_non_loopback_bind():
    from prover_gym.searchqa.serve import main

    assert main(["--host", "0.0.0.0", "--port", "1"]) == 2


class _Flaky(BaseHTTPRequestHandler):
    plan: list = []
    seen = 0

    def do_POST(self):
        type(self).seen += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        kind = self.plan.pop(0) if self.plan else "ok"
        if kind in (500, 429, 404):
            self.send_response(kind)
            self.end_headers()
            self.wfile.write(b"nope")
            return
        if kind == "slow":
            time.sleep(1.5)
        payload = (
            b'{"result": [[{"document": {"id": "1"'
            if kind == "truncated"
            else json.dumps(
                {
                    "result": [
                        [{"document": {"id": "7", "contents": '"T"\ntext'}, "score": 1.5}] for _ in body["queries"]
                    ]
                }
            ).encode()
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            self.wfile.write(payload)
        except BrokenPipeError:  # the client gave up (timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky():
    _Flaky.plan, _Flaky.seen = [], 0
    with loopback_server(_Flaky) as url:
        yield url


def test_http_retries_5xx_and_429_then_succeeds(flaky):
    _Flaky.plan = [500, 429]
    client = HTTPRetriever(flaky, retries=3, backoff=0.01)
    (hits,) = client.search(["q"], 3)
    assert hits[0].id == "7" and hits[0].title == '"T"' and hits[0].score == 1.5
    assert _Flaky.seen == 3 and client.stats["retries"] == 2


def test_http_errors_are_clear(flaky):
    _Flaky.plan = [404]
    with pytest.raises(RetrieverError, match="refused the request.*HTTP 404"):
        HTTPRetriever(flaky, retries=3, backoff=0.01).search(["q"], 3)
    _Flaky.plan = ["truncated"]
    with pytest.raises(RetrieverError, match="not Search-R1 JSON"):
        HTTPRetriever(flaky, retries=1).search(["q"], 3)
    _Flaky.plan = ["slow", "slow"]
    with pytest.raises(RetrieverUnavailable, match="Timeout"):
        HTTPRetriever(flaky, retries=2, timeout=0.3, backoff=0.01).search(["q"], 3)
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RetrieverUnavailable, match=r"unreachable after 2 attempts.*prover_gym.searchqa.serve"):
        HTTPRetriever(dead, retries=2, backoff=0.01).search(["q"], 3)


def _hammer(args):
    """One client process: POST distinct queries for ``seconds``; returns (latencies, errors)."""
    import requests as rq

    url, seconds, worker = args
    session = rq.Session()
    lat, errors, k = [], 0, 0
    end = time.time() + seconds
    while time.time() < end:
        t = time.perf_counter()
        try:
            r = session.post(url + "/retrieve", json={"query": f"university press {worker} {k}", "topk": 3}, timeout=10)
            if r.status_code != 200 or len(r.json()["result"][0]) != 3:
                errors += 1
        except rq.RequestException:
            errors += 1
        lat.append(time.perf_counter() - t)
        k += 1
    return lat, errors


def test_server_under_concurrent_clients_from_several_processes(server):
    """Three client processes on loopback for 3 s each: no errors, and the latency percentiles are
    reported (printed with -s) and bounded."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(3) as pool:
        results = pool.map(_hammer, [(server, 3.0, w) for w in range(3)])
    lat = sorted(x for r in results for x in r[0])
    errors = sum(r[1] for r in results)
    p50, p95, p99 = (lat[int(q * (len(lat) - 1))] * 1000 for q in (0.5, 0.95, 0.99))
    print(
        f"\nretrieval server: {len(lat)} requests from 3 processes, p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
        f"p99 {p99:.1f} ms, errors {errors}"
    )
    assert errors == 0 and len(lat) >= 30
    assert p99 < 2000


def test_a_server_down_is_not_charged_to_the_agent_and_a_retry_continues(flaky, bundled_dir):
    """Issue 14 items 7-8: with the retrieval server failing, step() raises RetrieverUnavailable and the env
    stays as before (step counter, turns, snapshot); timeout and retries are gym.make kwargs; a retry works."""
    from prover_gym import snapshot

    env = gym.make(
        "prover/SearchQA-v0",
        split="test",
        retriever="http",
        search_url=flaky,
        retriever_timeout=0.3,
        retriever_retries=2,
    )
    obs, info = env.reset(seed=3)
    before = snapshot(env).state
    _Flaky.plan = [500, 500]
    with pytest.raises(RetrieverUnavailable, match="after 2 attempts"):
        env.step("search[anything]")
    assert env.unwrapped._step == 0 and snapshot(env).state == before
    _Flaky.plan = ["slow", "slow"]
    t = time.time()
    with pytest.raises(RetrieverUnavailable, match="Timeout"):
        env.step("search[anything]")
    assert time.time() - t < 3.5  # 2 x 0.3 s timeouts (+ the handler's sleep), not 3 x 30 s
    assert env.unwrapped._step == 0
    _, _, term, trunc, info = env.step("search[anything]")  # the server is back: the same step goes through
    assert info["step"] == 1 and not (term or trunc) and "error" not in info
    with pytest.raises(ValueError, match="retriever_timeout"):
        gym.make("prover/SearchQA-v0", split="test", retriever="http", search_url=flaky, retriever_retries=0)


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"result": ["str"]}, "a result is str"),
        ({"result": [[{"document": "x"}]]}, "'document' is str"),
        ({"result": [[{"document": {"contents": "c"}, "score": "high"}]]}, "'score'"),
    ],
)
def test_malformed_answers_are_retriever_errors_naming_the_field(payload, field):
    class Fake:
        text = json.dumps(payload)

        def json(self):
            return payload

    with pytest.raises(RetrieverError, match=field):
        HTTPRetriever._parse(Fake(), "http://127.0.0.1:1", 1, 3)
