"""WebShop's reward (``web_agent_site/engine/goal.py::get_reward``), term for term.

    total = (n_attr_matches + n_option_matches + r_price) / (|attributes| + |goal_options| + 1) * r_type

Success is ``total == 1.0``. The one deviation: ``title_score`` needs the nouns of two titles.
The original uses spaCy's POS tags; here spaCy is used when installed with a model
(``en_core_web_sm``/``_lg``), and otherwise a heuristic keeps alphabetic tokens that are not
stop words, colours, sizes or common adjectives. Buying the target product with the right
options scores 1.0 under either; only partial credit for cross-product purchases can move.
"""

from __future__ import annotations

import functools
import re

from prover_gym.webshop.matching import COLOR_SET, normalize_color, token_set_ratio

_STOP = set(
    "a about above after again against all am an and any are as at be because been before being below between both but by "
    "can did do does doing down during each few for from further had has have having he her here hers him his how i if in "
    "into is it its itself just me more most my no nor not now of off on once only or other our out over own same she "
    "should so some such than that the their them then there these they this those through to too under until up very was "
    "we were what when where which while who whom why will with you your".split()
)
_NOT_NOUNS = _STOP | set(COLOR_SET) | set(
    "small medium large x xl xxl xs extra new best premium natural organic soft heavy light lightweight long short "
    "slim wide high low durable classic modern portable waterproof wireless easy quick fast free pure fresh mini "
    "big little premium professional compact adjustable comfortable cute elegant casual vintage".split()
)
_WORD = re.compile(r"[a-z]+")


@functools.lru_cache(maxsize=1)
def _spacy():
    import importlib.util

    # spaCy itself comes in with alfworld, but without a model package it cannot tag nouns; look for
    # the model first, so that the 3 s `import spacy` is not paid (once per process) for nothing
    names = [n for n in ("en_core_web_lg", "en_core_web_sm") if importlib.util.find_spec(n) is not None]
    if not names:
        return None
    try:
        import spacy
    except ImportError:
        return None
    for name in names:
        try:
            return spacy.load(name)
        except OSError:
            continue
    return None


@functools.lru_cache(maxsize=100_000)
def title_nouns(title: str) -> tuple[str, ...]:
    """Lower-cased nouns of a title, duplicates kept (the reward divides by their count)."""
    nlp = _spacy()
    if nlp is not None:
        return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN"))
    return tuple(w for w in _WORD.findall(title.lower()) if len(w) > 1 and w not in _NOT_NOUNS)


def type_reward(product: dict, goal: dict) -> dict:
    query_match = product["query"] == goal["query"]
    purchased = {x.strip() for x in product["product_category"].split("›")}
    wanted = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(purchased & wanted) >= 2
    p_nouns, d_nouns = title_nouns(product["name"]), title_nouns(goal["name"])
    title_score = 0.2 if not d_nouns else len(set(p_nouns) & set(d_nouns)) / len(d_nouns)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def attribute_matches(product: dict, goal: dict) -> int:
    found = 0
    bullets = " ".join(product["BulletPoints"]).lower()
    for g in goal["attributes"]:
        if any(token_set_ratio(p, g) > 85 for p in product["Attributes"]):
            found += 1
        elif g in product["Title"].lower() or g in bullets or g in product["Description"].lower():
            found += 1
    return found


def option_matches(purchased_values: list[str], goal_options) -> int:
    """Goal options are (name, value) tuples for synthetic goals, value strings for human goals."""
    purchased = [normalize_color(o) for o in purchased_values]
    wanted = [normalize_color(o) for o in goal_options]
    return sum(1 for g in wanted if any(token_set_ratio(p, g) > 85 for p in purchased))


def get_reward(product: dict, goal: dict, price: float, options: dict[str, str]) -> tuple[float, dict]:
    """(total reward, components) for buying ``product`` at hidden ``price`` with ``options``."""
    kind = type_reward(product, goal)
    goal_options = list(goal["goal_options"].items()) if isinstance(goal["goal_options"], dict) else list(goal["goal_options"])
    r_price = price <= goal["price_upper"]
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(list(options.values()), goal_options)
    denominator = len(goal["attributes"]) + len(goal_options) + 1
    total = (n_attr + n_opt + r_price) / denominator * kind["r_type"]
    info = {
        **kind,
        "r_att": n_attr / len(goal["attributes"]) if goal["attributes"] else None,
        "w_att": len(goal["attributes"]) / denominator,
        "r_price": bool(r_price),
        "w_price": 1 / denominator,
    }
    if goal_options:
        info["r_option"] = n_opt / len(goal_options)
        info["w_option"] = len(goal_options) / denominator
    return total, info
