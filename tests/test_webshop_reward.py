"""WebShop reward components against hand-computed values (the original test_goal.py vectors)."""

import pytest

from prover_gym.webshop.matching import normalize_color, token_set_ratio
from prover_gym.webshop.reward import attribute_matches, get_reward, option_matches, type_reward


@pytest.mark.parametrize(
    "goal, purchased, score",
    [
        (("size", "x-small"), "small", 100),
        (("size", "x-small"), "x-small", 100),
        (("size", "large"), "x-large", 83),
        ("essential oil", "essential oils", 96),
        ("16 inch", "20 inch", 73),
        ("3 ounce (pack of 1)", "3-ounce (2-pack)", 92),
        ("grey", "grey", 100),
        ("", "grey", 0),
        ("café", "caf", 100),  # non-ASCII dropped before matching
    ],
)
def test_token_set_ratio(goal, purchased, score):
    assert token_set_ratio(purchased, goal) == score


def test_normalize_color_quirks():
    assert normalize_color("light blue") == "blue"
    assert normalize_color("chocolate brown") == "brown"
    assert normalize_color("tired") == "red"
    assert normalize_color(("color", "black")) == "black"
    assert normalize_color(("color", "plain black")) == ("color", "plain black")
    assert normalize_color("medium") == "medium"


def _product(**kw):
    base = {
        "Title": "Herbal shampoo",
        "name": "Herbal shampoo",
        "BulletPoints": [],
        "Description": "",
        "Attributes": ["tea tree", "essential oil", "natural ingredients"],
        "query": "shampoo",
        "product_category": "Beauty › Hair Care › Shampoo",
    }
    base.update(kw)
    return base


GOAL = {
    "attributes": ["tea tree", "essential oils", "natural ingredients"],
    "query": "shampoo",
    "name": "Herbal shampoo",
    "product_category": "Beauty › Hair Care › Shampoo",
    "price_upper": 40.0,
    "goal_options": {"color": "grey", "size": "XL"},
}


def test_attribute_matches():
    assert attribute_matches(_product(), GOAL) == 3
    assert attribute_matches(_product(Attributes=["essential oil", "natural ingredients"]), GOAL) == 2
    no_attrs = _product(
        Attributes=[], BulletPoints=["with essential oils inside"], Description="made of natural ingredients"
    )
    assert attribute_matches(no_attrs, GOAL) == 2


def test_option_matches_list_form():
    goal = ["grey", "XL", "pack of 12"]
    assert option_matches(["pack of 12", "grey", "XL"], goal) == 3
    assert option_matches(["pack of 12", "blue", "XL"], goal) == 2
    assert option_matches(["pack of 12", "powder snow", "XL"], ["cool powder snow", "XL", "pack of 12"]) == 3
    assert option_matches([], goal) == 0


def test_category_match_needs_two_distinct_shared_levels():
    goal = {**GOAL, "query": "other", "product_category": "a › b › c"}
    assert type_reward(_product(query="x", product_category="b › c › a"), goal)["category_match"]
    assert type_reward(_product(query="x", product_category="a › d › b"), goal)["category_match"]
    assert not type_reward(_product(query="x", product_category="a › a › d"), goal)["category_match"]


def test_full_reward_values():
    perfect, info = get_reward(_product(), GOAL, 35.0, {"color": "grey", "size": "XL"})
    assert perfect == 1.0 and info["r_type"] == 1.0 and info["r_option"] == 1.0 and info["r_price"]
    # only "natural ingredients" found (in the description), options and price right: (1 + 2 + 1) / 6
    partial = _product(Attributes=[], Description="natural ingredients only")
    total, _ = get_reward(partial, GOAL, 35.0, {"color": "grey", "size": "XL"})
    assert total == pytest.approx(4 / 6)
    # a third goal option the purchase lacks: 4 / 7
    goal3 = {**GOAL, "goal_options": {"color": "grey", "size": "XL", "scent": "lavender"}}
    total, info = get_reward(partial, goal3, 35.0, {"color": "grey", "size": "XL"})
    assert total == pytest.approx(4 / 7) and info["r_option"] == pytest.approx(2 / 3)
    # over budget: the price term is lost
    total, info = get_reward(_product(), GOAL, 41.0, {"color": "grey", "size": "XL"})
    assert total == pytest.approx(5 / 6) and not info["r_price"]


def test_type_reward_overrides_in_order():
    goal = {**GOAL, "query": "q1", "product_category": "x › y", "name": "shampoo bottle pump refill"}
    other = _product(query="q2", product_category="p › q", name="shampoo brush comb towel")
    r = type_reward(other, goal)  # 1 of 4 nouns shared: no query/category match, title 0.25 > 0.2 -> 1.0
    assert r["title_score"] == pytest.approx(0.25) and r["r_type"] == 1.0
    r = type_reward(
        _product(query="q2", product_category="p › q", name="shampoo cap"),
        {**goal, "name": "shampoo bottle pump refill lid"},
    )
    assert r["title_score"] == pytest.approx(0.2) and r["r_type"] == 0.5
    r = type_reward(_product(query="q2", product_category="p › q", name="towel"), goal)
    assert r["title_score"] == 0.0 and r["r_type"] == 0.0
    r = type_reward(_product(query="q1", name="a b"), {**goal, "name": "the a"})  # no nouns at all -> 0.2
    assert r["title_score"] == 0.2


def _expert_purchase(**kwargs) -> dict:
    """reward_info of the expert's purchase on the first test goal (item start) of a WebShop made with kwargs."""
    import gymnasium as gym

    env = gym.make("prover/WebShop-v0", split="test", start="item", **kwargs)
    env.reset(seed=0)
    while True:
        _, _, done, _, info = env.step(env.unwrapped.expert_action())
        if done:
            return info["reward_info"]


def test_spacy_model_kwarg_names_the_tagger_and_refuses_a_missing_model(monkeypatch):
    import gymnasium as gym

    from prover_gym.webshop import reward

    with pytest.raises(ValueError, match="spacy_model='no_such_model'.*spacy download no_such_model"):
        gym.make("prover/WebShop-v0", split="test", spacy_model="no_such_model")
    assert _expert_purchase(spacy_model=None)["title_nouns"] == "heuristic"

    # a named model tags the nouns (a stand-in pipeline here: no model package in the test environment)
    class Tok:
        def __init__(self, text, pos):
            self.text, self.pos_ = text, pos

    fake = lambda title: [Tok(w, "NOUN" if w.lower() in ("shampoo", "bottle") else "ADJ") for w in title.split()]  # noqa: E731
    monkeypatch.setattr(reward, "_nlp", lambda name: fake if name == "stand_in_model" else None)
    assert reward.tagger("stand_in_model") == "spacy:stand_in_model"
    assert reward.title_nouns("Big Shampoo Bottle blue", "spacy:stand_in_model") == ("shampoo", "bottle")
    goal = {
        "query": "q",
        "product_category": "a › b",
        "name": "shampoo bottle",
        "attributes": [],
        "goal_options": {},
        "price_upper": 10.0,
    }
    product = _product(query="q", product_category="a › b", name="Big Shampoo Bottle", Attributes=[])
    _, info = reward.get_reward(product, goal, 5.0, {}, nouns="stand_in_model")
    assert info["title_nouns"] == "spacy:stand_in_model" and info["title_score"] == 1.0
    # through the env: it resolves the name once at make and hands the resolved tagger to every purchase
    assert _expert_purchase(spacy_model="stand_in_model")["title_nouns"] == "spacy:stand_in_model"
