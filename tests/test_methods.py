"""The method registry (trainers/methods.py): what each shipped method is, and that adding one is a
single registration: a toy method registered here trains, runs in the leaderboard and is compared in
its report without any other change."""

from __future__ import annotations

import csv
import json

import pytest

from trainers import advantages as adv
from trainers import methods
from trainers.methods import MethodSpec


def test_the_shipped_methods_and_what_they_do():
    assert methods.names("baseline") == ["random", "expert"]
    assert methods.names("sft", "rl") == [
        "sft",
        "grpo",
        "dr_grpo",
        "gigpo",
        "grpo_matched",
        "prover",
        "prover_random",
        "prover_unverified",
    ]
    asks = {n for n in methods.names() if methods.get(n).asks_judge}
    verifies = {n for n in methods.names() if methods.get(n).verifies}
    assert asks == {"prover", "prover_random", "prover_unverified"} and verifies == {"prover", "prover_random"}
    assert methods.get("prover_random").judge({"kind": "oracle", "side": "failed"}, 3) == {
        "kind": "random",
        "side": "failed",
        "seed": 3,
    }
    assert methods.get("grpo_matched").matched_to == "prover"
    assert ("prover", "grpo") in methods.comparisons() and ("prover", "grpo_matched") in methods.comparisons()
    assert methods.base_advantage("prover") is adv.grpo and methods.base_advantage("gigpo") is adv.gigpo


def test_bad_names_and_specs_are_refused_clearly():
    with pytest.raises(ValueError, match="did you mean 'prover'"):
        methods.get("prove")
    with pytest.raises(ValueError, match="already registered"):
        methods.register(MethodSpec("grpo", advantage=adv.grpo))
    with pytest.raises(ValueError, match="needs an advantage"):
        MethodSpec("x")
    with pytest.raises(ValueError, match="verifies needs asks_judge"):
        MethodSpec("x", advantage=adv.grpo, verifies=True)
    from trainers.config import TrainConfig

    with pytest.raises(ValueError, match="method='prove'"):
        TrainConfig(method="prove")


def _doubled(*args, **kwargs):
    return [[2 * a for a in turn] for turn in adv.grpo(*args, **kwargs)]


@pytest.fixture
def toy_method():
    spec = methods.register(
        MethodSpec("grpo_doubled", advantage=_doubled, order=35, compare_to=("grpo",), description="toy")
    )
    yield spec
    del methods.REGISTRY[spec.name]


def test_a_registered_method_trains_runs_in_the_leaderboard_and_is_compared(toy_method, tmp_path, bundled_dir):
    from leaderboards.run import main
    from trainers.config import load_config
    from trainers.train import Trainer

    small = ["env_kwargs={split: train, max_turns: 1}", "tasks_per_iteration=2", "group_size=2", "max_tokens=6"]
    rows = Trainer(
        load_config(None, [*small, "method=grpo_doubled", "iterations=1", f"out_dir={tmp_path / 't'}"])
    ).run()
    assert rows[0]["samples"] > 0

    out = tmp_path / "lb"
    args = ["--preset", "smoke", "--envs", "searchqa", "--methods", "grpo", "grpo_doubled", "--seeds", "0", "1"]
    assert main([*args, "--out", str(out), "--jobs", "1"]) == 0
    table = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert sorted({r["method"] for r in table}) == ["grpo", "grpo_doubled"]
    report = json.loads((out / "leaderboard.json").read_text())
    pairs = {(c["a"], c["b"]) for c in report["comparisons"]}
    assert ("grpo_doubled", "grpo") in pairs
    assert "grpo_doubled" in (out / "leaderboard.md").read_text()
