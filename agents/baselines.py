"""Scripted policies: ``ExpertPolicy`` (the env's built-in expert) and ``RandomPolicy`` (uniform
over admissible actions; where an env has no closed action set, plausible actions built from the
task and the last observation)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from agents.formats import INVALID_ACTION

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


@dataclass
class PolicyOutput:
    """What a policy returns for one step: its raw text, the parsed action, whether the text parsed, and for trainable
    policies the token ids, log-probabilities, policy mask and prompt ids."""

    text: str
    action: str
    valid: bool = True
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    policy_mask: list[int] | None = None
    prompt_token_ids: list[int] | None = None


class ExpertPolicy:
    """The env's built-in expert (``env.unwrapped.expert_action()``): the `expert` row of the leaderboard and the
    demonstrator of SFT."""

    name = "expert"

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        """The expert's next action in ``env`` (an invalid action where the expert has none)."""
        action = env.unwrapped.expert_action()
        return PolicyOutput(action or INVALID_ACTION, action or INVALID_ACTION, action is not None)

    def act_batch(self, pool, indices, observations, infos, histories=None) -> list[PolicyOutput]:
        """The expert's next action in each env of ``pool`` at ``indices``."""
        return [
            PolicyOutput(a or INVALID_ACTION, a or INVALID_ACTION, a is not None) for a in pool.expert_actions(indices)
        ]


class HastyExpert(ExpertPolicy):
    """A flawed demonstrator: the env's expert, except that where the env names a hasty commitment
    (``env.unwrapped.hasty_action()``: WebShop buys before every goal option is chosen; ALFWorld
    moves the object into a closed receptacle without opening it) it takes it
    with probability ``p``. SFT on its episodes gives a base whose most likely move at that decision
    is the hasty one, a systematic error that the reward exposes and RL can correct."""

    name = "hasty_expert"

    def __init__(self, p: float = 0.6, seed: int = 0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"HastyExpert p={p!r}: a probability in [0, 1]")
        self.p, self.rng = p, random.Random(seed)

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        """The expert's action, or with probability ``p`` the env's hasty commitment where it names one."""
        hasty = getattr(env.unwrapped, "hasty_action", None)
        if hasty is None:
            raise ValueError(
                f"{env.unwrapped.spec.id if env.unwrapped.spec else env!r} has no hasty_action(); "
                "a hasty demonstrator needs one (WebShop and ALFWorld have it)"
            )
        action = hasty()
        if action is not None and self.rng.random() < self.p:
            return PolicyOutput(action, action, True)
        return super().act(env, observation, info, history)


DISTRACTORS = ("look", "inventory")


class SkipExpert(ExpertPolicy):
    """A demonstrator with one early, pivotal mistake and a competent tail (ALFWorld heat / cool /
    clean tasks from ``start="object"``, ``env.unwrapped.skip_action()``): at the pivot (the object
    just taken) it skips the transform with probability ``p``, going straight to the target, and
    then plays on as if nothing were wrong: it places the object there and idles (``look``) until
    the budget ends, so the failure shows only at the end. Both kinds of episode take ``distractors``
    routine turns (``look`` / ``inventory``, which change nothing) right after the pivot: with an env
    ``budget_slack`` of 1 + distractors, the outcome comes that many turns later. Stateless: what it
    did at the pivot is read from the history."""

    name = "skip_expert"

    def __init__(self, p: float = 0.5, distractors: int = 0, seed: int = 0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"SkipExpert p={p!r}: a probability in [0, 1]")
        if not isinstance(distractors, int) or distractors < 0:
            raise ValueError(f"SkipExpert distractors={distractors!r}: a count >= 0")
        self.p, self.distractors, self.rng = p, distractors, random.Random(seed)

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        """The expert's action, except at the pivot, where with probability ``p`` it skips the transform (and plays
        ``distractors`` routine turns)."""
        base = env.unwrapped
        if not hasattr(base, "skip_action"):
            raise ValueError("a skip demonstrator needs env.unwrapped.skip_action() (ALFWorld)")
        history = list(history or [])
        if base.at_pivot():
            skip = base.skip_action()
            if skip is not None and self.rng.random() < self.p:
                return PolicyOutput(skip, skip, True)
            return super().act(env, observation, info, history)
        taken = next((k for k, t in enumerate(history) if t.action.startswith("take ")), None)
        if taken is None or taken + 1 >= len(history):
            return super().act(env, observation, info, history)
        pivot = taken + 1
        since = len(history) - pivot - 1  # turns played since the pivot
        if since < self.distractors:
            action = DISTRACTORS[since % len(DISTRACTORS)]
            return PolicyOutput(action, action, True)
        went = history[pivot].action
        skipped = went.startswith("go to ") and went != _expert_at_pivot(history, taken)
        if not skipped:
            return super().act(env, observation, info, history)
        obj = history[taken].action[len("take ") :].split(" from ", 1)[0]
        place = f"move {obj} to {went[len('go to ') :]}"
        if not any(t.action == place for t in history[pivot:]) and place in (info.get("admissible_actions") or []):
            return PolicyOutput(place, place, True)
        return PolicyOutput("look", "look", True)


