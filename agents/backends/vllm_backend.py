"""vLLM's offline engine behind the chat-backend protocol (GPU extra: ``pip install prover-gym[gpu]``).

Same contract as the hf backend: the model's chat template (optionally an assistant prefix),
batched generation, generated token ids and their log-probabilities under the sampling
distribution (``logprobs_mode="processed_logprobs"`` where the installed vLLM supports it).
vLLM is imported only when this backend is made.
"""

from __future__ import annotations

from agents.backends.base import BackendError, Completion, LocalChatBackend


class VLLMBackend(LocalChatBackend):
    def __init__(self, model_path: str, *, max_tokens: int = 512, temperature: float = 1.0, top_p: float = 1.0,
                 seed: int = 0, gpu_memory_utilization: float = 0.85, dtype: str = "bfloat16", **engine_kwargs):
        try:
            import vllm
        except ImportError:
            raise ImportError("the vllm backend needs vLLM and a GPU: pip install 'prover-gym[gpu]'") from None
        self._vllm = vllm
        kwargs = dict(model=model_path, seed=seed, gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
                      **engine_kwargs)
        try:
            self.llm = vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # older vLLM: raw log-probs (equal to processed ones at temperature 1, top_p 1)
            self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.defaults = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p}
        self.seed = seed
        self._calls = 0  # part of the per-request seeds: saved and restored with trainer checkpoints

    def load_weights(self, named_tensors) -> None:
        """Load a learner's weights into the engine in memory (no files): the model runner's own
        ``load_weights`` (the HF-name to vLLM-layout mapping, fused qkv included), run in-process when
        the engine lives here (V0, or V1 with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``), else on every
        worker through ``collective_rpc``. The prefix cache is dropped: it holds old-weight KV."""
        weights = [(name, tensor.detach().to("cpu")) for name, tensor in named_tensors]
        engine = self.llm.llm_engine
        executor = getattr(engine, "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        runner = getattr(getattr(worker, "worker", worker), "model_runner", None)
        if runner is not None:
            runner.model.load_weights(weights)
        else:
            self.llm.collective_rpc(_load_weights_on_worker, args=(weights,))
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    def _generate(self, prompts: list[list[int]], params: dict) -> list[Completion]:
        self._calls += 1
        # one seed per request: with one seed for all, a GRPO group (the same prompt n times) would
        # get n identical samples
        sampling = [self._vllm.SamplingParams(temperature=max(0.0, params["temperature"]), top_p=params["top_p"],
                                              max_tokens=params["max_tokens"], logprobs=0,
                                              seed=(self.seed * 1_000_003 + self._calls * 65_537 + row) % (1 << 63))
                    for row in range(len(prompts))]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], sampling, use_tqdm=False)
        results = []
        for prompt, out in zip(prompts, outputs):
            if not out.outputs:
                raise BackendError("vLLM returned no completion")
            o = out.outputs[0]
            ids = list(o.token_ids)
            logprobs = [step[t].logprob for step, t in zip(o.logprobs or [], ids)] if o.logprobs else None
            results.append(Completion(o.text, o.finish_reason, len(prompt), len(ids), None, ids, logprobs, list(prompt)))
        return results


def _load_weights_on_worker(worker, weights) -> None:
    """Runs inside each vLLM worker (``collective_rpc`` passes the worker as the first argument)."""
    worker.model_runner.model.load_weights(weights)
