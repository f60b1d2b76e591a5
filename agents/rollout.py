"""Run a policy in an env (or an ``EnvPool``) and return trajectories with the snapshot before
every turn, so any turn can be restored and branched (what ProVer's verification needs)."""

from __future__ import annotations

import time
from collections import defaultdict

from agents.trajectory import Trajectory, Turn
from prover_gym import snapshot

# cumulative seconds of the batched rollouts (rollout_batch): "generate" (the policy's batched
# generation) and "env" (reset / restore / snapshot / step through the pool); a profiler reads deltas
PROFILE: defaultdict[str, float] = defaultdict(float)  # seconds by stage ("generate", "env")


def rollout(
    env, policy, *, seed: int | None = None, task_id: str | None = None, key: tuple | None = None
) -> Trajectory:
    """One episode of ``policy`` (anything with ``act(env, observation, info, history)``) in ``env``.
    ``key``: the episode's sampling key (agents.backends.sampling), passed to a policy that takes one."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
    traj = Trajectory(env.unwrapped.env_id, info["task_id"], info["task"], key=key)
    return _play(env, policy, obs, info, traj, [])


def _play(env, policy, obs: str, info: dict, traj: Trajectory, past: list[Turn]) -> Trajectory:
    """Step ``policy`` until the episode ends, appending turns (with the snapshot before each)."""
    keyed = {"key": traj.key} if traj.key is not None else {}
    while True:
        snap = snapshot(env)
        out = policy.act(env, obs, info, past + traj.turns, **keyed)
        next_obs, reward, terminated, truncated, next_info = env.step(out.action)
        traj.turns.append(
            Turn(
                obs,
                out.text,
                out.action,
                float(reward),
                snap,
                out.valid,
                next_info,
                out.token_ids,
                out.logprobs,
                out.policy_mask,
                out.prompt_token_ids,
            )
        )
        obs, info = next_obs, next_info
        if terminated or truncated:
            traj.won, traj.terminated, traj.truncated = bool(info.get("won")), terminated, truncated
            return traj


def rollout_from(
    env,
    snap,
    policy,
    history: list[Turn] | None = None,
    *,
    task_id: str = "",
    task: str = "",
    key: tuple | None = None,
) -> Trajectory:
    """Continue from ``snap`` (restored into ``env``) until the episode ends. ``history`` (the turns
    that led there) is shown to the policy but not included in the returned trajectory. ``key``: the
    continuation's sampling key (its turns are numbered on from the history)."""
    from prover_gym import restore

    restore(env, snap)
    obs, info, terminated, truncated = env.unwrapped.current_state()
    traj = Trajectory(env.unwrapped.env_id, task_id or info["task_id"], task or info["task"], key=key)
    if terminated or truncated:
        traj.won, traj.terminated, traj.truncated = bool(info.get("won")), terminated, truncated
        return traj
    return _play(env, policy, obs, info, traj, list(history or []))


def rollout_batch(pool, policy, seeds=None, task_ids=None, *, starts=None, indices=None, keys=None) -> list[Trajectory]:
    """One episode in each env of ``pool`` (an ``EnvPool``; or the envs ``indices`` of it), stepped
    in lock-step so a model policy generates for all of them in one batch; ``policy`` needs
    ``act_batch(pool, indices, observations, infos, histories)``.

    ``starts``: continue from states instead of resetting, one ``(snapshot, history, task_id, task)``
    per env (what ``rollout_from`` does for one env): ``history`` is shown to the policy but not
    included in the returned trajectory. ``keys``: one sampling key per episode (or None), passed to
    the policy's ``act_batch`` (agents.backends.sampling): an episode's tokens then do not depend on
    which other episodes share its batches.
    """
    idx = list(range(len(pool))) if indices is None else list(indices)
    n = len(idx)
    pasts: list[list[Turn]] = [[] for _ in range(n)]
    t_env = time.perf_counter()
    if starts is None:
        options = [{"task_id": t} for t in task_ids] if task_ids is not None else None
        first = pool.reset(seeds=seeds, options=options, indices=idx)
        obs = [o for o, _ in first]
        infos = [i for _, i in first]
        trajs = [Trajectory(pool.env_id, i.get("task_id"), i.get("task", "")) for i in infos]
        active = [k for k in range(n) if "worker_error" not in infos[k]]
    else:
        if len(starts) != n:
            raise ValueError(f"rollout_batch: {len(starts)} starts for {n} envs")
        pool.restore([s[0] for s in starts], idx)
        current = pool.call("current_state", indices=idx)
        obs = [c[0] for c in current]
        infos = [c[1] for c in current]
        trajs = [Trajectory(pool.env_id, s[2] or i["task_id"], s[3] or i["task"]) for s, i in zip(starts, infos)]
        pasts = [list(s[1] or []) for s in starts]
        active = []
        for k, (_, _, term, trunc) in enumerate(current):
            if term or trunc:
                trajs[k].won, trajs[k].terminated, trajs[k].truncated = bool(infos[k].get("won")), term, trunc
            else:
                active.append(k)
    if keys is not None:
        if len(keys) != n:
            raise ValueError(f"rollout_batch: {len(keys)} sampling keys for {n} envs")
        for traj, key in zip(trajs, keys):
            traj.key = key
    while active:
        envs = [idx[k] for k in active]
        snaps = pool.snapshot(envs)
        t_gen = time.perf_counter()
        PROFILE["env"] += t_gen - t_env
        keyed = {"keys": [keys[k] for k in active]} if keys is not None else {}
        outs = policy.act_batch(
            pool,
            envs,
            [obs[k] for k in active],
            [infos[k] for k in active],
            [pasts[k] + trajs[k].turns for k in active],
            **keyed,
        )
        t_env = time.perf_counter()
        PROFILE["generate"] += t_env - t_gen
        results = pool.step([o.action for o in outs], envs)
        still = []
        for k, snap, out, (o, r, term, trunc, info) in zip(active, snaps, outs, results):
            trajs[k].turns.append(
                Turn(
                    obs[k],
                    out.text,
                    out.action,
                    float(r),
                    snap,
                    out.valid,
                    info,
                    out.token_ids,
                    out.logprobs,
                    out.policy_mask,
                    out.prompt_token_ids,
                )
            )
            obs[k], infos[k] = o, info
            if term or trunc:
                trajs[k].won, trajs[k].terminated, trajs[k].truncated = bool(info.get("won")), term, trunc
            else:
                still.append(k)
        active = still
    PROFILE["env"] += time.perf_counter() - t_env
    return trajs


