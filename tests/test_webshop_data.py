"""WebShop official-format loading on fixtures written in the published schemas, and golden pages."""

import json

import gymnasium as gym
import pytest

from prover_gym.webshop.data import DataError, build_goals, load_products, parse_pricing, price_tag, split_goals


def _product(
    asin,
    name,
    pricing,
    options,
    query="hair extensions",
    category="beauty",
    path="Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Extensions",
):
    return {
        "name": name,
        "product_information": {},
        "brand": "X",
        "brand_url": "",
        "full_description": f"About {name}.",
        "pricing": pricing,
        "list_price": "",
        "availability_quantity": 1,
        "availability_status": "In Stock",
        "images": ["https://img/1.jpg", "https://img/transparent.gif"],
        "product_category": path,
        "average_rating": "",
        "small_description": [f"Made for {name}. ", "Second bullet "],
        "total_reviews": "",
        "total_answered_questions": "",
        "customization_options": options,
        "seller_id": "",
        "seller_name": "",
        "fulfilled_by_amazon": "",
        "fast_track_message": "",
        "aplus_present": "",
        "asin": asin,
        "category": category,
        "query": query,
        "page": 1,
        "small_description_old": "",
    }


def _opt(*values):
    return [{"value": v, "is_selected": False, "url": "u", "price_string": "", "price": 0, "image": ""} for v in values]


@pytest.fixture
def official(tmp_path):
    return write_official(tmp_path)


def write_official(tmp_path):
    """Official-format WebShop files (items_shuffle / items_ins_v2 / items_human_ins) in ``tmp_path``."""
    items = [
        _product("B06Y3VLDFB", "Solid Wood Console Table", "$877.80", ""),
        _product(
            "B08R3XSC65",
            "Clip In Hair Extension Natural Looking",
            "",
            {"Color": _opt("Natural Black", "Dark Brown"), "Size": _opt("16 Inch", "20 Inch")},
        ),
        _product(
            "B08ZRR3DZT",
            "SheIn Women's Dress",
            "$19.99$27.99",
            {"Size": _opt("X-Small", "Small"), "Color": _opt("Black", "Navy/White")},
        ),
        _product("B09DG92LJL", "Plain Mug", "$8.50", {"Color": None}),
        _product("B09DG92LJL", "Duplicate Mug", "$1.00", ""),  # duplicate ASIN: skipped
        _product("nan", "Broken", "$1.00", ""),  # bad ASIN: skipped
    ]
    attrs = {
        "B06Y3VLDFB": {"attributes": ["solid wood"]},
        "B08R3XSC65": {
            "attributes": ["natural looking", "clip in"],
            "instruction": "Find me natural looking hair extensions",
            "instruction_attributes": ["natural looking"],
        },
        "B08ZRR3DZT": {
            "attributes": ["polyester spandex", "daily wear"],
            "instruction": "Find me women's dresses with polyester spandex for daily wear",
            "instruction_attributes": ["polyester spandex", "daily wear"],
        },
        "B09DG92LJL": {"attributes": []},
    }
    human = {
        "B08R3XSC65": [
            {
                "asin": "B08R3XSC65",
                "instruction": "i need a long clip-in hair extension which is natural looking.",
                "attributes": ["natural looking"],
                "options": ["color: dark brown"],
                "instruction_attributes": ["natural looking"],
                "instruction_options": ["dark brown"],
                "assignment_id": "a",
                "worker_id": "w",
            },
            {
                "asin": "B08R3XSC65",
                "instruction": "hair extension",
                "attributes": [],
                "options": [""],
                "instruction_attributes": [],
                "instruction_options": [],
                "assignment_id": "b",
                "worker_id": "w",
            },
        ]
    }
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(items))
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(attrs))
    (tmp_path / "items_human_ins.json").write_text(json.dumps(human))
    return tmp_path


def test_prices_and_tags():
    assert price_tag(parse_pricing("$877.80")) == "$877.8"
    assert price_tag(parse_pricing("")) == "$100.0"
    assert price_tag(parse_pricing("$19.99$27.99")) == "$19.99 to $27.99"
    assert price_tag(parse_pricing("$8.50")) == "$8.5"
    assert parse_pricing("$1,299.00") == [1299.0]


