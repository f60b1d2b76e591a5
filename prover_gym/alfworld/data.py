"""ALFWorld games: the bundled generated splits (built lazily, one game at a time, cached) and
official json_2.1.x directories (task dirs with ``game.tw-pddl`` and ``traj_data.json``).

Generated splits mirror ALFWorld's: ``train`` and ``valid_seen`` draw from the same floor plans,
``valid_unseen`` only from ALFRED's held-out floor plans (10, 219, 308, 424), never used in train.
``test`` is ``valid_unseen`` (ALFWorld's out-of-distribution evaluation). Task ``i`` of a split has
task type ``TASK_TYPES[i % 6]``; its floor plan and layout come from a seed derived from
``(split, i, attempt)``, and the first attempt whose game the handcoded expert wins within the
step budget is kept, with that winning walkthrough stored in the game file.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from functools import cache, lru_cache
from pathlib import Path

from prover_gym.alfworld.generator import (
    TASK_TYPES,
    UNSEEN_FLOOR_PLANS,
    Infeasible,
    available_floor_plans,
    generate_game,
    scene_type,
    write_game,
)
from prover_gym.cache import build_once, cache_dir

GENERATOR_VERSION = "alfworld-gen-v1"
SPLIT_SIZES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}  # ALFWorld's split sizes
SPLIT_ALIASES = {
    "test": "valid_unseen",
    "eval_in_distribution": "valid_seen",
    "eval_out_of_distribution": "valid_unseen",
}
MAX_ATTEMPTS = 40
PATCH_VERSION = "alfworld-patched-v2"  # v1 swapped in the package grammar and had no help action


class DataError(ValueError):
    """A games directory or game file is missing or malformed."""


def canonical_split(split: str) -> str:
    """``split`` with its aliases resolved (``test`` -> ``valid_unseen``, ...); a ValueError naming the valid ones
    otherwise."""
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLIT_SIZES:
        raise ValueError(f"split={split!r}; use one of {sorted(SPLIT_SIZES) + sorted(SPLIT_ALIASES)}")
    return split


# ---- generated games ---------------------------------------------------------------------------
def generated_root(max_receptacles: int | None, num_distractors: int) -> Path:
    """The cache folder of the games generated with these knobs."""
    knobs = f"r{max_receptacles if max_receptacles is not None else 'all'}-d{num_distractors}"
    return cache_dir() / GENERATOR_VERSION / knobs


def generated_task_ids(split: str, task_types=None, num_games: int | None = None) -> list[str]:
    """The generated ids of ``split`` (``num_games`` of them, default the split's size) of the given task types."""
    split = canonical_split(split)
    n = SPLIT_SIZES[split] if num_games is None else num_games
    wanted = set(task_types or TASK_TYPES)
    return [f"{split}/{i:05d}" for i in range(n) if TASK_TYPES[i % len(TASK_TYPES)] in wanted]


def task_type_of(task_id: str) -> str:
    """The task type of a generated task id (task types cycle over the ids)."""
    return TASK_TYPES[int(task_id.rsplit("/", 1)[1]) % len(TASK_TYPES)]


@cache
def split_floor_plans(split: str, task_type: str) -> tuple[int, ...]:
    """The AI2-THOR floor plans of ``split`` where ``task_type`` has valid goals (train / seen / unseen kept apart as in
    ALFWorld)."""
    from prover_gym.alfworld.generator import _constants

    valid = _constants().GOALS_VALID[task_type]
    plans = [n for n in available_floor_plans() if scene_type(n) in valid]
    if split == "valid_unseen":
        return tuple(n for n in plans if n in UNSEEN_FLOOR_PLANS)
    return tuple(n for n in plans if n not in UNSEEN_FLOOR_PLANS)


def generated_game(
    task_id: str, engine, *, max_receptacles: int | None, num_distractors: int, budget: int = 50
) -> Path:
    """The game file of a generated task, generating and checking it on first use (cached).

    ``engine`` (an ``AlfredEngine``) is used to check the game: the handcoded expert must win it
    within ``budget`` steps. It is left with the game loaded at its initial state.
    """
    split, index = task_id.rsplit("/", 1)
    task_type = task_type_of(task_id)

    def build(tmp: Path) -> dict:
        plans = split_floor_plans(split, task_type)
        rng = random.Random(f"{GENERATOR_VERSION}|{task_id}")
        for attempt in range(MAX_ATTEMPTS):
            floor_plan = rng.choice(plans)
            seed = rng.randrange(1 << 30)
            try:
                game = generate_game(
                    floor_plan, task_type, seed, max_receptacles=max_receptacles, num_distractors=num_distractors
                )
            except Infeasible:
                continue
            walkthrough = _expert_walkthrough(engine, str(write_game(game, tmp)), budget)
            if walkthrough is not None:
                write_game(game, tmp, walkthrough)
                return {
                    "task_id": task_id,
                    "task_type": task_type,
                    "floor_plan": floor_plan,
                    "seed": seed,
                    "attempt": attempt,
                    "walkthrough_len": len(walkthrough),
                    "version": GENERATOR_VERSION,
                }
        raise DataError(f"could not generate a solvable game for {task_id} in {MAX_ATTEMPTS} attempts")

    return build_once(generated_root(max_receptacles, num_distractors) / split / index, build) / "game.tw-pddl"


def _expert_walkthrough(engine, path: str, budget: int) -> list[str] | None:
    engine.load(path)
    commands = []
    for _ in range(budget):
        plan = engine.expert_plan()
        command = plan[0] if plan else "look"
        commands.append(command)
        _, won = engine.step(command)
        if won:
            return commands
        if engine.expert_error:
            return None
    return None


# ---- official games ----------------------------------------------------------------------------
def _split_dirs(root: Path) -> list[str]:
    """The folders of ``root`` that a ``split=`` can name: ALFWorld's three, and any other holding
    task dirs (official json_2.1.1 also ships ``valid_train/``)."""
    return sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir() and (d.name in SPLIT_SIZES or next(d.glob("*/*/traj_data.json"), None) is not None)
    )


