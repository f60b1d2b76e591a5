"""A policy backed by any chat backend (hf, vllm, openai) and a prompt format.

Each step renders the format's prompt from the trajectory so far, asks the backend, parses the
reply into a canonical action (``INVALID_ACTION`` when unparseable) and returns the raw text plus,
for local backends, the generated token ids and log-probs (all of them policy tokens).

A backend that fails (server down, 429/5xx after its retries, malformed replies) costs the turns it
was asked for, not the run: each failed request becomes an invalid action (the env leaves its state
unchanged), counted in ``stats["failures"]``. Only when every request of
``max_consecutive_failures`` calls in a row fails does the policy give up with
``BackendUnavailable`` (a dead server must not be scored as a 0% agent)."""

from __future__ import annotations

from agents.backends.base import BackendError, BackendUnavailable
from agents.baselines import PolicyOutput
from agents.formats import INVALID_ACTION, SearchR1Format, make_format
from agents.trajectory import Turn


class LLMPolicy:
    """A policy over a chat backend: the env's prompt format renders the observation (and history) into messages,
    the backend generates, the format parses the action; token ids and log-probabilities are kept for training. A
    failed request costs its turn (an invalid action, counted in ``stats``), not the run (module docstring)."""

    def __init__(
        self, backend, fmt=None, *, env_id: str | None = None, max_consecutive_failures: int = 5, **generation
    ):
        if fmt is None:
            if env_id is None:
                raise ValueError("LLMPolicy needs a format or the env_id whose default format to use")
            fmt = make_format(env_id)
        self.backend, self.format, self.generation = backend, fmt, generation
        self.max_consecutive_failures = max_consecutive_failures
        self.stats = {"requests": 0, "failures": 0}
        self.last_error: str | None = None
        self._failing_calls = 0

    def request(self, observation: str, info: dict, history: list[Turn]) -> tuple[list[dict], str]:
        """The (chat messages, assistant prefix) this policy sends for ``observation`` after ``history``
        (SFT renders expert turns through it, so training sees exactly the prompts of acting)."""
        if isinstance(self.format, SearchR1Format):
            pairs = [
                (t.text, history[i + 1].observation if i + 1 < len(history) else observation)
                for i, t in enumerate(history)
            ]
            return self.format.messages(info.get("task", observation), pairs)
        pairs = [(t.observation, t.action) for t in history]
        return self.format.messages(info.get("task", ""), pairs, observation, info.get("admissible_actions")), ""

    def _outputs(self, requests, keys: list | None = None) -> list[PolicyOutput]:
        messages = [m for m, _ in requests]
        prefixes = [p for _, p in requests]
        kwargs = dict(self.generation)
        if any(prefixes):
            kwargs["prefixes"] = prefixes
        if keys is not None and any(k is not None for k in keys):
            kwargs["keys"] = keys
        if getattr(self.backend, "supports_partial", False):
            kwargs["errors"] = "return"  # one failed request costs one turn, not the batch
        self.stats["requests"] += len(messages)
        try:
            completions = self.backend.chat(messages, **kwargs)
        except BackendError as exc:
            completions = [exc] * len(messages)
        failed = [c for c in completions if isinstance(c, BaseException)]
        if failed:
            self.stats["failures"] += len(failed)
            self.last_error = str(failed[0])
        self._failing_calls = self._failing_calls + 1 if len(failed) == len(completions) else 0
        if self._failing_calls >= self.max_consecutive_failures:
            raise BackendUnavailable(
                f"policy backend failed on every request of {self._failing_calls} calls in a row "
                f"(last: {self.last_error})"
            )
        outs = []
        for c in completions:
            if isinstance(c, BaseException):
                outs.append(PolicyOutput("", INVALID_ACTION, False))
                continue
            parsed = self.format.parse(c.text)
            n = len(c.token_ids) if c.token_ids is not None else 0
            outs.append(
                PolicyOutput(
                    parsed.text or c.text,
                    parsed.action,
                    parsed.valid,
                    c.token_ids,
                    c.logprobs,
                    [1] * n if c.token_ids is not None else None,
                    c.prompt_token_ids,
                )
            )
        return outs

    def act(
        self, env, observation: str, info: dict, history: list[Turn] | None = None, *, key: tuple | None = None
    ) -> PolicyOutput:
        """One turn. ``key``: the episode's sampling key (``turn_key`` adds the turn)."""
        history = history or []
        return self._outputs([self.request(observation, info, history)], [turn_key(key, history)])[0]

    def act_batch(self, pool, indices, observations, infos, histories=None, *, keys=None) -> list[PolicyOutput]:
        """One turn of each episode. ``keys``: per episode, its sampling key or None."""
        histories = histories or [[] for _ in indices]
        turn_keys = [turn_key(k, h) for k, h in zip(keys or [None] * len(histories), histories)]
        return self._outputs([self.request(o, i, h) for o, i, h in zip(observations, infos, histories)], turn_keys)


def turn_key(episode_key: tuple | None, history: list) -> tuple | None:
    """The sampling key of a turn: its episode's key plus the turn's index in the episode (the
    history shown to the policy, a continuation's included), so turn t of an episode draws the same
    tokens whoever asks and whatever else is in the batch (agents.backends.sampling)."""
    return None if episode_key is None else (*episode_key, len(history))
