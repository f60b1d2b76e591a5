"""A local transformers causal LM behind the chat-backend protocol: the model's own chat template,
batched generation (left padding), and the generated token ids with their log-probabilities, which
the trainer needs for the policy-gradient ratio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.backends.base import BackendError, Completion, LocalChatBackend


class HFBackend(LocalChatBackend):
    """In-process generation with a transformers model (the tiny model on CPU, or any HF causal LM): batched, keyed
    sampling per row (agents.backends.sampling), the shared-prefix decoder where it supports the model
    (agents.backends.decode), else ``generate()``; returns token ids and their log-probabilities for the learner."""

    def __init__(
        self,
        model_path: str,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 16,
        trainable: bool = False,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        from prover_gym.models import resolve

        hf_logging.disable_progress_bar()  # no "Loading weights" bar per checkpoint: the caller reports its stages
        path = Path(resolve(model_path)).expanduser()  # pretrained:<name>: its prepared folder (prover_gym.models)
        if not path.exists():
            raise BackendError(f"model_path={model_path!r}: no such local directory (models are never downloaded here)")
        self.torch = torch
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        adapter = path / "adapter_config.json"  # a LoRA checkpoint (peft): its base model, then the adapter
        base_path = path
        if adapter.is_file():
            import json

            base_path = Path(json.loads(adapter.read_text()).get("base_model_name_or_path") or "")
            if not base_path.is_dir():
                raise BackendError(f"{adapter}: its base model {str(base_path)!r} is not a local directory")
        self.model: Any = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=getattr(torch, dtype))
        if adapter.is_file():
            try:
                from peft import PeftModel
            except ImportError:
                raise BackendError(f"{path} holds a LoRA adapter; loading it needs peft: pip install peft") from None
            self.model = PeftModel.from_pretrained(self.model, str(path), is_trainable=trainable)
        self._setup(self.model, tokenizer, device, max_tokens, temperature, top_p, seed, batch_size)

    @classmethod
    def from_model(
        cls,
        model,
        tokenizer,
        *,
        device: str = "cpu",
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 16,
    ) -> HFBackend:
        """A backend over a model and tokenizer already in memory (e.g. random weights of a published
        shape, benchmarks/gpu_check.py), generating exactly as one loaded from a directory."""
        import torch

        self = cls.__new__(cls)
        self.torch = torch
        self._setup(model, tokenizer, device, max_tokens, temperature, top_p, seed, batch_size)
        return self

    def _setup(self, model, tokenizer, device, max_tokens, temperature, top_p, seed, batch_size) -> None:
        """What both constructors share: left padding (a pad token if the tokenizer has none), the model
        on its device in eval mode, the generation defaults."""
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = model.to(device).eval()
        self.device = device
        self.defaults = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p}
        self.seed, self.batch_size = seed, batch_size
        self.calls = 0
        # agents.backends.decode for the architectures it knows (Qwen3); False: transformers' generate()
        self.fast_decode = True

    def __repr__(self) -> str:
        return f"HFBackend(model={self.model.config.model_type}, device={self.device!r})"

    def load_weights(self, named_tensors) -> None:
        """Replace the weights (a separate generation copy kept in step with a learner)."""
        state = {k: v.detach() for k, v in named_tensors}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if k != "lm_head.weight"]:  # tied heads may be left out
            raise BackendError(f"load_weights: missing {missing[:5]}, unexpected {unexpected[:5]}")

    def _generate(self, prompts: list[list[int]], params: dict, keys: list[tuple]) -> list[Completion]:
        """Greedy (temperature <= 0: nothing drawn) or keyed sampling (agents.backends.sampling): the
        greedy search of ``generate`` with a logits processor that adds each row's own Gumbel noise
        and records the chosen tokens' clean log-probabilities. The global torch RNG is not touched."""
        from agents.backends.decode import supports
        from agents.backends.sampling import KeyedSampler

        torch = self.torch
        greedy = params["temperature"] <= 0
        # on an accelerator the noise is computed there (counter-based); on the CPU, per-row generators
        counter = not str(self.device).startswith("cpu")
        sampler = (
            None
            if greedy
            else KeyedSampler(
                keys, params["temperature"], params["top_p"], counter=counter, eos_token_id=self.tokenizer.eos_token_id
            )
        )
        if self.fast_decode and supports(self.model):
            return self._decode(prompts, params, sampler)
        batch = self.tokenizer.pad({"input_ids": prompts}, return_tensors="pt").to(self.device)
        with torch.no_grad():
            gen = self.model.generate(
                **batch,
                max_new_tokens=params["max_tokens"],
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                logits_processor=[sampler] if sampler is not None else None,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                output_scores=greedy,
                return_dict_in_generate=True,
            )
            if greedy:  # log-probs of the greedy tokens under the model's distribution
                logps = self.model.compute_transition_scores(gen.sequences, gen.scores, normalize_logits=True)
        width, eos = batch["input_ids"].shape[1], self.tokenizer.eos_token_id
        rows = []
        for row in gen.sequences[:, width:].tolist():
            rows.append(row[: row.index(eos) + 1] if eos in row else row)
        return self._completions(
            prompts, rows, sampler, lambda i, n: logps[i].tolist()[:n] if greedy else [], "generate()"
        )

    def _completions(self, prompts, rows, sampler, greedy_logprobs, engine: str) -> list[Completion]:
        """One Completion per row of new tokens (cut after eos): the keyed sampler's recorded log-probs
        (checking that ``engine`` took the drawn tokens), else ``greedy_logprobs(row, n)``."""
        eos = self.tokenizer.eos_token_id
        results = []
        for i, (prompt, new) in enumerate(zip(prompts, rows)):
            finish = "stop" if eos is not None and new and new[-1] == eos else "length"
            if sampler is not None:
                drawn, lp = sampler.row(i, len(new))
                if drawn != new:  # the engine took another token than the one drawn (it never should)
                    raise BackendError(f"keyed sampling: {engine} did not follow the drawn tokens")
            else:
                lp = greedy_logprobs(i, len(new))
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            results.append(Completion(text, finish, len(prompt), len(new), None, new, lp, list(prompt)))
        return results

    def _decode(self, prompts: list[list[int]], params: dict, sampler) -> list[Completion]:
        """``_generate`` through agents.backends.decode: shared prompt prefixes encoded once, a lean
        decode loop; the same choice of tokens (keyed noise or argmax) and the same log-probabilities."""
        from agents.backends.decode import Decoder

        torch = self.torch
        eos = self.tokenizer.eos_token_id
        steps: list[tuple] = []

        def greedy(logits):
            chosen = logits.argmax(-1)
            steps.append((chosen, torch.log_softmax(logits, -1).gather(-1, chosen[:, None])[:, 0]))
            return chosen

        decoder = Decoder(self.model, self.tokenizer.pad_token_id, eos)
        rows = decoder.generate(prompts, params["max_tokens"], sampler.choose if sampler is not None else greedy)
        return self._completions(
            prompts, rows, sampler, lambda i, n: [float(s[1][i]) for s in steps[:n]], "the decoder"
        )

    def score_answers(self, pairs: list[tuple[list[int], list[int]]], batch_size: int = 16) -> tuple[list[float], int]:
        """``log p(answer | prompt)`` (summed over the answer's tokens) for each (prompt ids, answer ids) pair,
        with no generation. The model reads each distinct ``prompt + answer[:-1]`` once (two one-token answers to
        one prompt share a row); the rows' common token prefix is encoded once and its key/value cache repeated
        for their remaining tokens (right-padded, so every row keeps its positions). Returns the scores and the
        number of tokens the model read."""
        import copy

        from agents.backends.decode import cache_kwargs, output_cache

        torch = self.torch
        if not pairs:
            return [], 0
        if any(not p or not a for p, a in pairs):
            raise ValueError("score_answers: every pair needs a non-empty prompt and answer")
        rows: dict[tuple, int] = {}  # distinct input rows -> their index
        where = [rows.setdefault(tuple(p) + tuple(a[:-1]), len(rows)) for p, a in pairs]
        seqs = list(rows)
        # the shared prefix stops before each prompt's last token: that position's logits score the answer
        lcp = min(len(p) for p, _ in pairs) - 1
        for seq in seqs[1:]:
            n = 0
            while n < lcp and seq[n] == seqs[0][n]:
                n += 1
            lcp = n
        model, device, pad = self.model, self.device, self.tokenizer.pad_token_id
        logps: list = [None] * len(seqs)  # per row: its log-softmax over the positions after the prefix
        read = lcp
        with torch.no_grad():
            prefix_cache = None
            if lcp:
                prefix = torch.tensor([list(seqs[0][:lcp])], device=device)
                prefix_cache = output_cache(model(input_ids=prefix, use_cache=True))
            for start in range(0, len(seqs), batch_size):
                chunk = seqs[start : start + batch_size]
                width = max(len(r) for r in chunk) - lcp
                ids = torch.tensor([list(r[lcp:]) + [pad] * (width + lcp - len(r)) for r in chunk], device=device)
                mask = torch.tensor([[1] * len(r) + [0] * (width + lcp - len(r)) for r in chunk], device=device)
                cache = None
                if prefix_cache is not None:  # the prefix's keys and values, once per row of this chunk
                    cache = copy.deepcopy(prefix_cache)
                    cache.batch_repeat_interleave(len(chunk))
                kwargs = cache_kwargs(model, cache)
                out = model(input_ids=ids, attention_mask=mask, use_cache=cache is not None, **kwargs)
                for j, row in enumerate(torch.log_softmax(out.logits.float(), -1)):
                    logps[start + j] = row
                read += sum(len(r) - lcp for r in chunk)
        scores = []
        for (prompt, answer), r in zip(pairs, where):
            at = len(prompt) - 1 - lcp  # the row position whose logits predict the answer's first token
            positions = torch.arange(at, at + len(answer), device=device)
            scores.append(float(logps[r][positions, torch.tensor(answer, device=device)].sum()))
        return scores, read
