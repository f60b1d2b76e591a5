"""The scoring judge: a local LLM that cannot fail to parse. Instead of asking for a free-form reply, it
scores every candidate turn of the trajectories on the judge's ``side`` with the model's own
log-probabilities and proposes the best one; nothing is generated.

Modes (``mode``):

- ``yes_no`` (default): per candidate turn, the group is shown and the model asked whether that turn (its
  action quoted) is the decision that made the attempt succeed where the failed attempts did not; the
  score is ``log p("Yes") - log p("No")`` as the first word of its reply. A bias of the model towards
  either answer is the same for every candidate of a group, so it cancels in the argmax.
- ``name``: per trajectory on the side, the model is asked which turn decided it, and each turn's number
  is scored as the answer (``log p(" <k>" | ... "Turn")``).

The prompts carry no answer-shaped example (a small model copies the example: the free-form judge's
failure with SmolLM2-135M, docs/results.md). Every candidate of a group shares the group's rendering, so
the backend encodes that prefix once and repeats its key/value cache for the candidates
(``HFBackend.score_answers``). ``stats`` counts calls, proposals, candidates scored and the tokens read.
"""

from __future__ import annotations

from agents.trajectory import Trajectory
from judges.base import Proposal, check_side, mixed_outcome, on_side, side_words
from judges.llm import PROMPTS, render_attempts

MODES = ("yes_no", "name")
SCORE_JUDGE_OPTS = ("mode", "max_turn_chars", "template", "side")  # the rest configures the hf backend


class ScoringJudge:
    """Proposes the single turn, among the trajectories on ``side``, that the model scores highest (see the module
    docstring); ties go to the earliest (trajectory, turn). ``backend``: a local backend with ``score_answers``
    (agents.backends.hf_backend.HFBackend)."""

    def __init__(
        self,
        backend,
        *,
        mode: str = "yes_no",
        max_turn_chars: int = 200,
        template: str = "score_judge.txt",
        side: str = "won",
    ):
        if mode not in MODES:
            raise ValueError(f"scoring judge mode={mode!r}; use one of {', '.join(MODES)}")
        if not hasattr(backend, "score_answers"):
            raise ValueError(f"{backend!r} cannot score answers; the scoring judge needs kind hf (a local model)")
        self.backend, self.mode, self.side = backend, mode, check_side(side)
        self.max_turn_chars = max_turn_chars
        self.template = (PROMPTS / template).read_text(encoding="utf-8")
        self.stats = {"calls": 0, "proposals": 0, "candidates": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.last_scores: list[tuple[int, int, float]] = []  # (trajectory, turn, score) of the last group

    def _ids(self, text: str, assistant_prefix: str = "") -> list[int]:
        return self.backend.prompt_ids([{"role": "user", "content": text}], assistant_prefix)

    def _answer(self, text: str) -> list[int]:
        return self.backend.tokenizer(text, add_special_tokens=False)["input_ids"]

    def questions(self, group: list[Trajectory]) -> list[tuple[int, int, list[int], list[list[int]]]]:
        """Per prompt: (trajectory, turn or -1 for a whole-trajectory prompt, prompt ids, the answers scored)."""
        attempts = render_attempts(group, self.max_turn_chars)
        _, purpose = side_words(self.side)
        head = self.template.format(task=group[0].task, attempts=attempts, question="{question}")
        out = []
        for i, traj in enumerate(group):
            if not on_side(traj, self.side) or not traj.turns:
                continue
            outcome = "SUCCESS" if traj.won else "FAILURE"
            if self.mode == "name":
                q = f"Which turn of attempt {i} ({outcome}) {purpose}? Answer with the turn number."
                answers = [self._answer(f" {k}") for k in range(len(traj.turns))]
                out.append((i, -1, self._ids(head.replace("{question}", q), "Turn"), answers))
                continue
            for k, turn in enumerate(traj.turns):
                q = (
                    f"Look at turn {k} of attempt {i} ({outcome}), where the action was: {turn.action}\n"
                    f"Is this the decision that {purpose}? Answer yes or no."
                )
                out.append((i, k, self._ids(head.replace("{question}", q)), [self._answer("Yes"), self._answer("No")]))
        return out

    def scores(self, group: list[Trajectory]) -> list[tuple[int, int, float]]:
        """(trajectory, turn, score) of every candidate turn of ``group`` on the judge's side."""
        questions = self.questions(group)
        pairs = [(prompt, answer) for _, _, prompt, answers in questions for answer in answers]
        logps, read = self.backend.score_answers(pairs)
        self.stats["prompt_tokens"] += read
        out, at = [], 0
        for i, k, _, answers in questions:
            row = logps[at : at + len(answers)]
            at += len(answers)
            if self.mode == "name":
                out += [(i, turn, lp) for turn, lp in enumerate(row)]
            else:
                out.append((i, k, row[0] - row[1]))
        self.stats["candidates"] += len(out)
        return out

    def propose(self, group: list[Trajectory]) -> Proposal | None:
        """The best-scored turn of a mixed group (None when the group is not mixed or has no candidate)."""
        if not mixed_outcome(group):
            return None
        self.stats["calls"] += 1
        self.last_scores = self.scores(group)
        if not self.last_scores:
            return None
        i, k, score = max(self.last_scores, key=lambda c: (c[2], -c[0], -c[1]))
        self.stats["proposals"] += 1
        return Proposal(i, k, k, f"{self.mode} score {score:.3f} (the highest of {len(self.last_scores)} turns)")
