"""Scripted policies: ``ExpertPolicy`` (the env's built-in expert) and ``RandomPolicy`` (uniform
over admissible actions; where an env has no closed action set, plausible actions built from the
task and the last observation)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from agents.formats import INVALID_ACTION

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


@dataclass
class PolicyOutput:
    text: str
    action: str
    valid: bool = True
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    policy_mask: list[int] | None = None
    prompt_token_ids: list[int] | None = None


class ExpertPolicy:
    name = "expert"

    def act(self, env, observation: str, info: dict, history=None) -> PolicyOutput:
        action = env.unwrapped.expert_action()
        return PolicyOutput(action or INVALID_ACTION, action or INVALID_ACTION, action is not None)

    def act_batch(self, pool, indices, observations, infos, histories=None) -> list[PolicyOutput]:
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


def make_demonstrator(spec: dict | None, seed: int = 0) -> ExpertPolicy:
    """The SFT demonstrator of a config: {} or {kind: expert} = the expert; {kind: hasty, p: 0.6}."""
    spec = dict(spec or {})
    kind = spec.pop("kind", "expert")
    if kind == "expert" and not spec:
        return ExpertPolicy()
    if kind == "hasty":
        bad = sorted(set(spec) - {"p"})
        if bad:
            raise ValueError(f"sft_demonstrator {{kind: hasty}}: unknown keys {bad}; it takes p")
        return HastyExpert(float(spec.get("p", 0.6)), seed)
    raise ValueError(f"sft_demonstrator kind={kind!r}: use expert or hasty (with p)")


class RandomPolicy:
    name = "random"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def choose(self, observation: str, info: dict) -> str:
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
        action = self.choose(observation, info)
        return PolicyOutput(action, action)

    def act_batch(self, pool, indices, observations, infos, histories=None) -> list[PolicyOutput]:
        return [PolicyOutput(a, a) for a in (self.choose(o, i) for o, i in zip(observations, infos))]
