"""The fuzzy matching WebShop's reward relies on, without its dependencies.

- ``token_set_ratio``: thefuzz 0.19's ``fuzz.token_set_ratio`` (the version WebShop pins) on its
  difflib path (python-Levenshtein is in none of WebShop's requirements).
- ``normalize_color``: ``web_agent_site/engine/normalize.py``, with its 102-entry ``COLOR_SET``.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

COLOR_SET = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
]

_NON_WORD = re.compile(r"(?ui)\W")


def normalize_color(value):
    """First COLOR_SET entry ``c`` with ``c in value`` (substring for a str, element for a tuple),
    else ``value`` unchanged. So "light blue" -> "blue" and even "tired" -> "red", as in WebShop."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def _full_process(value) -> str:
    text = value if isinstance(value, str) else str(value)
    text = "".join(ch for ch in text if ord(ch) < 128)  # force_ascii
    return _NON_WORD.sub(" ", text).lower().strip()


def _ratio(a: str, b: str) -> int:
    if not a or not b:
        return 0
    return int(round(100 * SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a, b) -> int:
    """0..100; 100 whenever one side's tokens are a subset of the other's."""
    p1, p2 = _full_process(a), _full_process(b)
    if not p1 or not p2:
        return 0
    t1, t2 = set(p1.split()), set(p2.split())
    sect = " ".join(sorted(t1 & t2))
    c12 = (sect + " " + " ".join(sorted(t1 - t2))).strip()
    c21 = (sect + " " + " ".join(sorted(t2 - t1))).strip()
    sect = sect.strip()
    return max(_ratio(sect, c12), _ratio(sect, c21), _ratio(c12, c21))
