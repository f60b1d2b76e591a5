"""A prepared GPU check: what one accelerator does with the paper's model shapes, measured through the
project's own code, and what `leaderboards/run.py --preset paper` would cost on it.

    python benchmarks/gpu_check.py                   # a GPU: the Qwen3-1.7B and Qwen3-4B shapes
    python benchmarks/gpu_check.py --shapes tiny     # CPU, the tiny model (what the test suite runs)
    python benchmarks/gpu_check.py --json out.json   # the figures as JSON too

For each shape, with random weights (nothing is downloaded; the published Qwen3-1.7B / Qwen3-4B
configs stand in for Qwen3.5, whose configs are not at hand):

1. generation tok/s through ``HFBackend`` (batched, keyed sampling, as rollouts generate):
   64 prompts x 512 -> 256 tokens and 256 x 512 -> 128 (bf16 on a GPU);
2. one learner step as the trainer takes it (float32 weights, the response tokens' log-probs, the
   clipped-ratio loss with the KL to a frozen reference, AdamW), on 8 sequences of 2,048 tokens in
   micro-batches: seconds, tokens/s and peak memory (an out-of-memory is reported, not raised);
3. a verification round: ``verify_segment`` on a Search-QA group (the bundled data, the in-process
   BM25 retriever), M continuations from each side of a turn, through the env pool: seconds and tok/s.

Then the projected GPU-hours of paper.yaml per env and method, from these rates and the stated
per-env assumptions (turns per episode, tokens per turn, eval split sizes). The projection is for
HF generation: vLLM (paper.yaml's rollout engine) is not installed on the lent GPU machine, and it is
what makes the paper's budget feasible; the check says when vLLM is importable and does not time it.

On a GPU machine with torch, transformers, peft and accelerate but no network, install what else
it needs from the wheelhouse `make wheelhouse` builds (cp312, manylinux x86-64, <= 60 MB):
``pip install --no-index --no-deps wheelhouse/*.whl`` (docs/leaderboard.md, "Reproducing the paper").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agents.tiny_model import DEFAULT_CONFIG as TINY_CONFIG  # noqa: E402
from trainers import methods as registry  # noqa: E402

# the published configs (config.json of Qwen/Qwen3-1.7B and Qwen/Qwen3-4B): the architecture's cost
QWEN3_1_7B = dict(
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151936,
    max_position_embeddings=40960,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
)
SHAPES: dict[str, dict] = {
    "qwen3-1.7b": QWEN3_1_7B,
    "qwen3-4b": dict(  # Qwen/Qwen3-4B: wider and deeper, the same attention layout
        QWEN3_1_7B, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32
    ),
    # the project's tiny model (agents/tiny_model.py), for a CPU run that keeps this script alive
    "tiny": {**TINY_CONFIG, "vocab_size": 4096},
}
# what an iteration of paper.yaml spends, per env: assumptions (stated in the output), not measurements.
# turns: mean per episode (ALFWorld's max is 50, WebShop's 15, Search-QA's 4); gen: generated tokens per
# turn (max 512); prompt: prompt tokens per turn (the learner re-encodes each turn's prompt);
# eval_episodes: the eval split (ALFWorld valid_unseen 134 games, WebShop's 500 test goals, Search-R1's
# 7 test sets: nq 3,610 + triviaqa 11,313 + popqa 14,267 + hotpotqa 7,405 + 2wiki 12,576 + musique
# 2,417 + bamboogle 125)
ASSUMED = {
    "alfworld": {"turns": 25, "gen": 150, "prompt": 1500, "eval_episodes": 134},
    "webshop": {"turns": 8, "gen": 150, "prompt": 1500, "eval_episodes": 500},
    "searchqa": {"turns": 3, "gen": 200, "prompt": 1000, "eval_episodes": 51713},
}
# what the lent GPU machine has (Python 3.12, torch, transformers, peft, accelerate and their
# requirements) and what this check needs besides: carried as wheels (`make wheelhouse`, with the
# project's own wheel); tests/test_gpu_check.py runs the check with every other package hidden
MACHINE_HAS = ("torch", "transformers", "peft", "accelerate")
WHEELHOUSE = ("gymnasium", "Farama-Notifications", "cloudpickle", "bm25s", "PyStemmer")
WHEELHOUSE_MAX_MB = 60
JUDGE_TOKENS = 512  # generated per judge call (one call per verified group)


def word_tokenizer(vocab_size: int):
    """A tokenizer over ``t0 .. t{N-1}`` words with the chat template of the tiny model: prompts of a
    known length for a model of any vocabulary, without downloading the real one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from agents.tiny_model import CHAT_TEMPLATE, SPECIAL

    vocab = {tok: i for i, tok in enumerate(SPECIAL)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL), vocab_size)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=f"t{len(SPECIAL)}"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", additional_special_tokens=SPECIAL[1:2]
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def random_model(shape: str, dtype, device: str):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    config = Qwen3Config(**SHAPES[shape])
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


