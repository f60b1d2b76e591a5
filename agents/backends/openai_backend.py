"""Any OpenAI-compatible chat-completions server (vLLM serve, SGLang, OpenAI, Ollama) through the
official ``openai`` client.

- The API key is read from the environment variable named by ``api_key_env`` and is never stored
  in logs, reprs or error messages; a loopback server without a key gets the placeholder "EMPTY".
- Retries (connection errors, timeouts, 429, 5xx, malformed bodies) with linear back-off are ours
  (the client's own retries are off) so that ``stats`` counts them; then ``BackendUnavailable``.
- A batch of conversations is sent concurrently (``concurrency`` threads).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

from agents.backends.base import BackendError, BackendUnavailable, Completion


class OpenAIBackend:
    """Any OpenAI-compatible chat completions endpoint (vLLM / SGLang servers, hosted APIs): concurrent requests,
    retries with backoff on connection errors and 429 / 5xx, then BackendUnavailable; the API key from
    ``api_key_env``, never logged."""

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        temperature: float = 1.0,
        max_tokens: int = 512,
        concurrency: int = 8,
        continue_final_message: bool = True,
    ):
        import openai

        self.model, self.base_url = model, base_url
        self.timeout, self.max_retries, self.backoff = timeout, max(1, max_retries), backoff
        self.defaults = {"temperature": temperature, "max_tokens": max_tokens}
        key = os.environ.get(api_key_env)
        if not key:
            host = urlparse(base_url).hostname or ""
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise ValueError(
                    f"no API key: set the environment variable {api_key_env} (named by api_key_env) for {base_url}"
                )
            key = "EMPTY"
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        self._openai = openai
        self._pool = ThreadPoolExecutor(max(1, concurrency))
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self.continue_final_message = continue_final_message

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    def chat(
        self, conversations: list[list[dict]], *, prefixes: list[str] | None = None, errors: str = "raise", **generation
    ) -> list[Completion]:
        """``prefixes``: assistant text to continue (a Search-R1 transcript), sent as a final assistant
        message with vLLM/SGLang's ``continue_final_message`` (a server without it answers a new turn).
        ``errors="return"``: a request that fails after the retries yields its ``BackendError`` in
        its slot instead of raising (the others' completions are kept)."""
        params = {**self.defaults, **{k: v for k, v in generation.items() if v is not None}}
        continued = (
            {
                **params,
                "extra_body": {
                    **params.get("extra_body", {}),
                    "continue_final_message": True,
                    "add_generation_prompt": False,
                },
            }
            if self.continue_final_message
            else params
        )

        def one(item):
            conversation, prefix = item
            try:
                if prefix:
                    return self._one(conversation + [{"role": "assistant", "content": prefix}], continued)
                return self._one(conversation, params)
            except BackendError as exc:
                if errors == "raise":
                    raise
                return exc

        return list(self._pool.map(one, zip(conversations, prefixes or [""] * len(conversations))))

    supports_tools = True
    supports_partial = True

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _one(self, messages: list[dict], params: dict) -> Completion:
        oa = self._openai
        retryable = (
            oa.APIConnectionError,
            oa.APITimeoutError,
            oa.RateLimitError,
            oa.InternalServerError,
            oa.APIResponseValidationError,
            ValueError,
        )
        last = "no attempt"
        for attempt in range(self.max_retries):
            self._count("requests")
            try:
                resp = self._client.chat.completions.create(model=self.model, messages=messages, **params)  # type: ignore[arg-type]
            except oa.APIStatusError as exc:
                if exc.status_code < 500 and exc.status_code != 429:
                    self._count("failures")
                    raise BackendError(f"{self.base_url} refused the request: HTTP {exc.status_code}") from None
                last = f"HTTP {exc.status_code}"
            except retryable as exc:
                last = type(exc).__name__
            else:  # a 200 whose body is not a chat completion (only the parse is guarded: a TypeError from
                # our own call arguments must surface, not pass for a server fault)
                try:
                    choice = resp.choices[0]
                    usage = getattr(resp, "usage", None)
                    return Completion(
                        choice.message.content or "",
                        choice.finish_reason,
                        getattr(usage, "prompt_tokens", None),
                        getattr(usage, "completion_tokens", None),
                        [c.model_dump() for c in (choice.message.tool_calls or [])] or None,
                    )
                except (AttributeError, IndexError, TypeError):
                    last = "malformed response"
            if attempt + 1 < self.max_retries:
                self._count("retries")
                time.sleep(self.backoff * (attempt + 1))
        self._count("failures")
        raise BackendUnavailable(
            f"chat backend at {self.base_url} failed after {self.max_retries} attempts ({last}); "
            f"is the server running (e.g. `vllm serve {self.model}`)?"
        )

    def close(self) -> None:
        """Close the HTTP client."""
        self._pool.shutdown(wait=False)
        self._client.close()
