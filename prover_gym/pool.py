"""``EnvPool``: n envs of one id stepped as a batch, in-process or in worker processes.

    pool = EnvPool("prover/SearchQA-v0", 8, backend="process", split="train")
    results = pool.reset(seeds=range(8))          # [(obs, info), ...]
    results = pool.step(actions)                  # [(obs, reward, terminated, truncated, info), ...]
    snaps = pool.snapshot(); pool.restore(snaps)  # one Snapshot per env

Backends: ``"process"`` (default; one spawned worker per env, required for engines that are not
thread-safe such as ALFWorld's), ``"thread"`` and ``"sync"`` (in the caller's thread). A worker
that dies or does not answer within ``timeout`` seconds is replaced by a fresh one; its episode
is reported as failed (``truncated=True``, ``info["worker_error"]``) and it must be reset.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Sequence

import gymnasium as gym

from prover_gym.core import Snapshot, restore, snapshot

__all__ = ["EnvPool", "WorkerError"]


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
        return env.unwrapped.expert_action()
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


class EnvPool:
    """A batch of ``n`` envs made with ``gym.make(env_id, **kwargs)``."""

    def __init__(self, env_id: str, n: int, *, backend: str = "process", timeout: float = 300.0,
                 start_method: str = "spawn", **kwargs):
        if n < 1:
            raise ValueError(f"EnvPool needs n >= 1, got {n}")
        if backend not in ("process", "thread", "sync"):
            raise ValueError(f"backend={backend!r}; use 'process', 'thread' or 'sync'")
        self.env_id, self.n, self.backend, self.kwargs = env_id, n, backend, kwargs
        self.failures = 0
        self._closed = False
        if backend == "process":
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
            return list(self._executor.map(lambda ia: _call(self._envs[ia[0]], cmd, ia[1]), zip(indices, args)))
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

    @staticmethod
    def _failed(cmd: str, reason: str):
        info = {"worker_error": reason, "won": False}
        if cmd == "step":
            return ("", 0.0, False, True, info)
        if cmd == "reset":
            return ("", info)
        return None

    def reset(self, seeds: Iterable[int | None] | None = None, options: Sequence[dict | None] | None = None,
              indices: Sequence[int] | None = None) -> list[tuple[str, dict]]:
        idx = list(range(self.n)) if indices is None else list(indices)
        seeds = [None] * len(idx) if seeds is None else list(seeds)
        options = [None] * len(idx) if options is None else list(options)
        return self._run("reset", list(zip(seeds, options)), idx)

    def step(self, actions: Sequence[str], indices: Sequence[int] | None = None) -> list[tuple]:
        return self._run("step", list(actions), indices)

    def snapshot(self, indices: Sequence[int] | None = None) -> list[Snapshot]:
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("snapshot", [None] * len(idx), idx)

    def restore(self, snaps: Sequence[Snapshot], indices: Sequence[int] | None = None) -> None:
        self._run("restore", list(snaps), indices)

    def expert_actions(self, indices: Sequence[int] | None = None) -> list[str | None]:
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("expert", [None] * len(idx), idx)

    def call(self, name: str, *args, indices: Sequence[int] | None = None) -> list:
        """Call ``env.unwrapped.<name>(*args)`` on each env."""
        idx = list(range(self.n)) if indices is None else list(indices)
        return self._run("call", [(name, args)] * len(idx), idx)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.backend == "process":
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

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass
