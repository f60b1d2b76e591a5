"""prover-gym envs as environments of TRL's ``GRPOTrainer`` (its ``environment_factory`` mode).

    from prover_gym.integrations.trl import environment_factory, task_dataset

    trainer = GRPOTrainer(
        model=...,
        train_dataset=task_dataset("prover/WebShop-v0", {"split": "train"}, n=256),
        environment_factory=environment_factory("prover/WebShop-v0", split="train"),
        args=GRPOConfig(...),
    )

TRL makes one environment per rollout, calls ``reset(**row)`` with the dataset row (its ``task_id``
picks the task; the returned observation is appended to the prompt), exposes the public methods as
tools the model calls (here one: ``act(action)``, the env's action text) and scores the finished
rollout with ``get_reward()`` (the episode's total reward). TRL is not imported here; pin it with the
``trl`` extra (``pip install 'prover-gym[trl]'``, tested with trl 1.16.0).

What ProVer needs that this interface does not give: TRL's rollout loop owns generation and the
environment instances, and hands the trainer only prompts, completions and rewards. ProVer needs the
env's state *before* each turn (a ``snapshot``) to run continuations from inside a trajectory, and the
token spans of each turn to add the segment's advantage. The environments here take a snapshot at every
turn (``snapshots``), so a TRL user can verify a segment outside the trainer (``verify_segment`` over
``rollout_from`` continuations), but crediting it inside ``GRPOTrainer`` would need a custom
``rollout_func`` and advantage hook; the bundled trainer (``prover-gym-train method=prover``) does both.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym

import prover_gym  # noqa: F401  (registers the ids)
from prover_gym.core import snapshot as _snapshot

DONE_NOTE = "The episode has ended; no more actions are accepted."


class ProverGymEnvironment:
    """One prover-gym env behind TRL's environment protocol (``reset``, tool methods, ``get_reward``)."""

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[dict] = {}

    def __init__(self):
        if not self.env_id:
            raise TypeError("use environment_factory(env_id, **kwargs) to make the environment class")
        self._env = gym.make(self.env_id, **self.env_kwargs)
        self._reward, self._done, self._info = 0.0, True, {}
        self.snapshots: list = []  # the state before each turn of the current episode (for ProVer-style analysis)

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the row's task (``task_id``; a seeded draw without one); returns the first observation."""
        options = {"task_id": str(task_id)} if task_id is not None else None
        obs, info = self._env.reset(seed=None if options else 0, options=options)
        self._reward, self._done, self._info = 0.0, False, info
        self.snapshots = [_snapshot(self._env)]
        return self._render(obs, info)

    def act(self, action: str) -> str:
        """Take one action in the environment and see what happens.

        Args:
            action: The action to take, written exactly as the observation's list of valid actions shows it.

        Returns:
            The environment's next observation.
        """
        if self._done:
            return DONE_NOTE
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._reward += float(reward)
        self._done, self._info = bool(terminated or truncated), info
        if not self._done:
            self.snapshots.append(_snapshot(self._env))
        text = self._render(obs, info)
        return text + ("\n" + ("Task complete." if info.get("won") else DONE_NOTE) if self._done else "")

    def get_reward(self) -> float:
        """The episode's total reward so far (1.0 for a win in ALFWorld and Search-QA; WebShop's score)."""
        return self._reward

    def _render(self, obs: str, info: dict) -> str:
        actions = info.get("admissible_actions")
        if actions:
            obs += "\nValid actions: " + ", ".join(actions[:50])
        return obs


def environment_factory(env_id: str, **env_kwargs: Any) -> type[ProverGymEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)``; each instance is a fresh ``gym.make(env_id, ...)``."""
    from prover_gym.registration import ENV_IDS

    try:
        gym.spec(env_id)
    except gym.error.Error:
        raise ValueError(f"env_id={env_id!r} is not registered; use one of {sorted(ENV_IDS)}") from None
    name = env_id.split("/")[-1].replace("-", "_") + "Environment"
    return type(name, (ProverGymEnvironment,), {"env_id": env_id, "env_kwargs": dict(env_kwargs)})


def task_dataset(env_id: str, env_kwargs: dict, n: int | None = None, instruction: str | None = None):
    """A ``datasets.Dataset`` of the split's tasks: ``prompt`` (one user message with the task) and ``task_id``."""
    from datasets import Dataset

    from prover_gym.core import TextEnv

    env = gym.make(env_id, **env_kwargs)
    base = env.unwrapped
    assert isinstance(base, TextEnv)
    ids = base.task_ids()[: n or None]
    rows = []
    for tid in ids:
        env.reset(options={"task_id": tid})
        task = base.task()
        text = instruction or "Solve the task by calling the act tool with one valid action at a time."
        rows.append({"prompt": [{"role": "user", "content": f"{text}\nTask: {task}"}], "task_id": tid})
    env.close()
    return Dataset.from_list(rows)
