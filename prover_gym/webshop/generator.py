"""Deterministic generator of the bundled WebShop catalogue, written in the official schemas.

Five categories (fashion, beauty, grocery, electronics, home & garden), fifteen product types,
each with its own attribute vocabulary, option groups (colour, size, flavour, pack, style ...),
price band, Amazon-style category path and scrape query. Titles are "Brand + descriptors +
type + features", bullets and descriptions mention some of the attributes, and many near-identical
products of each type differ only in attributes, options and price, so picking the right one
matters. About 40% of products carry a synthetic instruction ("Find me ... with ...") built from
their attributes the way WebShop's ``items_ins_v2`` instructions read; goals are then made from
the files by the same loader as the official data (option combinations x price clause).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

GENERATOR_VERSION = 1

COLORS = ["black", "white", "navy blue", "red", "dark brown", "light grey", "green", "pink", "beige", "purple"]
TYPES = [
    # (category, query, type noun, product_category, attributes, option groups, price band)
    (
        "fashion",
        "women's dresses",
        "dress",
        "Clothing, Shoes & Jewelry › Women › Clothing › Dresses",
        [
            "machine wash",
            "polyester spandex",
            "daily wear",
            "short sleeve",
            "long sleeve",
            "elastic waist",
            "button closure",
        ],
        {"color": COLORS, "size": ["x-small", "small", "medium", "large", "x-large", "xx-large"]},
        (15, 60),
    ),
    (
        "fashion",
        "men's t-shirts",
        "t-shirt",
        "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
        ["cotton", "machine wash", "slim fit", "classic fit", "short sleeve", "moisture wicking"],
        {"color": COLORS, "size": ["small", "medium", "large", "x-large", "xx-large"]},
        (8, 35),
    ),
    (
        "fashion",
        "running shoes",
        "running shoes",
        "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running",
        ["non slip", "rubber sole", "lace up", "memory foam", "breathable mesh"],
        {"color": COLORS, "size": ["7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12"]},
        (30, 120),
    ),
    (
        "beauty",
        "shampoo",
        "shampoo",
        "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos",
        ["sulfate free", "paraben free", "natural ingredients", "dry hair", "tea tree", "argan oil"],
        {
            "size": ["8 fl oz (pack of 1)", "16 fl oz (pack of 1)", "8 fl oz (pack of 2)", "32 fl oz (pack of 1)"],
            "scent": ["lavender", "citrus", "unscented", "coconut"],
        },
        (6, 40),
    ),
    (
        "beauty",
        "lipstick",
        "lipstick",
        "Beauty & Personal Care › Makeup › Lips › Lipstick",
        ["long lasting", "cruelty free", "matte finish", "vegan", "moisturizing"],
        {"color": ["ruby red", "nude", "coral", "plum", "rose", "mauve"]},
        (5, 30),
    ),
    (
        "beauty",
        "face serum",
        "face serum",
        "Beauty & Personal Care › Skin Care › Face › Serums",
        ["hyaluronic acid", "vitamin c", "fine lines", "dark spots", "sensitive skin", "fragrance free"],
        {"size": ["1 fl oz (pack of 1)", "2 fl oz (pack of 1)", "1 fl oz (pack of 2)"]},
        (10, 70),
    ),
    (
        "grocery",
        "coffee beans",
        "coffee beans",
        "Grocery & Gourmet Food › Beverages › Coffee › Whole Coffee Beans",
        ["gluten free", "non gmo", "dark roast", "medium roast", "fair trade", "whole bean"],
        {
            "size": ["12 ounce (pack of 1)", "2 pound (pack of 1)", "12 ounce (pack of 3)"],
            "flavor name": ["original", "vanilla", "hazelnut", "mocha", "caramel"],
        },
        (9, 45),
    ),
    (
        "grocery",
        "green tea",
        "green tea",
        "Grocery & Gourmet Food › Beverages › Tea › Green Tea",
        ["caffeine free", "organic", "individually wrapped", "sugar free", "antioxidant rich"],
        {
            "flavor name": ["jasmine", "mint", "lemon", "honey ginseng"],
            "size": ["20 count (pack of 1)", "20 count (pack of 6)", "100 count (pack of 1)"],
        },
        (4, 30),
    ),
    (
        "grocery",
        "protein bars",
        "protein bars",
        "Grocery & Gourmet Food › Snack Foods › Bars › Protein Bars",
        ["low carb", "high protein", "gluten free", "keto friendly", "low sugar"],
        {
            "flavor name": ["chocolate chip", "peanut butter", "cookies and cream", "birthday cake"],
            "size": ["12 count (pack of 1)", "12 count (pack of 2)", "4 count (pack of 1)"],
        },
        (10, 45),
    ),
    (
        "electronics",
        "wireless earbuds",
        "wireless earbuds",
        "Electronics › Headphones, Earbuds & Accessories › Earbuds",
        ["noise cancelling", "bluetooth 5.3", "long battery life", "water resistant", "fast charging"],
        {"color": ["black", "white", "navy blue", "rose gold"]},
        (18, 150),
    ),
    (
        "electronics",
        "usb c charger",
        "usb c charger",
        "Electronics › Computers & Accessories › Chargers & Adapters",
        ["fast charging", "usb c", "compact design", "overheat protection", "foldable plug"],
        {"style": ["20w", "45w", "65w", "100w"], "color": ["black", "white"]},
        (9, 60),
    ),
    (
        "electronics",
        "hdmi cable",
        "hdmi cable",
        "Electronics › Television & Video › Accessories › Cables › HDMI Cables",
        ["high speed", "4k hdr", "gold plated", "braided nylon", "ethernet"],
        {"size": ["3 feet", "6 feet", "10 feet", "15 feet"], "style": ["single", "2 pack"]},
        (6, 35),
    ),
    (
        "garden",
        "table lamps",
        "table lamp",
        "Home & Kitchen › Lighting & Ceiling Fans › Lamps & Shades › Table Lamps",
        ["living room", "bedside", "dimmable", "usb port", "easy assemble"],
        {"color": ["black", "white", "gold", "beige"], "style": ["modern", "farmhouse", "mid century"]},
        (20, 110),
    ),
    (
        "garden",
        "plant pots",
        "plant pot",
        "Patio, Lawn & Garden › Gardening & Lawn Care › Pots, Planters & Container Accessories",
        ["drainage hole", "indoor outdoor", "ceramic", "easy clean", "saucer included"],
        {"size": ["4 inch", "6 inch", "8 inch", "10 inch"], "color": ["white", "terracotta", "black", "green"]},
        (8, 50),
    ),
    (
        "garden",
        "office chairs",
        "office chair",
        "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs",
        ["lumbar support", "height adjustable", "easy assemble", "high back", "pu leather", "breathable mesh"],
        {"color": ["black", "grey", "white", "blue"]},
        (45, 260),
    ),
]
_DESCRIPTORS = [
    "premium",
    "classic",
    "everyday",
    "deluxe",
    "essential",
    "signature",
    "ultra",
    "original",
    "pro",
    "lite",
]
_SYLLABLES = ["ka", "lo", "mi", "ve", "ra", "zen", "tor", "qua", "bel", "nix", "or", "sa", "dri", "fel", "mon", "tik"]


def _brand(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice([2, 3]))).capitalize()


def _asin(rng: random.Random, used: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


def _instruction(rng: random.Random, query: str, attrs: list[str]) -> str:
    a = attrs
    templates = [f"Find me {query} with {a[0]}", f"Find me {a[0]} {query}", f"I need {query} that are {a[0]}"]
    if len(a) >= 2:
        templates += [
            f"Find me {a[0]} {query} with {a[1]}",
            f"Find me {query} with {a[0]}, and {a[1]}",
            f"I am looking for {a[0]} and {a[1]} {query}",
        ]
    if len(a) >= 3:
        templates += [
            f"Find me {a[0]} {query} with {a[1]} for {a[2]}",
            f"Find me {query} with {a[0]}, {a[1]}, and {a[2]}",
        ]
    return rng.choice(templates)


def generate(n_products: int = 3000, seed: int = 0, instruction_fraction: float = 0.4) -> tuple[list[dict], dict]:
    """(items_shuffle-style products, items_ins_v2-style attribute file)."""
    rng = random.Random(seed)
    used: set[str] = set()
    titles: set[str] = set()
    items: list[dict] = []
    attrs: dict[str, dict] = {}
    while len(items) < n_products:
        category, query, noun, path, vocab, option_groups, (lo, hi) = rng.choice(TYPES)
        brand = _brand(rng)
        attributes = rng.sample(vocab, rng.randint(2, min(4, len(vocab))))
        title_attrs = [a for a in attributes if rng.random() < 0.6]
        descriptor = rng.choice(_DESCRIPTORS).capitalize()
        title = f"{brand} {descriptor} {noun.title()} {' '.join(w.title() for w in title_attrs)}".strip()
        if title.lower() in titles:
            continue
        titles.add(title.lower())
        options = {}
        for name, values in option_groups.items():
            if rng.random() < 0.85:
                k = rng.randint(2, min(4, len(values)))
                options[name.title()] = [{"value": v, "is_selected": False} for v in rng.sample(values, k)]
        price = round(rng.uniform(lo, hi), 2)
        pricing = (
            f"${price:.2f}" if rng.random() < 0.7 else f"${price:.2f}${round(price * rng.uniform(1.05, 1.4), 2):.2f}"
        )
        others = [a for a in attributes if a not in title_attrs]
        bullets = [f"{a.capitalize()}: designed for people who care about {a}. " for a in others[:2]]
        bullets.append(f"What you get: one {noun} from {brand}, backed by a 30-day return policy. ")
        description = (
            f"The {brand} {noun} is made for everyday use. "
            + (f"It features {', '.join(others)}. " if others else "")
            + "Please check the size chart before ordering."
        )
        asin = _asin(rng, used)
        items.append(
            {
                "name": title,
                "product_information": {},
                "brand": brand,
                "brand_url": "",
                "full_description": description,
                "pricing": pricing,
                "list_price": "",
                "availability_status": "In Stock.",
                "images": [],
                "product_category": path,
                "average_rating": "",
                "small_description": bullets,
                "total_reviews": "",
                "total_answered_questions": "",
                "customization_options": options or "",
                "seller_id": "",
                "seller_name": "",
                "fulfilled_by_amazon": "",
                "fast_track_message": "",
                "aplus_present": "",
                "asin": asin,
                "category": category,
                "query": query.capitalize(),
                "page": 1,
                "small_description_old": "",
            }
        )
        entry: dict = {"attributes": attributes}
        if rng.random() < instruction_fraction:
            ins_attrs = rng.sample(attributes, rng.randint(1, min(3, len(attributes))))
            entry["instruction"] = _instruction(rng, query, ins_attrs)
            entry["instruction_attributes"] = ins_attrs
        attrs[asin] = entry
    return items, attrs


def write(directory: Path, n_products: int = 3000, seed: int = 0) -> None:
    """Generate a catalogue of ``n_products`` products and its goals in the original's file formats (items_shuffle.json,
    items_ins_v2.json) into ``directory``."""
    items, attrs = generate(n_products, seed)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "items_shuffle.json").write_text(json.dumps(items))
    (directory / "items_ins_v2.json").write_text(json.dumps(attrs))