def play_tasks(
    env_id: str, env_kwargs: dict, policy, task_ids: list[str], *, batch: int = 50, progress=None, pool=None
) -> list[Trajectory]:
    """One episode of ``policy`` per task, ``batch`` envs at a time in lock-step through one sync
    ``EnvPool`` made once (making an env can cost more than its episode: ALFWorld ~0.1 s), or through
    ``pool`` when given (kept by the caller, so an env that plays the same task again keeps its game
    loaded). ``progress(n)`` is called after each chunk with the number of episodes it played."""
    from prover_gym import EnvPool

    if not task_ids:
        return []
    if pool is not None:
        return rollout_chunks(pool, policy, task_ids=task_ids, progress=progress)
    with EnvPool(env_id, min(batch, len(task_ids)), backend="sync", **env_kwargs) as made:
        return rollout_chunks(made, policy, task_ids=task_ids, progress=progress)


def rollout_chunks(pool, policy, *, task_ids=None, starts=None, keys=None, progress=None) -> list[Trajectory]:
    """``rollout_batch`` over any number of episodes (one per task id, or per start), ``len(pool)`` at a
    time in the pool's first envs. ``keys``: one sampling key (or None) per episode; a chunk whose keys
    are all None is played unkeyed. ``progress(n)`` is called after each chunk with its size."""
    n = len(task_ids) if task_ids is not None else len(starts or [])
    width = len(pool)
    trajs: list[Trajectory] = []
    for first in range(0, n, width):
        part = slice(first, first + width)
        chunk_keys = keys[part] if keys is not None else None
        if chunk_keys is not None and all(k is None for k in chunk_keys):
            chunk_keys = None
        size = min(width, n - first)
        trajs += rollout_batch(
            pool,
            policy,
            task_ids=task_ids[part] if task_ids is not None else None,
            starts=starts[part] if starts is not None else None,
            indices=list(range(size)),
            keys=chunk_keys,
        )
        if progress is not None:
            progress(size)
    return trajs


def split_task_ids(env_id: str, env_kwargs: dict, episodes: int = 0) -> list[str]:
    """The first ``episodes`` task ids (0 = all) of the split ``env_kwargs`` names, in order."""
    from prover_gym import EnvPool

    with EnvPool(env_id, 1, backend="sync", **env_kwargs) as probe:
        ids = probe.call("task_ids", indices=[0])[0]
    return ids[:episodes] if episodes else ids


def split_outcomes(env_id: str, env_kwargs: dict, policy, *, episodes: int = 0, batch: int = 50) -> dict[str, int]:
    """Outcome (0/1) of one episode of ``policy`` on each of the first ``episodes`` tasks of the split
    ``env_kwargs`` names (0 = every task), in task order."""
    ids = split_task_ids(env_id, env_kwargs, episodes)
    return {task: int(t.won) for task, t in zip(ids, play_tasks(env_id, env_kwargs, policy, ids, batch=batch))}
