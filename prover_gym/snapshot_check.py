"""``check_snapshot(env)``: the snapshot/restore contract as a test, like gymnasium's ``check_env``.

A prover-gym env (a ``TextEnv`` subclass: ``_get_state`` / ``_set_state`` / ``fingerprint``) must let a
trajectory be branched anywhere. Over a few episodes of random play (admissible actions, the expert's
action, free text and bad input mixed), at a random point of each it checks:

1. **restore-replay determinism**: the same actions after ``restore`` give the same
   (observation, reward, terminated, truncated, info) as the first time, and the same ``state_key``;
2. **pickled round trip**: the snapshot pickled and restored into a fresh env of the same id and
   kwargs (``branch``) replays the same way, with the same step counter;
3. **independence of copies**: stepping one branch changes neither another branch nor the snapshot;
4. **the random state**: an unseeded ``reset`` after a restore picks the task the original picked;
5. **bad input**: a snapshot of another env id is refused with ``SnapshotError`` and leaves the env
   where it was; bad actions (empty, control characters, over-long) are answered, not raised, and
   replay like any other action.

Each failure raises ``SnapshotCheckError`` naming the property, the task, the actions that lead there
and the first step that differs, so it can be replayed by hand.
"""

from __future__ import annotations

import dataclasses
import pickle
import random

BAD_ACTIONS = ("", "\x00\x01\x7f", "click[" * 40, "x" * 5000, "search[]", "answer[ ]")


class SnapshotCheckError(AssertionError):
    """A prover-gym env broke the snapshot/restore contract (the message says where)."""


def _step(env, action: str) -> tuple:
    obs, reward, terminated, truncated, info = env.step(action)
    return obs, float(reward), bool(terminated), bool(truncated), info


def _play(env, actions: list[str]) -> list[tuple]:
    out = []
    for a in actions:
        out.append(_step(env, a))
        if out[-1][2] or out[-1][3]:
            break
    return out


def _choose(env, info: dict, rng: random.Random) -> str:
    """A random action: mostly admissible (or the expert's), sometimes free text or bad input."""
    base = env.unwrapped
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(BAD_ACTIONS)
    if roll < 0.3:
        expert = base.expert_action() if hasattr(base, "expert_action") else None
        if expert:
            return expert
    admissible = info.get("admissible_actions") or (
        base.admissible_actions() if hasattr(base, "admissible_actions") else None
    )
    if admissible:
        return rng.choice(list(admissible))
    return rng.choice(["look", "search[river]", "answer[yes]", "click[back to search]", "inventory"])


def _differs(a: list[tuple], b: list[tuple]) -> str:
    """'' when two plays are identical, else where and how they first differ."""
    fields = ("observation", "reward", "terminated", "truncated", "info")
    for i, (x, y) in enumerate(zip(a, b)):
        for name, u, v in zip(fields, x, y):
            if u != v:
                return f"step {i} differs in {name}: {u!r:.200} vs {v!r:.200}"
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} steps before the episode ended"
    return ""


def _same_point(a, b) -> bool:
    """Two snapshots of the same point: id, data, core fields (step, task, flags, last observation, the
    reset stream) and state key. (Env states may differ in form, e.g. a native handle vs its portable
    replay, and still be the same point; behaviour is checked by replaying.)"""
    return (a.env_id, a.fingerprint, a.core, a.key) == (b.env_id, b.fingerprint, b.core, b.key)


