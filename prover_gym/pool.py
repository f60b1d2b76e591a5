"""``EnvPool``: n envs of one id stepped as a batch, in-process or in worker processes.

    pool = EnvPool("prover/SearchQA-v0", 8, backend="process", split="train")
    results = pool.reset(seeds=range(8))          # [(obs, info), ...]
    results = pool.step(actions)                  # [(obs, reward, terminated, truncated, info), ...]
    snaps = pool.snapshot(); pool.restore(snaps)  # one Snapshot per env

Backends: ``"process"`` (default; one spawned worker per env, required for engines that are not
thread-safe such as ALFWorld's), ``"thread"``, ``"sync"`` (in the caller's thread) and ``"ray"``
(Ray actors, each holding ``envs_per_worker`` envs, on the cluster ``ray.init`` connects to;
snapshots travel to and from them pickled, so any actor can continue any env's state). A worker
that dies or does not answer within ``timeout`` seconds is replaced by a fresh one; its episodes
are reported as failed (``truncated=True``, ``info["worker_error"]``) and must be reset.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from prover_gym.core import Snapshot, restore, snapshot

__all__ = ["BACKENDS", "EnvPool", "WorkerError"]

BACKENDS = ("process", "thread", "sync", "ray")


class WorkerError(RuntimeError):
    """An env raised inside a worker; carries the worker's traceback."""


def _make(env_id: str, kwargs: dict) -> gym.Env:
    import prover_gym  # noqa: F401  (registers the ids in a spawned process)

    return gym.make(env_id, **kwargs)


def _call(env: gym.Env, cmd: str, arg: Any):
    if cmd == "reset":
        seed, options = arg
        return env.reset(seed=seed, options=options)
    if cmd == "step":
        return env.step(arg)
    if cmd == "snapshot":
        return snapshot(env)
    if cmd == "restore":
        restore(env, arg)
        return None
    if cmd == "expert":
        return env.unwrapped.expert_action()  # type: ignore[attr-defined]  # a prover-gym TextEnv
    if cmd == "call":
        name, args = arg
        return getattr(env.unwrapped, name)(*args)
    raise ValueError(f"unknown pool command {cmd!r}")


def _worker(conn, env_id: str, kwargs: dict) -> None:
    try:
        env = _make(env_id, kwargs)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            break
        if cmd == "close":
            env.close()
            conn.send(("ok", None))
            break
        try:
            conn.send(("ok", _call(env, cmd, arg)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


class _ProcessWorker:
    def __init__(self, ctx, env_id: str, kwargs: dict, timeout: float):
        self.env_id, self.kwargs, self.timeout, self.ctx = env_id, kwargs, timeout, ctx
        self._start()

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.env_id, self.kwargs), daemon=True)
        self.proc.start()
        child.close()
        self.recv(startup=True)

    def send(self, cmd: str, arg: Any = None) -> None:
        self.conn.send((cmd, arg))

    def recv(self, startup: bool = False):
        timeout = max(self.timeout, 120.0) if startup else self.timeout
        if not self.conn.poll(timeout):
            raise TimeoutError(f"env worker (pid {self.proc.pid}) gave no answer within {timeout:.0f}s")
        status, payload = self.conn.recv()
        if status == "error":
            raise WorkerError(payload)
        return payload

    def restart(self) -> None:
        self.kill()
        self._start()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


