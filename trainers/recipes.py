"""The shipped SFT bases' recipes, by name: the env, prompt format and SFT budget of each setting, and where a
base's folder is found. Data and look-ups only (no training), so the trainer's config resolves ``base:<name>``
without importing the builder (trainers/bases.py builds and evaluates a base from its recipe)."""

from __future__ import annotations

from pathlib import Path

# a setting = the env and prompt format RL trains in; the SFT budget that gives a base which
# generalises there (see docs/training.md, "Base policies", for how these were measured)
RECIPES: dict[str, dict] = {
    "searchqa": {
        "env_id": "prover/SearchQA-v0",
        "train_kwargs": {"split": "train", "data_sources": ["single_hop"], "max_turns": 2},
        "eval_kwargs": {"split": "test", "data_sources": ["single_hop"], "max_turns": 2},
        "format": {},
        "sft": {
            "sft_steps": 1500,
            "sft_episodes": None,
            "sft_lr": 1e-3,
            "sft_schedule": "constant",
            "minibatch_size": 16,
            "max_tokens": 32,
        },
    },
    "webshop": {
        "env_id": "prover/WebShop-v0",
        "train_kwargs": {"split": "train", "start": "item", "budget_slack": 1},
        "eval_kwargs": {"split": "test", "start": "item", "budget_slack": 1},
        "format": {"history_length": 4, "history_observations": False},
        "sft": {
            "sft_steps": 900,
            "sft_episodes": 2000,
            "sft_lr": 1e-3,
            "sft_schedule": "cosine",
            "minibatch_size": 16,
            "max_tokens": 64,
        },
    },
    # the webshop base after SFT on a hasty demonstrator (buys before every option is chosen, p = 0.6):
    # its likeliest move after the first option is the premature purchase, which RL can correct
    "webshop_hasty": {
        "init": "webshop",
        "env_id": "prover/WebShop-v0",
        "train_kwargs": {"split": "train", "start": "item", "budget_slack": 1},
        "eval_kwargs": {"split": "test", "start": "item", "budget_slack": 1},
        "format": {"history_length": 4, "history_observations": False},
        "sft": {
            "sft_steps": 200,
            "sft_episodes": 2000,
            "sft_lr": 1e-3,
            "sft_schedule": "cosine",
            "minibatch_size": 16,
            "max_tokens": 64,
            "sft_demonstrator": {"kind": "hasty", "p": 0.6},
        },
    },
    "alfworld": {
        "env_id": "prover/ALFWorld-v0",
        "train_kwargs": {
            "split": "train",
            "task_types": ["pick_and_place_simple"],
            "max_receptacles": 5,
            "num_distractors": 1,
            "max_steps": 15,
            "num_games": 1200,
            "start": "object",
            "budget_slack": 1,
        },
        "eval_kwargs": {
            "split": "valid_unseen",
            "task_types": ["pick_and_place_simple"],
            "max_receptacles": 5,
            "num_distractors": 1,
            "max_steps": 15,
            "num_games": 1200,
            "start": "object",
            "budget_slack": 1,
        },
        "format": {"history_length": 1},
        "sft": {
            "sft_steps": 600,
            "sft_episodes": None,
            "sft_lr": 1e-3,
            "sft_schedule": "cosine",
            "minibatch_size": 16,
            "max_tokens": 64,
        },
    },
}


# the alfworld base after SFT on a hasty demonstrator (moves the object into a closed receptacle
# without opening it, p = 0.6) in the setting without a spare step (budget_slack 0), where that is final
RECIPES["alfworld_hasty"] = {
    **RECIPES["alfworld"],
    "init": "alfworld",
    "train_kwargs": {**RECIPES["alfworld"]["train_kwargs"], "budget_slack": 0},
    "eval_kwargs": {**RECIPES["alfworld"]["eval_kwargs"], "budget_slack": 0},
    "sft": {**RECIPES["alfworld"]["sft"], "sft_steps": 200, "sft_demonstrator": {"kind": "hasty", "p": 0.6}},
}


