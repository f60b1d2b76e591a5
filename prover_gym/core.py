"""Core protocol: the ``TextEnv`` base class and exact snapshot / restore / branch.

Every prover-gym environment is a ``TextEnv``: observations and actions are ``str``; the step
limit lives inside the env (so it is part of the snapshot); ``info`` always carries
``task_id``, ``task``, ``won``, ``admissible_actions`` and ``step``; and a bad action never
raises: it is answered with an observation that says what was wrong, counts as a step, and
leaves the state unchanged.

A subclass fills in five hooks (``task_ids``, ``_load_task``, ``_apply``, ``_get_state``,
``_set_state``) and may add ``admissible_actions``, ``expert_action`` and ``_extra_info``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import pickle
import string
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Text

__all__ = [
    "Outcome",
    "Snapshot",
    "SnapshotError",
    "TextEnv",
    "UnicodeText",
    "branch",
    "restore",
    "snapshot",
]

_SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "


class UnicodeText(Text):
    """A ``Text`` space over all of Unicode.

    ``contains(x)`` is true for any ``str`` whose length is within bounds (gymnasium's ``Text``
    only admits a finite charset, which cannot describe natural-language observations);
    ``sample()`` draws printable ASCII.
    """

    def __init__(self, max_length: int, *, min_length: int = 0):
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_CHARSET)

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a str of an allowed length (any characters: actions are free text)."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


_ATOMS = (str, int, float, bool, bytes, type(None))


def canonical(obj: Any) -> Any:
    """A form of ``obj`` whose pickle depends only on its value, for ``state_key``: sets as sorted tuples, dict
    items sorted, dataclasses as (type, fields), recursively. Two equal states built in different orders (a
    frozenset's iteration order follows its insertion history and the process's string hashing) get one key."""
    if isinstance(obj, _ATOMS):
        return obj
    if isinstance(obj, (set, frozenset)):
        return ("<set>", tuple(sorted((canonical(x) for x in obj), key=_order)))
    if isinstance(obj, dict):
        items = ((canonical(k), canonical(v)) for k, v in obj.items())
        return ("<dict>", tuple(sorted(items, key=lambda kv: _order(kv[0]))))
    if type(obj) is tuple or type(obj) is list:
        return type(obj)(canonical(x) for x in obj)
    if isinstance(obj, tuple):  # a namedtuple
        return (type(obj).__qualname__, tuple(canonical(x) for x in obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__qualname__, tuple(canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)))
    return obj


def _order(x: Any) -> bytes:
    return pickle.dumps(x, protocol=4)


class SnapshotError(ValueError):
    """A snapshot cannot be taken or restored (wrong env, different data, not reset yet)."""


@dataclass(frozen=True)
class Snapshot:
    """The complete state of an environment at one instant. Picklable and small.

    ``make_kwargs`` are the keyword arguments the env was made with, so ``branch`` can build
    fresh copies with ``gymnasium.make(env_id, **make_kwargs)``.
    """

    env_id: str
    fingerprint: str
    make_kwargs: dict
    core: tuple
    state: Any = field(repr=False)
    key: str = field(default="", compare=False)  # the state's identity (TextEnv.state_key), e.g. GiGPO's anchors

    @property
    def step(self) -> int:
        """The env's step count when the snapshot was taken."""
        return self.core[0]

    @property
    def task_id(self) -> str:
        """The task the snapshot's episode plays."""
        return self.core[1]


@dataclass
class Outcome:
    """What a subclass's ``_apply`` returns for one action."""

    observation: str
    reward: float = 0.0
    terminated: bool = False
    won: bool = False
    info: dict = field(default_factory=dict)


