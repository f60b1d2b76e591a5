"""Snapshot / restore / branch: restored branches are indistinguishable from the original run."""

import pickle

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prover_gym import SnapshotError, branch, check_snapshot, restore, snapshot

ACTION = st.one_of(
    st.builds(
        lambda q: f"search[{q}]",
        st.sampled_from(["University", "painter", "founded 1801", "Institute Press", "novel", "river", "zzqx", "the"]),
    ),
    st.builds(lambda a: f"answer[{a}]", st.sampled_from(["1921", "yes", "no", "nobody"])),
    st.text(max_size=30),
    st.just("EXPERT"),
)


def _play(env, actions):
    """Step through actions (EXPERT = the expert's action) until the episode ends."""
    out = []
    for a in actions:
        if a == "EXPERT":
            a = env.unwrapped.expert_action() or "answer[x]"
        out.append(env.step(a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@pytest.fixture(scope="module")
def envs(bundled_dir):
    a = gym.make("prover/SearchQA-v0", split="test")
    b = gym.make("prover/SearchQA-v0", split="test")
    yield a, b
    a.close(), b.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 1 << 30))
def test_the_snapshot_contract_holds(envs, seed):
    """prover_gym.check_snapshot from random points: restore-replay, pickled copies, independence, the
    reset stream, a foreign snapshot refused."""
    env, _ = envs
    assert check_snapshot(env, episodes=1, seed=seed)["episodes"] == 1


def test_restore_into_a_never_reset_env_and_branch(envs, bundled_dir):
    env, _ = envs
    env.reset(seed=5)
    env.step(env.unwrapped.expert_action())
    snap = snapshot(env)
    fresh = gym.make("prover/SearchQA-v0", split="test")  # never reset: OrderEnforcing must let it step
    restore(fresh, snap)
    expected = _play(env, ["EXPERT"] * 4)
    assert _play(fresh, ["EXPERT"] * 4) == expected
    copies = branch(snap, 3)
    assert len(copies) == 3
    results = [_play(c, ["EXPERT"] * 4) for c in copies]
    assert all(r == expected for r in results)
    # branches are independent
    copies[0].step("search[x]") if not (expected[-1][2] or expected[-1][3]) else None
    assert snapshot(copies[1]).step == snapshot(copies[2]).step
    assert len(pickle.dumps(snap)) < 4096


def test_mismatched_snapshots_raise_value_error_naming_both(envs, bundled_dir):
    env, _ = envs
    env.reset(seed=0)
    snap = snapshot(env)
    train_env = gym.make("prover/SearchQA-v0", split="train")
    with pytest.raises(ValueError, match="different data or settings"):
        restore(train_env, snap)
    k5 = gym.make("prover/SearchQA-v0", split="test", topk=5)
    with pytest.raises(SnapshotError):
        restore(k5, snap)
    from dataclasses import replace

    alien = replace(snap, env_id="prover/ALFWorld-v0")
    with pytest.raises(ValueError, match=r"prover/ALFWorld-v0.*prover/SearchQA-v0"):
        restore(env, alien)
    with pytest.raises(SnapshotError, match="reset"):
        snapshot(gym.make("prover/SearchQA-v0", split="test"))
    with pytest.raises(TypeError):
        snapshot(gym.make("CartPole-v1"))


def test_snapshot_includes_rng_so_unseeded_resets_match(envs):
    env, other = envs
    env.reset(seed=123)
    snap = snapshot(env)
    first = [env.reset()[1]["task_id"] for _ in range(5)]
    restore(other, snap)
    assert [other.reset()[1]["task_id"] for _ in range(5)] == first


def test_snapshot_after_a_reset_by_task_id_without_seed():
    env = gym.make("prover/SearchQA-v0", split="test")
    tid = env.unwrapped.task_ids()[3]
    env.reset(options={"task_id": tid})
    snap = snapshot(env)
    assert snap.task_id == tid and snap.step == 0
