"""WebShop data in the published formats, loaded and turned into goals as the original does.

Files (``web_agent_site/utils.py`` names):
- ``items_shuffle*.json``: a JSON array of scraped products (``name``, ``full_description``,
  ``pricing``, ``small_description``, ``customization_options``, ``product_category``, ``asin``,
  ``category``, ``query``, ...);
- ``items_ins_v2*.json``: ASIN -> ``{attributes, [instruction, instruction_attributes]}``;
- ``items_human_ins.json``: ASIN -> list of human instruction records.

``load_products`` follows ``engine.load_products`` (skip bad/duplicate ASINs, parse prices,
lower-case options, ``'/'`` -> ``' | '``); hidden prices for price ranges are drawn uniformly from
a seeded RNG (the original used the unseeded global RNG, so its prices varied per process);
``build_goals`` follows ``goal.get_synthetic_goals`` / ``get_human_goals`` and shuffles with
``random.seed(233)``.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import warnings
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
SHUFFLE_SEED = 233


class DataError(ValueError):
    """A WebShop data file is missing or malformed; the message names it."""


@dataclass
class Catalog:
    """WebShop's products as the original loads them (options, attributes, prices), indexed by ASIN, with the hidden
    prices the reward compares and the human-instruction file's counts."""

    products: list[dict]
    by_asin: dict[str, dict]
    prices: dict[str, float]  # hidden price per ASIN (what the reward compares)
    human_counts: dict = field(default_factory=dict)  # human instruction file: records, ASINs, ASINs loaded

    def __len__(self) -> int:
        return len(self.products)


def _read_json(path: Path, what: str):
    if not path.is_file():
        raise DataError(f"{path}: no such file (the WebShop {what})")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); re-download the WebShop {what}") from None


def parse_pricing(pricing, where: str = "pricing") -> list[float]:
    """``"$19.99$27.99"`` -> [19.99, 27.99]; empty -> [100.0] (the original's default). A piece
    with no number (``"$"``, ``"$1.2.3"``) is an error naming ``where``, as the original's
    ``Decimal`` raises on it."""
    if not pricing:
        return [100.0]
    values = []
    for piece in str(pricing).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", piece)
        try:
            values.append(float(Decimal(digits)))
        except (InvalidOperation, ValueError):
            raise DataError(
                f"{where}: pricing {pricing!r} has a price with no number ({piece!r}); the original's "
                "loader raises on it too: fix the record (e.g. '$19.99' or '$19.99$27.99')"
            ) from None
    return values[:2] if values else [100.0]


def price_tag(prices: list[float]) -> str:
    """``$19.99 to $27.99``; Python's ``str(float)`` formatting, so $8.50 shows as ``$8.5``."""
    return f"${prices[0]}" if len(prices) == 1 else f"${prices[0]} to ${prices[1]}"


def load_products(
    items_path: Path,
    attrs_path: Path | None,
    human_path: Path | None,
    *,
    goal_source: str,
    num_products: int | None = None,
    seed: int = 0,
) -> Catalog:
    """Read the official files and build the catalogue (see ``make_catalog``)."""
    raw = _read_json(items_path, "product file (items_shuffle*.json)")
    if not isinstance(raw, list):
        raise DataError(f"{items_path}: expected a JSON array of products, got {type(raw).__name__}")
    attrs = _read_json(attrs_path, "attribute file (items_ins_v2*.json)") if attrs_path else {}
    human = _read_json(human_path, "human instruction file (items_human_ins.json)") if human_path else {}
    for what, doc, path in (("attribute", attrs, attrs_path), ("human instruction", human, human_path)):
        if not isinstance(doc, dict):
            raise DataError(
                f"{path}: expected a JSON object keyed by ASIN (the WebShop {what} file), got {type(doc).__name__}"
            )
    return make_catalog(
        raw,
        attrs,
        human,
        goal_source=goal_source,
        num_products=num_products,
        seed=seed,
        source=str(items_path),
        attrs_source=str(attrs_path or "the attribute file"),
        human_source=str(human_path or "the human instruction file"),
    )


# what ``engine.load_products`` reads with ``p[key]`` (a KeyError there); ``images`` is not rendered
# in text mode, so it is not required here
REQUIRED_PRODUCT_KEYS = (
    "asin",
    "name",
    "category",
    "query",
    "product_category",
    "full_description",
    "small_description",
    "customization_options",
)