def check_snapshot(env, *, episodes: int = 6, steps: int = 8, seed: int = 0, fresh_copies: bool = True) -> dict:
    """Check ``env``'s snapshot/restore contract (module docstring); returns counts of what was checked,
    raises ``SnapshotCheckError`` at the first violation. ``env`` is made with ``gym.make`` (its id and
    kwargs make the fresh copies; ``fresh_copies=False`` skips those for an env whose copies are costly)."""
    from prover_gym.core import SnapshotError, _base, branch, restore, snapshot

    base = _base(env)
    rng = random.Random(f"check_snapshot|{seed}")
    counts = {"episodes": 0, "snapshots": 0, "replayed_steps": 0, "branches": 0}
    for _ in range(episodes):
        reset_seed = rng.randrange(1 << 30)
        obs, info = env.reset(seed=reset_seed)
        where = f"{base.env_id}, reset(seed={reset_seed}) -> task {info.get('task_id', base._task_id)!r}"
        prefix: list[str] = []
        for _ in range(rng.randrange(0, steps)):
            action = _choose(env, info, rng)
            obs, _, terminated, truncated, info = _step(env, action)
            if terminated or truncated:  # snapshot before the action that ended it: play the prefix again
                obs, info = env.reset(seed=reset_seed)  # (by a seeded reset, not by the restore under test)
                for a in prefix:
                    obs, _, _, _, info = _step(env, a)
                break
            prefix.append(action)
        snap = snapshot(env)
        key = base.state_key()
        counts["snapshots"] += 1
        suffix, original = [], []
        for _ in range(rng.randrange(1, steps + 1)):
            action = _choose(env, info, rng)
            suffix.append(action)
            original.append(_step(env, action))
            info = original[-1][4]
            if original[-1][2] or original[-1][3]:
                break
        end_key = base.state_key()
        context = f"{where}, after {prefix!r}, replaying {suffix!r}"

        restore(env, snap)  # 1. restore, replay
        if base.state_key() != key:
            raise SnapshotCheckError(f"restore-replay: the state key after restore differs ({context})")
        replay = _play(env, suffix)
        if why := _differs(original, replay):
            raise SnapshotCheckError(f"restore-replay: {why} ({context})")
        if base.state_key() != end_key:
            raise SnapshotCheckError(f"restore-replay: the state key at the end differs ({context})")
        counts["replayed_steps"] += len(replay)

        if fresh_copies:  # 2. pickled into fresh copies; 3. copies independent of each other and of the snapshot
            copies = branch(pickle.loads(pickle.dumps(snap)), 2)
            try:
                first = _play(copies[0], suffix)
                if why := _differs(original, first):
                    raise SnapshotCheckError(f"pickled round trip: {why} ({context})")
                if snapshot(copies[0]).step != snap.step + len(first):
                    raise SnapshotCheckError(f"pickled round trip: the step counter is off ({context})")
                if not _same_point(snapshot(copies[1]), snap):
                    raise SnapshotCheckError(f"independence: stepping one branch changed another ({context})")
                second = _play(copies[1], suffix)
                if why := _differs(original, second):
                    raise SnapshotCheckError(f"independence: the second branch {why} ({context})")
                counts["branches"] += 2
            finally:
                for c in copies:
                    c.close()
        restore(env, snap)
        if why := _differs(original, _play(env, suffix)):
            raise SnapshotCheckError(f"independence: the snapshot changed after branching; {why} ({context})")

        restore(env, snap)  # 4. the reset stream is part of the state
        picks = [env.reset()[1].get("task_id") for _ in range(3)]
        restore(env, snap)
        again = [env.reset()[1].get("task_id") for _ in range(3)]
        if picks != again:
            raise SnapshotCheckError(f"random state: unseeded resets after a restore pick {again} vs {picks} ({where})")

        restore(env, snap)  # 5. a foreign snapshot is refused and changes nothing
        alien = dataclasses.replace(snap, env_id=snap.env_id + "-other", fingerprint="0" * len(snap.fingerprint))
        try:
            restore(env, alien)
        except SnapshotError:
            pass
        else:
            raise SnapshotCheckError(f"bad input: a snapshot of another env id was restored ({where})")
        if not _same_point(snapshot(env), snap):
            raise SnapshotCheckError(f"bad input: a refused restore changed the env ({where})")
        counts["episodes"] += 1
    if counts["snapshots"] == 0:
        raise SnapshotCheckError(f"{base.env_id}: every episode ended before a snapshot point; give more episodes")
    return counts
