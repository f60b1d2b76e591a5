"""The real ALFWorld text engine (textworld ``PddlEnv`` + alfworld's Alfred wrappers), made fast
and branchable.

``AlfredEngine`` drives one ``PddlEnv`` wrapped exactly as ``AlfredTWEnv`` does it
(``AlfredDemangler`` -> ``AlfredInfos`` -> ``AlfredExpert(handcoded)``) and adds:

* **Native snapshots.** libdownward keeps every visited state in its registry and exports
  ``get_state_id`` / ``set_state_id`` (not bound by ``fast_downward.load_lib``); together with a copy
  of ``PddlState``'s Python-side fact mirror, the wrappers' state and the expert, that is the whole
  game state. Restoring is a table swap, independent of the episode length.
* **Portable snapshots.** State ids are process-local and die with the game's registry, so every
  snapshot also carries the list of FD operator ids applied since the start; restoring elsewhere
  replays those operators silently (no text rendering) from the game's initial state.
* **Speed-ups that keep the text byte-identical** (tested): the TatSu parses of grammar templates
  and conjunctive queries are memoised, the PDDL->SAS translations and the TWL2 grammar are cached
  per game, and ``reset`` of a loaded game restores its initial snapshot instead of re-translating.
  The patches are active only inside this engine's calls, so the stock engine next to it stays stock.

The engine relies on private attributes of ``textworld==1.7.0`` and ``fast-downward-textworld==20.6.4``;
``check_versions`` refuses others with a message naming the pins.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import itertools
import json
import os
import pickle
import random
import re
import sys
import threading
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

PINNED = {"textworld": "1.7.0", "fast-downward-textworld": "20.6.4", "alfworld": "0.4.2"}
_LOCK = threading.RLock()  # the FD translator and the memo patches are process-global
_UIDS = itertools.count()


class EngineError(RuntimeError):
    """The ALFWorld engine is missing, the wrong version, or a game cannot be loaded."""


def check_versions() -> None:
    """Raise naming the fix unless the installed alfworld and textworld are the versions the engine's patches were
    written against."""
    from importlib import metadata

    problems = []
    for name, want in PINNED.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != want:
            problems.append(f"{name}=={want} (found {have or 'nothing'})")
    if problems:
        raise EngineError(
            "prover/ALFWorld-v0 needs the pinned engine: "
            + ", ".join(problems)
            + '. Install it with: pip install alfworld==0.4.2 "textworld[pddl]==1.7.0" '
            "(with the virtualenv's bin first on PATH, so fast-downward-textworld builds)."
        )


def _prepare_import() -> None:
    # importing alfworld creates $ALFWORLD_DATA (default ~/.cache/alfworld); keep it in our cache
    if "ALFWORLD_DATA" not in os.environ:
        from prover_gym.cache import cache_dir

        os.environ["ALFWORLD_DATA"] = str(cache_dir() / "alfworld_data")


# ---- memoisation patches ----------------------------------------------------------------------
_TEXTGEN_MEMO: dict = {}
_QUERY_MEMO: dict = {}
_TRANSLATION_MEMO: OrderedDict[tuple, tuple] = OrderedDict()
_LOGIC_MEMO: OrderedDict[tuple, Any] = OrderedDict()


@functools.cache
def _patches() -> tuple:
    """(owner, attribute, memoised replacement) for each patched engine function, built once."""
    import fast_downward
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

    orig_parse = textgen._parse_and_convert
    orig_query = Rule.__dict__["parse_conjunctive_query"]
    orig_logic = pddl_logic.GameLogic

    def copy_context(context):
        # the stock version deep-copies entity infos and variables that derivation never mutates
        # (it only adds keys to the two dicts), so copying the dicts gives the same text
        return {
            "state": context["state"],
            "facts": context["facts"],
            "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]),
            "entity_infos": context["entity_infos"],
        }

    def symbol_copy(self, context):
        new = copy.deepcopy(self, {id(self.context): self.context})  # the old context is replaced anyway
        new.context = copy_context(context)
        return new

    def logic_memo(domain, grammar):
        # Games of one domain differ in their grammar only by the task sentence: the logic is parsed
        # once per template (the sentence blanked) and each game gets the template's rules with its
        # own "task" rule, parsed alone (a few ms). Rules are looked up by name when text is derived,
        # so the text is the same as a full parse's (tested).
        template, task = _split_task(grammar)
        key = (domain, template if task is not None else grammar)
        logic = _LOGIC_MEMO.get(key)
        if logic is None:
            logic = _LOGIC_MEMO[key] = orig_logic(domain=domain, grammar=key[1])
            _trim(_LOGIC_MEMO, 64)
        else:
            _LOGIC_MEMO.move_to_end(key)
        if task is None:
            return logic
        game_logic = copy.copy(logic)  # shares the template's actions and types (read-only after load)
        rules = textgen.ContextSensitiveGrammar()
        rules._rules.update({name: list(alternatives) for name, alternatives in logic.grammar._rules.items()})
        rules._rules["task"] = textgen.ContextSensitiveGrammar.parse(json.dumps({"task": [{"rhs": task}]}))._rules[
            "task"
        ]
        game_logic.grammar = rules
        return game_logic

    def parse_memo(text, rule_name=None, trace=False, **kwargs):
        if trace or kwargs:
            return orig_parse(text, rule_name=rule_name, trace=trace, **kwargs)
        key = (text, rule_name)
        parsed = _TEXTGEN_MEMO.get(key)
        if parsed is None:
            parsed = _TEXTGEN_MEMO[key] = orig_parse(text, rule_name=rule_name)
        return copy.deepcopy(parsed)  # derive() mutates the symbols' contexts

    def query_memo(cls, expr):
        rule = _QUERY_MEMO.get(expr)
        if rule is None:
            rule = _QUERY_MEMO[expr] = orig_query.__func__(cls, expr)
        return rule

    class _CachedFD:
        def __getattr__(self, name):
            return getattr(fast_downward, name)

        @staticmethod
        def pddl2sas(domain, problem, verbose=False, optimize=False):
            # the "optimized" translation only feeds the FD replanner (the `planner` expert and
            # `policy_commands`), which this engine never calls: hand it the plain task instead
            key = (domain, problem)
            hit = _TRANSLATION_MEMO.get(key)
            if hit is None:
                hit = _stored_translation(domain, problem)
            if hit is None:
                argv = list(sys.argv)
                try:
                    hit = fast_downward.pddl2sas(domain, problem, verbose=verbose, optimize=False)
                finally:
                    sys.argv[:] = argv  # pddl2sas overwrites sys.argv
                _store_translation(domain, problem, hit)
            _TRANSLATION_MEMO[key] = hit
            _TRANSLATION_MEMO.move_to_end(key)
            _trim(_TRANSLATION_MEMO, 64)
            return hit

    return (
        (textgen, "_parse_and_convert", parse_memo),
        (textgen, "copy_context", copy_context),
        (textgen.Symbol, "copy", symbol_copy),
        (Rule, "parse_conjunctive_query", classmethod(query_memo)),
        (pddl_logic, "fast_downward", _CachedFD()),
        (pddl_logic, "GameLogic", logic_memo),
    )


_TASK_RULE = re.compile(r'("task": \[\s*\{\s*"rhs": )("(?:[^"\\]|\\.)*")(\s*\}\s*\])')


def _split_task(grammar: str) -> tuple[str, str | None]:
    """(the grammar with its task sentence blanked, the sentence), or (grammar, None) when the grammar
    does not have exactly one plain ``"task": [{"rhs": "..."}]`` rule."""
    found = list(_TASK_RULE.finditer(grammar))
    if len(found) != 1:
        return grammar, None
    m = found[0]
    return grammar[: m.start(2)] + '"(the task)"' + grammar[m.end(2) :], json.loads(m.group(2))


# The PDDL->SAS translation of a game (fast_downward's grounding: most of a game's load time) is
# stored in the user cache, keyed by the domain and problem text and the pinned versions, so every
# worker process and every later run loads it (a pickle, < 1 ms) instead of translating again.
_TRANSLATION_VERSION = 1


def _translation_path(domain: str, problem: str):
    import hashlib

    from prover_gym.cache import cache_dir

    key = json.dumps([_TRANSLATION_VERSION, PINNED, domain, problem]).encode()
    digest = hashlib.sha256(key).hexdigest()
    return cache_dir() / "alfworld_sas" / digest[:2] / f"{digest}.pkl.z"


def _stored_translation(domain: str, problem: str):
    import zlib

    path = _translation_path(domain, problem)
    try:
        return pickle.loads(zlib.decompress(path.read_bytes()))
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001  (a damaged entry is translated again and replaced)
        return None


def _store_translation(domain: str, problem: str, hit) -> None:
    import zlib

    from prover_gym.cache import atomic_write

    path = _translation_path(domain, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, zlib.compress(pickle.dumps(hit, protocol=pickle.HIGHEST_PROTOCOL), 1))
    except OSError:  # a read-only or full cache: the translation is still used, only not kept
        pass


def _trim(table: OrderedDict, size: int) -> None:
    """Drop the oldest entries of an LRU table beyond ``size``."""
    while len(table) > size:
        table.popitem(last=False)


@contextlib.contextmanager
def _fast(rng_state):
    """Run engine code with the memo patches on and this engine's private ``random`` state (the
    handcoded expert draws from the global ``random`` module). Yields a holder for the new state."""
    with _LOCK:
        saved = [
            (owner, name, vars(owner)[name]) for owner, name, _ in _patches()
        ]  # as stored (a classmethod stays one)
        for owner, name, patched in _patches():
            setattr(owner, name, patched)
        outer = random.getstate()
        random.setstate(rng_state)
        holder: dict = {}
        try:
            yield holder
        finally:
            holder["rng"] = random.getstate()
            random.setstate(outer)
            for owner, name, original in saved:
                setattr(owner, name, original)


# ---- snapshots --------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineState:
    """Portable engine state: enough to rebuild the game anywhere from its initial state."""

    game: str  # game file path
    ops: tuple  # FD operator ids applied since the initial state
    feedback: str
    last_command: str
    moves: int
    expert: bytes  # pickled HandCodedTWAgent (b"" without expert)
    prev_command: str
    expert_plan: tuple
    rng: tuple  # this engine's `random` state
    expert_error: str  # why the handcoded expert gave up in this episode ("" while it works)
    token: tuple  # (engine uid, serial): finds the native record in the process that made it


@dataclass
class _Native:
    state_id: int
    facts: dict
    vars_by_name: dict
    vars_by_type: dict
    var_counts: Counter
    operators: dict
    game_state: Any
    prev_state: Any
    last_action: Any


class AlfredEngine:
    """One ALFWorld game engine. Not thread-safe; one per env."""

    def __init__(self, *, expert: bool = True, native_cache: int = 256):
        check_versions()
        _prepare_import()
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
        from textworld.envs.pddl import PddlEnv

        infos = textworld.EnvInfos(admissible_commands=True, won=True, facts=expert, extras=["gamefile"])
        self._pddl = PddlEnv(infos)
        lib = self._pddl.downward_lib
        lib.get_state_id.argtypes, lib.get_state_id.restype = [], ctypes.c_int
        lib.set_state_id.argtypes, lib.set_state_id.restype = [ctypes.c_int], None
        self._lib = lib
        inner = AlfredInfos(AlfredDemangler(self._pddl, shuffle=False))
        self._expert_wrapper = AlfredExpert(inner, expert_type="handcoded") if expert else None
        self._top = self._expert_wrapper or inner
        self.expert_enabled = expert
        self._uid = (os.getpid(), next(_UIDS))
        self._serial = itertools.count()
        self._natives: OrderedDict[int, _Native] = OrderedDict()
        self._native_cache = native_cache
        self.game: str | None = None
        self._initial: tuple[EngineState, _Native] | None = None
        self._ops: list[int] = []
        self._rng = random.Random(0).getstate()
        self.expert_error = ""

    # ---- game lifecycle ---------------------------------------------------------------------
    def load(self, game: str, *, seed: int = 0) -> None:
        """Load ``game`` (a game.tw-pddl path with traj_data.json beside it) and record its initial state."""
        self._rng = random.Random(seed).getstate()
        self.expert_error = ""
        self._natives.clear()
        with _fast(self._rng) as out:
            try:
                self._top.load(game)
                self._top.reset()
            except Exception as exc:  # noqa: BLE001 - the engine raises many kinds
                self.game = None
                raise EngineError(f"cannot load ALFWorld game {game}: {type(exc).__name__}: {exc}") from exc
        self._rng = out["rng"]
        self.game = game
        self._ops = []
        self._initial = (self._portable(), self._save_native())

    def initial_feedback(self) -> str:
        """The loaded game's opening text (its task sentence included)."""
        if self._initial is None:
            raise EngineError("load() a game first")
        return self._initial[0].feedback

    def reset(self) -> None:
        """Back to the loaded game's initial state (a restore, no re-translation)."""
        if self._initial is None:
            raise EngineError("load() a game before reset()")
        self._restore_native(*self._initial)

    def step(self, command: str) -> tuple[str, bool]:
        """Apply an admissible ``command``; returns (feedback, won)."""
        ew = self._expert_wrapper
        with _fast(self._rng) as out:
            if ew is None:
                state, _, _ = self._top.step(command)
            else:  # AlfredExpert.step, with the expert's own failures contained
                state, _, _ = ew._wrapped_env.step(command)
                ew.state = state
                ew.prev_command = str(command)
                if self.expert_error:
                    state["extra.expert_plan"] = []
                else:
                    try:
                        ew._gather_infos()
                    except Exception as exc:  # noqa: BLE001 - the handcoded expert can crash or time out
                        self.expert_error = f"{type(exc).__name__}: {exc}"
                        state["extra.expert_plan"] = []
        self._rng = out["rng"]
        last = self._pddl._last_action
        if last is not None:
            self._ops.append(int(last.id))
        return state.feedback, bool(state["won"])

    # ---- views ------------------------------------------------------------------------------
    @property
    def state(self):
        """The current textworld game state (feedback, admissible commands, expert plan, won)."""
        return self._top.state

    def feedback(self) -> str:
        """The game's text after the last command."""
        return self.state.feedback

    def admissible(self) -> list[str]:
        """The commands the game accepts now."""
        return list(self.state["admissible_commands"])

    def expert_plan(self) -> list[str]:
        """The handcoded expert's remaining plan from here ([] where the expert is off or failed)."""
        if not self.expert_enabled or self.expert_error:
            return []
        return list(self.state.get("extra.expert_plan") or [])

    def facts(self) -> tuple[str, ...]:
        """The current world state as sorted fact strings (path-independent, unlike ``ops``)."""
        return tuple(sorted(str(f) for group in self._pddl._pddl_state._facts.values() for f in group))

    # ---- snapshots --------------------------------------------------------------------------
    def snapshot(self) -> EngineState:
        """The engine's state as a portable ``EngineState`` (the game and its operator path); a native copy is kept in a
        small cache so restoring into this engine is fast."""
        portable = self._portable()
        self._natives[portable.token[1]] = self._save_native()
        _trim(self._natives, self._native_cache)
        return portable

    def restore(self, snap: EngineState) -> None:
        """Put the game in the state of ``snap``: from the native cache when this engine took it, else by replaying its
        operator path."""
        native = self._natives.get(snap.token[1]) if snap.token[0] == self._uid and snap.game == self.game else None
        if native is not None:
            self._natives.move_to_end(snap.token[1])
            self._restore_native(snap, native)
        else:
            self._restore_portable(snap)

    def _portable(self) -> EngineState:
        st = self.state
        ew = self._expert_wrapper
        return EngineState(
            game=self.game or "",
            ops=tuple(self._ops),
            feedback=st.feedback,
            last_command=st.get("last_command") or "",
            moves=self._pddl._moves,
            expert=pickle.dumps(ew._handcoded_expert, protocol=pickle.HIGHEST_PROTOCOL) if ew else b"",
            prev_command=ew.prev_command if ew else "",
            expert_plan=tuple(self.expert_plan()),
            rng=self._rng,
            expert_error=self.expert_error,
            token=(self._uid, next(self._serial)),
        )

    def _save_native(self) -> _Native:
        ps = self._pddl._pddl_state
        return _Native(
            state_id=self._lib.get_state_id(),
            facts={k: set(v) for k, v in ps._facts.items()},
            vars_by_name=dict(ps._vars_by_name),
            vars_by_type={k: set(v) for k, v in ps._vars_by_type.items()},
            var_counts=Counter(ps._var_counts),
            operators=dict(getattr(ps, "_operators", {})),
            game_state=self._pddl.state,
            prev_state=self._pddl.prev_state,
            last_action=self._pddl._last_action,
        )

    def _restore_native(self, snap: EngineState, native: _Native) -> None:
        ps = self._pddl._pddl_state
        self._lib.set_state_id(native.state_id)
        ps._facts = defaultdict(set, {k: set(v) for k, v in native.facts.items()})
        ps._vars_by_name = dict(native.vars_by_name)
        ps._vars_by_type = defaultdict(set, {k: set(v) for k, v in native.vars_by_type.items()})
        ps._var_counts = Counter(native.var_counts)
        ps._operators = dict(native.operators)
        self._pddl.state = native.game_state
        self._pddl.prev_state = native.prev_state
        self._pddl._last_action = native.last_action
        self._set_wrappers(snap, native.game_state)

    def _set_wrappers(self, snap: EngineState, game_state) -> None:
        self._pddl._moves = snap.moves
        self._ops = list(snap.ops)
        self._rng = snap.rng
        self.expert_error = snap.expert_error
        ew = self._expert_wrapper
        if ew is not None:
            ew.state = game_state
            ew._handcoded_expert = pickle.loads(snap.expert)
            ew.prev_command = snap.prev_command
        else:
            self._top.state = game_state

    def _restore_portable(self, snap: EngineState) -> None:
        """Rebuild from the game's initial state by applying the operator ids, rendering only once."""
        from textworld.core import GameState

        if snap.game != self.game or self._initial is None:
            self.load(snap.game)
        assert self._initial is not None  # load() records it
        init_snap, init_native = self._initial
        self._restore_native(init_snap, init_native)
        ps = self._pddl._pddl_state
        with _fast(self._rng):
            for op_id in snap.ops:
                ps.all_applicable_actions()
                if op_id not in ps._operators:
                    raise EngineError(
                        f"snapshot operator {op_id} is not applicable in {snap.game}; the game file changed"
                    )
                ps.apply(_OpRef(op_id))
            state = GameState()
            state.last_command = snap.last_command
            state.feedback = state.raw = snap.feedback
            self._pddl.state = state
            self._pddl._last_action = None
            self._pddl._gather_infos()
            if self.expert_enabled:
                state["extra.expert_plan"] = list(snap.expert_plan)
        self._pddl.prev_state = None
        self._set_wrappers(snap, state)


class _OpRef:
    """What ``PddlState.apply`` reads from an action: its operator id."""

    __slots__ = ("id",)

    def __init__(self, op_id: int):
        self.id = op_id


def stock_stack(game: str):
    """The unpatched engine stack of ``AlfredTWEnv`` on ``game`` (loaded, not reset): the reference
    our text is compared with and the baseline of ``benchmarks/bench_alfworld.py``."""
    check_versions()
    _prepare_import()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
    from textworld.envs.pddl import PddlEnv

    infos = textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"])  # the expert adds facts
    env = AlfredExpert(AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False)), expert_type="handcoded")
    env.load(game)
    return env
