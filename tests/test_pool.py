import os
import signal

import pytest
from conftest import expert_batch_rollout

from prover_gym import EnvPool


@pytest.fixture(scope="module")
def process_pool(bundled_dir):
    with EnvPool("prover/SearchQA-v0", 2, backend="process", split="test", timeout=60) as pool:
        yield pool


def test_process_pool_matches_sync_and_thread(process_pool):
    seeds = [3, 4]
    expected = expert_batch_rollout(process_pool, seeds)
    for backend in ("sync", "thread"):
        with EnvPool("prover/SearchQA-v0", 2, backend=backend, split="test") as pool:
            assert expert_batch_rollout(pool, seeds) == expected


def test_pool_snapshot_restore_crosses_processes(process_pool):
    process_pool.reset(seeds=[10, 11])
    process_pool.step(process_pool.expert_actions())
    snaps = process_pool.snapshot()
    after = process_pool.step(["search[Institute]", "search[painter]"])
    process_pool.restore(list(reversed(snaps)))  # each worker gets the other's state
    swapped = process_pool.step(["search[painter]", "search[Institute]"])
    assert swapped == list(reversed(after))


def test_dead_worker_is_replaced_and_its_episode_reported_failed(process_pool):
    process_pool.reset(seeds=[0, 1])
    os.kill(process_pool._workers[1].proc.pid, signal.SIGKILL)
    process_pool._workers[1].proc.join(10)  # dead before the next request: the send itself fails
    results = process_pool.step(["search[University]", "search[University]"])
    assert "worker_error" not in results[0][4]
    obs, reward, term, trunc, info = results[1]
    assert trunc and reward == 0.0 and "worker_error" in info
    assert process_pool.failures == 1
    # the replacement works after a reset
    obs, info = process_pool.reset(seeds=[5], indices=[1])[0]
    assert info["task_id"] and obs.endswith("?")


def test_pool_argument_errors(bundled_dir):
    with pytest.raises(ValueError, match="backend"):
        EnvPool("prover/SearchQA-v0", 1, backend="gpu")
    with EnvPool("prover/SearchQA-v0", 2, backend="sync", split="test") as pool:
        pool.reset()
        with pytest.raises(ValueError, match="got 1 arguments for 2 envs"):
            pool.step(["x"])


def test_webshop_in_a_process_pool_matches_in_process():
    with (
        EnvPool("prover/WebShop-v0", 2, backend="process", split="test") as pool,
        EnvPool("prover/WebShop-v0", 2, backend="sync", split="test") as ref,
    ):
        assert expert_batch_rollout(pool, [7, 8]) == expert_batch_rollout(ref, [7, 8])
        pool.reset(seeds=[1, 2])
        pool.step(pool.expert_actions())
        snaps = pool.snapshot()
        ref.restore(snaps)  # snapshots taken in worker processes restore in this one
        assert ref.step(["click[back to search]"] * 2) == pool.step(["click[back to search]"] * 2)


def test_a_hung_worker_is_bounded_by_the_timeout_and_replaced(bundled_dir):
    """SIGSTOP one worker mid-episode: the batch comes back after ``timeout`` (not never), the stopped
    worker is killed and replaced, its episode is failed, the other env is untouched."""
    import time

    with EnvPool("prover/SearchQA-v0", 2, backend="process", split="test", timeout=3) as pool:
        pool.reset(seeds=[0, 1])
        os.kill(pool._workers[0].proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        results = pool.step(["search[University]", "search[University]"])
        waited = time.monotonic() - t0
        assert 2.5 < waited < 30
        assert results[0][3] and "TimeoutError" in results[0][4]["worker_error"]
        assert "worker_error" not in results[1][4] and pool.failures == 1
        obs, info = pool.reset(seeds=[4], indices=[0])[0]
        assert obs.endswith("?")
