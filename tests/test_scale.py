"""Scale-out paths on CPU: env workers and verification fan-out on a local Ray cluster (2 CPUs,
loopback), LoRA training, and a separate generation engine fed the learner's weights (the vLLM
path, with an HF copy standing in for vLLM)."""

import os
import signal

import gymnasium as gym
import pytest
import torch
from conftest import SlipPolicy, expert_batch_rollout, metric_rows

from agents.baselines import ExpertPolicy
from agents.rollout import rollout
from judges import Proposal
from prover_gym import EnvPool
from trainers.config import load_config
from trainers.train import Trainer
from trainers.verification import verify_segment

ray = pytest.importorskip("ray")

SMALL = [
    "env_kwargs={split: train, max_turns: 1}",
    "tasks_per_iteration=2",
    "group_size=2",
    "max_tokens=6",
    "continuations=2",
    "progress=false",
]


@pytest.fixture(scope="module")
def local_ray(bundled_dir):
    ray.init(
        num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    yield
    ray.shutdown()


def test_ray_pool_matches_in_process_and_survives_a_killed_actor(local_ray):
    with (
        EnvPool("prover/SearchQA-v0", 4, backend="ray", envs_per_worker=2, split="test", timeout=120) as pool,
        EnvPool("prover/SearchQA-v0", 4, backend="sync", split="test") as ref,
    ):
        assert len(pool._ray.actors) == 2
        assert expert_batch_rollout(pool, [1, 2, 3, 4]) == expert_batch_rollout(ref, [1, 2, 3, 4])
        # snapshots cross the actor boundary both ways, pickled: envs 0,1 (actor 0) get 2,3's states
        pool.reset(seeds=[5, 6, 7, 8])
        pool.step(pool.expert_actions())
        snaps = pool.snapshot()
        ref.restore(snaps)
        assert pool.step(["search[painter]"] * 4) == ref.step(["search[painter]"] * 4)
        pool.restore([snaps[2], snaps[3], snaps[0], snaps[1]])
        ref.restore(snaps)
        assert pool.call("current_state")[0] == ref.call("current_state")[2]
        # kill actor 1: its two episodes fail (bounded), the actor is replaced, the others go on
        pid = ray.get(pool._ray.actors[1].ready.remote())
        os.kill(pid, signal.SIGKILL)
        results = pool.step(["search[University]"] * 4)
        assert [r[3] for r in results] == [False, False, True, True]
        assert all("worker_error" in r[4] and r[2] == 0.0 for r in results[2:])
        assert pool.failures == 1
        assert pool.reset(seeds=[9], indices=[3])[0][1]["task_id"] == ref.reset(seeds=[9], indices=[3])[0][1]["task_id"]


def test_a_hung_ray_actor_is_bounded_by_the_timeout_and_replaced(local_ray):
    import time

    with EnvPool("prover/SearchQA-v0", 2, backend="ray", envs_per_worker=1, split="test", timeout=3) as pool:
        pool.reset(seeds=[0, 1])
        pid = ray.get(pool._ray.actors[0].ready.remote())
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        results = pool.step(["search[University]"] * 2)
        assert 2.5 < time.monotonic() - t0 < 60
        assert results[0][3] and "TimeoutError" in results[0][4]["worker_error"]
        assert "worker_error" not in results[1][4] and pool.failures == 1
        assert pool.reset(seeds=[4], indices=[0])[0][0].endswith("?")


@pytest.mark.parametrize("env_id", ["prover/SearchQA-v0", "prover/WebShop-v0"])
def test_verification_fan_out_on_ray_actors_matches_in_process(local_ray, env_id):
    env = gym.make(env_id, split="test")
    when = (lambda a: a.startswith("search[")) if "Search" in env_id else (lambda a: a.startswith("click[b0"))
    instead = "answer[certainly not this]" if "Search" in env_id else "click[back to search]"
    failed = rollout(env, SlipPolicy(when, instead), seed=2)
    k = next(i for i, t in enumerate(failed.turns) if t.action == instead)
    proposal = Proposal(0, k, k)
    with EnvPool(env_id, 4, backend="ray", envs_per_worker=4, split="test") as pool:
        remote = verify_segment(env, failed, proposal, ExpertPolicy(), m=2, pool=pool)
    local = verify_segment(env, failed, proposal, ExpertPolicy(), m=2)
    assert (remote.a_seg, remote.success_before, remote.success_after) == (
        local.a_seg,
        local.success_before,
        local.success_after,
    )
    assert [[t.action for t in c.turns] for c in remote.continuations] == [
        [t.action for t in c.turns] for c in local.continuations
    ]
    assert remote.extra_env_steps == local.extra_env_steps > 0


def test_trainer_on_ray_env_actors_matches_the_in_process_path(local_ray, tmp_path):
    runs = {}
    for backend in ("sync", "ray"):
        out = tmp_path / backend
        trainer = Trainer(
            load_config(
                None,
                SMALL
                + [
                    "iterations=2",
                    f"pool_backend={backend}",
                    "pool_options={envs_per_worker: 2}" if backend == "ray" else "pool_options={}",
                    f"out_dir={out}",
                ],
            )
        )
        trainer.run()
        if backend == "ray":
            assert len(trainer.pool()._ray.actors) == 2
        trainer.close()
        runs[backend] = metric_rows(out)
    assert runs["ray"] == runs["sync"] and len(runs["ray"]) == 2
    assert all(r["rollout_digest"] for r in runs["ray"])


def _peft_changed(trainer, before):
    after = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    return changed


def test_lora_trains_adapters_only_and_resumes_exactly(tmp_path, bundled_dir):
    lora = ["lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}"]
    a, b = tmp_path / "a", tmp_path / "b"
    trainer = Trainer(
        load_config(None, SMALL + lora + ["iterations=2", "sft_steps=2", "sft_episodes=1", f"out_dir={a}"])
    )
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.run()
    changed = _peft_changed(trainer, before)
    assert changed and all("lora_" in k for k in changed)  # the base weights never move
    assert sum(p.numel() for p in trainer._trainable()) < 0.05 * sum(p.numel() for p in trainer.model.parameters())
    ckpt = a / "checkpoint" / "model"
    assert (ckpt / "adapter_config.json").is_file() and not (ckpt / "model.safetensors").exists()
    # interrupted after 1 iteration, resumed: the same rows as the uninterrupted run
    Trainer(load_config(None, SMALL + lora + ["iterations=1", "sft_steps=2", "sft_episodes=1", f"out_dir={b}"])).run()
    Trainer(
        load_config(None, SMALL + lora + ["iterations=2", "sft_steps=2", "sft_episodes=1", f"out_dir={b}"]), resume=True
    ).run()
    assert metric_rows(a) == metric_rows(b)
    # the adapter checkpoint loads for evaluation through the hf backend (base + adapter)
    from agents.backends.hf_backend import HFBackend

    evaluator = HFBackend(str(ckpt), temperature=0)
    merged = trainer.plain_model()
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.allclose(evaluator.model(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-5)


def test_a_separate_rollout_engine_gets_the_learners_weights_and_the_same_results(tmp_path, bundled_dir):
    """rollout_engine (vLLM on GPU; an HF copy here): weights synced after SFT and every update, so the
    run equals generating with the learner itself."""
    common = SMALL + ["iterations=2", "sft_steps=2", "sft_episodes=1", "recompute_logprobs=false"]
    inproc = Trainer(load_config(None, common + [f"out_dir={tmp_path / 'a'}"]))
    inproc.run()
    engine = Trainer(load_config(None, common + ["rollout_engine={kind: hf}", f"out_dir={tmp_path / 'b'}"]))
    assert engine.generator is not engine.backend and engine.generator.model is not engine.model
    from agents.backends.base import TrainableGenerator

    assert isinstance(engine.generator, TrainableGenerator)  # the protocol declares what the trainer uses
    engine.run()
    assert metric_rows(tmp_path / "a") == metric_rows(tmp_path / "b")
    learner = dict(engine.model.state_dict())
    assert all(torch.equal(v, learner[k]) for k, v in engine.generator.model.state_dict().items())


def test_lora_weights_stream_to_the_engine_without_a_model_copy(tmp_path, bundled_dir):
    """policy_weights: a LoRA policy's weights as plain HF names, base + delta per adapted layer (no
    deep copy of the model); the separate engine fed them scores sampled tokens as the learner does."""
    lora = ["lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}"]
    trainer = Trainer(
        load_config(
            None,
            SMALL
            + lora
            + ["iterations=1", "sft_steps=3", "sft_episodes=1", "rollout_engine={kind: hf}", f"out_dir={tmp_path}"],
        )
    )
    rows = trainer.run()
    streamed = dict(trainer.policy_weights())
    merged = trainer.plain_model().state_dict()  # the deep-copy merge, as the reference
    assert streamed.keys() == merged.keys()
    assert max(float((streamed[k] - merged[k]).abs().max()) for k in merged) < 1e-6
    assert any(
        not torch.equal(
            streamed[k], trainer.model.get_base_model().state_dict()[k.replace("q_proj.", "q_proj.base_layer.")]
        )
        for k in streamed
        if "q_proj.weight" in k
    )  # the adapters moved the merged weights
    assert rows[-1]["rollout_logprob_gap_max"] < 1e-4  # the engine's log-probs are the learner's


def test_recomputed_logprobs_match_the_samplers(tmp_path, bundled_dir):
    """The learner's recomputed old log-probs equal what the HF sampler reported (temperature 1), so
    recompute_logprobs only matters where the generation engine's numerics differ (vLLM)."""
    from trainers.sequences import collate, token_logprobs, turn_samples

    trainer = Trainer(load_config(None, SMALL + [f"out_dir={tmp_path}"]))
    groups = trainer.collect()
    trajs = [t for g in groups for t in g]
    samples = [
        s
        for s in turn_samples(trajs, [[1.0] * len(t.turns) for t in trajs], trainer.backend.tokenizer)
        if any(s.policy_mask)
    ]
    batch = collate(samples, trainer.backend.tokenizer.pad_token_id)
    with torch.no_grad():
        mine = token_logprobs(trainer.model, batch, batch["policy_mask"])
    mask = batch["policy_mask"].bool()
    assert mask.sum() > 0
    assert torch.allclose(mine[mask], batch["old_logprobs"][mask], atol=1e-4)


def test_scale_config_errors():
    with pytest.raises(ValueError, match="pool_backend"):
        load_config(None, ["pool_backend=gpu"])
    with pytest.raises(ValueError, match="rollout_engine.kind"):
        load_config(None, ["rollout_engine={kind: sglang}"])
    with pytest.raises(ValueError, match="lora keys"):
        load_config(None, ["lora={rank: 8}"])
