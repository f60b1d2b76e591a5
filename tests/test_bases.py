"""The shipped base policies (bases/<name>, trainers/bases.py): each loads, matches its recipe, and
plays its setting through gym.make; the SFT schedule; the leaderboard's check of a base's setting."""

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainers.bases import RECIPES, BaseError, base_dir, recipe  # noqa: E402
from trainers.sft import lr_factor  # noqa: E402


@pytest.mark.parametrize("name", sorted(n for n, r in RECIPES.items() if r.get("ship", True)))
def test_each_shipped_base_loads_matches_its_recipe_and_plays(name):
    import gymnasium as gym

    from agents.backends.hf_backend import HFBackend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy
    from agents.rollout import rollout

    path = base_dir(name)
    meta = json.loads((path / "recipe.json").read_text())
    assert meta["recipe"] == recipe(name)  # rebuilt by `python -m trainers.bases build <name>` from this recipe
    assert meta["eval"]["episodes"] >= 200 and 0.0 < meta["eval"]["success"] < 1.0
    assert math.isclose(
        meta["eval"]["standard_error"],
        math.sqrt(meta["eval"]["success"] * (1 - meta["eval"]["success"]) / meta["eval"]["episodes"]),
        abs_tol=1e-4,
    )
    spec = recipe(name)
    backend = HFBackend(str(path), max_tokens=spec["sft"]["max_tokens"], temperature=0.0)
    assert next(backend.model.parameters()).dtype.is_floating_point
    env = gym.make(spec["env_id"], **spec["eval_kwargs"])
    traj = rollout(env, LLMPolicy(backend, make_format(spec["env_id"], **spec["format"])), seed=0)
    assert traj.turns and all(t.valid for t in traj.turns[:1])  # it writes a parseable action, not noise


def test_unknown_or_missing_base_is_a_clear_error(tmp_path):
    with pytest.raises(BaseError, match="unknown base 'nope'"):
        base_dir("nope")
    with pytest.raises(BaseError, match="python -m trainers.bases build searchqa"):
        base_dir("searchqa", root=tmp_path)


def test_a_base_kept_out_of_git_is_built_into_the_cache_from_its_pretrained_model(tmp_path, monkeypatch):
    """smol_alfworld_pivot (SmolLM2-135M-Instruct, 260 MB): its recipe names the pretrained model its SFT starts
    from, and it is built into $PROVER_GYM_CACHE/bases even in a checkout (bases/ is for shipped bases)."""
    from trainers.recipes import default_out

    monkeypatch.setenv("PROVER_GYM_CACHE", str(tmp_path))
    spec = recipe("smol_alfworld_pivot")
    assert spec["model"] == "pretrained:smollm2-135m" and spec["init"] is None and spec["ship"] is False
    assert default_out("smol_alfworld_pivot") == tmp_path / "bases" / "smol_alfworld_pivot"
    assert default_out("alfworld_pivot") == ROOT / "bases" / "alfworld_pivot"  # shipped: the checkout's bases/
    with pytest.raises(BaseError, match=f"build smol_alfworld_pivot.*{tmp_path / 'bases'}"):
        base_dir("smol_alfworld_pivot", root=tmp_path / "bases")


def test_cosine_schedule_warms_up_then_decays_to_zero():
    steps = 100
    f = [lr_factor(s, steps, "cosine") for s in range(steps)]
    assert f[0] == pytest.approx(0.2) and f[4] == pytest.approx(1.0)  # 5 warm-up steps
    assert all(a >= b for a, b in zip(f[4:], f[5:]))  # then non-increasing
    assert f[-1] < 0.01 and lr_factor(52, steps, "cosine") == pytest.approx(0.5, abs=0.02)
    assert {lr_factor(s, steps, "constant") for s in range(steps)} == {1.0}


def test_leaderboard_refuses_a_base_built_for_another_setting():
    from leaderboards.run import PresetError, shipped_base

    spec = recipe("searchqa")
    block = {
        "env_id": spec["env_id"],
        "train_kwargs": spec["train_kwargs"],
        "eval_kwargs": spec["eval_kwargs"],
        "format": spec["format"],
        "base": "searchqa",
    }
    assert shipped_base("searchqa", block)["model_dir"] == str(base_dir("searchqa"))
    with pytest.raises(PresetError, match="was built for train_kwargs"):
        shipped_base("searchqa", {**block, "train_kwargs": {**spec["train_kwargs"], "max_turns": 3}})
    assert shipped_base("searchqa", {k: v for k, v in block.items() if k != "base"}) is None
