"""WebShop's search engine, in-process: BM25 over the same per-product text the original indexes.

The original (``search_engine/convert_product_file_format.py`` + Pyserini) indexes, per product,
the lower-cased join of Title, Description, the first bullet point and the option text
``"name: v1, v2, and name2: ..."`` with Lucene's English analyzer (possessive filter, 33 stop
words, Porter stemmer) and BM25 k1=0.9, b=0.4, returning the top 50. This does the same with
``bm25s`` (index cached on disk); ties go to the earlier product, as with single-threaded Lucene.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from prover_gym.bm25 import LUCENE_STOPWORDS, BM25Index, fingerprint_texts

SEARCH_RETURN_N = 50
# Lucene's EnglishPossessiveFilter: a trailing 's with any of its three apostrophes (', U+2019, U+FF07)
_POSSESSIVE = re.compile("['\u2019\uff07]s\\b")
TOKEN_PATTERN = r"(?u)\b\w+(?:\.\w+)*\b"


def product_text(product: dict) -> str:
    """A product's searchable text as the original indexes it (title, description, first bullet, options)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    bullets = product["BulletPoints"][0] if product["BulletPoints"] else ""
    return " ".join([product["Title"], product["Description"], bullets, option_text]).lower()


def _prep(text: str) -> str:
    return _POSSESSIVE.sub("", text.lower())


class ProductSearch:
    """``search(keywords) -> list of ASINs`` (at most 50), memoised per keyword string."""

    def __init__(self, products: list[dict], *, cache_root=None, memo_size: int = 50_000):
        texts = [_prep(product_text(p)) for p in products]
        self.asins = [p["asin"] for p in products]
        self.index = BM25Index(
            texts,
            fingerprint=fingerprint_texts(texts, self.asins),
            stopwords=LUCENE_STOPWORDS,
            stemmer="porter",
            token_pattern=TOKEN_PATTERN,
            cache_root=cache_root,
        )
        self._memo: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.Lock()

    def search(self, keywords: str) -> tuple[str, ...]:
        """The ASINs the original's BM25 search returns for ``keywords`` (at most SEARCH_RETURN_N), memoised."""
        with self._lock:
            hit = self._memo.get(keywords)
            if hit is not None:
                self._memo.move_to_end(keywords)
                return hit
        result = tuple(self.asins[i] for i, _ in self.index.search([_prep(keywords)], SEARCH_RETURN_N)[0])
        with self._lock:
            self._memo[keywords] = result
            while len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return result
