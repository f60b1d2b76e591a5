"""A run's plan: the preset loaded (defaults, ``${VAR}``s, bases, models) and checked whole
(leaderboards/validate.py), the methods it runs, every cell with its row key and what the results store already
holds (``make_plan`` -> ``Plan``; ``--dry-run`` prints it)."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from pathlib import Path

from leaderboards.cells import (
    CELL_COST,
    PRESETS,
    Cell,
    PresetError,
    _asks_judge,
    _known_methods,
    _method_of,
    _trained,
    config_hash,
    eval_tasks,
    matched_to,
    shipped_base,
)
from leaderboards.validate import TOP as PRESET_KEYS
from prover_gym.checks import did_you_mean


# ---- presets ---------------------------------------------------------------------------------
def load_preset(name_or_path: str, check: bool = True) -> dict:
    """A preset by name (leaderboards/presets/) or path, defaults filled and ``${VAR}``s expanded;
    ``check``: its blocks validated (run() checks it whole, with what the run needs, instead)."""
    import yaml

    path = Path(name_or_path)
    if not path.suffix:
        path = PRESETS / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in PRESETS.glob("*.yaml"))
        raise PresetError(f"preset {name_or_path!r} not found; use one of {known} or a path to a YAML preset")
    try:
        preset = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(preset, dict):
        raise PresetError(f"{path}: a preset is a YAML mapping with keys {sorted(PRESET_KEYS)}")
    missing = [key for key in ("name", "envs", "methods") if key not in preset]
    if missing:
        raise PresetError(f"{path}: missing key(s) {missing}")
    preset.setdefault("seeds", [0])
    preset.setdefault("ablations", [])
    preset.setdefault("judge", {"kind": "first_divergence"})
    preset.setdefault("judge_precision", {"tasks": 0})
    preset.setdefault("eval", {})
    preset.setdefault("train", {})
    preset.setdefault("backend", "hf")
    preset.setdefault("variants", {})
    preset = _resolve_models(_expand(preset, path))
    _fill_from_bases(preset, path)
    preset["_path"] = str(path)
    if check:
        check_preset(preset)
    return preset


def _fill_from_bases(preset: dict, path: Path) -> None:
    """An env block that names a shipped ``base`` takes the setting that base was built for from its recipe
    (trainers.bases.RECIPES, the one home of the env settings): ``env_id``, ``train_kwargs``, ``eval_kwargs``
    and ``format`` where the block leaves them out. Values the block gives stay (shipped_base() refuses a
    train setting or format that is not the base's; another eval split is allowed)."""
    from trainers.recipes import RECIPES

    envs = preset.get("envs")
    if not isinstance(envs, dict):
        return
    for env_name, block in envs.items():
        if not isinstance(block, dict) or not isinstance(block.get("base"), str):
            continue
        name = block["base"]
        if name not in RECIPES:
            from prover_gym.checks import did_you_mean

            raise PresetError(
                f"{path}: envs.{env_name}.base = {name!r} is not a base recipe{did_you_mean(name, RECIPES)}; "
                f"use one of {sorted(RECIPES)} (trainers/bases.py)"
            )
        recipe = RECIPES[name]
        for key in ("env_id", "train_kwargs", "eval_kwargs"):
            block.setdefault(key, copy.deepcopy(recipe[key]))
        if recipe.get("format"):  # an absent format is {}: left out, so the block's hash stays the same
            block.setdefault("format", copy.deepcopy(recipe["format"]))


def _resolve_models(preset: dict) -> dict:
    """``base:<name>`` (a shipped base) as the policy ``model`` or a judge's ``model_path`` -> its folder."""
    from trainers.config import resolve_model_path
    from trainers.recipes import BaseError

    def fix(block, key):
        if isinstance(block, dict) and isinstance(block.get(key), str) and not getattr(block[key], "missing", None):
            try:
                block[key] = resolve_model_path(block[key])
            except BaseError as exc:
                raise PresetError(f"{preset.get('_path', preset.get('name'))}: {key} = {block[key]!r}: {exc}") from None

    fix(preset, "model")
    judges = [preset.get("judge"), *[v.get("judge") for v in preset["variants"].values() if isinstance(v, dict)]]
    for judge in judges:
        fix(judge, "model_path")
        if isinstance(judge, dict):
            fix(judge.get("backend"), "model_path")
    return preset


def check_preset(preset: dict, extra: list[str] | None = None, **run) -> None:
    """Raise one PresetError listing every problem of ``preset`` (leaderboards/validate.py) and ``extra``
    (the command line's); ``run``: the run's envs, methods, make_envs, require_set."""
    from leaderboards.validate import problems

    found = [*(extra or []), *problems({k: v for k, v in preset.items() if k != "_path"}, **run)]
    if found:
        where = preset.get("_path", preset.get("name"))
        raise PresetError(f"{len(found)} problem(s) in preset {where}:\n" + "\n".join(f"  - {p}" for p in found))


def _expand(obj, path):
    if isinstance(obj, dict):
        return {k: _expand(v, path) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_expand(v, path) for v in obj]
    if isinstance(obj, str) and "${" in obj:
        out = os.path.expandvars(obj)
        missing = re.findall(r"\$\{(\w+)\}", out)
        if missing:
            return _Unset(obj, missing, path)
        return out
    return obj


class _Unset(str):
    """A value that names an unset environment variable; using it raises with the fix."""

    missing: list[str]
    path: str

    def __new__(cls, raw, missing, path):
        s = super().__new__(cls, raw)
        s.missing, s.path = missing, path
        return s


def plan_methods(preset: dict, args) -> list[str]:
    """The methods a run trains or evaluates (the preset's or ``--methods``, plus its ablations with ``--ablations``),
    each checked; grpo_matched needs its reference method or a fixed ratio."""
    names = list(args.methods or preset["methods"])
    if args.ablations:
        names += [m for m in preset.get("ablations", []) if m not in names]
    known = _known_methods(preset)
    for m in names:
        if m not in known:
            raise PresetError(
                f"unknown method {m!r}{did_you_mean(m, known)} (valid: {', '.join(known)}; variants are defined "
                "in the preset)"
            )
    for m in names:
        to = matched_to(m)
        if to is not None and to not in names and not preset["train"].get("match_ratio"):
            raise PresetError(
                f"{m} is GRPO given the tokens {to} spends: run {to} too (its measured ratio is used), or set "
                "train.match_ratio (e.g. 0.15)"
            )
    return names


@dataclasses.dataclass
class Plan:
    """What a run will do, decided before anything runs (``--dry-run`` prints it): the checked preset, the
    judge, the envs and seeds, and the cells to run (and those ``out`` already has)."""

    preset: dict
    judge: dict
    envs: list[str]
    seeds: list[int]
    out: Path
    cells: list[Cell]
    reused: list[tuple[str, int, str]]  # (env, seed, method) rows already in out's results
    eval_only: bool = False
    jobs: int = 1


def make_plan(args, db=None) -> Plan:
    """The preset (checked whole with the command line's choices), and every (env, seed, method) cell with
    its row key: a cell whose key ``db`` already holds is reused, the others are to run."""
    preset = load_preset(args.preset, check=False)
    envs = list(args.envs or (preset["envs"] if isinstance(preset["envs"], dict) else []))
    judge = preset["judge"]
    if args.judge:
        judge = _kind_config(
            "--judge",
            args.judge,
            "give a judge config file, a shipped one's name (configs/judges/: "
            "first_divergence, oracle, ...) or a mapping with 'kind'",
        )
    cli: list[str] = []  # the command line's problems, reported with the preset's
    try:
        methods = [] if args.eval_only else plan_methods(preset, args)
    except PresetError as exc:  # check the valid ones, report the others
        known = _known_methods(preset)
        methods = [m for m in [*(args.methods or preset["methods"]), *(preset["ablations"] or [])] if m in known]
        if args.methods or all(m in known for m in preset["methods"]):
            cli.append(
                ("--methods: " if args.methods else "") + str(exc)
            )  # (a preset's own unknown method is reported below, with its key path)
    if args.judge:
        import judges

        cli += judges.check(judge, "--judge")
    # one pass over everything this run needs, before any model loads or cell runs (validate.py)
    check_preset(preset, cli, envs=envs, methods=methods, make_envs=True, require_set=True)
    seeds = list(args.seeds if args.seeds is not None else preset["seeds"])
    ev = preset["eval"]
    cells: list[Cell] = []
    reused: list[tuple[str, int, str]] = []
    for env_name in envs:
        env_cfg = preset["envs"][env_name]
        split = str(env_cfg["eval_kwargs"].get("split", "test"))
        for seed in seeds:
            tasks = eval_tasks(env_cfg["env_id"], env_cfg["eval_kwargs"], ev.get("episodes", 0), seed)
            eval_hash = config_hash([env_cfg, ev, tasks])
            base = None if args.eval_only else shipped_base(env_name, env_cfg)
            if args.eval_only:
                policy_cfg = _policy_config(args.policy)
                entries = [
                    (
                        policy_cfg.get("name") or f"policy:{policy_cfg.get('model') or policy_cfg.get('model_path')}",
                        ("policy", policy_cfg),
                    )
                ]
            else:
                entries = [(m, None) for m in methods]  # type: ignore[misc]  # no special policy
            keys: dict[str, tuple[str, str]] = {}
            entries.sort(key=lambda e: matched_to(e[0]) is not None)  # after the cell it is matched to
            for method, special in entries:
                to = matched_to(method)
                matched: str | float | None = keys[to][0] if to is not None and to in keys else None
                if to is not None and matched is None:  # its reference not run: the preset's fixed ratio
                    matched = float(preset["train"]["match_ratio"])
                key_hash = config_hash(
                    [
                        eval_hash,
                        method,
                        preset.get("model"),
                        base and base["hash"],
                        [preset["train"], env_cfg.get("train")] if _trained(preset, method) else None,
                        judge if _asks_judge(_method_of(preset, method)) else None,
                        preset["variants"].get(method),
                        special,
                        *([matched] if matched is not None else []),
                    ]
                )
                key = f"{preset['name']}|{env_name}|{method}|{split}|{seed}|{key_hash}"
                keys[method] = (key, key_hash)
                if db is not None and db.get(key) is not None:
                    reused.append((env_name, seed, method))
                    continue
                cost = CELL_COST.get(env_name, 2) * (4 if _trained(preset, method) and method != "sft" else 1)
                cells.append(Cell(cost, env_name, seed, method, special, key, key_hash, tasks, base, matched))
    return Plan(
        preset,
        judge,
        envs,
        seeds,
        Path(args.out),
        cells,
        reused,
        eval_only=bool(args.eval_only),
        jobs=max(1, int(getattr(args, "jobs", 1) or 1)),
    )


def print_plan(plan: Plan) -> None:
    """``--dry-run``: the cells a run would execute, in the order it would start them, and those it
    would reuse from ``out``; plus the judge-precision measurement and the servers it would start."""
    preset, cells, reused, out = plan.preset, plan.cells, plan.reused, plan.out
    todo = [c for c in sorted(cells, key=lambda c: -c.cost) if matched_to(c.method) is None]
    todo += [c for c in cells if matched_to(c.method) is not None]
    print(f"plan of preset {preset['name']!r} into {out}: {len(cells)} cell(s) to run, {len(reused)} reused")
    for c in todo:
        after = f" (after {matched_to(c.method)}: its measured token ratio)" if matched_to(c.method) else ""
        if c.method == "sft":
            kind = "SFT + eval" if c.base is None else "eval of the shipped base"
        else:
            kind = "train + eval" if _trained(preset, c.method) else "eval"
        print(f"  run    {c.env:9s} seed {c.seed}  {c.method:18s} {kind}{after}")
    for env, seed, method in reused:
        print(f"  reused {env:9s} seed {seed}  {method}")
    spec = preset.get("judge_precision") or {}
    if spec.get("tasks"):
        print(f"  judge precision: {spec.get('kinds')} on {spec['tasks']} task(s) per env (unless recorded)")
    for name, block in preset["envs"].items():
        if block.get("retrieval_server"):
            print(
                f"  retrieval server for {name}: {block['retrieval_server'].get('retriever', 'bm25')} over "
                f"{block['retrieval_server'].get('corpus')}"
            )


def _kind_config(flag: str, spec: str, expected: str) -> dict:
    """A ``--judge`` / ``--policy`` value: a YAML file, or a YAML mapping inline, with a ``kind``."""
    import yaml

    from prover_gym.resources import shipped_configs

    shipped = shipped_configs("judges") if flag == "--judge" else {}
    if Path(spec).is_file():
        cfg = yaml.safe_load(Path(spec).read_text())
    elif spec in shipped:  # a shipped judge config, by name
        cfg = yaml.safe_load(shipped[spec].read_text())
    else:
        try:
            cfg = yaml.safe_load(spec)
        except yaml.YAMLError:
            cfg = None
    if not isinstance(cfg, dict) or "kind" not in cfg:
        raise PresetError(f"{flag} {spec!r}: {expected}")
    return cfg


def _policy_config(spec: str | None) -> dict:
    if not spec:
        raise PresetError(
            "--eval-only needs --policy: a backend config file or mapping, e.g. "
            "'{kind: openai, model: my-model, base_url: http://127.0.0.1:8000/v1}' or '{kind: hf, model_path: DIR}'"
        )
    return _kind_config("--policy", spec, "expected a mapping with 'kind' (openai | hf | vllm)")
