"""``prover/WebShop-v0``: the WebShop benchmark in text mode, in-process, with exact snapshots.

Actions are the original's: ``search[keywords]`` (accepted on any page, as in the original) and
``click[x]`` for a clickable of the current page (``info["admissible_actions"]`` lists them, with
``search[<query>]`` on the search page). ``click[Buy Now]`` ends the episode with WebShop's reward;
success (``won``) is reward 1.0. Anything else leaves the page unchanged: by default the
observation says what was wrong and repeats the page (``invalid_feedback=False`` returns the page
alone, as the original's no-op does).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from prover_gym._shared import shared
from prover_gym.core import Outcome, TextEnv
from prover_gym.webshop.data import DataError, build_goals, find_files, load_products, split_goals
from prover_gym.webshop.engine import SUB_PAGES, Shop, ShopState
from prover_gym.webshop.search import ProductSearch

STARTS = ("search", "item", "results")


def _no_goals(catalog, goal_source: str, items: Path, attrs: Path | None, human: Path | None, explicit: bool) -> str:
    """Why a catalogue gave no goals, with the kwarg that changes it."""
    if goal_source == "synthetic":
        return (
            f"no synthetic goals: none of the {len(catalog)} products loaded from {items} has an 'instruction' "
            f"with 'instruction_attributes' in {attrs}"
        )
    c = catalog.human_counts
    why = (
        "goal_source='human' (the default when items_human_ins.json is present)"
        if not explicit
        else "goal_source='human'"
    )
    if c.get("asins_loaded"):
        detail = (
            f"the {c['asins_loaded']} of them that are loaded have only records with empty "
            "instruction_attributes (skipped, as the original does)"
        )
    else:
        detail = f"none of them is among the {c.get('products', len(catalog))} products loaded from {items}"
    return (
        f"no human goals with {why}: {human} has {c.get('records', 0)} instructions for {c.get('asins', 0)} products, "
        f"and {detail}. Pass goal_source='synthetic' (the instructions of {attrs.name if attrs else 'items_ins_v2'}), "
        "or load the catalogue they were written for (the full items_shuffle.json, num_products=None)"
    )


class WebShopEnv(TextEnv):
    """WebShop text env.

    Args:
        split: ``"train"`` / ``"test"`` (synthetic goals: test = goals [0, 500)); human goals add
            ``"dev"`` (WebShop's split: test [0,500), dev [500,1500), train the rest); ``"all"``.
        data: None for the bundled generated catalogue; else a directory with the official
            ``items_shuffle*.json``, ``items_ins_v2*.json`` and optionally ``items_human_ins.json``.
        goal_source: ``"synthetic"`` or ``"human"``; default human when ``items_human_ins.json``
            is present, else synthetic.
        num_products: load only the first N products (as the original's ``num_products``).
        seed: draws hidden prices of price ranges and the goals' price bounds.
        shuffle_seed: the goal shuffle (233, as the original).
        max_steps: step limit (15, as verl-agent).
        invalid_feedback: prefix the observation of a rejected action with the reason.
        start: ``"search"`` (the original: the search page) or ``"item"``: the episode starts on the
            target product's item page (as if its title had been searched and its result clicked), so
            the task is to choose the instruction's options and buy. With ``max_steps`` = the number
            of the goal's options + 1 there is no step to undo a wrong option click: each click is a
            pivotal decision (``info["goal_options"]`` is not shown; the instruction names them).
            ``"results"``: the episode starts on the first results page of a search for the
            instruction itself (the first move most agents make), among plausible products. The
            tasks are the goals whose page shows both a product that reads as the right one (its
            title names the most of the instruction's attributes, within the price limit) and wins,
            and a look-alike that loses. Choosing the product is the early decision; a few option
            clicks and the buy follow it.
        budget_slack: with ``start="item"``, a per-task step budget of (the goal's options on the
            page) + 1 (buy) + ``budget_slack`` (capped by ``max_steps``): 0 = every click must be
            right, so a wrong option or a detour is final. None = ``max_steps`` only. With
            ``start="results"`` one more step (the product click): at 1, a wrong product cannot be
            undone (back to the results and the right click cost two steps).
            The pivot (``start="item"``), in the final step's info as ``pivot_step`` (0-based; None
            when the budget ran out first): a lost episode's is its buy (the hasty or wrong purchase
            ends it, so it is the last step); a won episode's is the decision that set it apart from
            a hasty buyer: the last step taken where a buy was possible and would have lost (the last
            option click before the buy), or the buy itself where the goal needs no option.
            ``start="results"``: the product chosen decides; its ``pivot_step`` is the index of the
            first click on a result (None if there was none), and the outcome shows at the buy,
            after the option clicks. ``start="search"`` omits the key (DESIGN's contract).
        spacy_model: the title-noun tagger of the reward's type factor: a spaCy model name (the
            original uses ``en_core_web_lg``; an error at make when it cannot be loaded), ``"auto"``
            (a model when one is installed, else the heuristic) or None (the heuristic);
            ``info["reward_info"]["title_nouns"]`` names the one used (prover_gym/webshop/reward.py).
    """

    env_id = "prover/WebShop-v0"

    def __init__(
        self,
        split: str = "train",
        data: str | None = None,
        *,
        goal_source: str | None = None,
        num_products: int | None = None,
        seed: int = 0,
        shuffle_seed: int = 233,
        max_steps: int = 15,
        invalid_feedback: bool = True,
        observation_mode: str = "text",
        start: str = "search",
        budget_slack: int | None = None,
        spacy_model: str | None = "auto",
        render_mode: str | None = None,
    ):
        make_kwargs = dict(
            split=split,
            data=data,
            goal_source=goal_source,
            num_products=num_products,
            seed=seed,
            shuffle_seed=shuffle_seed,
            max_steps=max_steps,
            invalid_feedback=invalid_feedback,
            observation_mode=observation_mode,
            start=start,
            budget_slack=budget_slack,
            spacy_model=spacy_model,
        )
        super().__init__(max_steps=max_steps, render_mode=render_mode, make_kwargs=make_kwargs)
        if start not in STARTS:
            raise ValueError(
                f"start={start!r}; use 'search' (the original), 'item' (the target's item page) or 'results' "
                "(the results of a search for the instruction)"
            )
        if budget_slack is not None and (start == "search" or budget_slack < 0):
            raise ValueError(f"budget_slack={budget_slack!r} needs start='item' or 'results' and a value >= 0")
        self.start, self.budget_slack = start, budget_slack
        from prover_gym.webshop.reward import tagger

        self.nouns = tagger(spacy_model)  # checked now: a model that is not installed fails at make, not at buy
        if observation_mode != "text":
            raise ValueError(
                f"observation_mode={observation_mode!r}; only 'text' (the original's simple mode) is provided"
            )
        if data is None:
            from prover_gym.webshop.bundled import bundled_data_dir

            items, attrs, human = find_files(bundled_data_dir())
        else:
            items, attrs, human = find_files(Path(data))
        explicit = goal_source is not None
        if goal_source is None:
            goal_source = "human" if human is not None else "synthetic"
        if goal_source not in ("synthetic", "human"):
            raise ValueError(f"goal_source={goal_source!r}; use 'synthetic' or 'human'")
        if goal_source == "human" and human is None:
            raise DataError(f"goal_source='human' needs items_human_ins.json next to {items}")
        if attrs is None:  # the original reads it for every product's attributes, whatever the goals
            raise DataError(
                f"goal_source={goal_source!r} needs items_ins_v2*.json next to {items}: "
                + (
                    "synthetic goals are its instructions"
                    if goal_source == "synthetic"
                    else "without it every product's attributes are ['DUMMY_ATTR'] and the reward's attribute "
                    "part never matches (even the expert scores 0.8)"
                )
            )
        key = (str(items), str(attrs), str(human), goal_source, num_products, seed, shuffle_seed)

        def build():
            catalog = load_products(
                items,
                attrs,
                human if goal_source == "human" else None,
                goal_source=goal_source,
                num_products=num_products,
                seed=seed,
            )
            goals = build_goals(catalog, goal_source, seed=seed, shuffle_seed=shuffle_seed)
            if not goals:
                raise DataError(_no_goals(catalog, goal_source, items, attrs, human, explicit))
            shop = Shop(catalog, shared(("search", str(items), num_products), lambda: ProductSearch(catalog.products)))
            digest = hashlib.sha256(json.dumps([g["asin"] + g["instruction_text"] for g in goals]).encode()).hexdigest()
            return catalog, goals, shop, digest

        self.catalog, self.goals, self.shop, digest = shared(key, build)
        self.goal_source, self.split, self.invalid_feedback = goal_source, split, invalid_feedback
        self._ids = [str(i) for i in split_goals(len(self.goals), split, goal_source)]
        if start == "results":  # the goals with a choice to make on the first results page (see _plan)
            plans = shared(
                (*key, "results_start", split, str(spacy_model)),
                lambda: {i: self._plan(self.goals[int(i)]) for i in self._ids},
            )
            self._ids = [i for i in self._ids if None not in plans[i]]
            if not self._ids:
                raise DataError(
                    f"start='results': no goal of split {split!r} has, on the first page of a search for its "
                    "instruction, both a product that matches it visibly and wins and a look-alike that loses"
                )
        self._plans: dict[str, tuple[str | None, str | None]] = plans if start == "results" else {}
        self._fingerprint = hashlib.sha256(
            json.dumps(
                [self.env_id, digest, split, max_steps, invalid_feedback]
                + ([start, budget_slack] if start != "search" else [])
            ).encode()
        ).hexdigest()
        self._goal: dict | None = None
        self._state = ShopState()
        self._chosen_at: int | None = None  # start="results": the step (1-based) of the first product click
        self._lost_buy_at: int | None = None  # start="item": the last step (1-based) taken where a buy would lose

    def _plan(self, goal: dict) -> tuple[str | None, str | None]:
        """``start="results"``: a goal's (pick, decoy) on the first page of a search for its instruction.
        The pick is what an agent that reads the page would click: the best-ranked product among those
        whose title names the most of the attributes the instruction names, at a price within its limit,
        provided it wins when its goal options are chosen and it is bought (else None: no visible right
        answer, not a task). The decoy: the best-ranked product that loses when played the same way and
        matches visibly less well (a missing attribute or too dear: a plausible but readable mistake).
        Many products can win a goal (the reward scores attributes, options and price, not the asin)."""
        text = goal["instruction_text"].lower()
        named = [a for a in goal.get("attributes") or () if a in text]
        limit = goal.get("price_upper")
        start = ShopState(page="results", keywords=text)

        def visible(asin: str) -> tuple[int, bool]:
            product = self.catalog.by_asin[asin]
            affordable = limit is None or min(product["pricing"] or [0.0]) <= limit
            return sum(a in product["Title"].lower() for a in named), affordable

        def wins(asin: str) -> bool:
            t = self.shop.step(start, f"click[{asin.lower()}]", goal, self.nouns)
            for _ in range(8):  # the options a product offers, then the buy
                if t.error or t.done:
                    break
                t = self.shop.step(t.state, self._misled_click(t.state, goal), goal, self.nouns)
            return not t.error and t.done and t.reward == 1.0

        page = self.shop.window(start)
        seen = {a: visible(a) for a in page}
        best = max((m for m, ok in seen.values() if ok), default=None)
        if best is None:
            return None, None
        first = next(a for a in page if seen[a] == (best, True))
        pick = first if wins(first) else None
        decoy = next((a for a in page if seen[a] != (best, True) and not wins(a)), None)
        return pick, decoy

    # ---- TextEnv hooks ----------------------------------------------------------------------
    def task_ids(self) -> list[str]:
        """The split's goal ids."""
        return self._ids

    def task(self) -> str:
        """The current goal's instruction."""
        return self._goal["instruction_text"] if self._goal else ""

    def fingerprint(self) -> str:
        """A digest of the catalogue, goals and settings; snapshots restore only into an env with the same one."""
        return self._fingerprint

    def _load_task(self, task_id: str) -> str:
        self._goal = self.goals[int(task_id)]
        self._state = ShopState()
        if self.start == "item":
            target = self._goal["asin"]
            query = self.catalog.by_asin[target]["Title"].lower()
            self._state = ShopState(page="item", keywords=query, asin=target, visited=frozenset({target}))
        elif self.start == "results":
            self._state = ShopState(page="results", keywords=self._goal["instruction_text"].lower())
        self._chosen_at = None
        self._lost_buy_at = None
        return self._page()

    def goal_option_count(self) -> int:
        """How many of the goal's options the target product offers (the clicks an expert makes)."""
        if self._goal is None:
            raise RuntimeError("reset() the env first: there is no goal yet")
        product_options = self.catalog.by_asin[self._goal["asin"]]["options"]
        wanted = self._goal["goal_options"]
        values = wanted.values() if isinstance(wanted, dict) else wanted
        return sum(any(v in vs for vs in product_options.values()) for v in values)

    def _step_limit(self) -> int:
        if self.budget_slack is None or self._goal is None:
            return self.max_steps
        chooses = 1 if self.start == "results" else 0  # the product click
        return min(self.max_steps, chooses + self.goal_option_count() + 1 + self.budget_slack)

    def _page(self) -> str:
        assert self._goal is not None
        return self.shop.render(self._state, self._goal["instruction_text"], self._goal)

    def _invalid(self, action: str, reason: str) -> Outcome:
        obs = self._page()
        if self.invalid_feedback:
            obs = f"Invalid action: {reason}. The page is unchanged.\n\n{obs}"
        return Outcome(observation=obs, info={"error": reason})

    def _apply(self, action: str) -> Outcome:
        t = self.shop.step(self._state, action, self._goal, self.nouns)
        if t.error:
            return self._invalid(action, t.error)
        if (
            self.start == "results"
            and self._chosen_at is None
            and self._state.page == "results"
            and t.state.page == "item"
        ):
            self._chosen_at = self._step
        if self.start == "item" and not t.done and self._state.page == "item" and not self._buy_wins(self._state):
            self._lost_buy_at = self._step  # a hasty buy was possible here and would have lost
        self._state = t.state
        won = t.done and t.reward == 1.0
        return Outcome(observation=self._page(), reward=t.reward, terminated=t.done, won=won, info=t.info)

    def _buy_wins(self, state: ShopState) -> bool:
        """Whether buying on this item page now would win the goal (the engine's own reward)."""
        t = self.shop.step(state, "click[buy now]", self._goal, self.nouns)
        return not t.error and t.done and t.reward == 1.0

    def _get_state(self) -> Any:
        if self.start == "results":
            return (self._state, self._chosen_at)
        if self.start == "item":
            return (self._state, self._lost_buy_at)
        return self._state

    def _state_key_material(self) -> Any:
        # start="item": where a buy last would have lost is path history that changes only the recorded pivot
        return self._state if self.start == "item" else self._get_state()

    def _set_state(self, state: Any) -> None:
        assert self._task_id is not None  # restore() sets it before calling this hook
        if self.start == "results":
            state, self._chosen_at = state
        elif self.start == "item":
            state, self._lost_buy_at = state
        self._state = state
        self._goal = self.goals[int(self._task_id)]

    def admissible_actions(self) -> list[str]:
        """``search[<query>]`` on the search page, else ``click[...]`` for each button of the page."""
        clickables = self.shop.clickables(self._state)
        out = ["search[<query>]"] if self._state.page == "search" else []
        return out + [f"click[{c}]" for c in clickables if c != "search"]

    def _extra_info(self) -> dict:
        clickables = self.shop.clickables(self._state) if self._goal else []
        info: dict[str, Any] = {
            "page": self._state.page,
            "available_actions": {"has_search_bar": self._state.page == "search", "clickables": clickables},
            "goal_source": self.goal_source,
        }
        if self.start == "item" and (self._terminated or self._truncated):  # the deciding action (or None)
            info["pivot_step"] = self._item_pivot()
        if self.start == "results" and (self._terminated or self._truncated):  # the product chosen (or None)
            info["pivot_step"] = None if self._chosen_at is None else self._chosen_at - 1
        return info

    def _item_pivot(self) -> int | None:
        """``start="item"``'s recorded pivot (0-based), at the episode's end: None when the budget ran out;
        a lost purchase: the buy (the hasty or wrong purchase decided it); a won one: the last step taken
        where a buy was possible and would have lost (the last option click, which a hasty buyer skips),
        or the buy itself where the goal needed no option."""
        if not self._terminated:
            return None
        if self._won and self._lost_buy_at is not None:
            return self._lost_buy_at - 1
        return self._step - 1

    # ---- the early decision (start="results") --------------------------------------------------
    def at_pivot(self) -> bool:
        """Whether the next action is the pivot: ``start="results"``, no product chosen yet."""
        ended = self._terminated or self._truncated
        return self.start == "results" and self._goal is not None and self._chosen_at is None and not ended

    def decoy_action(self) -> str | None:
        """What a misled demonstrator does here (``agents.baselines.DecoyExpert``), or None where it does
        as the expert. At the pivot: click the task's decoy (``_plan``: a plausible product that reads
        less well against the instruction and loses). On that product's page: play on as if it were
        right: choose the goal's option values it offers, then buy (competent turns; the failure shows
        only at the buy)."""
        if self._goal is None or self.start != "results" or self._terminated or self._truncated:
            return None
        s = self._state
        if self.at_pivot():
            if s.page != "results":
                return None
            assert self._task_id is not None
            return f"click[{self._plans[self._task_id][1]}]"  # every task has one; as the page shows it
        if s.page != "item" or s.asin == self._expert_target():
            return None
        return self._misled_click(s, self._goal)

    def _expert_target(self) -> str:
        """The product the expert buys: the goal's asin, or with ``start="results"`` the task's pick."""
        assert self._goal is not None and self._task_id is not None
        pick = self._plans[self._task_id][0] if self.start == "results" else None
        return pick or self._goal["asin"]

    def _misled_click(self, s: ShopState, goal: dict) -> str:
        """On a product's page: the next goal option value it offers that is not chosen yet, else buy."""
        assert s.asin is not None
        offered = self.catalog.by_asin[s.asin]["options"]
        wanted = goal["goal_options"]
        chosen = dict(s.options)
        for value in wanted.values() if isinstance(wanted, dict) else wanted:
            name = next((n for n, vs in offered.items() if value in vs), None)
            if name is not None and chosen.get(name) != value:
                return f"click[{value}]"
        return "click[buy now]"

    # ---- expert -----------------------------------------------------------------------------
    def hasty_action(self) -> str | None:
        """What a hasty demonstrator does instead of the expert here, or None where it does as the
        expert: on the target's page with at least one option chosen, where the expert would click
        another goal option, it buys (the classic premature purchase; the goal is then missed)."""
        s = self._state
        if self._goal is None or self._terminated or self._truncated or s.page != "item":
            return None
        if s.asin != self._goal["asin"] or not s.options:
            return None
        expert = self.expert_action()
        return "click[buy now]" if expert not in (None, "click[buy now]") else None

    # ---- expert -----------------------------------------------------------------------------
    def expert_action(self) -> str | None:
        """Goal-driven oracle: search the target's title, page to it, choose the goal's options, buy.
        ``start="results"``: the target is the task's pick (``_plan``), found by the instruction's search."""
        if self._goal is None or self._terminated or self._truncated:
            return None
        s, target = self._state, self._expert_target()
        query = self._goal["instruction_text"].lower() if self.start == "results" else None
        query = query or self.catalog.by_asin[target]["Title"].lower()
        if s.page == "search":
            return f"search[{query}]"
        if s.page in SUB_PAGES:
            return "click[< prev]"
        if s.page == "results":
            hits = self.shop.results(s.keywords)
            if target not in hits:
                return f"search[{query}]" if s.keywords != query else "click[back to search]"
            wanted_page = hits.index(target) // 10 + 1
            if wanted_page > s.page_num:
                return "click[next >]"
            if wanted_page < s.page_num:
                return "click[< prev]"
            # start="results": the asin as the page shows it, a plain copy for a small model (the engine
            # lowercases an action's argument, as the original does); elsewhere the original's lowercase
            return f"click[{target if self.start == 'results' else target.lower()}]"
        if s.page == "item":
            if s.asin != target:
                return "click[< prev]"
            if self.start == "results":
                return self._misled_click(s, self._goal)  # the pick is a product that wins this way
            chosen = dict(s.options)
            product_options = self.catalog.by_asin[target]["options"]
            goal_options = self._goal["goal_options"]
            pairs = (
                goal_options.items()
                if isinstance(goal_options, dict)
                else [(next((n for n, vs in product_options.items() if v in vs), None), v) for v in goal_options]
            )
            for name, value in pairs:
                if name is not None and value in product_options.get(name, ()) and chosen.get(name) != value:
                    return f"click[{value}]"
            return "click[buy now]"
        return None