def make_catalog(
    raw: list[dict],
    attrs: dict,
    human: dict,
    *,
    goal_source: str,
    num_products: int | None = None,
    seed: int = 0,
    source: str = "products",
    attrs_source: str = "the attribute file",
    human_source: str = "the human instruction file",
) -> Catalog:
    """``engine.load_products`` on parsed data: skip bad and duplicate ASINs, parse prices,
    lower-case options (``'/'`` -> ``' | '``), attach attributes and instructions, draw hidden prices.
    Raises ``DataError`` (naming the file, the record and the fix) where the original raises."""
    if num_products is not None:
        raw = raw[:num_products]
    rng = random.Random(seed)
    products, by_asin, prices = [], {}, {}
    no_attributes = 0
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise DataError(f"{source}: product #{i} is a {type(p).__name__}, not an object")
        missing = [k for k in REQUIRED_PRODUCT_KEYS if k not in p]
        if missing:
            raise DataError(
                f"{source}: product #{i} (asin {p.get('asin', '?')!r}) has no {', '.join(map(repr, missing))}; "
                "the original's loader needs every product to carry these keys (empty values are fine)"
            )
        asin = str(p["asin"])
        if asin == "nan" or len(asin) > 10 or asin in by_asin:
            continue
        where = f"{source}: product #{i} (asin {asin})"
        bullets = p["small_description"]
        bullets = bullets if isinstance(bullets, list) else [bullets or ""]
        options: dict[str, list[str]] = {}
        custom = p["customization_options"]
        if custom and not isinstance(custom, dict):
            raise DataError(
                f"{where}: customization_options is a {type(custom).__name__}; expected an object "
                "{option name: [{'value': ...}, ...]} or an empty value"
            )
        for name, values in (custom or {}).items():
            if values is None:
                continue
            if not isinstance(values, list) or not all(isinstance(v, dict) and "value" in v for v in values):
                raise DataError(
                    f"{where}: customization option {name!r} must be a list of objects with a 'value' "
                    f"(got {str(values)[:80]})"
                )
            options[name.lower()] = [str(v["value"]).strip().replace("/", " | ").lower() for v in values]
        pricing = parse_pricing(p.get("pricing"), where)
        if asin in attrs and not isinstance(attrs[asin], dict):
            raise DataError(f"{attrs_source}: the entry of {asin} is a {type(attrs[asin]).__name__}, not an object")
        entry = attrs.get(asin) or {}
        if goal_source == "synthetic" and asin not in attrs:
            raise DataError(
                f"{where} is not in {attrs_source}; synthetic goals read every product's instruction from "
                "it (the original raises KeyError): use the attribute file that belongs to these products, "
                "or goal_source='human'"
            )
        if "attributes" not in entry:
            no_attributes += asin in human
        record = {
            "asin": asin,
            "name": p["name"],
            "Title": p["name"],
            "Description": p["full_description"] or "",
            "BulletPoints": [str(b) for b in bullets],
            "Reviews": [],
            "Rating": "N.A.",
            "category": p["category"],
            "query": str(p["query"]).lower().strip(),
            "product_category": p["product_category"],
            "options": options,
            "pricing": pricing,
            "Price": price_tag(pricing),
            "Attributes": list(entry["attributes"]) if "attributes" in entry else ["DUMMY_ATTR"],
        }
        if goal_source == "human" and asin in human:
            record["instructions"] = _human_records(human[asin], asin, human_source)
        elif goal_source == "synthetic" and entry.get("instruction"):
            record["instruction_text"] = entry["instruction"]
            record["instruction_attributes"] = entry.get("instruction_attributes") or []
        products.append(record)
        by_asin[asin] = record
        prices[asin] = pricing[0] if len(pricing) == 1 else rng.uniform(pricing[0], pricing[1])
    if not products:
        raise DataError(f"{source}: no valid products")
    counts = {}
    if goal_source == "human":
        counts = {
            "records": sum(len(v) for v in human.values() if isinstance(v, list)),
            "asins": len(human),
            "asins_loaded": sum(a in by_asin for a in human),
            "products": len(products),
        }
        if no_attributes:
            warnings.warn(
                f"{no_attributes} products with human instructions have no entry in {attrs_source}; their "
                "attributes are ['DUMMY_ATTR'] (as the original), so the reward's attribute part cannot match "
                "them",
                stacklevel=3,
            )
    return Catalog(products, by_asin, prices, counts)


HUMAN_RECORD_KEYS = ("instruction", "instruction_attributes", "instruction_options")