class _RayWorkers:
    """Ray actors of class ``_RayEnvs`` (made lazily, so ``import prover_gym`` never imports ray)."""

    def __init__(
        self, env_id: str, kwargs: dict, n: int, per_worker: int, timeout: float, options: dict, init: dict | None
    ):
        try:
            import ray
        except ImportError:
            raise ImportError("EnvPool(backend='ray') needs Ray: pip install 'ray>=2.9'") from None
        self.ray = ray
        if not ray.is_initialized():
            # ray_init={"address": "auto"} joins a running cluster; the default starts a local one on
            # loopback, sized to this machine
            defaults = (
                {} if (init or {}).get("address") else {"_node_ip_address": "127.0.0.1", "include_dashboard": False}
            )
            ray.init(**{"log_to_driver": False, "configure_logging": False, **defaults, **(init or {})})
        # an env actor mostly waits on the learner: it reserves no CPU by default, so a 2-CPU
        # cluster can hold more actors than cores (Ray would otherwise refuse to place them)
        actor_cls = ray.remote(_RayEnvs).options(**{"num_cpus": 0, "max_concurrency": 1, **options})
        self.cls: Any = actor_cls
        self.env_id, self.kwargs, self.timeout = env_id, kwargs, timeout
        self.per_worker = per_worker  # env i lives in actor i // per_worker, slot i % per_worker
        self.sizes = [min(per_worker, n - start) for start in range(0, n, per_worker)]
        self.actors = [self._start(k) for k in range(len(self.sizes))]

    def _start(self, k: int):
        actor = self.cls.remote(self.env_id, self.kwargs, self.sizes[k])
        self.ray.get(actor.ready.remote(), timeout=max(self.timeout, 120.0))
        return actor

    def restart(self, k: int) -> None:
        self.ray.kill(self.actors[k], no_restart=True)
        self.actors[k] = self._start(k)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)


class _RayEnvs:
    """The body of a Ray actor: ``n`` envs, a batch of commands per call."""

    def __init__(self, env_id: str, kwargs: dict, n: int):
        self.envs = [_make(env_id, kwargs) for _ in range(n)]

    def ready(self) -> int:
        return os.getpid()

    def run(self, cmd: str, items: list[tuple[int, Any]]) -> list:
        out = []
        for local, arg in items:
            try:
                out.append(("ok", _call(self.envs[local], cmd, arg)))
            except BaseException:
                out.append(("error", traceback.format_exc()))
        return out