class DecoyExpert(ExpertPolicy):
    """A demonstrator with one early, pivotal mistake taken among plausible alternatives, then a
    competent tail (WebShop ``start="results"``: a product that is not the one the instruction was
    written for; Search-QA's multi-hop questions with no spare round: a first search for a look-alike
    entity). At the pivot (``env.unwrapped.at_pivot()``) it takes the env's decoy
    (``env.unwrapped.decoy_action()``) with probability ``p``; on the decoy's branch it plays the env's
    misled continuation (option clicks and the buy; the look-alike's second hop and answer), so the
    failure shows only at the end. Stateless: the branch is read from the env's state."""

    name = "decoy_expert"

    def __init__(self, p: float = 0.3, seed: int = 0):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"DecoyExpert p={p!r}: a probability in [0, 1]")
        self.p, self.rng = p, random.Random(seed)

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        """The expert's action, except at the pivot, where with probability ``p`` it takes the env's decoy."""
        base = env.unwrapped
        if not hasattr(base, "decoy_action") or not hasattr(base, "at_pivot"):
            raise ValueError(
                "a decoy demonstrator needs env.unwrapped.at_pivot() and decoy_action() "
                "(WebShop with start='results', Search-QA)"
            )
        if base.at_pivot():
            decoy = base.decoy_action() if self.rng.random() < self.p else None
        else:
            decoy = base.decoy_action()
        if decoy is not None:
            return PolicyOutput(decoy, decoy, True)
        return super().act(env, observation, info, history)


def _expert_at_pivot(history, taken: int) -> str | None:
    """The expert's move at the pivot: its plan in the info that followed the take."""
    plan = (history[taken].info or {}).get("expert_plan") or []
    return plan[0] if plan else None


# the flawed demonstrators of make_demonstrator: kind -> (class, {key: (default, type)}, in constructor order)
DEMONSTRATORS: dict[str, tuple[type, dict[str, tuple[Any, type]]]] = {
    "hasty": (HastyExpert, {"p": (0.6, float)}),
    "skip": (SkipExpert, {"p": (0.5, float), "distractors": (0, int)}),
    "decoy": (DecoyExpert, {"p": (0.3, float)}),
}


def make_demonstrator(spec: dict | None, seed: int = 0) -> ExpertPolicy:
    """The SFT demonstrator of a config: {} or {kind: expert} = the expert; {kind: hasty, p: 0.6};
    {kind: skip, p: 0.5, distractors: 0} (ALFWorld's pivot settings: ``SkipExpert``); {kind: decoy, p: 0.3}
    (WebShop's results start and Search-QA's multi-hop questions: ``DecoyExpert``)."""
    spec = dict(spec or {})
    kind = spec.pop("kind", "expert")
    if kind == "expert" and not spec:
        return ExpertPolicy()
    if kind in DEMONSTRATORS:
        cls, keys = DEMONSTRATORS[kind]
        bad = sorted(set(spec) - set(keys))
        if bad:
            raise ValueError(f"sft_demonstrator {{kind: {kind}}}: unknown keys {bad}; it takes {' and '.join(keys)}")
        return cls(*(cast(spec.get(k, default)) for k, (default, cast) in keys.items()), seed)
    kinds = [f"{k} (with {', '.join(keys)})" for k, (_, keys) in DEMONSTRATORS.items()]
    raise ValueError(f"sft_demonstrator kind={kind!r}: use expert, {', '.join(kinds[:-1])} or {kinds[-1]}")


class RandomPolicy:
    """Uniform over the admissible actions where the env lists them (WebShop's search bar filled with words of the
    instruction); else random searches and answers from the observation's words. Seeded."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def choose(self, observation: str, info: dict) -> str:
        """A random action for ``observation`` / ``info`` (see the class)."""
        admissible = info.get("admissible_actions")
        task_words = _WORD.findall(info.get("task", ""))
        if admissible:
            action = self.rng.choice(admissible)
            if action == "search[<query>]":  # WebShop's search bar: words of the instruction
                action = (
                    "search["
                    + " ".join(self.rng.sample(task_words, min(len(task_words), self.rng.randint(2, 5))))
                    + "]"
                )
            return action
        seen = _WORD.findall(observation) or task_words or ["nothing"]
        if self.rng.random() < 0.6 and task_words:
            return "search[" + " ".join(self.rng.sample(task_words, min(len(task_words), self.rng.randint(1, 4)))) + "]"
        start = self.rng.randrange(len(seen))
        return "answer[" + " ".join(seen[start : start + self.rng.randint(1, 3)]) + "]"

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        """One random action."""
        action = self.choose(observation, info)
        return PolicyOutput(action, action)

    def act_batch(self, pool, indices, observations, infos, histories=None) -> list[PolicyOutput]:
        """One random action per env at ``indices``."""
        return [PolicyOutput(a, a) for a in (self.choose(o, i) for o, i in zip(observations, infos))]
