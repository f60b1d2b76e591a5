"""Base policies: the tiny model after SFT on expert episodes of *every* train task of a setting,
shipped in the repository (``bases/<name>/``) so that ``make run`` starts RL from a policy that
already solves a share of unseen tasks, and rebuilt by one command:

    python -m trainers.bases build webshop          # SFT per RECIPES['webshop'], then held-out eval
    python -m trainers.bases eval webshop --episodes 500

A base is an ordinary HF model directory (fp16 safetensors, the tiny tokenizer) plus
``recipe.json``: the recipe it was built from, its SFT losses and its greedy success on the
recipe's held-out split with a standard error. Rebuilding on another machine gives the same
recipe; the weights agree to floating-point reduction order (CPU kernels differ by thread count),
so the recorded success is the figure to compare, to within its standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

from trainers.recipes import RECIPES, BaseError, base_dir, default_out, recipe  # noqa: F401  (re-exported)

BASE_VERSION = 1


def build(name: str, out: Path | None = None, *, seed: int = 0, eval_episodes: int = 0, log=print) -> Path:
    """SFT of the tiny model per ``RECIPES[name]``; writes the base (fp16) and its recipe.json."""
    import torch

    from trainers.config import TrainConfig
    from trainers.train import Trainer

    spec = recipe(name)
    out = Path(out or default_out(name))
    work = out.parent / f".{out.name}.build"
    shutil.rmtree(work, ignore_errors=True)
    init = spec.get("init")  # a base this one continues from (its SFT runs on top of that base's weights)
    cfg = TrainConfig(
        env_id=spec["env_id"],
        env_kwargs=spec["train_kwargs"],
        policy_format=spec["format"],
        method="grpo",
        iterations=0,
        seed=seed,
        out_dir=str(work / "run"),
        # a base this one continues from, else a named pretrained model, else the tiny model from scratch
        model_path=str(base_dir(init)) if init else spec.get("model"),
        **spec["sft"],
    )
    t0 = time.time()
    trainer = Trainer(cfg)
    losses = trainer.sft()
    seconds = time.time() - t0
    model = trainer.plain_model()
    model.to(torch.float16)
    tmp = work / "model"
    model.save_pretrained(str(tmp))
    trainer.backend.tokenizer.save_pretrained(str(tmp))
    trainer.close()
    meta = {
        "name": name,
        "version": BASE_VERSION,
        "seed": seed,
        "recipe": spec,
        "sft_seconds": round(seconds, 1),
        "first_loss": losses[0],
        "last_loss": sum(losses[-50:]) / len(losses[-50:]),
    }
    log(
        f"{name}: SFT {spec['sft']['sft_steps']} steps in {seconds:.0f}s, "
        f"loss {losses[0]:.3f} -> {meta['last_loss']:.3f}"
    )
    (tmp / "recipe.json").write_text(json.dumps(meta, indent=1) + "\n")
    if eval_episodes:
        meta["eval"] = evaluate(name, tmp, episodes=eval_episodes, log=log)
        (tmp / "recipe.json").write_text(json.dumps(meta, indent=1) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    return out


def evaluate(name: str, model_dir: Path | None = None, *, episodes: int = 200, batch: int = 50, log=print) -> dict:
    """Greedy success of a base on the first ``episodes`` held-out tasks of its recipe (0 = all)."""
    from agents.backends.hf_backend import HFBackend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy
    from agents.rollout import split_outcomes

    spec = recipe(name)
    model_dir = Path(model_dir or base_dir(name))
    policy = LLMPolicy(
        HFBackend(str(model_dir), max_tokens=spec["sft"]["max_tokens"], temperature=0.0, seed=0),
        make_format(spec["env_id"], **spec["format"]),
    )
    t0 = time.time()
    wins = list(split_outcomes(spec["env_id"], spec["eval_kwargs"], policy, episodes=episodes, batch=batch).values())
    p = sum(wins) / len(wins)
    res = {
        "split": spec["eval_kwargs"].get("split"),
        "episodes": len(wins),
        "success": round(p, 4),
        "standard_error": round(math.sqrt(p * (1 - p) / len(wins)), 4),
        "seconds": round(time.time() - t0, 1),
    }
    log(
        f"{name}: greedy success {100 * p:.1f}% +- {100 * res['standard_error']:.1f} (SE) on {len(wins)} "
        f"{res['split']} tasks, {res['seconds']:.0f}s"
    )
    return res


def main(argv: list[str] | None = None) -> int:
    """``python -m trainers.bases``: build a base from its recipe, or evaluate one."""
    ap = argparse.ArgumentParser(prog="python -m trainers.bases", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="SFT a base per its recipe and write it (see --out)")
    b.add_argument("names", nargs="+", choices=sorted(RECIPES))
    b.add_argument(
        "--out", help="output folder (one name only); default bases/<name> in a checkout, else <cache>/bases/<name>"
    )
    b.add_argument(
        "--eval-episodes", type=int, default=500, help="held-out tasks to evaluate after the build (0: none)"
    )
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--set", nargs="*", default=[], help="recipe overrides for a probe, e.g. sft.sft_steps=500")
    e = sub.add_parser("eval", help="greedy success of a base on its held-out split")
    e.add_argument("name", choices=sorted(RECIPES))
    e.add_argument("--model", help="a model directory (default: the shipped base)")
    e.add_argument("--episodes", type=int, default=500)
    e.add_argument("--write", action="store_true", help="record the result in the base's recipe.json")
    args = ap.parse_args(argv)
    if args.cmd == "eval":
        model = Path(args.model) if args.model else base_dir(args.name)
        res = evaluate(args.name, model, episodes=args.episodes)
        if args.write:
            meta_path = model / "recipe.json"
            meta = json.loads(meta_path.read_text())
            meta["eval"] = res
            meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        return 0
    if args.out and len(args.names) > 1:
        ap.error("--out takes one name")
    import yaml

    for name in args.names:
        for item in args.set:
            key, raw = item.split("=", 1)
            *path, last = key.split(".")
            node = RECIPES[name]
            for k in path:
                node = node[k]
            node[last] = yaml.safe_load(raw)
        build(name, Path(args.out) if args.out else None, seed=args.seed, eval_episodes=args.eval_episodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
