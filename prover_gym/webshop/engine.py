"""The WebShop state machine and its text pages, without Flask or HTML.

Pages render straight to the original's ``observation_mode='text'`` strings (BeautifulSoup's
visible text nodes, stripped, joined by ``" [SEP] "``), and clickables follow
``get_available_actions`` (buttons in page order, then ASINs, then option values). The state is
a small frozen ``ShopState``, so a snapshot is just a reference to it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from prover_gym.webshop.data import Catalog
from prover_gym.webshop.reward import get_reward
from prover_gym.webshop.search import ProductSearch

SEP = " [SEP] "
PRODUCT_WINDOW = 10
SUB_PAGES = ("description", "features", "reviews")
_ACTION = re.compile(r"(.+)\[(.+)\]", re.S)


def _asin(state) -> str:
    """The product of an item (or sub-) page's state."""
    if state.asin is None:
        raise ValueError(f"page {state.page!r} has no product")
    return state.asin


@dataclass(frozen=True)
class ShopState:
    """Where the shopper is: the page, the search keywords and results page, the product and the options chosen, the
    pages visited, and the reward once bought. A value: snapshots are these."""

    page: str = "search"  # search | results | item | description | features | reviews | done
    keywords: str = ""
    page_num: int = 1
    asin: str | None = None
    options: tuple[tuple[str, str], ...] = ()  # (option name, value) in the order first chosen
    visited: frozenset = field(default_factory=frozenset)
    reward: float | None = None


@dataclass
class Transition:
    """The result of one action: the next state, an error for an invalid action, the reward, whether the episode is
    done, and info."""

    state: ShopState
    error: str | None = None
    reward: float = 0.0
    done: bool = False
    info: dict = field(default_factory=dict)