class TextEnv(gym.Env):
    """Base class of the prover-gym text environments. See the module docstring."""

    env_id: ClassVar[str] = ""
    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    max_action_length: ClassVar[int] = 4096
    max_observation_length: ClassVar[int] = 1 << 20

    def __init__(self, *, max_steps: int, render_mode: str | None = None, make_kwargs: dict | None = None):
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; use one of {self.metadata['render_modes']} or None"
            )
        self.render_mode = render_mode
        self.max_steps = max_steps
        self.observation_space = UnicodeText(self.max_observation_length)
        self.action_space = UnicodeText(self.max_action_length)
        self._make_kwargs = dict(make_kwargs or {})
        self._step = 0
        self._task_id: str | None = None
        self._terminated = False
        self._truncated = False
        self._won = False
        self._last_obs = ""

    # ---- hooks for subclasses -------------------------------------------------------------
    def task_ids(self) -> list[str]:
        """The ids of the tasks in this env's split, in a fixed order."""
        raise NotImplementedError

    def task(self) -> str:
        """The current task's instruction or question."""
        raise NotImplementedError

    def _load_task(self, task_id: str) -> str:
        """Start ``task_id`` from its initial state and return the first observation."""
        raise NotImplementedError

    def _apply(self, action: str) -> Outcome:
        """Apply a (length-checked, surrogate-free) action. Must not raise on bad actions."""
        raise NotImplementedError

    def _invalid(self, action: str, reason: str) -> Outcome:
        """The answer to an action the env rejects; the state is left unchanged."""
        return Outcome(observation=f"Invalid action: {reason}", info={"error": reason})

    def _get_state(self) -> Any:
        """Env-specific state, picklable; together with the core fields it is the whole state."""
        raise NotImplementedError

    def _set_state(self, state: Any) -> None:
        """Put back what ``_get_state`` returned; ``self._task_id`` already names the snapshot's task."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """Identifies the data and the dynamics-relevant settings; snapshots only restore into an
        env with the same id and fingerprint."""
        raise NotImplementedError

    def _step_limit(self) -> int:
        """The current episode's step limit: ``max_steps``, or less where an env derives a per-task
        budget from the task (it must depend on the task only, so snapshots stay exact)."""
        return self.max_steps

    def state_key(self) -> str:
        """The identity of the current state, equal for two states from which every action sequence
        gives the same observations and outcomes: the task, the done flags and the env-specific state,
        without the step counter and the RNG. GiGPO groups turns by it (its "anchor states").
        Subclasses override ``_state_key_material`` when ``_get_state`` holds path history."""
        material = (self._task_id, self._terminated, self._truncated, self._won, self._state_key_material())
        return hashlib.blake2b(pickle.dumps(canonical(material), protocol=4), digest_size=12).hexdigest()

    def _state_key_material(self) -> Any:
        return self._get_state()

    def admissible_actions(self) -> list[str] | None:
        """The actions the env accepts from the current state, where it can list them (ALFWorld, WebShop); None where
        any text is allowed (Search-QA)."""
        return None

    def expert_action(self) -> str | None:
        """The built-in expert's next action from the current state, or None."""
        return None

    def _extra_info(self) -> dict:
        return {}

    # ---- gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start a task. ``options={"task_id": t}`` picks task ``t``; else ``seed`` picks task
        ``task_ids()[seed % n]``; with neither, the env's RNG picks one.

        Raises ValueError for an unknown ``task_id`` (the list is ``env.unwrapped.task_ids()``).
        """
        super().reset(seed=seed)
        ids = self.task_ids()
        if not ids:
            raise ValueError(f"{self.env_id}: the split has no tasks; check the `split` and `data` arguments")
        task_id = (options or {}).get("task_id")
        if task_id is None:
            index = seed % len(ids) if seed is not None else int(self.np_random.integers(len(ids)))
            task_id = ids[index]
        elif task_id not in self._task_index():
            raise ValueError(
                f"{self.env_id}: unknown task_id {task_id!r}; env.unwrapped.task_ids() lists the "
                f"{len(ids)} tasks of this split"
            )
        self._task_id = task_id
        self._step = 0
        self._terminated = self._truncated = self._won = False
        self._last_obs = self._clip(self._load_task(task_id))
        return self._last_obs, self._info({})

    def step(self, action):
        """Apply one action (text; coerced and length-limited): ``(observation, reward, terminated, truncated, info)``.
        A bad action is an invalid step with ``info["error"]``, never an exception; an infrastructure failure raises
        and leaves the env as it was."""
        if self._task_id is None:
            raise gym.error.ResetNeeded(f"{self.env_id}: call reset() before step()")
        if self._terminated or self._truncated:
            obs = "The episode has ended. Call reset() to start a new one."
            return obs, 0.0, self._terminated, self._truncated, self._info({"error": "episode over"})
        self._step += 1
        action_text, problem = _coerce_action(action, self.max_action_length)
        try:
            outcome = self._invalid(action_text, problem) if problem else self._apply(action_text)
        except BaseException:
            # an infrastructure failure (a retrieval server down) is not the agent's step: the env stays
            # exactly as before the call (``_apply`` changes state only once it has what it needs)
            self._step -= 1
            raise
        self._terminated = bool(outcome.terminated)
        self._won = bool(outcome.won)
        self._truncated = not self._terminated and self._step >= self._step_limit()
        self._last_obs = self._clip(outcome.observation)
        reward = float(outcome.reward)
        return self._last_obs, reward, self._terminated, self._truncated, self._info(outcome.info)

    def render(self):
        """``ansi``: the last observation; ``human``: print it."""
        if self.render_mode == "ansi":
            return self._last_obs
        if self.render_mode == "human":
            print(self._last_obs)
        return None

    # ---- snapshot protocol ----------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The complete state now, as a picklable ``Snapshot`` (restore it here, into a copy, or ``branch`` it). Raises
        SnapshotError before the first reset."""
        if self._task_id is None:
            raise SnapshotError(f"{self.env_id}: call reset() before snapshot()")
        core = (
            self._step,
            self._task_id,
            self._terminated,
            self._truncated,
            self._won,
            self._last_obs,
            copy.deepcopy(self.np_random.bit_generator.state),  # creates the RNG if reset had no seed
        )
        return Snapshot(
            self.env_id, self.fingerprint(), dict(self._make_kwargs), core, self._get_state(), self.state_key()
        )

    def restore(self, snap: Snapshot) -> None:
        """Put the env exactly in the state of ``snap`` (same data and settings: checked by fingerprint); the next steps
        replay as they did after the snapshot. Raises SnapshotError naming the mismatch."""
        if not isinstance(snap, Snapshot):
            raise SnapshotError(f"restore() expects a prover_gym.Snapshot, got {type(snap).__name__}")
        if snap.env_id != self.env_id:
            raise SnapshotError(
                f"snapshot is from {snap.env_id!r} but this env is {self.env_id!r}; restore it into an env "
                f"made with gym.make({snap.env_id!r}, ...)"
            )
        mine = self.fingerprint()
        if snap.fingerprint != mine:
            raise SnapshotError(
                f"snapshot of {snap.env_id!r} was taken with different data or settings (fingerprint "
                f"{snap.fingerprint[:12]} vs {mine[:12]}); make the env with the same kwargs: {snap.make_kwargs}"
            )
        step, task_id, terminated, truncated, won, last_obs, rng_state = snap.core
        if self._np_random is None:
            self._np_random, _ = gym.utils.seeding.np_random()
        self._np_random.bit_generator.state = copy.deepcopy(rng_state)
        self._step, self._task_id = step, task_id
        self._terminated, self._truncated, self._won = terminated, truncated, won
        self._last_obs = last_obs
        self._set_state(snap.state)  # after the core fields: it may look up the task by self._task_id

    # ---- helpers --------------------------------------------------------------------------
    def current_state(self) -> tuple[str, dict, bool, bool]:
        """(observation, info, terminated, truncated) as of now, e.g. right after a restore."""
        return self._last_obs, self._info({}), self._terminated, self._truncated

    @property
    def elapsed_steps(self) -> int:
        """Steps taken in the current episode."""
        return self._step

    def _task_index(self) -> set[str]:
        cached = getattr(self, "_task_id_set", None)
        if cached is None:
            cached = self._task_id_set = set(self.task_ids())
        return cached

    def _clip(self, obs: str) -> str:
        return obs if len(obs) <= self.max_observation_length else obs[: self.max_observation_length]

    def _info(self, extra: dict) -> dict:
        info = {
            "task_id": self._task_id,
            "task": self.task(),
            "won": self._won,
            "admissible_actions": None if (self._terminated or self._truncated) else self.admissible_actions(),
            "step": self._step,
        }
        info.update(self._extra_info())
        info.update(extra)
        return info


