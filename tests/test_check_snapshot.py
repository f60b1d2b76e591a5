"""prover_gym.check_snapshot (which the three envs' test files run as their snapshot property test)
catches each way an env can break the snapshot contract, shown on a small counter env and broken copies."""

from __future__ import annotations

import gymnasium as gym
import pytest

from prover_gym import SnapshotCheckError, check_snapshot
from prover_gym.core import Outcome, TextEnv


class Counter(TextEnv):
    """Adds each action's length mod 3 to a counter; the episode ends at 12. The state is the counter
    and the actions so far (a list)."""

    env_id = "test/Counter-v0"

    def __init__(self, max_steps: int = 20, render_mode=None):
        super().__init__(max_steps=max_steps, render_mode=render_mode, make_kwargs={"max_steps": max_steps})
        self.count, self.log = 0, []

    def task_ids(self):
        return ["a", "b", "c", "d"]

    def task(self):
        return f"count to 12 from task {self._task_id}"

    def _load_task(self, task_id):
        self.count, self.log = 0, []
        return "count 0"

    def _apply(self, action):
        self.count += len(action) % 3 + 1
        self.log.append(action[:10])
        return Outcome(
            f"count {self.count} after {len(self.log)}", reward=float(self.count >= 12), terminated=self.count >= 12
        )

    def admissible_actions(self):
        return ["a", "bb", "ccc"]

    def _get_state(self):
        return (self.count, list(self.log))

    def _set_state(self, state):
        self.count, self.log = state[0], list(state[1])

    def fingerprint(self):
        return "counter-v0"

    def _state_key_material(self):
        return (self.count, tuple(self.log))


class ForgetsTheCounter(Counter):
    env_id = "test/ForgetsTheCounter-v0"

    def _get_state(self):
        return (0, list(self.log))


class SharesItsLog(Counter):
    """The snapshot holds the live list: later steps change the snapshot."""

    env_id = "test/SharesItsLog-v0"

    def _get_state(self):
        return (self.count, self.log)

    def _set_state(self, state):
        self.count, self.log = state


class ClockDriven(Counter):
    """Depends on state outside the snapshot (a class-level counter shared by all copies)."""

    env_id = "test/ClockDriven-v0"
    ticks = 0

    def _apply(self, action):
        ClockDriven.ticks += 1
        out = super()._apply(action)
        out.observation += f" tick {ClockDriven.ticks % 2}"
        return out


for cls in (Counter, ForgetsTheCounter, SharesItsLog, ClockDriven):
    if cls.env_id not in gym.registry:
        gym.register(cls.env_id, entry_point=cls)


def test_a_correct_env_passes_and_says_what_it_checked():
    counts = check_snapshot(gym.make("test/Counter-v0"), episodes=5)
    assert counts["episodes"] == 5 and counts["replayed_steps"] > 0 and counts["branches"] == 10


@pytest.mark.parametrize(
    "env_id, property_name",
    [
        ("test/ForgetsTheCounter-v0", "restore-replay"),
        ("test/SharesItsLog-v0", "restore-replay"),
        ("test/ClockDriven-v0", "restore-replay"),
    ],
)
def test_each_broken_env_is_caught_with_how_to_replay_it(env_id, property_name):
    with pytest.raises(SnapshotCheckError, match=property_name) as err:
        check_snapshot(gym.make(env_id), episodes=5)
    assert "reset(seed=" in str(err.value) and "replaying" in str(err.value)


def test_state_keys_do_not_depend_on_the_order_a_state_was_built_in():
    """Equal states get one key: a frozenset's iteration order (so its pickle) follows its insertion history
    and the process's string hashing, so the key is taken over a canonical form (sets and dict items sorted,
    dataclasses by field)."""
    import dataclasses
    import pickle

    from prover_gym.core import canonical

    a, b = frozenset([8, 16]), frozenset([16, 8])  # 8 and 16 share a slot: the first inserted is iterated first
    assert a == b and pickle.dumps(a) != pickle.dumps(b)
    assert pickle.dumps(canonical(a)) == pickle.dumps(canonical(b))

    @dataclasses.dataclass(frozen=True)
    class State:
        page: str
        seen: frozenset
        opts: dict

    x, y = State("item", a, {"size": "m", "color": "red"}), State("item", b, {"color": "red", "size": "m"})
    assert x == y and pickle.dumps(canonical(x)) == pickle.dumps(canonical(y))
    assert pickle.dumps(canonical(x)) != pickle.dumps(canonical(State("item", frozenset([8]), x.opts)))


def test_webshop_branches_keep_their_state_key_under_any_string_hashing():
    """The case check_snapshot found (PYTHONHASHSEED=3): a branch's visited set, rebuilt by unpickling in another
    order, gave the same state another key, so a fresh copy seemed to have moved."""
    import os
    import subprocess
    import sys

    code = (
        "import gymnasium as gym, prover_gym\n"
        "from prover_gym import check_snapshot\n"
        "check_snapshot(gym.make('prover/WebShop-v0', split='test'), episodes=4)\n"
    )
    for hash_seed in ("3", "0"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (hash_seed, proc.stderr[-1500:])
