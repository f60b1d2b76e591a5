"""The credit record: one JSON line per judged segment in ``out_dir/credit.jsonl``.

ProVer's whole decision for a group in one place: the group's trajectories (actions, observations cut
to ``obs_chars`` characters, rewards, outcomes), the judge's proposal (kind, side, trajectory, turn
span, reason), the verification (each side's source and continuation outcomes, each continuation's
actions and result, V(before), V(after), A_seg and its standard error, the p-value), whether it was
credited, the bonus per token and the tokens it touched, the pivot step when the env records one
(``info["pivot_step"]`` of a trajectory's final step), and the generated-token cost. ``SCHEMA`` is its
JSON Schema (docs/credit.md describes each field); ``validate`` checks a record against it.

Written by the trainer for every method that proposes segments (prover, prover_random,
prover_unverified, any judge, exhaustive and oracle included), capped per iteration by
``credit_records`` (None = all).
"""

from __future__ import annotations

from typing import Any

from agents.trajectory import Trajectory
from judges.oracle import recorded_pivot
from trainers.judge_eval import localised

VERSION = 1

_INT = {"type": "integer"}
_NUM = {"type": "number"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_OPT_INT = {"type": ["integer", "null"]}
_CONTINUATION = {
    "type": "object",
    "required": ["actions", "won", "turns", "tokens"],
    "additionalProperties": False,
    "properties": {
        "actions": {"type": "array", "items": _STR},
        "won": _BOOL,
        "turns": _INT,
        "tokens": _INT,
    },
}
_SIDE = {
    "type": "object",
    "required": ["boundary", "source", "outcomes", "value", "continuations"],
    "additionalProperties": False,
    "properties": {
        "boundary": _INT,  # the state before this turn (len(turns) = the end of the episode)
        "source": {"enum": ["continuations", "group", "terminal", "judge"]},
        "outcomes": {"type": "array", "items": _BOOL},
        "value": _NUM,
        "continuations": {"type": "array", "items": _CONTINUATION},
    },
}
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "prover-gym credit record",
    "type": "object",
    "required": [
        "version",
        "iteration",
        "group",
        "task_id",
        "env_id",
        "method",
        "obs_chars",
        "trajectories",
        "proposal",
        "verification",
        "credited",
        "bonus",
        "credited_tokens",
        "pivot_step",
        "cost",
    ],
    "additionalProperties": False,
    "properties": {
        "version": {"const": VERSION},
        "iteration": _INT,
        "group": _INT,
        "task_id": _STR,
        "env_id": _STR,
        "method": _STR,
        "obs_chars": _INT,
        "trajectories": {
            "type": "array",
            "minItems": 2,
            "items": {
                "type": "object",
                "required": ["index", "won", "reward", "actions", "observations", "valid", "pivot_step"],
                "additionalProperties": False,
                "properties": {
                    "index": _INT,
                    "won": _BOOL,
                    "reward": _NUM,
                    "actions": {"type": "array", "items": _STR},
                    "observations": {"type": "array", "items": _STR},
                    "valid": {"type": "array", "items": _BOOL},
                    "pivot_step": _OPT_INT,
                },
            },
        },
        "proposal": {
            "type": "object",
            "required": ["judge", "side", "trajectory", "start", "end", "reason"],
            "additionalProperties": False,
            "properties": {
                "judge": _STR,
                "side": _STR,
                "trajectory": _INT,
                "start": _INT,
                "end": _INT,
                "reason": _STR,
            },
        },
        "verification": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["before", "after", "a_seg", "a_seg_se", "p_value"],
                    "additionalProperties": False,
                    "properties": {
                        "before": _SIDE,
                        "after": _SIDE,
                        "a_seg": _NUM,
                        "a_seg_se": _NUM,
                        "p_value": _NUM,
                    },
                },
            ]
        },
        "credited": _BOOL,
        "bonus": _NUM,
        "credited_tokens": _INT,
        "pivot_step": _OPT_INT,
        "hit_pivot": {"type": ["boolean", "null"]},
        "cost": {
            "type": "object",
            "required": ["generated_tokens", "prompt_tokens", "env_steps"],
            "additionalProperties": False,
            "properties": {"generated_tokens": _INT, "prompt_tokens": _INT, "env_steps": _INT},
        },
    },
}


def _continuation(run: Trajectory) -> dict:
    return {
        "actions": [t.action for t in run.turns],
        "won": bool(run.won),
        "turns": len(run.turns),
        "tokens": sum(len(t.token_ids or []) for t in run.turns),
    }


def _side(boundary: int, source: str, outcomes: list, runs: list[Trajectory]) -> dict:
    values = [bool(x) for x in outcomes]
    return {
        "boundary": boundary,
        "source": source or "judge",
        "outcomes": values,
        "value": sum(values) / len(values) if values else 0.0,
        "continuations": [_continuation(r) for r in runs],
    }


def make_record(
    *,
    iteration: int,
    group_index: int,
    method: str,
    judge: str,
    side: str,
    group: list[Trajectory],
    proposal,
    verification,
    credited: bool,
    bonus: float,
    credited_tokens: int,
    obs_chars: int,
) -> dict:
    """One record (see ``SCHEMA``). ``verification``: a ``trainers.verification.Verification`` or None
    (``prover_unverified``); ``bonus``: what each credited policy token received (0 when not credited)."""
    traj = group[proposal.trajectory]
    trajectories = [
        {
            "index": i,
            "won": bool(t.won),
            "reward": float(t.total_reward),
            "actions": [u.action for u in t.turns],
            "observations": [u.observation[:obs_chars] for u in t.turns],
            "valid": [bool(u.valid) for u in t.turns],
            "pivot_step": recorded_pivot(t),
        }
        for i, t in enumerate(group)
    ]
    pivot = recorded_pivot(traj)
    ver = None
    cost = {"generated_tokens": 0, "prompt_tokens": 0, "env_steps": 0}
    if verification is not None:
        v = verification
        ver = {
            "before": _side(proposal.start, v.before_source, v.success_before, v.continuations_before),
            "after": _side(proposal.end + 1, v.after_source, v.success_after, v.continuations_after),
            "a_seg": float(v.a_seg),
            "a_seg_se": float(v.a_seg_se),
            "p_value": float(v.p_value),
        }
        cost = {
            "generated_tokens": int(v.extra_tokens),
            "prompt_tokens": int(v.extra_prompt_tokens),
            "env_steps": int(v.extra_env_steps),
        }
    return {
        "version": VERSION,
        "iteration": iteration,
        "group": group_index,
        "task_id": str(traj.task_id),
        "env_id": str(traj.env_id),
        "method": method,
        "obs_chars": obs_chars,
        "trajectories": trajectories,
        "proposal": {
            "judge": judge,
            "side": side,
            "trajectory": proposal.trajectory,
            "start": proposal.start,
            "end": proposal.end,
            "reason": str(proposal.reason or ""),
        },
        "verification": ver,
        "credited": bool(credited),
        "bonus": float(bonus),
        "credited_tokens": int(credited_tokens),
        "pivot_step": pivot,
        "hit_pivot": localised(group, proposal),
        "cost": cost,
    }


def validate(record: dict) -> None:
    """Raise ``jsonschema.ValidationError`` when ``record`` does not follow ``SCHEMA``."""
    import jsonschema

    jsonschema.validate(record, SCHEMA)