def official_games(root: Path, split: str, *, include_sliced: bool = False) -> dict[str, Path]:
    """task id (the task dir relative to the split dir) -> game.tw-pddl, for solvable games, as
    ``AlfredTWEnv.collect_game_files`` selects them (no movable-receptacle tasks; sliced ones only
    with ``include_sliced``)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(
            f"ALFWorld data directory {root} does not exist; pass data= the json_2.1.x folder "
            "(the one holding train/, valid_seen/, valid_unseen/) or a folder of task dirs"
        )
    canonical = SPLIT_ALIASES.get(split, split)
    if (root / canonical).is_dir():
        base = root / canonical
    elif split == "all":  # asked for explicitly: every task dir below the folder, as one split
        base = root
    else:  # never fall back to the whole folder: it would put other splits' games into this one
        present = _split_dirs(root)
        if present:
            raise DataError(
                f"ALFWorld data {root} has no {canonical}/ folder (split={split!r}); it has "
                f"{', '.join(p + '/' for p in present)}: pass one of split={present}"
            )
        raise DataError(
            f"ALFWorld data {root} has no {canonical}/ folder (split={split!r}); for a folder of task "
            "dirs used as one split, pass split='all'"
        )
    games = {}
    for traj in sorted(base.rglob("traj_data.json")):
        task_dir = traj.parent
        rel = task_dir.relative_to(base).as_posix()
        if "movable" in rel or ("Sliced" in rel and not include_sliced):
            continue
        game = task_dir / "game.tw-pddl"
        if not game.is_file():
            continue
        try:
            doc = json.loads(game.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{game}: not a JSON game file ({exc}); re-download or delete it") from exc
        for key in ("pddl_domain", "grammar", "pddl_problem"):
            if key not in doc:
                raise DataError(f"{game}: missing key {key!r}; is this a textworld .tw-pddl game file?")
        if not doc.get("solvable"):
            continue
        games[rel] = game
    if not games:
        raise DataError(f"no solvable ALFWorld games (task dirs with game.tw-pddl + traj_data.json) under {base}")
    return games


# alfworld's scripts/patch_tw-pddl.py (json_2.1.1 -> 2.1.2), verbatim: a ``help`` action in the PDDL
# domain, its grammar entry, ``move X to Y`` for ``put X in/on Y`` and the go-to feedback typo fixed.
HELP_ACTION_PDDL = """\
(:action help
    :parameters (?a - agent)
    :precondition
        ()
    :effect
        (and
            (checked ?a)
        )
)
"""

HELP_GRAMMAR = """\