def test_load_products_like_the_original(official):
    cat = load_products(
        official / "items_shuffle_1000.json", official / "items_ins_v2_1000.json", None, goal_source="synthetic"
    )
    assert [p["asin"] for p in cat.products] == ["B06Y3VLDFB", "B08R3XSC65", "B08ZRR3DZT", "B09DG92LJL"]
    dress = cat.by_asin["B08ZRR3DZT"]
    assert dress["options"] == {"size": ["x-small", "small"], "color": ["black", "navy | white"]}
    assert 19.99 <= cat.prices["B08ZRR3DZT"] <= 27.99 and cat.prices["B06Y3VLDFB"] == 877.8
    # an entry with "attributes": [] keeps the empty list (engine.load_products: 'attributes' in attributes[asin])
    assert cat.by_asin["B09DG92LJL"]["options"] == {} and cat.by_asin["B09DG92LJL"]["Attributes"] == []
    assert dress["BulletPoints"][0] == "Made for SheIn Women's Dress. "
    goals = build_goals(cat, "synthetic")
    assert len(goals) == 2 * 2 + 2 * 2  # option combinations of the two instruction products
    texts = {g["instruction_text"] for g in goals}
    assert any(
        t.startswith(
            "Find me women's dresses with polyester spandex for daily wear with color: black, and size: x-small, and price lower than "
        )
        for t in texts
    )
    for g in goals:
        assert g["price_upper"] > cat.prices[g["asin"]] and isinstance(g["goal_options"], dict)
        assert g["instruction_text"].endswith(f"price lower than {g['price_upper']:.2f} dollars")
    assert build_goals(cat, "synthetic") == goals  # deterministic
    assert build_goals(cat, "synthetic", shuffle_seed=1) != goals


def test_human_goals_and_splits(official):
    cat = load_products(
        official / "items_shuffle_1000.json",
        official / "items_ins_v2_1000.json",
        official / "items_human_ins.json",
        goal_source="human",
    )
    goals = build_goals(cat, "human")
    assert len(goals) == 1  # the record without instruction_attributes is skipped
    assert goals[0]["goal_options"] == ["dark brown"]
    assert goals[0]["instruction_text"].startswith(
        "i need a long clip-in hair extension which is natural looking, and price lower than "
    )
    assert list(split_goals(12087, "test", "human")) == list(range(500))
    assert split_goals(12087, "dev", "human") == range(500, 1500)
    assert split_goals(12087, "train", "human") == range(1500, 12087)
    assert split_goals(6910, "train", "synthetic") == range(500, 6910)
    with pytest.raises(ValueError, match="split='dev'"):
        split_goals(6910, "dev", "synthetic")


def test_env_on_official_files_golden_pages(official):
    env = gym.make("prover/WebShop-v0", data=str(official), split="all", goal_source="human")
    obs, info = env.reset(options={"task_id": "0"})
    instruction = info["task"]
    assert obs == f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search"
    assert info["admissible_actions"] == ["search[<query>]"]
    obs, *_ = env.step("search[clip in hair extension]")
    head = f"Instruction: [SEP] {instruction} [SEP] Back to Search [SEP] "
    assert (
        obs.startswith(head + "Page 1 (Total results: ")
        and " [SEP] Next > [SEP] B08R3XSC65 [SEP] Clip In Hair Extension Natural Looking [SEP] $100.0" in obs
    )
    obs, _, _, _, info = env.step("click[b08r3xsc65]")
    assert obs == head + (
        "< Prev [SEP] color [SEP] natural black [SEP] dark brown [SEP] size [SEP] 16 inch [SEP] 20 inch [SEP] "
        "Clip In Hair Extension Natural Looking [SEP] Price: $100.0 [SEP] Rating: N.A. [SEP] Description [SEP] "
        "Features [SEP] Reviews [SEP] Buy Now"
    )
    assert info["available_actions"]["clickables"] == [
        "back to search",
        "< prev",
        "description",
        "features",
        "reviews",
        "buy now",
        "natural black",
        "dark brown",
        "16 inch",
        "20 inch",
    ]
    assert (
        env.step("click[features]")[0]
        == head + "< Prev [SEP] Made for Clip In Hair Extension Natural Looking. [SEP] Second bullet"
    )
    env.step("click[< prev]")
    assert env.step("click[reviews]")[0] == head + "< Prev"
    env.step("click[< prev]")
    assert env.step("click[description]")[0] == head + "< Prev [SEP] About Clip In Hair Extension Natural Looking."
    env.step("click[< prev]")
    env.step("click[dark brown]")
    obs, reward, term, trunc, info = env.step("click[buy now]")
    assert term and reward == 1.0 and info["won"]
    assert obs.startswith(
        "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk interface.) "
        '[SEP] Purchased [SEP] asin [SEP] B08R3XSC65 [SEP] options [SEP] {"color": "dark brown"} [SEP] attrs'
    )
    assert obs.endswith("[SEP] Your score (min 0.0, max 1.0) [SEP] 1.0 [SEP] Reward Details [SEP] None")


