"""The chat-backend protocol: a batch of conversations in, completions out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Completion:
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
    def chat(self, conversations: list[list[dict]], **generation) -> list[Completion]: ...
