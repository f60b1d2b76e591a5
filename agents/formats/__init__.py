"""Prompt formats: how a model sees an env, and how its text becomes a canonical env action.

- ``SearchR1Format`` (Search-QA): Search-R1's single-transcript protocol. The prompt is the
  original template; each response is cut after the first ``</search>`` (else ``</answer>``),
  and the first ``<search>``/``<answer>`` block becomes ``search[q]``/``answer[a]``.
- ``ReActFormat`` (WebShop, ALFWorld): verl-agent style per-step prompt with the task, a window
  of recent (observation, action) pairs, the current observation and the admissible actions; the
  model answers ``<think>...</think><action>...</action>``.

Unparseable text never raises: ``parse`` returns ``ParsedAction(INVALID_ACTION, valid=False,
reason=...)``, and every env answers ``INVALID_ACTION`` as an invalid action (state unchanged).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
INVALID_ACTION = "invalid[unparseable model output]"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


@dataclass(frozen=True)
class ParsedAction:
    """A model output parsed: the env action (INVALID_ACTION when it did not parse), whether it parsed, why not, and the
    text kept in the transcript."""

    action: str
    valid: bool
    reason: str = ""
    text: str = ""  # the part of the model's text that is kept in the transcript (after cutting)


def _template(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8")


class SearchR1Format:
    """Search-R1's tags. ``messages(question, turns)`` gives the chat messages and the assistant
    text so far (responses and observations concatenated, as Search-R1 continues one transcript)."""

    name = "searchr1"

    def __init__(self, template: str = "searchr1.txt"):
        self.template = _template(template)

    @staticmethod
    def question(text: str) -> str:
        """The question as Search-R1 shows it (ending with a question mark)."""
        text = text.strip()
        return text if text.endswith("?") else text + "?"

    def prompt(self, question: str) -> str:
        """Search-R1's instruction prompt for ``question``."""
        return self.template.format(question=self.question(question))

    def messages(self, question: str, history: list[tuple[str, str]]) -> tuple[list[dict], str]:
        """``history`` = [(kept model text, observation), ...]."""
        return [{"role": "user", "content": self.prompt(question)}], "".join(t + o for t, o in history)

    @staticmethod
    def cut(text: str) -> str:
        """``text`` up to its first closing search or answer tag (search first, as Search-R1 stops generation)."""
        for tag in ("</search>", "</answer>"):  # search has priority, as in Search-R1
            i = text.find(tag)
            if i >= 0:
                return text[: i + len(tag)]
        return text

    def parse(self, text: str) -> ParsedAction:
        """``<search>q</search>`` -> ``search[q]``, ``<answer>a</answer>`` -> ``answer[a]``; anything else is invalid,
        with the reason."""
        if not isinstance(text, str):
            return ParsedAction(INVALID_ACTION, False, f"model output is {type(text).__name__}, not text")
        kept = self.cut(text)
        match = re.search(r"<(search|answer)>(.*?)</\1>", kept, re.S)
        if not match:
            return ParsedAction(
                INVALID_ACTION, False, "no complete <search>...</search> or <answer>...</answer> block", kept
            )
        verb, content = match.group(1), match.group(2).strip()
        return ParsedAction(f"{verb}[{content}]", True, "", kept)


class ReActFormat:
    """``<think>...</think><action>...</action>``; ``lowercase`` as verl-agent does for WebShop and
    ALFWorld; ``require_think`` and the CJK rule are verl-agent's validity checks."""

    name = "react"

    def __init__(
        self,
        template: str = "react_webshop.txt",
        history_length: int = 2,
        lowercase: bool = True,
        require_think: bool = True,
        max_prompt_chars: int = 13_000,
        history_observations: bool = True,
    ):
        self.template = _template(template)
        self.history_length, self.lowercase, self.require_think = history_length, lowercase, require_think
        self.max_prompt_chars = max_prompt_chars
        # False: the window shows past actions only (a short prompt for small models; WebShop's item page
        # does not show which options are already selected, the past actions do)
        self.history_observations = history_observations

    def messages(
        self, task: str, history: list[tuple[str, str]], observation: str, admissible: list[str] | None
    ) -> list[dict]:
        """``history`` = [(observation, action), ...] of earlier steps, oldest first."""
        shown = ", ".join(f"'{a}'" for a in admissible) if admissible else "any valid action"
        recent = history[-self.history_length :] if self.history_length else []
        first = len(history) - len(recent) + 1
        if self.history_observations:
            past = "".join(f"[Observation {i}: '{o}', Action {i}: '{a}']\n" for i, (o, a) in enumerate(recent, first))
            what = f"observations and the corresponding actions you took: {past}"
        else:
            past = "".join(f"[Action {i}: '{a}']\n" for i, (_, a) in enumerate(recent, first))
            what = f"actions you took: {past}"
        lead = (
            f"Prior to this step, you have already taken {len(history)} step(s). "
            f"Below are the most recent {len(recent)} {what}"
            if recent
            else ""
        )
        content = self.template.format(task=task, history=lead, observation=observation, admissible=shown)
        if len(content) > self.max_prompt_chars and lead:  # verl-agent falls back to the no-history prompt
            content = self.template.format(task=task, history="", observation=observation, admissible=shown)
        return [{"role": "user", "content": content}]

    def parse(self, text: str) -> ParsedAction:
        """The action inside ``<action>...</action>`` (lower-cased where the env's actions are); invalid without one,
        with the reason."""
        if not isinstance(text, str):
            return ParsedAction(INVALID_ACTION, False, f"model output is {type(text).__name__}, not text")
        body = text.lower() if self.lowercase else text
        match = re.search(r"<action>(.*?)</action>", body, re.S)
        if not match:
            return ParsedAction(INVALID_ACTION, False, "no <action>...</action> block", text)
        if self.require_think and not re.search(r"<think>.*?</think>", body, re.S):
            return ParsedAction(INVALID_ACTION, False, "no <think>...</think> block before the action", text)
        if _CJK.search(text):
            return ParsedAction(INVALID_ACTION, False, "CJK characters in the response", text)
        action = match.group(1).strip()
        if not action:
            return ParsedAction(INVALID_ACTION, False, "empty <action></action>", text)
        return ParsedAction(action, True, "", text)


FORMATS = {"searchr1": SearchR1Format, "react": ReActFormat}
DEFAULT_FORMAT: dict[str, tuple[str, dict[str, Any]]] = {
    "prover/SearchQA-v0": ("searchr1", {}),
    "prover/WebShop-v0": ("react", {"template": "react_webshop.txt"}),
    "prover/ALFWorld-v0": ("react", {"template": "react_alfworld.txt", "history_length": 2}),
}


def make_format(name_or_env_id: str, **kwargs):
    """A format by name (``"searchr1"``, ``"react"``) or the default one for an env id."""
    if name_or_env_id in DEFAULT_FORMAT:
        name, defaults = DEFAULT_FORMAT[name_or_env_id]
        return FORMATS[name](**{**defaults, **kwargs})
    if name_or_env_id not in FORMATS:
        raise ValueError(
            f"unknown format {name_or_env_id!r}; use one of {sorted(FORMATS)} or an env id {sorted(DEFAULT_FORMAT)}"
        )
    return FORMATS[name_or_env_id](**kwargs)
