"""The agentic judge: a chat model that inspects the group through tools before proposing.

Tools (OpenAI tools format): ``view_turn(trajectory, turn)`` shows one turn in full,
``compare(a, b)`` reports where two attempts first differ, ``propose_segment(trajectory, start,
end, reason)`` ends the episode with a proposal (validated; an invalid one is answered with the
error so the model can fix it). The model starts from a compact outline of the group. Backends
without native tool calls can answer ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
(Qwen's text convention). At most ``max_calls`` tool calls; then None.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agents.backends import BackendError
from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side, side_words
from judges.llm import instruction

_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view_turn",
            "description": "Show one turn of one attempt in full (observation and action).",
            "parameters": {
                "type": "object",
                "properties": {"trajectory": {"type": "integer"}, "turn": {"type": "integer"}},
                "required": ["trajectory", "turn"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "compare",
            "description": "Report the first turn at which two attempts differ, and how.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "propose_segment",
            "description": "",  # set per side by tools()
            "parameters": {
                "type": "object",
                "properties": {
                    "trajectory": {"type": "integer"},
                    "start": {"type": "integer"},
                    "end": {"type": "integer"},
                    "reason": {"type": "string"},
                },
                "required": ["trajectory", "start", "end"],
            },
        },
    },
]


def tools(side: str) -> list[dict]:
    """The tool list, with ``propose_segment`` described for ``side``."""
    import copy

    which, purpose = side_words(side)
    out: list[dict[str, Any]] = copy.deepcopy(_TOOLS)
    out[2]["function"]["description"] = (
        f"Final answer: turns start..end (inclusive) of {'a ' + which if which else 'an'} attempt that {purpose}."
    )
    return out


TOOLS = tools("won")
_TEXT_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


class AgenticJudge:
    """A judge that inspects the group with tools (read a turn, compare attempts) over a chat backend that supports tool
    calls, then calls ``propose_segment`` once; at most ``max_calls`` calls, counted with its failures in ``stats``."""

    def __init__(self, backend, *, max_calls: int = 8, max_chars: int = 1500, side: str = "won"):
        self.backend, self.max_calls, self.max_chars = backend, max_calls, max_chars
        self.side = check_side(side)
        self.tools = tools(self.side)
        self.stats = {
            "calls": 0,
            "tool_calls": 0,
            "invalid_proposals": 0,
            "backend_errors": 0,
            "proposals": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }

    def outline(self, group: list[Trajectory]) -> str:
        """The opening message: the task, each attempt's outcome and actions, and the instruction for ``side``."""
        lines = [f"Task: {group[0].task}", "Attempts (turn: action):"]
        for i, t in enumerate(group):
            acts = "; ".join(f"{k}: {turn.action}" for k, turn in enumerate(t.turns))
            lines.append(f"Attempt {i} ({'SUCCESS' if t.won else 'FAILURE'}, {len(t.turns)} turns): {acts}")
        lines.append(instruction(self.side))
        lines.append("Use the tools to inspect turns, then call propose_segment exactly once.")
        return "\n".join(lines)

    def _tool(self, group, name: str, args: dict) -> tuple[str, Proposal | None]:
        try:
            if name == "view_turn":
                t = group[int(args["trajectory"])].turns[int(args["turn"])]
                return f"observation: {t.observation[: self.max_chars]}\naction: {t.action}\nreward: {t.reward}", None
            if name == "compare":
                a, b = group[int(args["a"])], group[int(args["b"])]
                for k, (x, y) in enumerate(zip(a.turns, b.turns)):
                    if x.action != y.action or x.observation != y.observation:
                        same = "the same" if x.observation == y.observation else "different"
                        return (
                            f"first difference at turn {k}: observations are {same}; "
                            f"actions {x.action!r} vs {y.action!r}",
                            None,
                        )
                return f"no difference in the first {min(len(a.turns), len(b.turns))} turns", None
            if name == "propose_segment":
                p = Proposal(int(args["trajectory"]), int(args["start"]), int(args["end"]), str(args.get("reason", "")))
                if not p.valid_for(group) or not on_side(group[p.trajectory], self.side):
                    self.stats["invalid_proposals"] += 1
                    which = side_words(self.side)[0] or "an"
                    return f"invalid: name {which} attempt and a turn range inside it", None
                return "accepted", p
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            return f"error: bad arguments ({type(exc).__name__})", None
        return f"error: unknown tool {name!r}", None

    @staticmethod
    def _calls(completion) -> list[tuple[str, str, dict]]:
        calls = []
        for i, c in enumerate(completion.tool_calls or []):
            fn = c.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            calls.append((c.get("id", f"call{i}"), fn.get("name", ""), args))
        if not calls:
            for i, m in enumerate(_TEXT_CALL.finditer(completion.text or "")):
                try:
                    data = json.loads(m.group(1))
                    calls.append((f"text{i}", str(data.get("name", "")), dict(data.get("arguments", {}))))
                except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                    continue
        return calls

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """A segment of a trajectory on ``side`` of a mixed group after the tool conversation, or None (not mixed, no
        valid proposal within ``max_calls``, or the backend failing)."""
        if not mixed_outcome(group):
            return None
        messages: list[dict] = [{"role": "user", "content": self.outline(group)}]
        used = 0
        while used < self.max_calls:
            self.stats["calls"] += 1
            try:
                (reply,) = self.backend.chat([messages], temperature=0.0, tools=self.tools)
            except BackendError:
                self.stats["backend_errors"] += 1
                return None
            self.stats["prompt_tokens"] += reply.prompt_tokens or 0  # the judge's cost (cost/judge_* metrics)
            self.stats["completion_tokens"] += reply.completion_tokens or 0
            calls = self._calls(reply)
            if not calls:
                messages += [
                    {"role": "assistant", "content": reply.text or ""},
                    {"role": "user", "content": "Call one of the tools (propose_segment to finish)."},
                ]
                used += 1
                continue
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.text or "",
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                        for cid, n, a in calls
                    ],
                }
            )
            for cid, name, args in calls:
                used += 1
                self.stats["tool_calls"] += 1
                result, proposal = self._tool(group, name, args)
                if proposal is not None:
                    self.stats["proposals"] += 1
                    return proposal
                messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        return None
