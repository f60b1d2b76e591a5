"""WebShop's reward (``web_agent_site/engine/goal.py::get_reward``), term for term.

    total = (n_attr_matches + n_option_matches + r_price) / (|attributes| + |goal_options| + 1) * r_type

Success is ``total == 1.0``. The one deviation: ``title_score`` needs the nouns of two titles.
The original tags them with spaCy (``en_core_web_lg``). ``nouns`` chooses the tagger: a spaCy model
name (the original's behaviour; an error naming the fix when it is not installed), ``"auto"`` (the
default: ``en_core_web_lg`` or ``_sm`` when installed, else the heuristic) or ``None`` (the heuristic:
alphabetic tokens that are not stop words, colours, sizes or common adjectives, which agrees with
spaCy on ~97% of titles). Buying the target product with the right options scores 1.0 under either;
for another product the type factor ``r_type`` (0 / 0.1 / 0.5 / 1 by title overlap) can differ, so the
reward, and occasionally success itself (0.1 vs 1.0), can differ. ``info["title_nouns"]`` names the
tagger a reward used.
"""

from __future__ import annotations

import functools
import re

from prover_gym.webshop.matching import COLOR_SET, normalize_color, token_set_ratio

_STOP = set(
    "a about above after again against all am an and any are as at be because been before being below "
    "between both but by can did do does doing down during each few for from further had has have having "
    "he her here hers him his how i if in into is it its itself just me more most my no nor not now of "
    "off on once only or other our out over own same she should so some such than that the their them "
    "then there these they this those through to too under until up very was we were what when where "
    "which while who whom why will with you your".split()
)
_NOT_NOUNS = (
    _STOP
    | set(COLOR_SET)
    | set(
        "small medium large x xl xxl xs extra new best premium natural organic soft heavy light lightweight long short "
        "slim wide high low durable classic modern portable waterproof wireless easy quick fast free pure fresh mini "
        "big little premium professional compact adjustable comfortable cute elegant casual vintage".split()
    )
)
_WORD = re.compile(r"[a-z]+")


HEURISTIC = "heuristic"


@functools.lru_cache(maxsize=8)
def tagger(nouns: str | None = "auto") -> str:
    """The tagger ``nouns`` resolves to: ``"spacy:<model>"`` or ``"heuristic"`` (see the module doc); an
    already resolved name resolves to itself."""
    import importlib.util

    if nouns is None or nouns == HEURISTIC:
        return HEURISTIC
    if isinstance(nouns, str) and nouns.startswith("spacy:"):
        nouns = nouns.split(":", 1)[1]
    if nouns == "auto":
        # spaCy itself comes in with alfworld, but without a model package it cannot tag nouns; look for
        # the model first, so that the 3 s `import spacy` is not paid (once per process) for nothing
        for name in ("en_core_web_lg", "en_core_web_sm"):
            if importlib.util.find_spec(name) is not None and _nlp(name) is not None:
                return f"spacy:{name}"
        return HEURISTIC
    if not isinstance(nouns, str) or _nlp(nouns) is None:
        raise ValueError(
            f"spacy_model={nouns!r}: spaCy cannot load it; install spaCy and the model "
            f"(`pip install spacy && python -m spacy download {nouns}`), or use spacy_model='auto' "
            "(a model when one is installed, else the heuristic) or None (the heuristic)"
        )
    return f"spacy:{nouns}"


@functools.lru_cache(maxsize=8)
def _nlp(name: str):
    try:
        import spacy

        return spacy.load(name)
    except (ImportError, OSError):
        return None


@functools.lru_cache(maxsize=100_000)
def title_nouns(title: str, nouns: str = HEURISTIC) -> tuple[str, ...]:
    """Lower-cased nouns of a title, duplicates kept (the reward divides by their count); ``nouns`` is
    a resolved tagger (``tagger()``)."""
    if nouns.startswith("spacy:"):
        nlp = _nlp(nouns.split(":", 1)[1])
        return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN"))
    return tuple(w for w in _WORD.findall(title.lower()) if len(w) > 1 and w not in _NOT_NOUNS)


def type_reward(product: dict, goal: dict, nouns: str = HEURISTIC) -> dict:
    """The original's type reward of buying ``product`` for ``goal``: query and category match and the title's noun
    overlap, as a dict of the parts and ``r_type``."""
    query_match = product["query"] == goal["query"]
    purchased = {x.strip() for x in product["product_category"].split("›")}
    wanted = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(purchased & wanted) >= 2
    p_nouns, d_nouns = title_nouns(product["name"], nouns), title_nouns(goal["name"], nouns)
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
    """How many of the goal's attributes the product has (fuzzy match on its attributes, else found in its title,
    bullets or description), as the original counts them."""
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


def get_reward(
    product: dict, goal: dict, price: float, options: dict[str, str], *, nouns: str | None = "auto"
) -> tuple[float, dict]:
    """(total reward, components) for buying ``product`` at hidden ``price`` with ``options``;
    ``nouns``: the title-noun tagger (a spaCy model name, "auto" or None; see the module doc)."""
    used = tagger(nouns)
    kind = type_reward(product, goal, used)
    goal_options = (
        list(goal["goal_options"].items()) if isinstance(goal["goal_options"], dict) else list(goal["goal_options"])
    )
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
        "title_nouns": used,
    }
    if goal_options:
        info["r_option"] = n_opt / len(goal_options)
        info["w_option"] = len(goal_options) / denominator
    return total, info
