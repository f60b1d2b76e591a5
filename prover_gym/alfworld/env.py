"""``prover/ALFWorld-v0``: ALFWorld's text games on the real engine (textworld ``PddlEnv`` with the
Alfred demangler, infos and handcoded-expert wrappers), with exact, fast snapshots.

Actions are the engine's own commands (``go to countertop 1``, ``take apple 1 from countertop 1``,
``move apple 1 to fridge 1``, ...); ``info["admissible_actions"]`` lists them. A command outside
that list gets the engine's ``Nothing happens.``, counts as a step and changes nothing
(``info["error"]`` says why). Reward 1.0 when the goal is reached, which ends the episode;
``max_steps`` (50, as verl-agent) truncates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple

from prover_gym.alfworld import data as alf_data
from prover_gym.alfworld.engine import AlfredEngine, EngineError
from prover_gym.alfworld.generator import TASK_TYPES
from prover_gym.core import Outcome, TextEnv


class AlfState(NamedTuple):
    """The env's state in a snapshot: the engine's, and when the goal object was taken (the pivot)."""

    engine: Any  # prover_gym.alfworld.engine.EngineState
    taken_at: int | None


# task types whose goal needs a transform on the way (heat, cool, clean): their pivot is where the object goes first
PIVOT_TASK_TYPES = ("pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_clean_then_place_in_recep")
_TASK_MARK = "Your task is to: "


# (env fingerprint, game path, task id) -> (the engine's state at the start, its feedback, the command that
# takes the goal object, the expert's budget from there): start="object" replays the expert's moves at
# every reset, ~3 ms a move; a group's rollouts, its verification and every later visit of a task in this
# process restore the recorded start instead (an exact restore: the snapshot contract).
_STARTS: OrderedDict[tuple[str, str, str], tuple[Any, str, str | None, int]] = OrderedDict()
_STARTS_MAX = 4096


def _inadmissible(command: str) -> str:
    return f"{command[:80]!r} is not an admissible command; choose one of info['admissible_actions']"


class ALFWorldEnv(TextEnv):
    """ALFWorld text env.

    Args:
        split: ``"train"``, ``"valid_seen"``, ``"valid_unseen"``; ``"test"`` = ``"valid_unseen"``.
        data: None for the bundled generated games; else an official json_2.1.x directory (with
            ``train/``, ``valid_seen/``, ``valid_unseen/``) or a folder of task dirs (with ``split="all"``;
            a split the folder lacks is an error).
        task_types: keep only these of the six task types (e.g. ``["pick_and_place_simple"]``).
        max_receptacles, num_distractors: the generator's difficulty knobs (None = every
            receptacle of the floor plan; distractor objects per game). Ignored for official data.
        num_games: use only the first N tasks of a generated split (before the task-type filter).
        expert: run the handcoded expert each step (``info["expert_plan"]``, ``expert_action()``);
            False is faster.
        grammar_patch: patch json_2.1.1 games exactly as alfworld's ``scripts/patch_tw-pddl.py``
            does (a ``help`` action, ``move X to Y``), so the 0.4.2 expert works on them.
        include_sliced: also load official ``*Sliced*`` tasks (AlfredTWEnv skips them).
        start: ``"room"`` (the original: the episode opens in the middle of the room) or ``"object"``:
            the handcoded expert's moves up to the goal object are played at reset (the agent stands
            where the object is, which it can now see), so the task is to take the object named in
            the goal, carry it to the receptacle the goal names and place it: every step is a
            decision the observation and goal text settle (needs ``expert=True``).
        invalid_to_expert: False (default, the env contract: a bad action keeps the state): a command
            outside the admissible list never reaches the engine, so the handcoded expert's plan stays
            as it was. True does as stock ALFWorld: the command goes to the engine (``Nothing
            happens.``, the world unchanged) and to the expert, which updates its own tracking from it,
            so its next plan can change (after ``""`` it is ``look``).
        budget_slack: with ``start="object"``, a per-task step budget of (the expert's remaining
            plan + ``budget_slack``), capped by ``max_steps``; 0 makes every wrong command final.

    The pivot (``start="object"``, heat / cool / clean tasks): once the goal object is taken, the next
    action decides where it goes: to the appliance the goal's transform needs, or elsewhere (straight
    to the target, where placing it untransformed loses the task). The final step's info carries
    ``pivot_step``: the 0-based index of that action in the episode, or None when the object was never
    taken (or no action followed); other task types and ``start="room"`` omit the key (DESIGN's contract).
    """

    env_id = "prover/ALFWorld-v0"

    def __init__(
        self,
        split: str = "train",
        data: str | None = None,
        *,
        max_steps: int = 50,
        task_types: list[str] | tuple[str, ...] | None = None,
        max_receptacles: int | None = None,
        num_distractors: int = 10,
        num_games: int | None = None,
        expert: bool = True,
        grammar_patch: bool = True,
        include_sliced: bool = False,
        start: str = "room",
        budget_slack: int | None = None,
        invalid_to_expert: bool = False,
        render_mode: str | None = None,
    ):
        task_types = list(task_types) if task_types is not None else None
        make_kwargs = dict(
            split=split,
            data=data,
            max_steps=max_steps,
            task_types=task_types,
            max_receptacles=max_receptacles,
            num_distractors=num_distractors,
            num_games=num_games,
            expert=expert,
            grammar_patch=grammar_patch,
            include_sliced=include_sliced,
        )
        if start != "room":
            make_kwargs.update(start=start, budget_slack=budget_slack)
        if invalid_to_expert:
            make_kwargs.update(invalid_to_expert=True)
        super().__init__(max_steps=max_steps, render_mode=render_mode, make_kwargs=make_kwargs)
        if start not in ("room", "object"):
            raise ValueError(f"start={start!r}; use 'room' (the original) or 'object' (where the goal object is)")
        if start == "object" and not expert:
            raise ValueError(
                "start='object' plays the handcoded expert's moves to the object at reset: it needs expert=True"
            )
        if budget_slack is not None and (start != "object" or not isinstance(budget_slack, int) or budget_slack < 0):
            raise ValueError(f"budget_slack={budget_slack!r} needs start='object' and an int >= 0")
        self.start, self.budget_slack = start, budget_slack
        if not isinstance(invalid_to_expert, bool):
            raise ValueError(
                f"invalid_to_expert={invalid_to_expert!r}; use False (bad actions keep the state) or "
                "True (stock: the expert sees them)"
            )
        self.invalid_to_expert = invalid_to_expert
        self._budgets: dict[str, int] = {}  # task id -> the expert's plan length from the start state
        self._takes: dict[str, str] = {}  # task id -> the command that takes the goal object (start="object")
        self._taken_at: int | None = None  # the step (1-based) whose action took the goal object
        for t in task_types or ():
            if t not in TASK_TYPES:
                raise ValueError(f"task_types: unknown task type {t!r}; use some of {list(TASK_TYPES)}")
        if max_receptacles is not None and (not isinstance(max_receptacles, int) or max_receptacles < 1):
            raise ValueError(f"max_receptacles must be None or a positive int, got {max_receptacles!r}")
        if not isinstance(num_distractors, int) or num_distractors < 0:
            raise ValueError(f"num_distractors must be a non-negative int, got {num_distractors!r}")
        self.split = split
        self._knobs: dict[str, Any] = dict(max_receptacles=max_receptacles, num_distractors=num_distractors)
        if data is None:
            self._official = None
            self._ids = alf_data.generated_task_ids(split, task_types, num_games)
            source = [alf_data.GENERATOR_VERSION, alf_data.canonical_split(split), max_receptacles, num_distractors]
        else:
            games = alf_data.official_games(Path(data), split, include_sliced=include_sliced)
            if task_types is not None:
                games = {k: v for k, v in games.items() if alf_data.traj_info(v)["task_type"] in task_types}
            self._official = games
            self._ids = sorted(games)
            digest = hashlib.sha256()
            for k in self._ids:
                digest.update(k.encode() + b"\0" + games[k].read_bytes())
            source = ["official", digest.hexdigest(), grammar_patch and alf_data.PATCH_VERSION]
        self._grammar_patch = grammar_patch
        self._fingerprint = hashlib.sha256(
            json.dumps(
                [self.env_id, source, self._ids, max_steps, expert]
                + ([start, budget_slack] if start != "room" else [])
                + (["invalid_to_expert"] if invalid_to_expert else [])
            ).encode()
        ).hexdigest()
        self.engine = AlfredEngine(expert=expert)
        self._meta: dict = {}

    # ---- games --------------------------------------------------------------------------------
    def game_path(self, task_id: str) -> Path:
        """The game.tw-pddl of ``task_id`` (generated and checked on first use for bundled games)."""
        if self._official is None:
            return alf_data.generated_game(
                task_id,
                self._checker(),
                max_receptacles=self._knobs["max_receptacles"],
                num_distractors=self._knobs["num_distractors"],
                budget=max(self.max_steps, 50),
            )
        game = self._official[task_id]
        return alf_data.patched_game(game) if self._grammar_patch else game

    def _checker(self) -> AlfredEngine:
        """The engine that checks new games with the handcoded expert (ours, unless expert=False)."""
        if self.engine.expert_enabled:
            return self.engine
        if getattr(self, "_expert_engine", None) is None:
            self._expert_engine = AlfredEngine(expert=True)
        return self._expert_engine

    def _enter(self, task_id: str) -> Path:
        if self._meta.get("task_id") == task_id and self.engine.game == self._meta["path"]:
            return Path(self._meta["path"])
        path = self.game_path(task_id)
        try:
            if self.engine.game != str(path):
                self.engine.load(str(path))
            info = alf_data.traj_info(Path(path))
        except (EngineError, alf_data.DataError):
            if self._official is not None:
                raise
            # a damaged cached game (truncated file, edited by hand): generate it again, never use it
            shutil.rmtree(path.parent, ignore_errors=True)
            alf_data.traj_info.cache_clear()
            path = self.game_path(task_id)
            self.engine.load(str(path))
            info = alf_data.traj_info(Path(path))
        intro = self.engine.initial_feedback()
        task = intro.split(_TASK_MARK, 1)[1].strip() if _TASK_MARK in intro else ""
        self._meta = {**info, "task": task, "path": str(path), "task_id": task_id}
        return path

    # ---- TextEnv hooks ----------------------------------------------------------------------
    def task_ids(self) -> list[str]:
        """The split's task ids (game paths, or generated ``split/NNNNN`` ids)."""
        return self._ids

    def task(self) -> str:
        """The current game's goal text."""
        return self._meta.get("task", "")

    def fingerprint(self) -> str:
        """A digest of the data and settings; snapshots restore only into an env with the same one."""
        return self._fingerprint

    def _load_task(self, task_id: str) -> str:
        path = self._enter(task_id)
        self.engine.reset()
        if self.start == "room":
            return self.engine.feedback()
        self._taken_at = None
        key = (self._fingerprint, str(path), task_id)
        memo = _STARTS.get(key)
        if memo is not None:
            _STARTS.move_to_end(key)
            state, feedback, take, budget = memo
            self.engine.restore(state)
            if take is not None:
                self._takes[task_id] = take
            self._budgets[task_id] = budget
            return feedback
        feedback = self._walk_to_start(task_id)
        _STARTS[key] = (self.engine.snapshot(), feedback, self._takes.get(task_id), self._budgets[task_id])
        while len(_STARTS) > _STARTS_MAX:
            _STARTS.popitem(last=False)
        return feedback

    def _walk_to_start(self, task_id: str) -> str:
        """start="object": the expert's moves from the loaded game's first state to just before it takes the
        goal object (and, on a task's first visit, the length of its plan from there: the budget)."""
        feedback = self.engine.feedback()
        for _ in range(self.max_steps):  # the expert's moves until its next command takes the object
            plan = self.engine.expert_plan()
            if not plan or plan[0].startswith("take "):
                if plan:
                    self._takes[task_id] = plan[0]
                break
            feedback, _ = self.engine.step(plan[0])
        if task_id not in self._budgets:  # the expert's steps from here to the goal (its plan is one step)
            start, steps = self.engine.snapshot(), 0
            while steps < self.max_steps:
                plan = self.engine.expert_plan()
                if not plan:
                    break
                steps += 1
                if self.engine.step(plan[0])[1]:
                    break
            self.engine.restore(start)
            self._budgets[task_id] = steps
        return feedback

    def _step_limit(self) -> int:
        if self.budget_slack is None or self._task_id is None:
            return self.max_steps
        return min(self.max_steps, self._budgets[self._task_id] + self.budget_slack)

    def _apply(self, action: str) -> Outcome:
        command = action.strip()
        admissible = command in self.engine.admissible()
        if not admissible and not self.invalid_to_expert:
            return Outcome(observation="Nothing happens.", info={"error": _inadmissible(command)})
        # as stock: the engine (``Nothing happens.``, no state change) and the handcoded expert see the
        # command as sent (the expert tracks its own progress from it, so its next plan can change)
        feedback, won = self.engine.step(action)
        if not admissible:
            return Outcome(observation=feedback, info={"error": _inadmissible(command)})
        if self._taken_at is None and command == self._takes.get(self._task_id or ""):
            self._taken_at = self._step
        return Outcome(observation=feedback, reward=1.0 if won else 0.0, terminated=won, won=won)

    def _get_state(self) -> Any:
        return AlfState(self.engine.snapshot(), self._taken_at)

    def _set_state(self, state: Any) -> None:
        assert self._task_id is not None  # restore() sets it before calling this hook
        state, taken_at = state.engine, state.taken_at
        if self.start != "room" and self._task_id not in self._budgets:  # a snapshot made in another env
            self._load_task(self._task_id)
        self._taken_at = taken_at
        path = self._enter(self._task_id)
        if state.game != str(path):  # made on another machine or cache: same game, other path
            state = dataclasses.replace(state, game=str(path), token=(None, -1))
        self.engine.restore(state)

    def admissible_actions(self) -> list[str]:
        """The commands the game accepts now (the ALFWorld admissible list)."""
        return self.engine.admissible()

    def _state_key_material(self) -> Any:
        # EngineState carries the operator path; two paths to the same world state are one state
        return self.engine.facts()  # the task id (in the key already) names the game

    def expert_action(self) -> str | None:
        """The handcoded expert's next command, or None when the episode is over or the expert has none."""
        if self._task_id is None or self._terminated or self._truncated:
            return None
        plan = self.engine.expert_plan()
        return plan[0] if plan else None

    def hasty_action(self) -> str | None:
        """What a hasty demonstrator does instead of the expert here, or None where it does as the
        expert: at a closed receptacle the expert is about to open and fill, it moves the object in
        straight away (not admissible while closed: "Nothing happens", a step lost)."""
        if self._task_id is None or self._terminated or self._truncated:
            return None
        plan = self.engine.expert_plan()
        if not plan or not plan[0].startswith("open "):
            return None
        state = self.engine.snapshot()  # the expert's move after opening, then back (engine state only)
        try:
            self.engine.step(plan[0])
            after = self.engine.expert_plan()
        finally:
            self.engine.restore(state)
        return after[0] if after and after[0].startswith("move ") else None

    def at_pivot(self) -> bool:
        """Whether the next action is the pivot: the goal object was taken by the last action, in a
        heat / cool / clean task from ``start="object"``."""
        ended = self._terminated or self._truncated
        return self._in_pivot_task() and self._taken_at is not None and self._step == self._taken_at and not ended

    def _in_pivot_task(self) -> bool:
        """A heat / cool / clean task from ``start="object"``: the settings whose pivot the env records."""
        return self.start != "room" and self._meta.get("task_type") in PIVOT_TASK_TYPES

    def skip_action(self) -> str | None:
        """At the pivot, the move that skips the transform: straight to the receptacle the goal names
        (found by playing the expert ahead on the engine, then back); None elsewhere."""
        if not self.at_pivot():
            return None
        state = self.engine.snapshot()
        try:
            for _ in range(self.max_steps):
                plan = self.engine.expert_plan()
                if not plan:
                    return None
                if plan[0].startswith("move "):
                    target = plan[0].split(" to ", 1)[1]
                    return f"go to {target}"
                self.engine.step(plan[0])
        finally:
            self.engine.restore(state)
        return None

    def pivot_step(self) -> int | None:
        """The 0-based index of the action that followed taking the goal object (heat / cool / clean
        tasks from ``start="object"``: the appliance or not), or None (see the class docstring)."""
        if not self._in_pivot_task() or self._taken_at is None:
            return None
        return self._taken_at if self._step > self._taken_at else None

    def _extra_info(self) -> dict:
        info = {
            "task_type": self._meta.get("task_type", ""),
            "floor_plan": self._meta.get("floor_plan", ""),
            "expert_plan": self.engine.expert_plan() if self._task_id is not None else [],
        }
        if (self._terminated or self._truncated) and self._in_pivot_task():  # the deciding action (or None)
            info["pivot_step"] = self.pivot_step()
        return info