def _human_records(records, asin: str, source: str) -> list[dict]:
    if not isinstance(records, list):
        raise DataError(
            f"{source}: the entry of {asin} is a {type(records).__name__}; expected a list of instruction records"
        )
    for j, r in enumerate(records):
        missing = [k for k in HUMAN_RECORD_KEYS if not isinstance(r, dict) or k not in r]
        if missing:
            raise DataError(
                f"{source}: record #{j} of {asin} has no {', '.join(map(repr, missing))}; each human "
                f"instruction record needs {', '.join(HUMAN_RECORD_KEYS)} (the original reads them all)"
            )
    return records


def _price_clause(price: float, rng: random.Random) -> tuple[float, str]:
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) >= 2:
        _, upper = sorted(rng.sample(above, 2))
        return upper, f", and price lower than {upper:.2f} dollars"
    return 1_000_000.0, ""


def build_goals(catalog: Catalog, goal_source: str, *, seed: int = 0, shuffle_seed: int = SHUFFLE_SEED) -> list[dict]:
    """Goals in WebShop's order (products, then option combinations), shuffled with ``shuffle_seed``."""
    rng = random.Random(seed + 1)
    goals: list[dict] = []
    counts: dict[str, int] = {}
    for product in catalog.products:
        asin = product["asin"]
        base = {
            "asin": asin,
            "category": product["category"],
            "query": product["query"],
            "name": product["name"],
            "product_category": product["product_category"],
        }
        if goal_source == "human":
            for record in product.get("instructions", []):
                attributes = record["instruction_attributes"] or []
                if not attributes:  # the original skips these too
                    continue
                upper, text = _price_clause(catalog.prices[asin], rng)
                goals.append(
                    {
                        **base,
                        "instruction_text": str(record["instruction"]).strip(".") + text,
                        "attributes": list(attributes),
                        "price_upper": upper,
                        "goal_options": list(record["instruction_options"] or []),
                        "weight": 1.0,
                    }
                )
        else:
            if not product.get("instruction_text"):
                continue
            attributes = product["instruction_attributes"]
            if not attributes:
                raise DataError(f"product {asin}: an instruction without instruction_attributes")
            upper, text = _price_clause(catalog.prices[asin], rng)
            names = sorted(product["options"])
            for combination in itertools.product(*(product["options"][n] for n in names)):
                chosen = dict(zip(names, combination))
                option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
                option_text = " with " + option_text if option_text else ""
                goals.append(
                    {
                        **base,
                        "name": product["Title"],
                        "instruction_text": f"{product['instruction_text']}{option_text}{text}",
                        "attributes": list(attributes),
                        "price_upper": upper,
                        "goal_options": chosen,
                    }
                )
                for a in attributes:
                    counts[a] = counts.get(a, 0) + 1
    if goal_source == "synthetic":
        for g in goals:
            g["weight"] = sum(1.0 / counts[a] for a in g["attributes"]) / len(g["attributes"])
    random.Random(shuffle_seed).shuffle(goals)
    return goals


def split_goals(n_goals: int, split: str, goal_source: str) -> range:
    """Goal indices of a split. Human goals: WebShop's test [0,500), dev [500,1500), train rest.
    Synthetic goals: verl-agent's test [0,500), train rest."""
    if goal_source == "human":
        bounds = {
            "test": (0, 500),
            "dev": (500, 1500),
            "valid": (500, 1500),
            "train": (1500, n_goals),
            "all": (0, n_goals),
        }
    else:
        bounds = {"test": (0, 500), "train": (500, n_goals), "all": (0, n_goals)}
    if split not in bounds:
        raise ValueError(f"split={split!r} is not a WebShop {goal_source}-goal split; use one of {sorted(bounds)}")
    lo, hi = bounds[split]
    lo, hi = min(lo, n_goals), min(hi, n_goals)
    return range(lo, hi)


def find_files(directory: Path) -> tuple[Path, Path | None, Path | None]:
    """(items, attributes, human instructions) under ``directory``; the full set wins over ``_1000``."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise DataError(f"data={str(directory)!r}: not a directory; point it at the folder holding items_shuffle*.json")

    def first(*names):
        return next((directory / n for n in names if (directory / n).is_file()), None)

    items = first("items_shuffle.json", "items_shuffle_1000.json")
    if items is None:
        raise DataError(f"data={str(directory)!r}: no items_shuffle.json or items_shuffle_1000.json")
    attrs = (
        first("items_ins_v2.json", "items_ins_v2_1000.json")
        if items.name == "items_shuffle.json"
        else first("items_ins_v2_1000.json", "items_ins_v2.json")
    )
    return items, attrs, first("items_human_ins.json")