action help {
    template :: "help";
    feedback :: "\nAvailable commands:\n  look:                             look around your current location\n  inventory:                        check your current inventory\n  go to (receptacle):               move to a receptacle\n  open (receptacle):                open a receptacle\n  close (receptacle):               close a receptacle\n  take (object) from (receptacle):  take an object from a receptacle\n  move (object) to (receptacle):  place an object in or on a receptacle\n  examine (something):              examine a receptacle or an object\n  use (object):                     use an object\n  heat (object) with (receptacle):  heat an object using a receptacle\n  clean (object) with (receptacle): clean an object using a receptacle\n  cool (object) with (receptacle):  cool an object using a receptacle\n  slice (object) with (object):     slice an object using a sharp object\n";
}
"""  # noqa: E501 - the official text, byte for byte


def needs_patch(doc: dict) -> bool:
    """A json_2.1.1 game: its domain has no ``help`` action (2.1.2 games and generated ones do)."""
    return "(:action help" not in doc["pddl_domain"]


def patch_doc(doc: dict) -> dict:
    """``patch_twpddl`` of alfworld's ``scripts/patch_tw-pddl.py`` on a loaded game file."""
    doc = dict(doc)
    before, after = doc["pddl_domain"].rsplit(")", 1)
    doc["pddl_domain"] = f"{before}{HELP_ACTION_PDDL}){after}"
    grammar = doc["grammar"]
    grammar = grammar.replace("You arrive at {lend.name}.", "You arrive at {r.name}.")
    grammar = grammar.replace("put {o} in/on {r}", "move {o} to {r}")
    grammar = grammar.replace("You put the {o.name} in/on the {r.name}.", "You move the {o.name} to the {r.name}.")
    doc["grammar"] = grammar + HELP_GRAMMAR
    return doc


def patched_game(game: Path) -> Path:
    """json_2.1.1 games have no ``help`` action and the old grammar (``put X in/on Y``, ``You arrive
    at loc 12``), while alfworld 0.4.x's expert says ``move X to Y``. Patch them exactly as alfworld's
    ``scripts/patch_tw-pddl.py`` does (the same bytes as the file it writes). The patched copy lives
    in the cache (with its traj_data.json); the official file is not touched."""
    raw = game.read_text()
    doc = json.loads(raw)
    if not needs_patch(doc):
        return game
    digest = hashlib.sha256(raw.encode()).hexdigest()[:20]

    def build(tmp: Path) -> dict:
        (tmp / "game.tw-pddl").write_text(json.dumps(patch_doc(doc)))
        shutil.copyfile(game.parent / "traj_data.json", tmp / "traj_data.json")
        return {"source": str(game), "patch": "alfworld scripts/patch_tw-pddl.py"}

    out = build_once(cache_dir() / PATCH_VERSION / digest, build)
    return out / "game.tw-pddl"


@lru_cache(maxsize=4096)
def traj_info(game: Path) -> dict:
    """The task description and type of an official game, from the ``traj_data.json`` beside it."""
    try:
        traj = json.loads((Path(game).parent / "traj_data.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{Path(game).parent / 'traj_data.json'}: unreadable ({exc})") from exc
    scene = traj.get("scene", {})
    return {"task_type": traj.get("task_type", ""), "floor_plan": scene.get("floor_plan", "")}
