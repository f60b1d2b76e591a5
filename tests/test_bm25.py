"""BM25Index top-k against a brute-force ranking over the same BM25 contributions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prover_gym.bm25 import BM25Index


@pytest.fixture(scope="module")
def index():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)]
    # Zipf-like frequencies: some terms have postings longer than n_docs / 8 (the dense path)
    p = 1 / np.arange(1, 201)
    p /= p.sum()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(2, 25)), p=p)) for _ in range(5000)]
    return BM25Index(texts, stopwords=None, stemmer=None, cache=False)


def brute_force(index, token_ids, k):
    csc = index._bm25.scores
    dense = np.zeros(index.n_docs)
    for t in token_ids:
        s, e = int(csc["indptr"][t]), int(csc["indptr"][t + 1])
        np.add.at(dense, csc["indices"][s:e], csc["data"][s:e])
    dense = dense.astype(np.float32)
    ranked = sorted((d for d in range(index.n_docs) if dense[d] > 0), key=lambda d: (-dense[d], d))
    return ranked[:k]


@settings(max_examples=80, deadline=None)
@given(terms=st.lists(st.integers(0, 210), min_size=1, max_size=6), k=st.sampled_from([1, 3, 10, 50]))
def test_top_k_equals_brute_force_with_ties_to_lower_index(index, terms, k):
    query = " ".join(f"w{t}" for t in terms)  # w200..w210 are out of vocabulary
    ids = index.tokenize([query])[0]
    got = [d for d, _ in index.search([query], k)[0]]
    assert got == brute_force(index, ids, k)


def test_empty_and_unknown_queries(index):
    assert index.search(["", "zzz qqq", "w0"], 3)[:2] == [[], []]
    with pytest.raises(ValueError):
        index.search(["w0"], 0)


def _shop(tmp_path_factory=None):
    from prover_gym.webshop.search import ProductSearch

    def product(asin, title, desc):
        return {"asin": asin, "Title": title, "Description": desc, "BulletPoints": [], "options": {}}

    return ProductSearch(
        [
            product("A1", "Red running shoes", "It’s light and it's comfortable."),  # U+2019
            product("A2", "Blue s-video cable", "Connects us to the TV."),
            product("A3", "Green tea", "Loose leaf tea."),
        ],
        cache_root=None,
    )


SHOP = None


def shop():
    global SHOP
    if SHOP is None:
        SHOP = _shop()
    return SHOP


def test_webshop_search_tokenises_like_lucene():
    """No known term -> no result (Lucene), not bm25s's empty-token fallback; a lone 's' (from
    's-video' or an unfiltered possessive) is not stemmed to the empty string; all three apostrophes
    of Lucene's possessive filter; 1-2 letter words left unstemmed ('us' stays 'us')."""
    s = shop()
    for q in ("zzzz qqqq", "the of and", "", "men’s", "it＇s", "what's"):
        assert s.search(q) == (), q
    # 's' is a term of A2 ('s-video' splits at the hyphen, as in Lucene), and of nothing else: A1's
    # "It’s" lost its possessive and no word is stemmed into the empty string
    assert s.search("s") == ("A2",) and s.search("s-video") == ("A2",)
    assert s.search("shoes") == ("A1",) and s.search("men’s shoes") == ("A1",)
    assert s.search("us") == ("A2",)


@given(st.lists(st.sampled_from(["zzz", "qq", "the", "of", "'s", "’s", "＇s", "-", "x", "men’s", "it's"]), max_size=6))
@settings(max_examples=60, deadline=None)
def test_queries_without_a_known_term_find_nothing(words):
    assert shop().search(" ".join(words)) == ()