class EnvPool:
    """A batch of ``n`` envs made with ``gym.make(env_id, **kwargs)``."""

    def __init__(
        self,
        env_id: str,
        n: int,
        *,
        backend: str = "process",
        timeout: float = 300.0,
        start_method: str = "spawn",
        envs_per_worker: int = 1,
        ray_options: dict | None = None,
        ray_init: dict | None = None,
        **kwargs,
    ):
        if n < 1:
            raise ValueError(f"EnvPool needs n >= 1, got {n}")
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; use one of {BACKENDS}")
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        self.env_id, self.n, self.backend, self.kwargs = env_id, n, backend, kwargs
        self.failures = 0
        self._closed = False
        if backend == "ray":
            self._ray = _RayWorkers(env_id, kwargs, n, envs_per_worker, timeout, ray_options or {}, ray_init)
        elif backend == "process":
            ctx = mp.get_context(start_method)
            self._workers = [_ProcessWorker(ctx, env_id, kwargs, timeout) for _ in range(n)]
        else:
            self._envs = [_make(env_id, kwargs) for _ in range(n)]
            self._executor = ThreadPoolExecutor(n) if backend == "thread" else None

    def __len__(self) -> int:
        return self.n

    # ---- batched calls ----------------------------------------------------------------------
    def _run(self, cmd: str, args: Sequence[Any], indices: Sequence[int] | None = None) -> list:
        if self._closed:
            raise RuntimeError("EnvPool is closed")
        indices = list(range(self.n)) if indices is None else list(indices)
        if len(args) != len(indices):
            raise ValueError(f"{cmd}: got {len(args)} arguments for {len(indices)} envs")
        if self.backend == "sync":
            return [_call(self._envs[i], cmd, a) for i, a in zip(indices, args)]
        if self.backend == "thread":
            assert self._executor is not None
            return list(self._executor.map(lambda ia: _call(self._envs[ia[0]], cmd, ia[1]), zip(indices, args)))
        if self.backend == "ray":
            return self._run_ray(cmd, args, indices)
        broken: dict[int, BaseException] = {}
        for i, a in zip(indices, args):
            try:
                self._workers[i].send(cmd, a)
            except (OSError, BrokenPipeError) as exc:  # the worker died before we asked
                broken[i] = exc
        out = []
        for i in indices:
            worker = self._workers[i]
            try:
                if i in broken:
                    raise broken[i]
                out.append(worker.recv())
            except WorkerError:
                raise
            except (TimeoutError, EOFError, OSError) as exc:
                self.failures += 1
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                worker.restart()
                out.append(self._failed(cmd, reason))
        return out

    def _run_ray(self, cmd: str, args: Sequence[Any], indices: list[int]) -> list:
        """One remote call per actor involved (its share of the batch), all in flight together."""
        ray, workers = self._ray.ray, self._ray
        per = workers.per_worker
        share: dict[int, list[tuple[int, Any]]] = {}
        for i, a in zip(indices, args):
            share.setdefault(i // per, []).append((i % per, a))
        refs = {k: workers.actors[k].run.remote(cmd, items) for k, items in share.items()}
        answers: dict[int, Any] = {}
        deadline = time.monotonic() + self._ray.timeout  # one bound for the whole batch
        for k, ref in refs.items():
            try:
                results = ray.get(ref, timeout=max(0.01, deadline - time.monotonic()))
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as exc:
                self.failures += 1
                reason = "TimeoutError" if isinstance(exc, ray.exceptions.GetTimeoutError) else "RayActorError"
                workers.restart(k)  # every env of that actor starts afresh: all its episodes are failed
                results = [
                    ("failed", f"{reason}: Ray actor {k} (envs {k * per}..{k * per + workers.sizes[k] - 1})")
                ] * len(share[k])
            for (local, _), (status, payload) in zip(share[k], results):
                i = k * per + local
                if status == "error":
                    raise WorkerError(payload)
                answers[i] = self._failed(cmd, payload) if status == "failed" else payload
        return [answers[i] for i in indices]

    @staticmethod
    def _failed(cmd: str, reason: str):
        info = {"worker_error": reason, "won": False}
        if cmd == "step":
            return ("", 0.0, False, True, info)
        if cmd == "reset":
            return ("", info)
        return None

    def reset(
        self,
        seeds: Iterable[int | None] | None = None,
        options: Sequence[dict | None] | None = None,
        indices: Sequence[int] | None = None,
    ) -> list[tuple[str, dict]]:
        """Reset the envs at ``indices`` (default all), each with its seed and options: ``[(observation, info)]``."""
        idx = list(range(self.n)) if indices is None else list(indices)
        seeds = [None] * len(idx) if seeds is None else list(seeds)
        options = [None] * len(idx) if options is None else list(options)
        return self._run("reset", list(zip(seeds, options)), idx)

    def step(self, actions: Sequence[str], indices: Sequence[int] | None = None) -> list[tuple]:
        """One action per env at ``indices`` (default all): ``[(observation, reward, terminated, truncated, info)]``."""
        return self._run("step", list(actions), indices)

    def snapshot(self, indices: Sequence[int] | None = None) -> list[Snapshot]:
        """A ``Snapshot`` of each env at ``indices`` (default all)."""
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("snapshot", [None] * len(idx), idx)

    def restore(self, snaps: Sequence[Snapshot], indices: Sequence[int] | None = None) -> None:
        """Restore each env at ``indices`` (default all) from its snapshot; any snapshot of the same env id and data,
        from any env of any pool."""
        self._run("restore", list(snaps), indices)

    def expert_actions(self, indices: Sequence[int] | None = None) -> list[str | None]:
        """The built-in expert's next action of each env at ``indices`` (None where it has none)."""
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("expert", [None] * len(idx), idx)

    def call(self, name: str, *args, indices: Sequence[int] | None = None) -> list:
        """Call ``env.unwrapped.<name>(*args)`` on each env."""
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("call", [(name, args)] * len(idx), idx)

    def close(self) -> None:
        """Close every env and stop the workers (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.backend == "ray":
            self._ray.close()
        elif self.backend == "process":
            for w in self._workers:
                try:
                    w.send("close")
                    w.conn.poll(5)
                except (OSError, BrokenPipeError):
                    pass
                w.kill()
        else:
            for env in self._envs:
                env.close()
            if self._executor:
                self._executor.shutdown()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass
