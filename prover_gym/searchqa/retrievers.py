"""Retrievers behind one protocol: ``search(queries, k) -> list[list[Passage]]``.

- ``BM25Retriever``: embedded BM25 (``bm25s``) over a ``Corpus``; the index is cached on disk
  under the corpus fingerprint, so a second env (or process) loads it memory-mapped in
  milliseconds instead of re-indexing.
- ``HTTPRetriever``: a client for the Search-R1 retrieval-server API (``POST /retrieve`` with
  ``queries``, ``topk``, ``return_scores``), with timeouts, retries with back-off, a URL pool and
  a response cache keyed by ``(query, k)`` that keeps branches deterministic.

Tokenisation (stated so results are reproducible): lower-case, tokens are runs of two or more
word characters, English stop words removed, Snowball English stemming. Documents with a score of
0 (no query term) are not returned, as in Lucene: a search can return fewer than k passages.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from prover_gym.bm25 import BM25Index
from prover_gym.cache import cache_dir
from prover_gym.searchqa.data import Corpus

__all__ = [
    "BM25Retriever",
    "HTTPRetriever",
    "Passage",
    "Retriever",
    "RetrieverError",
    "RetrieverUnavailable",
    "cache_dir",
]

TOKENIZATION = "lower; (?u)\\b\\w\\w+\\b; english stopwords; snowball-english stemmer"


@dataclass(frozen=True)
class Passage:
    """A retrieved passage: its id, contents (title line, then text) and score."""

    id: str
    contents: str
    score: float | None = None

    @property
    def title(self) -> str:
        """The first line of the contents."""
        return self.contents.split("\n", 1)[0]

    @property
    def text(self) -> str:
        """The contents after the title line."""
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""


class Retriever(Protocol):
    """Anything that turns a batch of queries into ranked passages."""

    identity: str

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The top ``k`` passages for each query, best first."""


class RetrieverError(RuntimeError):
    """The retriever answered, but not in the expected form."""


class RetrieverUnavailable(RetrieverError):
    """The retrieval server cannot be reached."""


