"""Keyed sampling (common random numbers) against HF's own sampling, side by side in one run (a
benchmark, not a test).

The same prompts through the tiny model, ``--rows`` rows x ``--tokens`` new tokens, one torch
thread: (a) ``generate(do_sample=True)`` seeded once (the global RNG: what the backend did before
keys; rows' tokens depend on the batch), then the log-probs from ``compute_transition_scores``;
(b) the backend's keyed path (``agents.backends.sampling``: Gumbel-max with one generator per row,
batch-independent). Interleaved repeats, min / median / max tokens per second of each, their
ratio, and the per-step cost of the noise alone.

    python benchmarks/bench_sampling.py [--rows 48] [--tokens 48] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from agents.backends import make_backend
    from agents.backends.sampling import KeyedSampler
    from agents.tiny_model import tiny_model_dir

    b = make_backend(
        {"kind": "hf", "model_path": str(tiny_model_dir()), "max_tokens": args.tokens, "batch_size": args.rows}
    )
    convs = [[{"role": "user", "content": f"Find me green tea number {i} with lemon flavor"}] for i in range(args.rows)]
    keys = [("bench", i) for i in range(args.rows)]
    prompts = [b.prompt_ids(c) for c in convs]
    eos, pad = b.tokenizer.eos_token_id, b.tokenizer.pad_token_id

    def hf_sampling() -> float:
        batch = b.tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
        t = time.perf_counter()
        torch.manual_seed(0)
        with torch.no_grad():
            gen = b.model.generate(
                **batch,
                max_new_tokens=args.tokens,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=None,
                pad_token_id=pad,
                eos_token_id=eos,
                output_scores=True,
                return_dict_in_generate=True,
            )
            b.model.compute_transition_scores(gen.sequences, gen.scores, normalize_logits=True)
        seconds = time.perf_counter() - t
        new = gen.sequences[:, batch["input_ids"].shape[1] :]
        return int((new != pad).sum()) / seconds

    def keyed() -> float:
        t = time.perf_counter()
        out = b.chat(convs, keys=keys, temperature=1.0)
        return sum(len(c.token_ids) for c in out) / (time.perf_counter() - t)

    hf_sampling(), keyed()  # warm-up
    a, k = [], []
    for _ in range(args.repeats):
        a.append(hf_sampling())
        k.append(keyed())
    sampler = KeyedSampler(keys, 1.0)
    t = time.perf_counter()
    for _ in range(args.tokens):
        sampler.noise(len(b.tokenizer), torch.float32, "cpu")
    noise_ms = (time.perf_counter() - t) / args.tokens * 1000
    figures = {
        "rows": args.rows,
        "tokens": args.tokens,
        "hf_sampling_tok_s": {"min": min(a), "median": statistics.median(a), "max": max(a)},
        "keyed_tok_s": {"min": min(k), "median": statistics.median(k), "max": max(k)},
        "keyed_over_hf": statistics.median(k) / statistics.median(a),
        "noise_ms_per_step": noise_ms,
    }
    print(
        f"HF sampling {figures['hf_sampling_tok_s']['median']:.0f} tok/s (min {min(a):.0f}, max {max(a):.0f}); "
        f"keyed {figures['keyed_tok_s']['median']:.0f} tok/s (min {min(k):.0f}, max {max(k):.0f}); "
        f"ratio keyed / HF {figures['keyed_over_hf']:.2f}; the noise alone {noise_ms:.1f} ms a step "
        f"({args.rows} rows x {len(b.tokenizer)} vocab)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
