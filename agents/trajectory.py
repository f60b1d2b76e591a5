"""Trajectories as DESIGN.md defines them: a list of turns, each with the observation shown, the
model's raw text, the parsed action, the reward, the snapshot taken *before* the turn, and (for
trainable policies) token ids, logprobs and the mask of policy tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

from prover_gym.core import Snapshot


@dataclass
class Turn:
    """One step of an episode: the observation the policy saw, its raw text, the parsed action, the reward, the env's
    snapshot *before* the turn, whether the text parsed, the step's info, and for trainable policies the generated
    token ids, their log-probabilities, the policy-token mask and the prompt's token ids."""

    observation: str
    text: str
    action: str
    reward: float
    snapshot: Snapshot
    valid: bool = True
    info: dict = field(default_factory=dict, repr=False)
    token_ids: list[int] | None = field(default=None, repr=False)
    logprobs: list[float] | None = field(default=None, repr=False)
    policy_mask: list[int] | None = field(default=None, repr=False)
    prompt_token_ids: list[int] | None = field(default=None, repr=False)


@dataclass
class Trajectory:
    """One episode of one task: its turns, whether it was won, how it ended, and the sampling key its turns were drawn
    with."""

    env_id: str
    task_id: str
    task: str
    turns: list[Turn] = field(default_factory=list)
    won: bool = False
    terminated: bool = False
    truncated: bool = False
    # the sampling key its turns were drawn with (agents.backends.sampling), or None: a continuation
    # from turn k of this trajectory is keyed from it, so branching is reproducible too
    key: tuple | None = field(default=None, compare=False)

    @property
    def total_reward(self) -> float:
        """The sum of the turns' rewards."""
        return sum(t.reward for t in self.turns)

    def __len__(self) -> int:
        return len(self.turns)
