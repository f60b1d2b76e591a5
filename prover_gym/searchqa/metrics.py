"""Answer metrics of the Search-R1 / FlashRAG line: SQuAD normalisation, EM, cover-EM, F1."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = {"yes", "no", "noanswer"}


def normalize_answer(text: str) -> str:
    """SQuAD/DrQA normalisation, in this order: lower-case; drop ASCII punctuation; replace the
    words a/an/the with a space; collapse whitespace. Non-ASCII punctuation and accents stay."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golden_answers: str | Iterable[str]) -> list[str]:
    return [golden_answers] if isinstance(golden_answers, str) else list(golden_answers)


def exact_match(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals the normalised form of any gold answer."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golden_answers)))


def cover_exact_match(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """SubEM ("acc" in FlashRAG): 1.0 if any normalised gold is a substring of the prediction."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) in pred for g in _golds(golden_answers)))


def f1_score(prediction: str, golden_answers: str | Iterable[str]) -> float:
    """Token-level F1, maximised over the golds, with FlashRAG's yes/no/noanswer special case."""
    pred = normalize_answer(prediction)
    best = 0.0
    for gold in _golds(golden_answers):
        ref = normalize_answer(gold)
        if (pred in _YES_NO or ref in _YES_NO) and pred != ref:
            continue
        common = Counter(pred.split()) & Counter(ref.split())
        same = sum(common.values())
        if same == 0:
            continue
        precision = same / len(pred.split())
        recall = same / len(ref.split())
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


METRICS = {"em": exact_match, "subem": cover_exact_match, "f1": f1_score}