def test_missing_or_corrupt_official_files_are_named(tmp_path, official):
    with pytest.raises(DataError, match="no items_shuffle"):
        gym.make("prover/WebShop-v0", data=str(tmp_path / "empty") if (tmp_path / "empty").mkdir() is None else None)
    (official / "items_ins_v2_1000.json").write_text("{not json")
    with pytest.raises(DataError, match="items_ins_v2_1000.json: not valid JSON"):
        gym.make("prover/WebShop-v0", data=str(official), goal_source="synthetic")
    with pytest.raises(DataError, match="not a directory"):
        gym.make("prover/WebShop-v0", data=str(official / "nope"))


def _rewrite(path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda items: items[1].pop("customization_options"),
            r"product #1 \(asin 'B08R3XSC65'\) has no 'customization_options'",
        ),
        (lambda items: items[2].pop("query"), r"product #2 .* has no 'query'"),
        (lambda items: items[0].pop("full_description"), r"product #0 .* has no 'full_description'"),
        (
            lambda items: items[0].update(pricing="$"),
            r"product #0 \(asin B06Y3VLDFB\): pricing '\$' has a price with no number",
        ),
        (
            lambda items: items[2].update(pricing="$19.99$"),
            r"product #2 .*pricing '\$19.99\$' has a price with no number",
        ),
        (
            lambda items: items[1]["customization_options"]["Color"][0].pop("value"),
            r"product #1 .*option 'Color' must be a list of objects with a 'value'",
        ),
        (lambda items: items[1].update(customization_options=["red"]), r"product #1 .*customization_options is a list"),
    ],
)
def test_product_records_the_original_rejects_are_errors_naming_the_record(official, edit, match):
    """The original's loader raises on these (KeyError, Decimal's InvalidOperation); the port used to
    drop them silently (options dropped turned 42 goals into 3). Now a DataError names file and record."""
    _rewrite(official / "items_shuffle_1000.json", edit)
    for source in ("synthetic", "human"):
        with pytest.raises(DataError, match=r"items_shuffle_1000.json: " + match):
            gym.make("prover/WebShop-v0", data=str(official), goal_source=source)


def test_goal_files_the_original_rejects_are_errors_naming_the_record(official):
    _rewrite(official / "items_ins_v2_1000.json", lambda a: a.pop("B08ZRR3DZT"))
    with pytest.raises(DataError, match=r"product #2 \(asin B08ZRR3DZT\) is not in .*items_ins_v2_1000.json"):
        gym.make("prover/WebShop-v0", data=str(official), goal_source="synthetic")
    _rewrite(official / "items_human_ins.json", lambda h: h["B08R3XSC65"][0].pop("instruction"))
    with pytest.raises(DataError, match=r"items_human_ins.json: record #0 of B08R3XSC65 has no 'instruction'"):
        gym.make("prover/WebShop-v0", data=str(official), goal_source="human")
    _rewrite(official / "items_human_ins.json", lambda h: h["B08R3XSC65"][1].pop("instruction_attributes"))
    with pytest.raises(DataError, match=r"record #0 of B08R3XSC65 has no 'instruction'"):
        gym.make("prover/WebShop-v0", data=str(official))


def test_human_goals_that_name_no_loaded_product_say_why(official):
    """Official items_human_ins.json names products outside items_shuffle_1000.json: the default
    goal_source ('human' when the file is there) used to give 0 goals and a bare 'no tasks' at reset."""
    _rewrite(official / "items_human_ins.json", lambda h: h.update({"B000000000": h.pop("B08R3XSC65")}))
    with pytest.raises(
        DataError,
        match=r"no human goals with goal_source='human' \(the default when items_human_ins.json "
        r"is present\): .*items_human_ins.json has 2 instructions for 1 products, and "
        r"none of them is among the 4 products loaded .*goal_source='synthetic'",
    ):
        gym.make("prover/WebShop-v0", data=str(official))
    env = gym.make("prover/WebShop-v0", data=str(official), goal_source="synthetic", split="all")
    assert len(env.unwrapped.task_ids()) == 2 * 2 + 2 * 2  # the synthetic goals still load
    env.close()


def test_human_goals_without_the_attribute_file_are_refused(official):
    (official / "items_ins_v2_1000.json").unlink()
    with pytest.raises(DataError, match=r"goal_source='human' needs items_ins_v2\*.json .*expert scores 0.8"):
        gym.make("prover/WebShop-v0", data=str(official))


def test_human_targets_missing_from_the_attribute_file_warn(official):
    _rewrite(official / "items_ins_v2_1000.json", lambda a: a.pop("B08R3XSC65"))
    with pytest.warns(
        UserWarning, match=r"1 products with human instructions have no entry in .*items_ins_v2_1000.json"
    ):
        env = gym.make("prover/WebShop-v0", data=str(official), goal_source="human", split="all")
    assert env.unwrapped.catalog.by_asin["B08R3XSC65"]["Attributes"] == ["DUMMY_ATTR"]  # as the original
    env.close()
