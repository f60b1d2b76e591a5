"""Settings with a known pivot (ALFWorld heat / cool / clean from the object): the deciding action
is recorded in the final info, the skip demonstrator makes an early mistake with a competent tail,
and the pivot survives snapshot / restore."""

import gymnasium as gym
import pytest

import prover_gym  # noqa: F401
from agents.baselines import ExpertPolicy, SkipExpert, make_demonstrator
from agents.rollout import rollout
from prover_gym import restore, snapshot

TRANSFORMS = ["pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_clean_then_place_in_recep"]
SETTING = dict(split="train", max_receptacles=5, num_distractors=1, max_steps=30, num_games=60, start="object")


@pytest.fixture(scope="module")
def env():
    e = gym.make("prover/ALFWorld-v0", task_types=TRANSFORMS, budget_slack=1, **SETTING)
    yield e
    e.close()


@pytest.fixture(scope="module")
def long_env():
    e = gym.make("prover/ALFWorld-v0", task_types=TRANSFORMS, budget_slack=6, **SETTING)
    yield e
    e.close()


def test_the_expert_wins_and_its_pivot_is_the_move_after_the_take(env):
    for task in env.unwrapped.task_ids()[:6]:
        traj = rollout(env, ExpertPolicy(), task_id=task)
        assert traj.won and traj.turns[0].action.startswith("take ")
        assert traj.turns[-1].info["pivot_step"] == 1
        # to the appliance (or, where the object lies at it, the transform itself)
        decision = traj.turns[1].action
        assert any(w in decision for w in ("microwave", "fridge", "sinkbasin")), decision
        assert all("pivot_step" not in u.info for u in traj.turns[:-1])  # only the final step carries it


@pytest.mark.parametrize("distractors", [0, 5])
def test_skipping_the_transform_fails_only_at_the_end(env, long_env, distractors):
    e = env if distractors == 0 else long_env
    for task in e.unwrapped.task_ids()[:6]:
        traj = rollout(e, SkipExpert(p=1.0, distractors=distractors), task_id=task)
        assert not traj.won and traj.truncated and traj.turns[-1].info["pivot_step"] == 1
        obj = traj.turns[0].action[len("take ") :].split(" from ")[0]
        target = traj.turns[1].action[len("go to ") :]
        assert f"move {obj} to {target}" in [u.action for u in traj.turns]  # the competent-looking tail
        assert len(traj.turns) - 1 - 1 >= 3 + distractors  # the outcome comes turns after the pivot
        won = rollout(e, SkipExpert(p=0.0, distractors=distractors), task_id=task)
        assert (
            won.won and [u.action for u in won.turns[2 : 2 + distractors]] == (["look", "inventory"] * 3)[:distractors]
        )


def test_skip_action_only_at_the_pivot_and_the_pivot_survives_restore(env):
    base = env.unwrapped
    task = base.task_ids()[0]
    env.reset(options={"task_id": task})
    assert not base.at_pivot() and base.skip_action() is None
    env.step(base.expert_action())  # the take
    assert base.at_pivot()
    skip = base.skip_action()
    assert skip.startswith("go to ") and skip != base.expert_action()
    snap = snapshot(env)
    env.step(skip)
    assert not base.at_pivot() and base.skip_action() is None
    restore(env, snap)
    assert base.at_pivot() and base.skip_action() == skip
    while True:  # finish with the expert from the restored pivot: the take recorded before restore counts
        obs, r, term, trunc, info = env.step(base.expert_action())
        if term or trunc:
            break
    assert info["won"] and info["pivot_step"] == 1


def test_other_task_types_and_room_starts_record_no_pivot():
    e = gym.make("prover/ALFWorld-v0", task_types=["pick_and_place_simple"], budget_slack=1, **SETTING)
    traj = rollout(e, ExpertPolicy(), task_id=e.unwrapped.task_ids()[0])
    assert traj.won and "pivot_step" not in traj.turns[-1].info  # the contract: settings without a pivot omit it
    e.close()


def test_the_skip_demonstrator_is_made_from_config_and_refuses_bad_keys():
    demo = make_demonstrator({"kind": "skip", "p": 0.3, "distractors": 2})
    assert isinstance(demo, SkipExpert) and demo.p == 0.3 and demo.distractors == 2
    with pytest.raises(ValueError, match="unknown keys"):
        make_demonstrator({"kind": "skip", "q": 1})
    with pytest.raises(ValueError, match="probability"):
        SkipExpert(p=2.0)


class _Script:
    """Plays a fixed list of actions, then ``then`` (default: the env's expert)."""

    def __init__(self, actions, then=None):
        self.actions, self.then = list(actions), then or ExpertPolicy()

    def act(self, env, observation, info, history=None):
        from agents.baselines import PolicyOutput

        if not self.actions:
            return self.then.act(env, observation, info, history)
        action = self.actions.pop(0)
        return PolicyOutput(action, action)


def test_the_last_shared_state_judge_finds_the_decision_first_divergence_misses(env):
    """A failed run that first fumbles (an invalid command: the state stays), then takes the object and
    goes straight to the target: first_divergence names the winner's take (where the fumble happened,
    a cosmetic difference), the decision-seeking judge the winner's move to the appliance (the last state
    both runs were in where they chose differently). A run that reaches the appliance but never applies
    the transform: the judge names the transform, the decision that run missed."""
    import judges

    task = env.unwrapped.task_ids()[0]
    won = rollout(env, ExpertPolicy(), task_id=task)
    plan = [t.action for t in won.turns]
    fumble = rollout(env, _Script(["dance"], then=SkipExpert(p=1.0)), task_id=task)
    assert won.won and not fumble.won and fumble.turns[1].action == plan[0] and fumble.turns[2].action != plan[1]
    assert fumble.turns[0].snapshot.key == fumble.turns[1].snapshot.key  # the invalid command kept the state
    fd = judges.make({"kind": "first_divergence"}).propose([won, fumble])
    lss = judges.make({"kind": "last_shared_state"}).propose([won, fumble])
    assert (fd.trajectory, fd.start) == (0, 0)  # the take: cosmetic
    assert (lss.trajectory, lss.start, lss.end) == (0, 1, 1) == (0, won.turns[-1].info["pivot_step"], 1)
    failed_side = judges.make({"kind": "last_shared_state", "side": "failed"}).propose([won, fumble])
    assert (failed_side.trajectory, failed_side.start) == (1, 2)  # the fumbling run's skip
    idle = rollout(env, _Script(plan[:2] + ["look"] * 8), task_id=task)  # at the appliance, no transform
    assert not idle.won
    lss = judges.make({"kind": "last_shared_state"}).propose([won, idle])
    assert (lss.trajectory, lss.start) == (0, 2)  # the transform, a turn after the recorded pivot
    assert judges.make({"kind": "last_shared_state"}).propose([won, won]) is None  # not mixed