# settings with a known pivot (issue "Where credit assignment decides"): ALFWorld heat / cool / clean from
# the object, where the move after the take (the appliance, or straight to the target) decides the task and
# the env records it (info["pivot_step"]); SFT on a demonstrator that skips the transform with p = 0.3 and
# plays a competent-looking tail (agents.baselines.SkipExpert).
_PIVOT_KWARGS = {
    "task_types": [
        "pick_heat_then_place_in_recep",
        "pick_cool_then_place_in_recep",
        "pick_clean_then_place_in_recep",
    ],
    "max_receptacles": 5,
    "num_distractors": 1,
    "max_steps": 30,
    "num_games": 1800,
    "start": "object",
}
# The long variant (the regime of the paper's 15-50-step episodes, where uniform credit is diluted most):
# eight routine turns (look / inventory) follow the pivot in every episode and the budget grows by as many,
# so 10-12 turns separate the pivot (step 1) from the outcome (a win at step 11 or 12, truncation at 13); a
# window of the last 10 past actions (no observations: a short prompt) keeps the pivot in view when the
# transform is due.
for _name, _init, _d, _format in (
    ("alfworld_pivot", "alfworld", 0, {"history_length": 1}),
    ("alfworld_pivot_long", "alfworld_pivot", 8, {"history_length": 10, "history_observations": False}),
):
    RECIPES[_name] = {
        "init": _init,
        "env_id": "prover/ALFWorld-v0",
        "train_kwargs": {"split": "train", **_PIVOT_KWARGS, "budget_slack": 1 + _d},
        "eval_kwargs": {"split": "valid_unseen", **_PIVOT_KWARGS, "budget_slack": 1 + _d},
        "format": _format,
        "sft": {
            **RECIPES["alfworld"]["sft"],
            "sft_steps": 600,
            "sft_demonstrator": {"kind": "skip", "p": 0.3, "distractors": _d},
        },
    }


# The analogues of the pivot setting in the other envs (the same issue): an early choice among plausible
# alternatives fixes the outcome and competent turns follow it; SFT on a demonstrator that takes the env's
# decoy with p = 0.3 (agents.baselines.DecoyExpert), continuing from the env's own base. (WebShop's analogue,
# `start="results"`, has no base here: the tiny model does not learn to copy a product's asin from the results
# page, 0.0% / 2.2% greedy after 600 / 1,200 SFT steps; docs/results.md.)
# Search-QA's two-hop (bridge) questions with two search rounds: the first search decides whether the bridge
# entity is found (a look-alike's page names another one), the second hop and the answer follow.
RECIPES["searchqa_bridge"] = {
    "init": "searchqa",
    "env_id": "prover/SearchQA-v0",
    "train_kwargs": {"split": "train", "data_sources": ["bridge"], "max_turns": 2},
    "eval_kwargs": {"split": "test", "data_sources": ["bridge"], "max_turns": 2},
    "format": {},
    "sft": {
        **RECIPES["searchqa"]["sft"],
        "sft_steps": 1500,
        "sft_schedule": "cosine",
        "sft_demonstrator": {"kind": "decoy", "p": 0.3},
    },
}


# The pivot setting with a pretrained policy (issue "A pretrained LLM in the loop"): SmolLM2-135M-Instruct
# (``model``: a named pretrained model, prover_gym/models.py) in its own chat template, full fine-tune on the
# same skip demonstrator. Its budget is sized from measured costs on 2 cores (docs/results.md, 2026-12-08):
# 16.5 s per step of 8 turns; 40 steps from 200 expert episodes gave a no-go base (44% of groups mixed), 120
# steps (1,974 s) a base that passes the pilot's go/no-go on sampling. The base is 260 MB in fp16: it is built
# into the cache (prover-gym-build-base smol_alfworld_pivot), not shipped in git.
RECIPES["smol_alfworld_pivot"] = {
    **RECIPES["alfworld_pivot"],
    "init": None,
    "model": "pretrained:smollm2-135m",
    "ship": False,
    "sft": {
        **RECIPES["alfworld_pivot"]["sft"],
        "sft_steps": 120,
        "sft_episodes": 200,
        "sft_lr": 5e-5,
        "minibatch_size": 8,
    },
}


class BaseError(ValueError):
    """An unknown base name, or a base directory that is missing or incomplete."""


def recipe(name: str) -> dict:
    """The recipe of base ``name`` (RECIPES), or a BaseError naming the known ones."""
    if name not in RECIPES:
        raise BaseError(f"unknown base {name!r}; use one of {sorted(RECIPES)}")
    return RECIPES[name]


def base_dir(name: str, root: Path | None = None) -> Path:
    """The base ``name`` (an HF model directory) in ``root``, else the first of
    ``prover_gym.resources.bases_roots()`` that has it; a clear error when none has."""
    from prover_gym.resources import bases_roots

    recipe(name)
    roots = [root] if root is not None else bases_roots()
    for folder in roots:
        path = Path(folder) / name
        if (path / "config.json").is_file() and (path / "recipe.json").is_file():
            return path
    raise BaseError(
        f"base {name!r} not found in {', '.join(str(r) for r in roots)}; build it with "
        f"`python -m trainers.bases build {name}` (it goes to {default_out(name)}), or point "
        "$PROVER_GYM_BASES (the leaderboard's --bases) at a folder that has it"
    )


def default_out(name: str) -> Path:
    """Where ``build`` writes ``name`` without ``--out``: the checkout's bases/, else the user cache (always
    the cache for a base that is not shipped in git, ``"ship": False``)."""
    from prover_gym.resources import build_root

    return build_root(ship=recipe(name).get("ship", True)) / name
