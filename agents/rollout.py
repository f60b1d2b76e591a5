"""Run a policy in an env (or an ``EnvPool``) and return trajectories with the snapshot before
every turn, so any turn can be restored and branched (what ProVer's verification needs)."""

from __future__ import annotations

from agents.trajectory import Trajectory, Turn
from prover_gym import snapshot


def rollout(env, policy, *, seed: int | None = None, task_id: str | None = None) -> Trajectory:
    """One episode of ``policy`` (anything with ``act(env, observation, info, history)``) in ``env``."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
    traj = Trajectory(env.unwrapped.env_id, info["task_id"], info["task"])
    return _play(env, policy, obs, info, traj, [])


def _play(env, policy, obs: str, info: dict, traj: Trajectory, past: list[Turn]) -> Trajectory:
    """Step ``policy`` until the episode ends, appending turns (with the snapshot before each)."""
    while True:
        snap = snapshot(env)
        out = policy.act(env, obs, info, past + traj.turns)
        next_obs, reward, terminated, truncated, next_info = env.step(out.action)
        traj.turns.append(Turn(obs, out.text, out.action, float(reward), snap, out.valid, next_info,
                               out.token_ids, out.logprobs, out.policy_mask, out.prompt_token_ids))
        obs, info = next_obs, next_info
        if terminated or truncated:
            traj.won, traj.terminated, traj.truncated = bool(info.get("won")), terminated, truncated
            return traj


def rollout_from(env, snap, policy, history: list[Turn] | None = None, *, task_id: str = "", task: str = "") -> Trajectory:
    """Continue from ``snap`` (restored into ``env``) until the episode ends. ``history`` (the turns
    that led there) is shown to the policy but not included in the returned trajectory."""
    from prover_gym import restore

    restore(env, snap)
    base = env.unwrapped
    obs = base._last_obs
    info = base._info({})
    traj = Trajectory(base.env_id, task_id or info["task_id"], task or info["task"])
    if base._terminated or base._truncated:
        traj.won, traj.terminated, traj.truncated = bool(info.get("won")), base._terminated, base._truncated
        return traj
    return _play(env, policy, obs, info, traj, list(history or []))


def rollout_batch(pool, policy, seeds=None, task_ids=None) -> list[Trajectory]:
    """One episode in each env of ``pool`` (an ``EnvPool``), stepped in lock-step; ``policy``
    needs ``act_batch(pool, indices, observations, infos, histories)``."""
    n = len(pool)
    options = [{"task_id": t} for t in task_ids] if task_ids is not None else None
    first = pool.reset(seeds=seeds, options=options)
    obs = [o for o, _ in first]
    infos = [i for _, i in first]
    trajs = [Trajectory(pool.env_id, i.get("task_id"), i.get("task", "")) for i in infos]
    active = [i for i in range(n) if "worker_error" not in infos[i]]
    while active:
        snaps = pool.snapshot(active)
        outs = policy.act_batch(pool, active, [obs[i] for i in active], [infos[i] for i in active],
                                [trajs[i].turns for i in active])
        results = pool.step([o.action for o in outs], active)
        still = []
        for i, snap, out, (o, r, term, trunc, info) in zip(active, snaps, outs, results):
            trajs[i].turns.append(Turn(obs[i], out.text, out.action, float(r), snap, out.valid, info,
                                       out.token_ids, out.logprobs, out.policy_mask, out.prompt_token_ids))
            obs[i], infos[i] = o, info
            if term or trunc:
                trajs[i].won, trajs[i].terminated, trajs[i].truncated = bool(info.get("won")), term, trunc
            else:
                still.append(i)
        active = still
    return trajs
