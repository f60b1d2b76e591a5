"""Keyed sampling on whatever device is here (a check and a benchmark, not a test): CPU, or a GPU.

    python benchmarks/check_keyed_sampling.py [--model bases/searchqa] [--device auto] [--json out.json]

With the HF backend on ``--device``: (1) a keyed row's tokens do not depend on the batch (alone, in a
batch, in a shuffled batch, in batches of another size); (2) the recorded log-probs are the model's
own (a forward pass over prompt + completion); (3) the same prompt under two keys gives two samples;
(4) tokens per second, keyed against HF's own sampling, side by side, interleaved; with ``--shape``
also on a randomly initialised model of a published shape (e.g. Qwen3-0.6B's), in bfloat16 on a GPU.
Needs only torch, transformers, gymnasium and this checkout (no data, no network). Exit code 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# published shapes (config.json of the Qwen3 releases), random weights stand in
SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16),
}


def throughput(backend, convs, keys, tokens: int, repeats: int) -> dict:
    import torch

    prompts = [backend.prompt_ids(c) for c in convs]
    pad, eos = backend.tokenizer.pad_token_id, backend.tokenizer.eos_token_id

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def hf() -> float:
        batch = backend.tokenizer.pad({"input_ids": prompts}, return_tensors="pt").to(backend.device)
        sync()
        t = time.perf_counter()
        torch.manual_seed(0)
        with torch.no_grad():
            gen = backend.model.generate(
                **batch,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=None,
                pad_token_id=pad,
                eos_token_id=eos,
                output_scores=True,
                return_dict_in_generate=True,
            )
            backend.model.compute_transition_scores(gen.sequences, gen.scores, normalize_logits=True)
        sync()
        return len(prompts) * (gen.sequences.shape[1] - batch["input_ids"].shape[1]) / (time.perf_counter() - t)

    def keyed() -> float:
        sync()
        t = time.perf_counter()
        out = backend.chat(convs, keys=keys, temperature=1.0)
        sync()
        return sum(len(c.token_ids) for c in out) / (time.perf_counter() - t)

    hf(), keyed()
    a, k = [], []
    for _ in range(repeats):
        a.append(hf())
        k.append(keyed())
    return {
        "hf_sampling_tok_s": statistics.median(a),
        "keyed_tok_s": statistics.median(k),
        "keyed_over_hf": statistics.median(k) / statistics.median(a),
        "hf_min_max": [min(a), max(a)],
        "keyed_min_max": [min(k), max(k)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[1] / "bases" / "searchqa"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shape", choices=sorted(SHAPES), help="also time a random model of this published shape")
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    from agents.backends.hf_backend import HFBackend

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    report: dict = {"device": device, "torch": torch.__version__}
    if device == "cuda":
        report["gpu"] = torch.cuda.get_device_name(0)
    b = HFBackend(args.model, device=device, max_tokens=24, temperature=1.0, batch_size=64)
    convs = [
        [{"role": "user", "content": "Answer the given question. Question: who founded the Voukecil Institute?"}],
        [{"role": "user", "content": "Find me green tea with lemon flavor"}],
        [{"role": "user", "content": "Answer the given question. Question: where is the river Odra?"}],
        [{"role": "user", "content": "Find me green tea with lemon flavor"}],
    ]
    keys = [("check", 0), ("check", 1), ("check", 2), ("check", 3)]
    whole = b.chat(convs, keys=keys)
    alone = [b.chat([c], keys=[k])[0] for c, k in zip(convs, keys)]
    shuffled = b.chat(convs[::-1], keys=keys[::-1])[::-1]
    b.batch_size = 3
    cut = b.chat(convs, keys=keys)
    b.batch_size = 64
    same = all([c.token_ids for c in run] == [c.token_ids for c in whole] for run in (alone, shuffled, cut))
    worst = 0.0
    with torch.no_grad():
        for c in whole:
            ids = torch.tensor([c.prompt_token_ids + c.token_ids], device=device)
            logits = b.model(ids).logits[0, len(c.prompt_token_ids) - 1 : -1].float()
            ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(c.token_ids, device=device)[:, None])[:, 0]
            worst = max(worst, float((ref.cpu() - torch.tensor(c.logprobs)).abs().max()))
    checks = {
        "batch-independent tokens": same,
        "log-probs are the model's (max abs diff < 1e-3)": worst < 1e-3,
        "two keys, two samples": whole[1].token_ids != whole[3].token_ids,
    }
    report.update(checks=checks, max_logprob_diff=worst)
    n = args.rows
    many = [[{"role": "user", "content": f"Find me green tea number {i} with lemon flavor"}] for i in range(n)]
    many_keys = [("bench", i) for i in range(n)]
    b.defaults["max_tokens"] = args.tokens
    report["tiny"] = throughput(b, many, many_keys, args.tokens, args.repeats)
    if args.shape:
        from transformers import AutoConfig, AutoModelForCausalLM

        cfg = AutoConfig.from_pretrained(args.model)
        for k, v in SHAPES[args.shape].items():
            setattr(cfg, k, v)
        cfg.num_key_value_heads, cfg.head_dim, cfg.layer_types = 8, 128, ["full_attention"] * cfg.num_hidden_layers
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        t = time.perf_counter()
        b.model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(device).eval()
        report[args.shape] = {
            "params_M": round(sum(p.numel() for p in b.model.parameters()) / 1e6, 1),
            "build_s": round(time.perf_counter() - t, 1),
            **throughput(b, many, many_keys, args.tokens, args.repeats),
        }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
