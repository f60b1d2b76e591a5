"""From rollout groups to token advantages: the method's registry function, then ProVer's verified
segment bonus, with the hygiene options (zero-variance groups, invalid-action penalty).

    per-turn A  = MethodSpec.advantage(outcome rewards, per-turn rewards, state keys) (pure; trainers/methods.py)
    token A     = A of the token's turn                                              (turns_to_tokens)
    ProVer      : token A += beta * bonus_scale * A_seg on the proposed segment's tokens, when the
                  verified A_seg passes the credit rule (apply_segment_bonus)

A group is verified only when it has both successes and failures (at most ``max_verified_groups``
per iteration). ``prover_unverified`` trusts the judge (A_seg = 1, no continuations);
``prover_random`` verifies a random segment of a random trajectory on the judge's side with the
same budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from agents.trajectory import Trajectory
from judges.base import mixed_outcome
from trainers import methods
from trainers.advantages import apply_segment_bonus, bonus_scale, turns_to_tokens
from trainers.methods import base_advantage
from trainers.sequences import token_turns
from trainers.verification import ValueEstimator, Verification, verify_segment


@dataclass
class CreditStats:
    """What the credit step of an iteration did: groups (mixed, dropped), proposals, verified and credited segments with
    their A_seg and p-values, the tokens and advantage mass the bonus touched, what verification cost, and the
    credit.jsonl records."""

    groups: int = 0
    dropped_groups: int = 0  # zero-variance groups left out of the loss (drop_zero_std_groups)
    mixed_groups: int = 0
    proposed: int = 0  # groups the judge named a segment for
    verified: int = 0  # proposals whose A_seg was measured (not prover_unverified)
    credited: int = 0  # proposals whose bonus entered the advantages
    a_seg: list[float] = field(default_factory=list)
    p_values: list[float] = field(default_factory=list)
    credited_tokens: int = 0
    advantage_mass: float = 0.0  # sum of |token advantage| over the groups in the loss, before any bonus
    bonus_mass: float = 0.0  # sum of |bonus| the credited segments added to their tokens
    extra_env_steps: int = 0
    extra_tokens: int = 0
    extra_prompt_tokens: int = 0  # prompt tokens the continuations' generation calls encoded
    records: list[dict] = field(default_factory=list)  # credit.jsonl rows (trainers/credit_record.py)

    def metrics(self) -> dict:
        """The iteration's ``prover/*`` and ``groups/*`` metrics."""
        a = self.a_seg
        return {
            "prover/proposed_segments": self.proposed,
            "prover/verified_segments": self.verified,
            "prover/credited_segments": self.credited,
            "prover/positive_segments": sum(x > 0 for x in a),
            "prover/mean_segment_advantage": sum(a) / len(a) if a else 0.0,
            "prover/segment_advantages": [round(x, 4) for x in a],  # the distribution, per iteration
            "prover/credited_tokens": self.credited_tokens,
            "prover/bonus_share": self.bonus_mass / self.advantage_mass if self.advantage_mass else 0.0,
            "groups/mixed": self.mixed_groups,
            "groups/dropped_fraction": self.dropped_groups / self.groups if self.groups else 0.0,
        }


def outcome_rewards(group: list[Trajectory], invalid_penalty: float) -> tuple[list[float], list[list[float]]]:
    """Outcome reward per trajectory (1 if won, minus ``invalid_penalty`` per turn whose text did not
    parse into an action, as verl-agent does) and the per-turn rewards behind it (GiGPO's returns)."""
    per_turn = []
    for t in group:
        rewards = [-invalid_penalty if not turn.valid else 0.0 for turn in t.turns]
        if rewards:
            rewards[-1] += 1.0 if t.won else 0.0
        per_turn.append(rewards)
    return [sum(r) if r else (1.0 if t.won else 0.0) for r, t in zip(per_turn, group)], per_turn


