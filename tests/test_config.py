"""Train configs as composition: ``defaults: [env/<setting>, model/<budget>]`` plus the method.

The shipped configs resolve to exactly the values they had as 27 flat files (the fixture was written by
the flat files' ``load_config(...).to_dict()`` before they became composition)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prover_gym.resources import shipped_configs
from trainers.config import load_config

FIXTURE = Path(__file__).parent / "fixtures" / "resolved_train_configs.json"


def test_every_shipped_train_config_resolves_to_its_recorded_values():
    recorded = json.loads(FIXTURE.read_text())
    shipped = shipped_configs("train")
    assert sorted(shipped) == sorted(recorded), (
        "a config was added or removed: add (or drop) its entry, load_config(<name>).to_dict(), in " + str(FIXTURE)
    )
    for name, path in shipped.items():
        assert load_config(path).to_dict() == recorded[name], name


def test_shipped_configs_compose_parts_not_repeat_them():
    for name, path in shipped_configs("train").items():
        text = path.read_text()
        assert "defaults:" in text and "env_kwargs" not in text, name


def test_a_users_config_composes_its_own_and_the_shipped_parts(tmp_path):
    (tmp_path / "parts" / "model").mkdir(parents=True)
    (tmp_path / "parts" / "model" / "mine.yaml").write_text("iterations: 3\nlr: 2.0e-4\njudge: {kind: oracle}\n")
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text(
        "defaults: [env/alfworld_cpu, model/mine]\nmethod: prover\nenv_kwargs: {max_steps: 9}\niterations: 4\n"
    )
    cfg = load_config(cfg_file)
    assert cfg.env_id == "prover/ALFWorld-v0" and cfg.method == "prover"
    assert cfg.iterations == 4  # the file's own keys come last
    assert cfg.lr == 2e-4 and cfg.judge == {"kind": "oracle"}  # the user's part
    # a mapping is merged key by key: the setting's other env kwargs stay
    assert cfg.env_kwargs["max_steps"] == 9 and cfg.env_kwargs["num_games"] == 300
    # overrides apply after composition, and `defaults=` swaps the parts
    cfg = load_config(cfg_file, ["defaults=[env/webshop_cpu]", "iterations=7"])
    assert cfg.env_id == "prover/WebShop-v0" and cfg.iterations == 7 and cfg.lr == 1e-4
    assert cfg.env_kwargs == {"split": "train", "max_steps": 9}


def test_bad_parts_are_refused_naming_the_input(tmp_path):
    with pytest.raises(ValueError, match=r"'env/alfworld_cpuu'.*did you mean.*env/alfworld_cpu"):
        load_config(None, ["defaults=[env/alfworld_cpuu]"])
    with pytest.raises(ValueError, match="expected a list of part names"):
        load_config(None, ["defaults={env: alfworld_cpu}"])
    (tmp_path / "parts" / "env").mkdir(parents=True)
    (tmp_path / "parts" / "env" / "loop.yaml").write_text("defaults: [env/loop]\n")
    (tmp_path / "run.yaml").write_text("defaults: [env/loop]\n")
    with pytest.raises(ValueError, match="env/loop -> env/loop is a cycle"):
        load_config(tmp_path / "run.yaml")
    (tmp_path / "typo.yaml").write_text("defaults: [env/searchqa_cpu]\nitterations: 3\n")
    with pytest.raises(ValueError, match="unknown config keys \\['itterations'\\]"):
        load_config(tmp_path / "typo.yaml")


def test_the_config_reference_and_help_are_generated_from_the_field_docs(capsys):
    from dataclasses import fields

    from trainers.config import TrainConfig, reference_markdown
    from trainers.train import main

    doc = Path(__file__).parents[1] / "docs" / "config-reference.md"
    assert doc.read_text() == reference_markdown(), "stale: run python -m trainers.config > docs/config-reference.md"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for f in fields(TrainConfig):
        assert f.metadata["help"], f"{f.name} has no help text"
        assert f"  {f.name} (" in text and f"| `{f.name}` |" in doc.read_text(), f.name


def test_print_config_shows_the_composed_values(capsys):
    import yaml

    from trainers.train import main

    assert main(["--config", "webshop_tiny_prover", "--print-config", "iterations=2"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    expected = {**json.loads(FIXTURE.read_text())["webshop_tiny_prover"], "iterations": 2}
    assert shown == expected


def test_every_preset_resolves_to_its_recorded_values(monkeypatch):
    """The presets' env blocks name their base and take its setting from trainers.bases.RECIPES (one home);
    each preset resolves as it did when the blocks repeated the setting (same cell and eval hashes)."""
    from leaderboards.run import PRESETS, config_hash, load_preset

    # recorded with the data variables unset (importing the ALFWorld engine sets ALFWORLD_DATA to its cache)
    for var in ("ALFWORLD_DATA", "WEBSHOP_DATA", "SEARCHQA_DATA"):
        monkeypatch.delenv(var, raising=False)

    root = str(Path(__file__).resolve().parents[1])
    recorded = json.loads((FIXTURE.parent / "resolved_presets.json").read_text())
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == sorted(recorded)
    for name, want in recorded.items():
        got = load_preset(name, check=False)
        got.pop("_path")
        got = json.loads(json.dumps(got, sort_keys=True, default=str).replace(root, "<root>"))
        assert got == want, name
        for env_name, block in got["envs"].items():
            assert config_hash(block) == config_hash(want["envs"][env_name])


def test_a_preset_block_takes_its_bases_setting_and_refuses_an_unknown_base(tmp_path):
    import yaml

    from leaderboards.run import PresetError, load_preset
    from trainers.bases import RECIPES

    preset = {"name": "t", "methods": ["sft"], "envs": {"a": {"base": "alfworld_pivot"}}}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(preset))
    block = load_preset(str(tmp_path / "t.yaml"), check=False)["envs"]["a"]
    recipe = RECIPES["alfworld_pivot"]
    assert block["train_kwargs"] == recipe["train_kwargs"] and block["eval_kwargs"] == recipe["eval_kwargs"]
    assert block["env_id"] == recipe["env_id"] and block["format"] == recipe["format"]
    preset["envs"]["a"] = {"base": "alfworld_pivott"}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(preset))
    with pytest.raises(PresetError, match=r"envs.a.base = 'alfworld_pivott'.*did you mean 'alfworld_pivot'"):
        load_preset(str(tmp_path / "t.yaml"), check=False)


def test_sections_name_every_field_once_and_nest_in_yaml_and_overrides(tmp_path):
    from dataclasses import fields

    from trainers.config import SECTIONS, TrainConfig

    listed = [k for keys in SECTIONS.values() for k in keys]
    assert sorted(listed) == sorted(f.name for f in fields(TrainConfig)) and len(listed) == len(set(listed))
    flat = load_config("alfworld_tiny_prover", ["lr=2e-4", "lora.r=4", "beta=0.5"])
    nested_file = tmp_path / "nested.yaml"
    nested_file.write_text(
        "defaults: [env/alfworld_cpu, model/tiny]\nout_dir: runs/alfworld_tiny_prover\n"
        "credit: {method: prover, beta: 0.5}\n"
    )
    nested = load_config(nested_file, ["learner.lr=2e-4", "model.lora.r=4"])
    assert nested.to_dict() == flat.to_dict()
    assert nested.sections()["learner"]["lr"] == 2e-4 and nested.sections()["model"]["lora"] == {"r": 4}
    # a later layer's flat key overrides an earlier layer's sectioned one, and overrides win over the file
    (tmp_path / "parts" / "model").mkdir(parents=True)
    (tmp_path / "parts" / "model" / "mine.yaml").write_text("learner: {lr: 3.0e-4, kl_coef: 0.01}\n")
    mine = tmp_path / "mine.yaml"
    mine.write_text("defaults: [model/mine]\nlr: 1.0e-4\n")
    assert load_config(mine).lr == 1e-4 and load_config(mine).kl_coef == 0.01
    assert load_config(mine, ["learner.lr=5e-4"]).lr == 5e-4


def test_bad_sections_are_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"learner.beta; beta is in section credit"):
        load_config(None, ["learner.beta=1"])
    with pytest.raises(ValueError, match=r"learner.lrr; did you mean 'lr'"):
        load_config(None, ["learner.lrr=1"])
    both = tmp_path / "both.yaml"
    both.write_text("lr: 1.0e-4\nlearner: {lr: 2.0e-4}\n")
    with pytest.raises(ValueError, match="lr is given twice"):
        load_config(both)
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner: 3\n")
    with pytest.raises(ValueError, match="learner: a section, given as a mapping"):
        load_config(bad)