class Shop:
    """Catalog + search + the transition and rendering rules. Stateless: states are values."""

    def __init__(self, catalog: Catalog, search: ProductSearch):
        self.catalog = catalog
        self.search_engine = search

    # ---- pages ------------------------------------------------------------------------------
    def results(self, keywords: str) -> tuple[str, ...]:
        """The catalogue's products matching ``keywords``, ranked by the search engine."""
        return tuple(a for a in self.search_engine.search(keywords) if a in self.catalog.by_asin)

    def window(self, state: ShopState) -> tuple[str, ...]:
        """The products shown on the state's results page."""
        start = (state.page_num - 1) * PRODUCT_WINDOW
        return self.results(state.keywords)[start : start + PRODUCT_WINDOW]

    def clickables(self, state: ShopState) -> list[str]:
        """The buttons of the state's page, as the original's ``get_available_actions`` lists them."""
        if state.page == "search":
            return ["search"]
        if state.page == "results":
            return [
                "back to search",
                *(["< prev"] if state.page_num > 1 else []),
                "next >",
                *(a.lower() for a in self.window(state)),
            ]
        if state.page == "item":
            values = [v for vs in self.catalog.by_asin[_asin(state)]["options"].values() for v in vs]
            return ["back to search", "< prev", *SUB_PAGES, "buy now", *dict.fromkeys(values)]
        if state.page in SUB_PAGES:
            return ["back to search", "< prev"]
        return []

    def render(self, state: ShopState, instruction: str, goal: dict | None = None) -> str:
        """The state's page as WebShop's text observation (the original's ``[SEP]``-joined simple mode)."""
        head = ["Instruction:", instruction.strip()]
        if state.page == "search":
            segs = ["WebShop", *head, "Search"]
        elif state.page == "results":
            hits = self.results(state.keywords)
            segs = [
                *head,
                "Back to Search",
                f"Page {state.page_num} (Total results: {len(hits)})",
                *(["< Prev"] if state.page_num > 1 else []),
                "Next >",
            ]
            for asin in self.window(state):
                p = self.catalog.by_asin[asin]
                segs += [asin.upper(), p["Title"].strip(), p["Price"]]
        elif state.page == "item":
            p = self.catalog.by_asin[_asin(state)]
            segs = [*head, "Back to Search", "< Prev"]
            for name, values in p["options"].items():
                segs += [name, *values]
            segs += [
                p["Title"].strip(),
                f"Price: {p['Price']}",
                f"Rating: {p['Rating']}",
                "Description",
                "Features",
                "Reviews",
                "Buy Now",
            ]
        elif state.page in SUB_PAGES:
            p = self.catalog.by_asin[_asin(state)]
            segs = [*head, "Back to Search", "< Prev"]
            if state.page == "description":
                segs.append(p["Description"].strip())
            elif state.page == "features":
                segs += [b.strip() for b in p["BulletPoints"]]
        else:  # done page: every hidden block of the template still shows, as in the original
            segs = [
                "Thank you for shopping with us!",
                "Your code:",
                "None",
                "(Paste it in your MTurk interface.)",
                "Purchased",
                "asin",
                str(state.asin),
                "options",
                json.dumps(dict(state.options)),
                "attrs",
                "None",
                "category",
                "None",
                "query",
                "None",
                "product category",
                "None",
                "Target",
                "asin",
                "options",
                "attrs",
                "price upper",
                "instuction text",
                "category",
                "product category",
                "query",
                "Goal",
                "None",
                "Reward",
                "Your score (min 0.0, max 1.0)",
                str(state.reward),
                "Reward Details",
                "None",
            ]
        return SEP.join(s for s in segs if s)

    # ---- transitions ------------------------------------------------------------------------
    def step(self, state: ShopState, action: str, goal: dict, nouns: str | None = "auto") -> Transition:
        """Apply ``search[...]`` or ``click[...]`` to ``state``: the next state (an invalid action leaves it, with an
        error), and on ``buy now`` the original's reward against ``goal``."""
        match = _ACTION.match(action)
        if not match:
            return Transition(state, f"{_short(action)!r} is not search[keywords] or click[button]")
        name, arg = match.group(1), match.group(2).lower()
        if name == "search":
            if state.page == "done":
                return Transition(state, "the purchase is made; nothing can be searched after Buy Now")
            keywords = " ".join(arg.split(" "))
            return Transition(replace(state, page="results", keywords=keywords, page_num=1, asin=None, options=()))
        if name != "click":
            return Transition(state, f"unknown action {name!r}; use search[...] or click[...]")
        if arg == "search" or arg not in self.clickables(state):
            return Transition(state, f"{_short(arg)!r} is not clickable on this page")
        return self._click(state, arg, goal, nouns)

    def _click(self, state: ShopState, arg: str, goal: dict, nouns: str | None = "auto") -> Transition:
        if arg == "back to search":
            return Transition(ShopState())
        if state.page == "results":
            if arg == "next >":
                return Transition(replace(state, page_num=state.page_num + 1))
            if arg == "< prev":
                return Transition(replace(state, page_num=state.page_num - 1))
            asin = next(a for a in self.window(state) if a.lower() == arg)
            return Transition(replace(state, page="item", asin=asin, options=(), visited=state.visited | {asin}))
        if state.page == "item":
            if arg == "< prev":
                return Transition(replace(state, page="results", asin=None, options=()))
            if arg in SUB_PAGES:
                return Transition(replace(state, page=arg))
            if arg == "buy now":
                product = self.catalog.by_asin[_asin(state)]
                price = self.catalog.prices[_asin(state)]
                total, details = get_reward(product, goal, price, dict(state.options), nouns=nouns)
                done = replace(state, page="done", reward=total)
                return Transition(done, reward=total, done=True, info={"reward_info": details, "task_score": total})
            group = next(n for n, vs in self.catalog.by_asin[_asin(state)]["options"].items() if arg in vs)
            options = dict(state.options)
            options[group] = arg
            return Transition(replace(state, options=tuple(options.items())))
        if state.page in SUB_PAGES and arg == "< prev":
            return Transition(replace(state, page="item"))
        raise AssertionError(f"unhandled click {arg!r} on page {state.page!r}")


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
