"""The chat-backend protocol: a batch of conversations in, completions out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass
class Completion:
    """One generated answer: its text and finish reason, token counts, tool calls (chat APIs), and for local backends
    the generated token ids, their log-probabilities under the sampling policy and the prompt's token ids."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: list | None = None
    token_ids: list[int] | None = None  # generated tokens (local backends)
    logprobs: list[float] | None = None  # log-probability of each generated token under the sampling policy
    prompt_token_ids: list[int] | None = None


class BackendError(RuntimeError):
    """The backend answered, but not usefully (refused, malformed, empty)."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached after the configured retries."""


class ChatBackend(Protocol):
    """What policies and judges call. ``defaults``: generation settings a call may override
    (``max_tokens``, ``temperature``, ``top_p``). Backends that can continue an assistant message
    set ``supports_partial = True`` (the policy then sends its assistant prefix that way)."""

    defaults: dict

    def chat(self, conversations: list[list[dict]], **generation) -> list[Completion]:
        """One completion per conversation (a list of chat messages); ``generation`` overrides ``defaults``."""


@runtime_checkable
class TrainableGenerator(Protocol):
    """A local generation engine the trainer keeps in step with its learner (hf, vllm): ``chat`` takes
    per-row sampling ``keys`` (agents.backends.sampling); ``calls`` counts chat calls (it keys the
    rows given no key, so a checkpoint saves it and a resume restores it); ``load_weights`` takes the
    learner's (HF name, tensor) pairs."""

    defaults: dict
    calls: int

    def chat(self, conversations: list[list[dict]], **generation) -> list[Completion]:
        """One completion per conversation; ``keys`` (one per row) fix each row's sampling noise."""

    def load_weights(self, named_tensors) -> None:
        """Load the learner's weights: (HF parameter name, tensor) pairs."""


class LocalChatBackend:
    """Shared by the in-process backends (hf, vllm): the model's chat template (plus an optional
    assistant prefix, to continue a transcript, and tools) turned into prompt token ids, and
    generation in chunks of ``batch_size``. Subclasses set ``tokenizer``, ``defaults`` and
    ``batch_size`` and implement ``_generate(prompt_ids, params, keys) -> list[Completion]``."""

    tokenizer: Any = None  # a transformers tokenizer (typed loosely: its API is dynamic)
    defaults: dict = {}
    batch_size: int = 1 << 30
    supports_partial = False  # an assistant prefix is rendered into the prompt ids instead
    calls = 0  # chat calls so far (part of the key of rows the caller gave no key)
    seed = 0  # the backend's seed: part of the key of rows the caller gave no key

    def prompt_ids(self, messages: list[dict], assistant_prefix: str = "", tools: list | None = None) -> list[int]:
        """The token ids of ``messages`` rendered with the chat template (and ``tools``), the generation prompt, then
        ``assistant_prefix``."""
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text + assistant_prefix, add_special_tokens=False)["input_ids"]

    def chat(
        self,
        conversations: list[list[dict]],
        *,
        prefixes: list[str] | None = None,
        keys: list[tuple | None] | None = None,
        **generation,
    ) -> list[Completion]:
        """Completions of ``conversations``. ``keys``: one sampling key per conversation (a tuple; see
        ``agents.backends.sampling``): a keyed row's tokens depend only on its key, the model and the
        prompt, not on the call counter or the rest of the batch. A row without a key is keyed by
        (``seed``, this call's number, its row), as every row was before keys existed."""
        params = {**self.defaults, **{k: v for k, v in generation.items() if v is not None}}
        prefixes = prefixes or [""] * len(conversations)
        prompts = [self.prompt_ids(m, p, params.get("tools")) for m, p in zip(conversations, prefixes)]
        if keys is not None and len(keys) != len(prompts):
            raise ValueError(f"chat: {len(keys)} sampling keys for {len(prompts)} conversations")
        self.calls += 1
        row_keys = [
            tuple(k) if k is not None else ("call", self.seed, self.calls, row)
            for row, k in enumerate(keys or [None] * len(prompts))
        ]
        out: list[Completion] = []
        for start in range(0, len(prompts), self.batch_size):
            end = start + self.batch_size
            out.extend(self._generate(prompts[start:end], params, row_keys[start:end]))
        return out

    def _generate(self, prompts: list[list[int]], params: dict, keys: list[tuple]) -> list[Completion]:
        raise NotImplementedError
