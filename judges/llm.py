"""The LLM judge: show the group's successful and failed trajectories to a chat model and ask for
one segment as JSON. ``side=won`` (default) asks for the decisions of a SUCCESSFUL attempt that made
it succeed where the failures did not (what ProVer's positive-only credit can reward); ``failed``
for a failed attempt's mistake; ``any`` for either. Indices, ranges and the side are validated;
malformed output gets one retry with the error spelled out; a model that will not cooperate (or a
backend that fails) yields None."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agents.backends import BackendError
from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side, side_words

PROMPTS = Path(__file__).resolve().parent / "prompts"
_JSON = re.compile(r"\{.*\}", re.S)


class LLMJudge:
    """A judge over any chat backend: the group rendered with each attempt's outcome, observations and actions, the
    model asked for a JSON segment of a trajectory on ``side``; a reply that does not parse or names a wrong segment
    is retried ``retries`` times, then None. Counts calls and failures in ``stats``."""

    def __init__(
        self,
        backend,
        *,
        template: str = "llm_judge.txt",
        max_turn_chars: int = 400,
        retries: int = 1,
        side: str = "won",
    ):
        self.backend = backend
        self.side = check_side(side)
        self.template = (PROMPTS / template).read_text(encoding="utf-8")
        self.max_turn_chars, self.retries = max_turn_chars, retries
        self.stats = {
            "calls": 0,
            "malformed": 0,
            "backend_errors": 0,
            "proposals": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }

    def render(self, group: list[Trajectory]) -> str:
        """The prompt: the template filled with every attempt, its outcome and its turns (observations cut to
        ``max_turn_chars``)."""
        return self.template.format(
            task=group[0].task, attempts=render_attempts(group, self.max_turn_chars), instruction=instruction(self.side)
        )

    def parse(self, text: str, group: list[Trajectory]) -> tuple[Proposal | None, str]:
        """The proposal in the reply ``text`` and why not when there is none (no JSON, bad fields, a segment not in the
        group or not on ``side``)."""
        match = _JSON.search(text or "")
        if not match:
            return None, "no JSON object in the reply"
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError as exc:
            return None, f"the JSON does not parse ({exc.msg})"
        try:
            proposal = Proposal(
                int(data["trajectory"]), int(data["start"]), int(data["end"]), str(data.get("reason", ""))
            )
        except (KeyError, TypeError, ValueError):
            return None, "the JSON needs integer fields trajectory, start and end"
        if not 0 <= proposal.trajectory < len(group) or not on_side(group[proposal.trajectory], self.side):
            which = side_words(self.side)[0].lower() or "listed"
            return None, f"attempt {proposal.trajectory} is not one of the {which} attempts"
        if not proposal.valid_for(group):
            n = len(group[proposal.trajectory].turns)
            return None, f"turns {proposal.start}..{proposal.end} are not a range within 0..{n - 1}"
        return proposal, ""

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The model's segment for a mixed group, or None (not mixed, or no valid reply after the retries; a backend
        error counts and gives None)."""
        if not mixed_outcome(group):
            return None
        messages = [{"role": "user", "content": self.render(group)}]
        for _ in range(1 + self.retries):
            self.stats["calls"] += 1
            try:
                (reply,) = self.backend.chat([messages], temperature=0.0)
            except BackendError:
                self.stats["backend_errors"] += 1
                return None
            self.stats["prompt_tokens"] += reply.prompt_tokens or 0  # the judge's cost (cost/judge_* metrics)
            self.stats["completion_tokens"] += reply.completion_tokens or 0
            proposal, error = self.parse(reply.text, group)
            if proposal is not None:
                self.stats["proposals"] += 1
                return proposal
            self.stats["malformed"] += 1
            messages = messages + [
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": f"That reply cannot be used: {error}. Reply with the JSON object only."},
            ]
        return None


def render_attempts(group: list[Trajectory], max_turn_chars: int) -> str:
    """Every attempt of ``group`` with its outcome and its turns (observation cut to ``max_turn_chars``, action), as
    the LLM judges show them."""
    blocks = []
    for i, traj in enumerate(group):
        lines = [f"Attempt {i} ({'SUCCESS' if traj.won else 'FAILURE'}):"]
        for k, turn in enumerate(traj.turns):
            obs = " ".join(turn.observation.split())
            if len(obs) > max_turn_chars:
                obs = obs[:max_turn_chars] + " ..."
            lines.append(f"  turn {k}: observation: {obs} | action: {turn.action}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def instruction(side: str) -> str:
    """The judge's request for ``side`` (shared by the LLM judge's prompt and the agentic judge)."""
    which, purpose = side_words(side)
    attempt = f"ONE {which.lower()} attempt" if which else "ONE attempt"
    return f"Find the contiguous range of turns in {attempt} that {purpose}."
