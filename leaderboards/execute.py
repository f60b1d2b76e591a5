"""Running a plan: retrieval servers, judge precision, and the cells on worker processes (each cell trains and
evaluates one method of one env and seed; compute-matched cells after the cell they match), every finished row
handed to the ``Recorder``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from leaderboards.cells import Cell, CellError, PresetError, _train_config, _trained, config_hash, matched_to
from leaderboards.plan import Plan
from leaderboards.record import Recorder, git_commit


def evaluate(
    env_id: str, env_kwargs: dict, policy, task_ids: list[str], *, batch: int, group_by: str | None, desc: str
) -> dict:
    """Play each task once with ``policy`` (batched over a sync EnvPool); success, score, groups."""
    from tqdm import tqdm

    from agents.rollout import play_tasks

    t0 = time.time()
    bar = tqdm(total=len(task_ids), desc=desc, leave=False, disable=None)
    trajs = play_tasks(env_id, env_kwargs, policy, task_ids, batch=batch, progress=bar.update)
    bar.close()
    stats = getattr(policy, "stats", None) or {}
    if stats.get("requests") and stats.get("failures") == stats["requests"]:
        from agents.backends.base import BackendUnavailable

        raise BackendUnavailable(
            f"the policy backend failed all {stats['requests']} requests of {desc} (last: {policy.last_error})"
        )
    groups: dict[str, list[float]] = {}
    for t in trajs:
        key = (t.turns[0].info or {}).get(group_by) if (group_by and t.turns) else None
        if key:
            groups.setdefault(str(key), []).append(float(t.won))
    return {
        "episodes": len(trajs),
        "success": sum(t.won for t in trajs) / max(1, len(trajs)),
        "score": sum(t.total_reward for t in trajs) / max(1, len(trajs)),
        "groups": {k: sum(v) / len(v) for k, v in sorted(groups.items())},
        "env_steps": sum(len(t.turns) for t in trajs),
        "tokens": sum(len(turn.token_ids or []) for t in trajs for turn in t.turns),
        "invalid_actions": sum(not turn.valid for t in trajs for turn in t.turns),
        "eval_seconds": round(time.time() - t0, 2),
        # per task 0/1, for standard errors and paired comparisons between methods (same tasks, same seed)
        "outcomes": {task: int(t.won) for task, t in zip(task_ids, trajs)},
        # requests the policy's backend failed (after its retries); each cost one turn (an invalid action)
        "policy_failures": stats.get("failures", 0),
    }


def llm_policy(preset: dict, model_path: str, env_cfg: dict, seed: int, backend_cfg: dict | None = None):
    """The policy to evaluate: a backend (the preset's, on ``model_path``, or ``backend_cfg``) in the
    env's prompt format, with the env block's ``format`` kwargs (as in training)."""
    from agents.backends import make_backend
    from agents.formats import make_format
    from agents.llm_policy import LLMPolicy

    ev = preset["eval"]
    cfg = backend_cfg or {
        "kind": preset.get("backend", "hf"),
        "model_path": model_path,
        "max_tokens": ev.get("max_tokens", 64),
        "temperature": ev.get("temperature", 0.0),
        "seed": seed,
    }
    return LLMPolicy(make_backend(cfg), make_format(env_cfg["env_id"], **(env_cfg.get("format") or {})))


def train(
    preset: dict,
    env_name: str,
    method: str,
    seed: int,
    out: Path,
    model_path: str | None,
    judge: dict,
    model_hash: str | None = None,
    match_ratio: float | None = None,
) -> dict:
    """Train (or reuse) one checkpoint; returns its model dir, curve, seconds and overhead figures."""
    from prover_gym.cache import atomic_write
    from trainers.checkpoint import has_checkpoint
    from trainers.train import Trainer

    env_cfg = preset["envs"][env_name]
    run_dir = out / "runs" / preset["name"] / env_name / method / f"seed{seed}"
    cfg = _train_config(preset, env_cfg, method, seed, run_dir, model_path, judge, match_ratio)
    digest = config_hash([cfg.to_dict(), model_hash])  # model_hash: the start model's content, when shipped
    meta_path = run_dir / "leaderboard_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("hash") != digest and run_dir.exists():
        shutil.rmtree(run_dir)  # another config: start over
        meta = {}
    done = meta.get("finished") and has_checkpoint(run_dir)  # (puts back a checkpoint a kill left as .old)
    seconds = meta.get("seconds", 0.0)
    if not done:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(meta_path, json.dumps({"hash": digest, "finished": False, "seconds": seconds}))
        t0 = time.time()
        trainer = Trainer(cfg, resume=has_checkpoint(run_dir))
        if method == "sft":
            trainer.sft()
            trainer.save()
        else:
            trainer.run(desc=f"{env_name} {method} s{seed}")
        trainer.close()
        seconds += time.time() - t0
        atomic_write(meta_path, json.dumps({"hash": digest, "finished": True, "seconds": round(seconds, 2)}))
    curve = []
    metrics = run_dir / "metrics.jsonl"
    if metrics.is_file():
        curve = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    extra: dict[str, Any] = {"model": str(run_dir / "checkpoint" / "model"), "train_hash": digest}
    if (run_dir / "credit.jsonl").is_file():  # where the credit went: the run's inspector page
        from leaderboards.credit_view import load_records, summary, write_page

        extra["inspector"] = str(write_page(run_dir).relative_to(out))
        records = load_records(run_dir)
        extra["credit"] = {
            **summary(records),
            "a_seg": [round(r["verification"]["a_seg"], 4) for r in records if r.get("verification")],
        }
    if curve:
        for k in ("prover/extra_tokens_ratio", "prover/extra_env_steps_ratio", "prover/bonus_share"):
            extra[k] = sum(r.get(k, 0.0) for r in curve) / len(curve)
        for k in (
            "prover/proposed_segments",
            "prover/verified_segments",
            "prover/credited_segments",
            "prover/positive_segments",
        ):
            extra[k] = sum(r.get(k, 0) for r in curve)
        extra["train_success_last"] = curve[-1].get("success")
        # the run's cost in tokens, by who spent them, and what grpo_matched is given (trainers.train.run_cost)
        from trainers.train import run_cost

        extra.update(run_cost(curve))
    return {
        "model_dir": str(run_dir / "checkpoint" / "model"),
        "curve": curve,
        "train_seconds": round(seconds, 2),
        "extra": extra,
    }


# ---- judge precision ----------------------------------------------------------------------------
def judge_precision(preset: dict, env_name: str, db) -> bool:
    """Each judge kind on one-slip groups, measured by verification: the share of its proposals whose
    A_seg (``m`` continuations of a noisy expert, ``eps`` random turns) is > 0, the mean A_seg, and the
    agreement with the exhaustive judge's best verified turn (trainers/judge_eval.py)."""
    import gymnasium as gym

    import judges
    from trainers.judge_eval import NoisyExpert, best_turns, slip_groups, verified_precision
    from trainers.verification import ValueEstimator

    spec = preset.get("judge_precision") or {}
    if not spec.get("tasks"):
        return False
    env_cfg = preset["envs"][env_name]
    kinds = spec.get("kinds", ["random", "first_divergence", "oracle", "exhaustive"])
    digest = config_hash([env_cfg, spec, "verified"])
    todo = [k for k in kinds if db.get_precision(f"{preset['name']}|{env_name}|{k}|{digest}") is None]
    if not todo:
        return False
    groups = slip_groups(
        env_cfg["env_id"],
        env_cfg["eval_kwargs"],
        spec["tasks"],
        spec.get("failures", 2),
        seed=0,
        slack=spec.get("slack"),
    )
    env = gym.make(env_cfg["env_id"], **env_cfg["eval_kwargs"])
    eps, m = spec.get("eps", 0.3), spec.get("m", 4)
    references = best_turns(groups, ValueEstimator(env, NoisyExpert(eps, seed=1), m))  # once for every kind
    for kind in todo:  # each judge gets the same continuation policy, seeded the same
        estimator = ValueEstimator(env, NoisyExpert(eps, seed=0), m)
        judge = judges.make({"kind": kind})
        if hasattr(judge, "bind"):
            judge.bind(ValueEstimator(env, NoisyExpert(eps, seed=2), m))
        stats = verified_precision(judge, groups, estimator, references=references)
        stats.update(continuation=f"noisy expert eps={eps}", m=m)
        db.put_precision(f"{preset['name']}|{env_name}|{kind}|{digest}", preset["name"], env_name, kind, digest, stats)
    env.close()
    return True


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def run_cell(preset: dict, cell: Cell, out: str, judge: dict, commit: str | None):
    """One leaderboard cell: the policy of its method (trained or reused as needed) played on its tasks.
    Returns (row, curve, log line, warning or None); the caller writes the row. Runs in a worker
    process under ``--jobs``."""
    import prover_gym

    env_name, seed, method, special, base = cell.env, cell.seed, cell.method, cell.special, cell.base
    out_dir = Path(out)
    env_cfg = preset["envs"][env_name]
    ev = preset["eval"]
    split = str(env_cfg["eval_kwargs"].get("split", "test"))
    trained: dict[str, Any] = {"train_seconds": 0.0, "curve": [], "extra": {}}
    if special is not None:
        backend_cfg = {k: v for k, v in special[1].items() if k != "name"}
        policy = llm_policy(preset, "", env_cfg, seed, backend_cfg)
    elif method == "random":
        from agents.baselines import RandomPolicy

        policy = RandomPolicy(seed)
    elif method == "expert":
        from agents.baselines import ExpertPolicy

        policy = ExpertPolicy()
    else:
        sft_model: str | None = base["model_dir"] if base is not None else None
        if method == "sft" and base is not None:
            trained = base
        if sft_model is None:
            sft = train(preset, env_name, "sft", seed, out_dir, preset.get("model"), judge)
            sft_model = sft["model_dir"]
            if method == "sft":
                trained = sft
        if method != "sft":
            base_hash = base["hash"] if base is not None else None
            ratio = cell.match if isinstance(cell.match, float) else None
            trained = train(preset, env_name, method, seed, out_dir, sft_model, judge, base_hash, ratio)
        policy = llm_policy(preset, trained["model_dir"], env_cfg, seed)
    res = evaluate(
        env_cfg["env_id"],
        env_cfg["eval_kwargs"],
        policy,
        cell.tasks,
        batch=ev.get("batch", 8),
        group_by=env_cfg.get("group_by"),
        desc=f"eval {env_name} {method} s{seed}",
    )
    backend = getattr(policy, "backend", None)
    if backend is not None and hasattr(backend, "close") and special is None:  # a local engine: free it
        backend.close()
    failures = res.pop("policy_failures")
    outcomes = res.pop("outcomes")
    warning = None
    if failures:
        warning = (
            f"warning: {env_name} {method} seed {seed}: the policy backend failed {failures} requests "
            f"(each an invalid action); last error: {policy.last_error}"
        )
    row = {
        "key": cell.key,
        "preset": preset["name"],
        "env": env_name,
        "env_id": env_cfg["env_id"],
        "method": method,
        "split": split,
        "seed": seed,
        "config_hash": cell.key_hash,
        "commit_id": commit,
        "version": prover_gym.__version__,
        **res,
        "train_seconds": trained["train_seconds"],
        "extra": {**trained["extra"], "outcomes": outcomes, **({"policy_failures": failures} if failures else {})},
    }
    from leaderboards.stats import standard_error

    se = standard_error(list(outcomes.values()))
    line = (
        f"{env_name:9s} {method:18s} seed {seed}: success {100 * res['success']:5.1f}% +- {100 * se:.1f} (SE) "
        f"score {100 * res['score']:5.1f} ({res['episodes']} episodes; train {trained['train_seconds']:.0f}s, "
        f"eval {res['eval_seconds']:.0f}s)"
    )
    return row, trained["curve"], line, warning


def execute(plan: Plan, db, record: Recorder) -> None:
    """Run the plan: its servers, the judge-precision measurement, the SFT checkpoints RL cells start from,
    then the cells (longest first, on ``plan.jobs`` worker processes), each handed to ``record``."""
    preset, judge, out = plan.preset, plan.judge, plan.out
    commit = git_commit()
    with contextlib.ExitStack() as services:
        start_servers(preset, plan.envs, out, services)
        if not plan.eval_only:
            for env_name in plan.envs:
                t_judge = time.time()
                if judge_precision(preset, env_name, db):
                    print(
                        f"[{time.time() - record.t_start:6.0f}s] {env_name:9s} judge precision by verification: "
                        f"{time.time() - t_judge:.0f}s",
                        flush=True,
                    )
        cells = plan.cells
        if plan.jobs > 1 and not plan.eval_only:
            # an env without a shipped base trains its SFT checkpoint first: every RL cell starts from it
            for env_name in dict.fromkeys(c.env for c in cells if c.base is None and _trained(preset, c.method)):
                for seed in dict.fromkeys(c.seed for c in cells if c.env == env_name):
                    train(preset, env_name, "sft", seed, out, preset.get("model"), judge)

        def run_cells(todo: list[Cell]) -> None:
            jobs = plan.jobs
            if jobs > 1 and len(todo) > 1:
                import multiprocessing as mp
                from concurrent.futures import ProcessPoolExecutor, as_completed

                threads = max(1, (os.cpu_count() or 1) // jobs)
                print(f"{len(todo)} cells on {jobs} worker processes ({threads} torch thread(s) each)", flush=True)
                with ProcessPoolExecutor(
                    max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(threads,)
                ) as ex:
                    futures = [
                        ex.submit(run_cell_safe, preset, c, str(out), judge, commit)
                        for c in sorted(todo, key=lambda c: -c.cost)
                    ]  # longest first
                    for fut in as_completed(futures):
                        record(fut.result())
            else:
                for c in todo:
                    record(run_cell_safe(preset, c, str(out), judge, commit))

        # grpo_matched cells run after the prover cells whose measured token ratio they are given
        run_cells([c for c in cells if matched_to(c.method) is None])
        run_cells([_matched(c, db) for c in cells if matched_to(c.method) is not None])


def start_servers(preset: dict, envs: list[str], out: Path, stack: contextlib.ExitStack) -> None:
    """Start the retrieval server of each selected env block that has a ``retrieval_server`` (one per
    search_url), on ``stack``: the run stops them when it ends, however it ends."""
    from prover_gym.searchqa.serve import served

    started: set[str] = set()
    for env_name in envs:
        block = preset["envs"][env_name]
        server = block.get("retrieval_server")
        if not server:
            continue
        for key in ("train_kwargs", "eval_kwargs"):
            kwargs = block.get(key) or {}
            url = kwargs.get("search_url")
            if kwargs.get("retriever") != "http" or not url or url in started:
                continue
            started.add(url)
            log = out / f"retrieval_server_{env_name}.log"
            stack.enter_context(served(str(url), **server, log=log))


class CellsFailed(RuntimeError):
    """Some cells raised; the others' rows are recorded."""


def run_cell_safe(preset: dict, cell: Cell, out: str, judge: dict, commit: str | None):
    """``run_cell``, with an exception of the cell returned as a ``CellError`` (recorded, and the run goes
    on) rather than raised through the pool. A backend that is down is everyone's problem: it stops the run."""
    import traceback

    from agents.backends.base import BackendUnavailable

    try:
        return run_cell(preset, cell, out, judge, commit)
    except (BackendUnavailable, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001  (any failure of one cell is recorded, not fatal to the run)
        return CellError(cell, f"{type(exc).__name__}: {exc}".splitlines()[0][:500], traceback.format_exc())


def _matched(cell: Cell, db) -> Cell:
    """A grpo_matched cell with its ratio: the measured one of the prover row it is matched to."""
    if not isinstance(cell.match, str):
        return cell
    row = db.get(cell.match)
    ratio = (row or {}).get("extra", {}).get("match_ratio") if row else None
    if ratio is None:
        raise PresetError(
            f"{cell.method} ({cell.env}, seed {cell.seed}): the {matched_to(cell.method)} row it is matched to has "
            "no measured token ratio; re-run it (its row predates cost accounting) or set train.match_ratio"
        )
    return cell._replace(match=float(ratio))
