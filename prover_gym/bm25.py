"""Embedded BM25 shared by the environments: ``bm25s`` (sparse matrices, Lucene scoring) with the
index cached on disk under a content fingerprint.

``BM25Index(texts, fingerprint=...)`` indexes once; a second index over the same texts (another
env, another process) loads the cached matrices memory-mapped in milliseconds. A cache that
fails to load or does not match is deleted and rebuilt, never used. Writes are atomic (build in a
temporary directory, then rename).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
from pathlib import Path

import numpy as np

from prover_gym.cache import MARKER, build_once, cache_dir

log = logging.getLogger(__name__)
_INDEX_FORMAT = 2  # 2: Porter leaves words of 1-2 letters alone (as Lucene); no empty-token matches

# Lucene's English stop set (Anserini's DefaultEnglishAnalyzer), used by WebShop's original index
LUCENE_STOPWORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with"
).split()


def fingerprint_texts(texts, ids=None) -> str:
    """A sha256 of the texts (and their ids) in order: the identity of a corpus, for caches and snapshots."""
    h = hashlib.sha256()
    for i, text in enumerate(texts):
        if ids is not None:
            h.update(str(ids[i]).encode("utf-8", "surrogatepass") + b"\x00")
        h.update(text.encode("utf-8", "surrogatepass") + b"\x01")
    return h.hexdigest()


def lucene_porter(stem_word):
    """Porter as Lucene's PorterStemFilter applies it: words of one or two letters are left alone
    (Martin Porter's own "departure"; PyStemmer's porter turns ``s`` into the empty string, ``is``
    into ``i`` and ``us`` into ``u``)."""

    def stem(word: str) -> str:
        return word if len(word) <= 2 else stem_word(word)

    return stem


class BM25Index:
    """BM25 over a list of texts; ``search`` returns (document index, score) pairs, best first,
    omitting documents that share no term with the query (as Lucene does).

    Args:
        texts: the documents.
        fingerprint: identifies ``texts`` (computed if omitted); keys the cache.
        stopwords: ``"en"`` (bm25s' English list), a list of words, or None.
        stemmer: a PyStemmer algorithm name (``"english"`` = Snowball, ``"porter"``) or None.
        k1, b: BM25 parameters (Lucene/Pyserini defaults 0.9, 0.4).
        token_pattern: regex of a token.
    """

    def __init__(
        self,
        texts: list[str],
        *,
        fingerprint: str | None = None,
        stopwords="en",
        stemmer: str | None = "english",
        k1: float = 0.9,
        b: float = 0.4,
        token_pattern: str = r"(?u)\b\w\w+\b",
        cache: bool = True,
        cache_root: Path | None = None,
        show_progress: bool = False,
    ):
        import bm25s

        self.n_docs = len(texts)
        if self.n_docs == 0:
            raise ValueError("cannot index an empty collection")
        self.fingerprint = fingerprint or fingerprint_texts(texts)
        settings = json.dumps([_INDEX_FORMAT, stopwords, stemmer, k1, b, token_pattern], sort_keys=True)
        key = hashlib.sha256((self.fingerprint + settings).encode()).hexdigest()[:32]
        self.index_dir = (cache_root or cache_dir()) / "bm25" / key
        stop = stopwords if isinstance(stopwords, str) else len(stopwords or [])
        self.description = f"bm25(k1={k1}, b={b}, stopwords={stop}, stemmer={stemmer}, token={token_pattern})"
        self._lock = threading.Lock()  # the tokenizer's vocabulary lookups are not thread-safe
        self._tok = self._make_tokenizer(stopwords, stemmer, token_pattern)
        if cache and self._try_load():
            return
        tokens = self._tok.tokenize(list(texts), return_as="tuple", show_progress=show_progress)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(tokens, show_progress=show_progress)
        if cache:
            self._save()

    @staticmethod
    def _make_tokenizer(stopwords, stemmer, token_pattern):
        import bm25s

        stem = None
        if stemmer:
            import Stemmer

            stem = Stemmer.Stemmer(stemmer).stemWord
            if stemmer == "porter":
                stem = lucene_porter(stem)
        return bm25s.tokenization.Tokenizer(lower=True, splitter=token_pattern, stopwords=stopwords, stemmer=stem)

    def _try_load(self) -> bool:
        import bm25s

        directory = self.index_dir
        marker = directory / MARKER
        if not marker.is_file():
            return False
        try:
            meta = json.loads(marker.read_text())
            if meta.get("n_docs") != self.n_docs or meta.get("fingerprint") != self.fingerprint:
                raise ValueError("the index does not match the documents")
            self._bm25 = bm25s.BM25.load(str(directory), mmap=True, show_progress=False, verbosity=0)
            self._tok.load_vocab(str(directory))
            if self._bm25.scores["num_docs"] != self.n_docs:
                raise ValueError("index size does not match")
            return True
        except Exception as exc:  # corrupt or stale: rebuild, never use
            log.warning("BM25 index cache %s is unusable (%s); rebuilding it", directory, exc)
            shutil.rmtree(directory, ignore_errors=True)
            return False

    def _save(self) -> None:
        def write(out: Path) -> dict:
            self._bm25.save(str(out), show_progress=False)
            self._tok.save_vocab(str(out))
            return {"n_docs": self.n_docs, "fingerprint": self.fingerprint, "settings": self.description}

        build_once(self.index_dir, write)

    def tokenize(self, queries: list[str]) -> list[list[int]]:
        """Each query's known term ids. bm25s maps a query with no known term to its empty-string
        token (id of ""), which would match documents; Lucene finds nothing, so that id is dropped."""
        with self._lock:
            ids = self._tok.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
            empty = self._tok.get_vocab_dict().get("")
        return [[t for t in q if t != empty] for q in ids]

    def search(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        """Top ``k`` (index, score) per query, best first; ties go to the lower document index."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        return [self._top_k(ids, k) for ids in self.tokenize(queries)]

    def _postings(self, token_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        # bm25s keeps per-token BM25 contributions in a CSC matrix: column t = (docs, scores)
        csc = self._bm25.scores
        indptr = csc["indptr"]
        spans = [(int(indptr[t]), int(indptr[t + 1])) for t in token_ids]
        if len(spans) == 1:
            s, e = spans[0]
            return np.asarray(csc["indices"][s:e]), np.asarray(csc["data"][s:e])
        return (
            np.concatenate([csc["indices"][s:e] for s, e in spans]),
            np.concatenate([csc["data"][s:e] for s, e in spans]),
        )

    def _top_k(self, token_ids: list[int], k: int) -> list[tuple[int, float]]:
        """Score only the documents in the query terms' postings (a repeated query term counts
        again, like Lucene's boost by term count), then select the k best."""
        if not token_ids:
            return []
        docs, contrib = self._postings(token_ids)
        if docs.size == 0:
            return []
        if docs.size * 8 < self.n_docs:  # short postings: aggregate the few candidates directly
            candidates, inverse = np.unique(docs, return_inverse=True)
            scores = np.bincount(inverse, weights=contrib.astype(np.float64))
        else:  # long postings: one dense accumulator, then keep only entries that can reach the top k
            dense = np.bincount(docs, weights=contrib.astype(np.float64), minlength=self.n_docs)
            values = dense[docs]
            # a document occurs at most len(token_ids) times in `docs`, so the (k * len)-th largest
            # entry is <= the k-th best document's score: every top-k document (ties too) survives
            take = k * len(token_ids)
            if values.size > take:
                threshold = np.partition(values, values.size - take)[values.size - take]
                docs = docs[values >= threshold]
            candidates = np.unique(docs)
            scores = dense[candidates]
        scores = scores.astype(np.float32)
        if candidates.size > k:
            kth = np.partition(scores, candidates.size - k)[candidates.size - k]
            keep = scores >= kth
            candidates, scores = candidates[keep], scores[keep]
        order = np.lexsort((candidates, -scores))[:k]
        return [(int(candidates[i]), float(scores[i])) for i in order if scores[i] > 0]

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for one query."""
        ids = self.tokenize([query])[0]
        if not ids:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids))