class CreditAssigner:
    """Computes an iteration's token advantages. ``judge`` and ``estimator_factory`` (a callable
    returning a fresh ``ValueEstimator`` for the current policy) are only used by ProVer methods."""

    def __init__(self, cfg, judge=None, estimator_factory=None, judge_name: str | None = None):
        self.cfg = cfg
        self.judge = judge
        self.estimator_factory = estimator_factory
        self.base = base_advantage(cfg.method, cfg.std_normalize)
        self.spec = methods.get(cfg.method)
        self.judge_name = judge_name or str((getattr(cfg, "judge", None) or {}).get("kind", type(judge).__name__))

    def __call__(
        self,
        groups: list[list[Trajectory]],
        tokenizer=None,
        *,
        iteration: int = 0,
        group_ids: list[int] | None = None,
    ) -> tuple[list[torch.Tensor | None], CreditStats]:
        """Per trajectory (groups flattened in order): its token advantages, or None when its group is
        left out of the loss; and the iteration's statistics, with a credit record per proposal
        (``iteration`` and the groups' global indices ``group_ids`` label them)."""
        cfg, stats = self.cfg, CreditStats()
        prover = self.spec.asks_judge
        estimator = self.estimator_factory() if prover and self.estimator_factory else None
        if estimator is not None and hasattr(self.judge, "bind"):
            self.judge.bind(estimator)
        out: list[torch.Tensor | None] = []
        for g, group in enumerate(groups):
            stats.groups += 1
            rewards, turn_rewards = outcome_rewards(group, cfg.invalid_action_penalty)
            if cfg.drop_zero_std_groups and len(set(rewards)) < 2:
                stats.dropped_groups += 1
                out += [None] * len(group)
                continue
            keys = [[turn.snapshot.key for turn in t.turns] for t in group]
            per_turn = self.base(
                rewards,
                turn_rewards,
                keys,
                std_normalize=cfg.std_normalize,
                gamma=cfg.gigpo_gamma,
                omega=cfg.gigpo_omega,
            )
            layouts = [token_turns(t, tokenizer) for t in group]
            tokens = [turns_to_tokens(a, lay) for a, lay in zip(per_turn, layouts)]
            stats.advantage_mass += float(sum(t.abs().sum() for t in tokens))
            if mixed_outcome(group):
                stats.mixed_groups += 1
                if prover and (cfg.max_verified_groups is None or stats.proposed < cfg.max_verified_groups):
                    where = (iteration, group_ids[g] if group_ids is not None else g)
                    self._prover(group, rewards, tokens, layouts, estimator, stats, where)
            out += tokens
        if estimator is not None:
            stats.extra_env_steps, stats.extra_tokens = estimator.extra_env_steps, estimator.extra_tokens
            stats.extra_prompt_tokens = estimator.extra_prompt_tokens
        return out, stats

    def _prover(self, group, rewards, tokens, layouts, estimator, stats, where: tuple[int, int]) -> None:
        """Judge, verify and credit one mixed group; ``where``: (iteration, global group index) for its record."""
        cfg = self.cfg
        proposal = self.judge.propose(group)
        if proposal is None or not proposal.valid_for(group):
            return
        stats.proposed += 1
        traj = group[proposal.trajectory]
        v = None
        if not self.spec.verifies:  # prover_unverified: trust the judge, no continuations
            a_seg, passes = 1.0, True
        else:
            v = self._verification(proposal, traj, group, estimator)
            a_seg = v.a_seg
            stats.verified += 1
            stats.a_seg.append(a_seg)
            stats.p_values.append(v.p_value)
            passes = a_seg > cfg.min_a_seg and (cfg.gate_alpha is None or v.p_value <= cfg.gate_alpha)
        credited = passes or (cfg.sign == "both" and a_seg < 0)
        scale = bonus_scale(torch.tensor(rewards, dtype=torch.float32), std_normalize=cfg.std_normalize)
        touched = 0
        if credited:
            touched = self._credit(proposal, a_seg, scale, tokens, layouts, stats)
        if cfg.credit_records is None or len(stats.records) < cfg.credit_records:
            from trainers.credit_record import make_record

            stats.records.append(
                make_record(
                    iteration=where[0],
                    group_index=where[1],
                    method=cfg.method,
                    judge=self.judge_name,
                    side=str(getattr(self.judge, "side", "")),
                    group=group,
                    proposal=proposal,
                    verification=v,
                    credited=credited,
                    bonus=cfg.beta * scale * a_seg if credited else 0.0,
                    credited_tokens=touched,
                    obs_chars=cfg.credit_obs_chars,
                )
            )

    def _credit(self, proposal, a_seg: float, scale: float, tokens, layouts, stats) -> int:
        """Add the bonus to the segment's policy tokens; returns how many tokens it changed."""
        cfg = self.cfg
        i, layout = proposal.trajectory, layouts[proposal.trajectory]
        before = tokens[i]
        tokens[i] = apply_segment_bonus(
            before,
            layout,
            torch.ones_like(layout),
            proposal.start,
            proposal.end,
            a_seg,
            beta=cfg.beta * scale,
            sign=cfg.sign,
        )
        touched = int((tokens[i] != before).sum())
        stats.bonus_mass += float((tokens[i] - before).abs().sum())
        stats.credited += 1
        stats.credited_tokens += touched
        return touched

    def _verification(self, proposal, traj, group, estimator) -> Verification:
        ev = proposal.evidence
        if isinstance(ev, dict) and "before" in ev:  # the exhaustive judge measured it already
            if not self.cfg.reverify:
                return Verification.measured(
                    ev["before"],
                    ev["after"],
                    before_source=ev.get("before_source", ""),
                    after_source=ev.get("after_source", ""),
                )
            # re-verify on fresh continuations (another key namespace), not the judge's maximum
            namespace, estimator.namespace = estimator.namespace, "reverify"
            try:
                return verify_segment(None, traj, proposal, None, self.cfg.continuations, estimator=estimator)
            finally:
                estimator.namespace = namespace
        reuse = self.cfg.value_before == "group"
        return verify_segment(
            None,
            traj,
            proposal,
            None,
            self.cfg.continuations,
            estimator=estimator,
            group_outcomes=[t.won for t in group] if reuse else None,
        )


def make_estimator_factory(env, policy_fn, m: int, pool_fn=None):
    """A factory of fresh ``ValueEstimator``s (one per iteration, so cost counters are per iteration)
    for the policy ``policy_fn()`` returns then."""

    def factory() -> ValueEstimator:
        return ValueEstimator(env, policy_fn(), m, pool_fn() if pool_fn is not None else None)

    return factory