@contextlib.contextmanager
def timed(device: str):
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    box: dict = {}
    yield box
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    box["seconds"] = time.perf_counter() - t0


def _peak_reset(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak_gib(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None


def measure_generation(backend, prompts: int, prompt_len: int, new: int, device: str) -> dict:
    """Sampled generation of ``prompts`` conversations of ``prompt_len`` words, ``new`` tokens each."""
    import random

    rng = random.Random(0)
    vocab = backend.model.config.vocab_size
    convs = [
        [{"role": "user", "content": " ".join(f"t{rng.randrange(3, vocab)}" for _ in range(prompt_len))}]
        for _ in range(prompts)
    ]
    keys = [("gpu_check", i) for i in range(prompts)]
    backend.chat(convs[: min(2, prompts)], keys=keys[:2], max_tokens=4)  # warm-up: kernels, allocator
    _peak_reset(device)
    with timed(device) as t:
        out = backend.chat(convs, keys=keys, max_tokens=new, temperature=1.0)
    tokens = sum(c.completion_tokens for c in out)
    return {
        "prompts": prompts,
        "prompt_tokens": round(sum(c.prompt_tokens for c in out) / len(out)),
        "new_tokens": new,
        "generated": tokens,
        "seconds": round(t["seconds"], 3),
        "tok_s": round(tokens / t["seconds"], 1),
        "peak_gib": _peak_gib(device),
    }


def measure_learner_step(shape: str, device: str, seqs: int, seq_len: int, response: int, micro: int) -> dict:
    """One optimizer step of the trainer's loss on ``seqs`` x ``seq_len`` tokens (the last ``response``
    of each are the policy's), float32 as the trainer trains, a frozen reference for the KL term."""
    import copy

    import torch

    from trainers.loss import policy_loss
    from trainers.sequences import token_logprobs

    _peak_reset(device)
    try:
        model = random_model(shape, torch.float32, device)
        ref = copy.deepcopy(model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(3, model.config.vocab_size, (seqs, seq_len), generator=g).to(device)
        mask = torch.zeros(seqs, seq_len, dtype=torch.long, device=device)
        mask[:, seq_len - response :] = 1
        batch_all = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

        def step() -> None:
            model.train()
            optimizer.zero_grad()
            for start in range(0, seqs, micro):
                part = slice(start, start + micro)
                batch = {k: v[part] for k, v in batch_all.items()}
                m = mask[part]
                lp = token_logprobs(model, batch, m)
                with torch.no_grad():
                    ref_lp = token_logprobs(ref, batch, m)
                adv = torch.ones_like(lp) * m
                loss, _ = policy_loss(lp, lp.detach(), adv, m, ref_logprobs=ref_lp, kl_coef=0.01)
                (loss * (m.sum() / mask.sum())).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            model.eval()

        step()  # warm-up: AdamW allocates its state on the first step
        with timed(device) as t:
            step()
        result: dict = {"seconds": round(t["seconds"], 3), "tok_s": round(seqs * seq_len / t["seconds"], 1)}
    except torch.OutOfMemoryError as exc:
        result = {"seconds": None, "tok_s": None, "error": f"out of memory: {str(exc).splitlines()[0]}"}
    peak = _peak_gib(device)
    model = ref = optimizer = None  # noqa: F841  (freed before the next shape)
    _peak_reset(device)
    return {
        "sequences": seqs,
        "seq_len": seq_len,
        "response": response,
        "micro_batch": micro,
        **result,
        "peak_gib": peak,
    }


def measure_verification(backend, device: str, group: int, m: int, max_tokens: int) -> dict:
    """A group of Search-QA rollouts, then ``verify_segment`` of turn 0 of its first trajectory:
    M continuations after the segment (and M before it, unless the group's outcomes serve)."""
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy
    from agents.rollout import rollout_chunks
    from judges.base import Proposal
    from prover_gym.pool import EnvPool
    from trainers.verification import ValueEstimator, verify_segment

    kwargs = {"split": "train", "data_sources": ["single_hop"], "max_turns": 3}
    backend.defaults["max_tokens"] = max_tokens
    policy = LLMPolicy(backend, make_format("prover/SearchQA-v0"))
    pool = EnvPool("prover/SearchQA-v0", max(group, 2 * m), backend="sync", **kwargs)
    try:
        task = pool.call("task_ids", indices=[0])[0][0]
        with timed(device) as t_roll:
            keys = [("gpu_check", "roll", i) for i in range(group)]
            trajs = rollout_chunks(pool, policy, task_ids=[task] * group, keys=keys)
        traj = max(trajs, key=lambda t: len(t.turns))  # a segment with turns after it: continuations run
        est = ValueEstimator(None, policy, m, pool)
        with timed(device) as t_ver:
            v = verify_segment(None, traj, Proposal(0, 0, 0), policy, m, pool=pool, estimator=est)
    finally:
        pool.close()
    generated = v.extra_tokens
    return {
        "group": group,
        "m": m,
        "max_tokens": max_tokens,
        "rollout_seconds": round(t_roll["seconds"], 3),
        "continuations": len(v.continuations),
        "generated": generated,
        "seconds": round(t_ver["seconds"], 3),
        "tok_s": round(generated / t_ver["seconds"], 1) if generated else None,
    }


def project_methods(paper: dict) -> list[str]:
    """The preset's methods and ablations that use a GPU (all but the baselines), in display order."""
    names = {*paper["methods"], *paper.get("ablations", [])}
    return [m for m in registry.names("sft", "rl") if m in names]


def project(paper: dict, rates: dict) -> list[dict]:
    """GPU-hours of paper.yaml per env and method for one seed, from the measured ``rates`` (tok/s of
    generation, the learner and a verification round) and ASSUMED."""
    train = paper["train"]
    it, t, g = train["iterations"], train["tasks_per_iteration"], train["group_size"]
    m, groups = train["continuations"], train["max_verified_groups"]
    gen, learn, ver = rates["generation"], rates["learner"], rates["verification"] or rates["generation"]
    rows = []
    for env, a in ASSUMED.items():
        rollout_tokens = t * g * a["turns"] * a["gen"]
        learn_tokens = t * g * a["turns"] * (a["prompt"] + a["gen"])
        verify_tokens = groups * 2 * m * max(1, a["turns"] // 2) * a["gen"]  # continuations from mid-episode
        judge_tokens = groups * JUDGE_TOKENS
        base = rollout_tokens / gen + (learn_tokens / learn if learn else math.nan)
        eval_hours = a["eval_episodes"] * a["turns"] * a["gen"] / gen / 3600
        for method in project_methods(paper):
            spec = registry.get(method)
            extra = 0.0  # seconds per iteration beyond GRPO's, from what the method's spec says it spends
            if spec.verifies:
                extra += verify_tokens / ver
            if spec.asks_judge and spec.judge is None:  # the preset's (LLM) judge; a forced judge is a heuristic
                extra += judge_tokens / gen
            if spec.extra_tasks:  # more tasks for the budget its reference (prover) spends on credit
                extra += base * (verify_tokens + judge_tokens) / rollout_tokens
            train_hours = 0.0 if spec.kind == "sft" else it * (base + extra) / 3600
            rows.append(
                {
                    "env": env,
                    "method": method,
                    "train_h": round(train_hours, 2),
                    "eval_h": round(eval_hours, 2),
                    "total_h": round(train_hours + eval_hours, 2),
                }
            )
    return rows


def run_shape(shape: str, device: str, args) -> dict:
    import torch

    from agents.backends.hf_backend import HFBackend

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    tok = word_tokenizer(SHAPES[shape]["vocab_size"])
    backend = HFBackend.from_model(random_model(shape, dtype, device), tok, device=device, batch_size=1 << 30, seed=0)
    out: dict = {"shape": shape, "device": device, "dtype": str(dtype).replace("torch.", ""), "generation": []}
    for prompts, new in args.generation:
        out["generation"].append(measure_generation(backend, prompts, args.prompt_len, new, device))
        print(
            f"  generation {prompts} x {args.prompt_len} -> {new}: {out['generation'][-1]['tok_s']:,.0f} tok/s",
            flush=True,
        )
    out["verification"] = measure_verification(backend, device, args.group, args.m, args.verify_tokens)
    print(
        f"  verification round: {out['verification']['seconds']:.1f} s, {out['verification']['tok_s']} tok/s",
        flush=True,
    )
    backend.model.to("cpu")
    del backend
    _peak_reset(device)
    out["learner"] = measure_learner_step(shape, device, args.seqs, args.seq_len, args.response, args.micro)
    lr = out["learner"]
    print(
        f"  learner step {args.seqs} x {args.seq_len}: {lr.get('seconds')} s, peak {lr.get('peak_gib')} GiB "
        + lr.get("error", ""),
        flush=True,
    )
    paper = __import__("yaml").safe_load((ROOT / "leaderboards/presets/paper.yaml").read_text())
    rates = {
        "generation": out["generation"][0]["tok_s"],
        "learner": out["learner"]["tok_s"],
        "verification": out["verification"]["tok_s"],
    }
    out["projection"] = project(paper, rates)
    out["seeds"] = len(paper["seeds"])
    return out


def table(out: dict) -> str:
    """The projection as a markdown table: hours per env for one seed, and the sum over envs x seeds."""
    rows = out["projection"]
    envs = list(dict.fromkeys(r["env"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = [
        f"| method | {' | '.join(f'{e} (h, 1 seed)' for e in envs)} | all envs x {out['seeds']} seeds (h) |",
        "| --- | " + " | ".join("---" for _ in envs) + " | --- |",
    ]
    for m in methods:
        cells = [next(r for r in rows if r["env"] == e and r["method"] == m)["total_h"] for e in envs]
        lines.append(f"| {m} | " + " | ".join(f"{c:,.1f}" for c in cells) + f" | {sum(cells) * out['seeds']:,.1f} |")
    return "\n".join(lines)


def wheelhouse_requirements() -> list[str]:
    """WHEELHOUSE pinned to the versions installed here (the ones the tests ran with)."""
    from importlib import metadata

    return [f"{name}=={metadata.version(name)}" for name in WHEELHOUSE]


def check_wheelhouse(folder: Path) -> list[str]:
    """Problems of a built wheelhouse: a wheel missing, one not for cp312 / manylinux x86-64 where it
    is compiled, or the total over WHEELHOUSE_MAX_MB."""
    wheels = sorted(folder.glob("*.whl"))
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in wheels}
    out = [f"no wheel of {n}" for n in ("prover-gym", *WHEELHOUSE) if n.lower().replace("_", "-") not in names]
    for w in wheels:
        tags = w.name[:-4].split("-")[-3:]
        if tags[0] not in ("py3", "py2.py3", "cp312") or not (tags[2] == "any" or "x86_64" in tags[2]):
            out.append(f"{w.name}: not installable on CPython 3.12 / x86-64")
    size = sum(w.stat().st_size for w in wheels) / 2**20
    if size > WHEELHOUSE_MAX_MB:
        out.append(f"{size:.1f} MB in all, over {WHEELHOUSE_MAX_MB} MB")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--shapes", nargs="+", default=None, help=f"of {list(SHAPES)} (default: the two Qwen3 on a GPU, tiny on CPU)"
    )
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when visible)")
    ap.add_argument("--generation", default="64x256,256x128", help="prompts x new tokens, comma-separated")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--seqs", type=int, default=8, help="learner step: sequences")
    ap.add_argument("--seq-len", type=int, default=2048, help="learner step: tokens per sequence")
    ap.add_argument("--response", type=int, default=512, help="learner step: policy tokens per sequence")
    ap.add_argument("--micro", type=int, default=1, help="learner step: sequences per micro-batch")
    ap.add_argument("--group", type=int, default=8, help="verification: the group's rollouts")
    ap.add_argument("--m", type=int, default=4, help="verification: continuations per side")
    ap.add_argument("--verify-tokens", type=int, default=128, help="verification: tokens per turn")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--wheelhouse-requirements", action="store_true", help="print what `make wheelhouse` downloads")
    ap.add_argument("--check-wheelhouse", metavar="DIR", help="check a built wheelhouse and print its size")
    args = ap.parse_args(argv)
    if args.wheelhouse_requirements:
        print(" ".join(wheelhouse_requirements()))
        return 0
    if args.check_wheelhouse:
        problems = check_wheelhouse(Path(args.check_wheelhouse))
        size = sum(w.stat().st_size for w in Path(args.check_wheelhouse).glob("*.whl")) / 2**20
        print("\n".join(problems) or f"{args.check_wheelhouse}: complete, {size:.1f} MB")
        return 1 if problems else 0
    import importlib.util

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    shapes = args.shapes or (["qwen3-1.7b", "qwen3-4b"] if device.startswith("cuda") else ["tiny"])
    bad = [s for s in shapes if s not in SHAPES]
    if bad:
        ap.error(f"--shapes {bad}: use some of {list(SHAPES)}")
    args.generation = [tuple(int(x) for x in part.split("x")) for part in args.generation.split(",")]
    import transformers

    where = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    print(f"gpu_check on {where}: torch {torch.__version__}, transformers {transformers.__version__}")
    if importlib.util.find_spec("vllm") is None:
        print("vLLM is not installed: generation is measured on the HF backend; paper.yaml rolls out on vLLM")
    else:
        print("vLLM is importable here; this check times the HF backend only")
    results = []
    for shape in shapes:
        print(f"{shape}:", flush=True)
        out = run_shape(shape, device, args)
        results.append(out)
        print(
            f"\nprojected GPU-hours of paper.yaml on {where}, {shape} shape, HF generation at "
            f"{out['generation'][0]['tok_s']:,.0f} tok/s (assumptions: benchmarks/gpu_check.py ASSUMED)"
        )
        print(table(out) + "\n", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": where, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