def _coerce_action(action: Any, max_length: int) -> tuple[str, str | None]:
    """Turn whatever the caller passed into a clean ``str``; return (text, problem or None)."""
    if isinstance(action, np.str_):
        action = str(action)
    if isinstance(action, bytes):
        action = action.decode("utf-8", "replace")
    if not isinstance(action, str):
        return "", f"an action must be a str, got {type(action).__name__}; pass the action text"
    # lone surrogates (invalid UTF-8) would break every JSON/log consumer downstream
    action = action.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if len(action) > max_length:
        return action[:80], (
            f"the action is {len(action)} characters long, over the limit of {max_length}; send a shorter action"
        )
    return action, None


# ---- functional API over wrapped envs ---------------------------------------------------------
def _base(env) -> TextEnv:
    base = getattr(env, "unwrapped", env)
    if not isinstance(base, TextEnv):
        raise TypeError(f"expected a prover-gym env (made with gym.make('prover/...')), got {type(base).__name__}")
    return base


def snapshot(env) -> Snapshot:
    """Capture the exact state of ``env`` (a prover-gym env, wrapped or not)."""
    return _base(env).snapshot()


def restore(env, snap: Snapshot) -> None:
    """Put ``env`` exactly where ``snap`` was taken, step counter included.

    Works on any env made with the same id and kwargs, also a fresh one never reset. Raises
    ``SnapshotError`` (a ``ValueError``) when the id or the data differ.
    """
    base = _base(env)
    fresh = base._task_id is None or not _wrappers_reset(env)
    if fresh and isinstance(snap, Snapshot) and snap.env_id == base.env_id and snap.fingerprint == base.fingerprint():
        # reset it through its wrappers first (gymnasium's OrderEnforcing and env checker see a reset, by
        # their public API), on the snapshot's task, so the restore below loads nothing new; a snapshot
        # that does not fit is refused below with the env untouched
        task_id = snap.task_id if snap.task_id in base._task_index() else None
        env.reset(options={"task_id": task_id} if task_id is not None else None)
    base.restore(snap)


def _wrappers_reset(env) -> bool:
    """Whether every wrapper that tracks it (gymnasium's OrderEnforcing) has seen a reset."""
    layer = env
    while isinstance(layer, gym.Wrapper):
        if getattr(layer, "has_reset", True) is False:
            return False
        layer = layer.env
    return True


def branch(snap: Snapshot, n: int, **overrides) -> list[gym.Env]:
    """``n`` fresh, independent envs, each restored to ``snap``."""
    if n < 0:
        raise ValueError(f"branch() needs n >= 0, got {n}")
    kwargs = {**snap.make_kwargs, **overrides}
    envs = []
    for _ in range(n):
        env = gym.make(snap.env_id, **kwargs)
        restore(env, snap)
        envs.append(env)
    return envs