class BM25Retriever:
    """Embedded BM25 (bm25s, Lucene scoring, k1=0.9, b=0.4 as Pyserini's defaults) over a Corpus."""

    def __init__(
        self,
        corpus: Corpus,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        cache: bool = True,
        cache_root: Path | None = None,
        show_progress: bool = False,
    ):
        self.corpus = corpus
        self._index = BM25Index(
            corpus.contents,
            fingerprint=corpus.fingerprint,
            stopwords="en",
            stemmer="english",
            k1=k1,
            b=b,
            cache=cache,
            cache_root=cache_root,
            show_progress=show_progress,
        )
        self.index_dir = self._index.index_dir
        self.identity = f"bm25:{corpus.fingerprint[:16]}:k1={k1}:b={b}"

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The top ``k`` BM25 passages for each query, best first."""
        ids, contents = self.corpus.ids, self.corpus.contents
        return [[Passage(ids[j], contents[j], score) for j, score in hits] for hits in self._index.search(queries, k)]

    def score_all(self, query: str) -> np.ndarray:
        """BM25 score of every passage for one query (for tests and benchmarks)."""
        return self._index.scores(query)


class HTTPRetriever:
    """Client for a Search-R1-compatible retrieval server.

    ``urls`` is one base URL or endpoint (``http://127.0.0.1:8000`` or ``.../retrieve``) or a list
    of them, used round-robin. Connection errors, timeouts and 5xx/429 answers are retried with
    back-off; after ``retries`` attempts a ``RetrieverUnavailable`` names the URLs and the fix.
    """

    def __init__(
        self,
        urls: str | list[str],
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        cache_size: int = 100_000,
        batch_size: int = 512,
    ):
        import requests

        urls = [urls] if isinstance(urls, str) else list(urls)
        if not urls:
            raise ValueError("HTTPRetriever needs at least one URL")
        self.urls = [u if u.rstrip("/").endswith("/retrieve") else u.rstrip("/") + "/retrieve" for u in urls]
        self.timeout, self.retries, self.backoff = timeout, max(1, retries), backoff
        self.batch_size = batch_size
        self.identity = "http:" + ",".join(self.urls)
        self._session = requests.Session()
        self._next = 0
        self._cache: OrderedDict[tuple[str, int], list[Passage]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0}

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The top ``k`` passages for each query from the retrieval server (Search-R1's /retrieve protocol), cached;
        retries with backoff, then raises RetrieverUnavailable."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        results: list[list[Passage] | None] = [None] * len(queries)
        missing: list[int] = []
        with self._lock:
            for i, q in enumerate(queries):
                hit = self._cache.get((q, k))
                if hit is not None:
                    self._cache.move_to_end((q, k))
                    results[i] = hit
                    self.stats["cache_hits"] += 1
                else:
                    missing.append(i)
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            answered = self._post([queries[i] for i in chunk], k)
            with self._lock:
                for i, passages in zip(chunk, answered):
                    results[i] = passages
                    self._cache[(queries[i], k)] = passages
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        return [r or [] for r in results]

    def _post(self, queries: list[str], k: int) -> list[list[Passage]]:
        import requests

        body: dict[str, Any] = {"queries": queries, "topk": k, "return_scores": True}
        last_error = "no attempt made"
        for attempt in range(self.retries):
            with self._lock:
                url = self.urls[self._next % len(self.urls)]
                self._next += 1
            self.stats["requests"] += 1
            try:
                resp = self._session.post(url, json=body, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                last_error = f"{url}: {type(exc).__name__}"
            else:
                if resp.status_code == 200:
                    return self._parse(resp, url, len(queries), k)
                last_error = f"{url}: HTTP {resp.status_code}"
                if resp.status_code < 500 and resp.status_code != 429:
                    raise RetrieverError(f"retrieval server refused the request ({last_error}): {resp.text[:200]}")
            if attempt + 1 < self.retries:
                self.stats["retries"] += 1
                time.sleep(self.backoff * (attempt + 1))
        raise RetrieverUnavailable(
            f"retrieval server unreachable after {self.retries} attempts ({last_error}). Start one with "
            f"`python -m prover_gym.searchqa.serve --port PORT` or pass retriever='bm25' to search in-process."
        )

    @staticmethod
    def _parse(resp, url: str, n: int, k: int) -> list[list[Passage]]:
        try:
            payload = resp.json()
            result = payload["result"]
        except (ValueError, KeyError, TypeError):
            raise RetrieverError(f"{url}: answer is not Search-R1 JSON ({resp.text[:200]!r})") from None
        if not isinstance(result, list) or len(result) != n:
            length = len(result) if isinstance(result, list) else "?"
            raise RetrieverError(f"{url}: expected {n} result lists, got {type(result).__name__} of length {length}")
        out = []
        for hits in result:
            if hits is not None and not isinstance(hits, list):
                raise RetrieverError(
                    f"{url}: a result is {type(hits).__name__}, expected a list of hits ({str(hits)[:200]!r})"
                )
            passages = []
            for hit in (hits or [])[:k]:
                doc = hit.get("document", hit) if isinstance(hit, dict) else {}
                if not isinstance(doc, dict):
                    raise RetrieverError(
                        f"{url}: a hit's 'document' is {type(doc).__name__}, expected an object ({str(hit)[:200]!r})"
                    )
                contents = doc.get("contents")
                if contents is None and "title" in doc:
                    contents = f'"{doc["title"]}"\n{doc.get("text", "")}'
                if contents is None:
                    raise RetrieverError(f"{url}: a hit has no 'contents' ({str(hit)[:200]})")
                score = hit.get("score") if isinstance(hit, dict) else None
                try:
                    score = None if score is None else float(score)
                except (TypeError, ValueError):
                    raise RetrieverError(f"{url}: a hit's 'score' is not a number ({score!r})") from None
                passages.append(Passage(str(doc.get("id", "")), str(contents), score))
            out.append(passages)
        return out

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()
