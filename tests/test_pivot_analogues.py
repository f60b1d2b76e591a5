"""The pivot setting's analogues (issue "Where credit assignment decides"): WebShop from the results of a
search for the instruction (the product chosen decides) and Search-QA's two-hop questions with no spare
search round (the first search decides), each with a decoy demonstrator whose early mistake is followed
by competent turns; and the long ALFWorld setting (10+ turns from the pivot to the outcome). Through
``gym.make`` with the shipped recipes' kwargs."""

import pickle

import gymnasium as gym
import pytest

import prover_gym  # noqa: F401
from agents.baselines import DecoyExpert, ExpertPolicy, SkipExpert, make_demonstrator
from agents.rollout import rollout
from prover_gym import restore, snapshot
from trainers.bases import RECIPES

# WebShop's analogue has no shipped base (the tiny model cannot copy an asin; docs/results.md): its kwargs
RESULTS = {"start": "results", "budget_slack": 1}


@pytest.fixture(scope="module")
def shop():
    e = gym.make("prover/WebShop-v0", split="train", **RESULTS)
    yield e
    e.close()


@pytest.fixture(scope="module")
def qa():
    e = gym.make("prover/SearchQA-v0", **RECIPES["searchqa_bridge"]["train_kwargs"])
    yield e
    e.close()


def _tasks_with_decoy(env, n):
    out = []
    for task in env.unwrapped.task_ids():
        env.reset(options={"task_id": task})
        if env.unwrapped.decoy_action() is not None:
            out.append(task)
        if len(out) == n:
            return out
    raise AssertionError("too few tasks with a decoy")


def test_webshop_results_start_offers_a_readable_choice_among_plausible_products(shop):
    base = shop.unwrapped
    for task in base.task_ids()[:10]:
        obs, info = shop.reset(options={"task_id": task})
        assert info["page"] == "results" and base.at_pivot()
        pick, decoy = base._plans[task]
        products = [c for c in info["available_actions"]["clickables"] if c.startswith("b0")]
        assert pick.lower() in products and decoy.lower() in products and len(products) >= 2
        assert base.expert_action() == f"click[{pick}]" and base.decoy_action() == f"click[{decoy}]"  # as shown
        # the pick reads better on the page: its title names more of the instruction's attributes, or the
        # decoy is over the price limit (both shown in the observation)
        goal, text = base._goal, base._goal["instruction_text"].lower()
        named = [a for a in goal["attributes"] if a in text]
        title = {a: base.catalog.by_asin[a]["Title"].lower() for a in (pick, decoy)}
        matches = {a: sum(x in title[a] for x in named) for a in (pick, decoy)}
        dear = goal.get("price_upper") is not None and min(base.catalog.by_asin[decoy]["pricing"]) > goal["price_upper"]
        assert matches[pick] > matches[decoy] or dear
        assert base.catalog.by_asin[pick]["Title"] in obs and base.catalog.by_asin[decoy]["Title"] in obs
    test = gym.make("prover/WebShop-v0", split="test", **RESULTS)
    assert 0 < len(test.unwrapped.task_ids()) < 500
    test.close()


@pytest.mark.parametrize("name", ["webshop_results", "searchqa_bridge"])
def test_the_expert_wins_and_its_pivot_is_the_first_move(name, shop, qa):
    env = shop if name == "webshop_results" else qa
    for task in env.unwrapped.task_ids()[:8]:
        traj = rollout(env, ExpertPolicy(), task_id=task)
        assert traj.won and traj.turns[-1].info["pivot_step"] == 0
        assert all("pivot_step" not in t.info for t in traj.turns[:-1])  # only the final step carries it
        assert len(traj.turns) >= 3  # turns follow the decision


@pytest.mark.parametrize("name", ["webshop_results", "searchqa_bridge"])
def test_the_decoy_fails_only_at_the_end_after_competent_turns(name, shop, qa):
    env = shop if name == "webshop_results" else qa
    for task in _tasks_with_decoy(env, 6):
        traj = rollout(env, DecoyExpert(p=1.0), task_id=task)
        assert not traj.won and traj.turns[-1].info["pivot_step"] == 0
        env.reset(options={"task_id": task})
        assert traj.turns[0].action != env.unwrapped.expert_action()  # the mistake is at the pivot
        # then no invalid move: every later turn is a competent one on the wrong branch, ending the episode
        assert all("error" not in t.info for t in traj.turns) and traj.terminated
        assert len(traj.turns) >= 3
        if name == "webshop_results":
            assert traj.turns[-1].action == "click[buy now]" and traj.turns[-1].reward < 1.0
        else:
            assert traj.turns[-1].action.startswith("answer[") and traj.turns[1].action.startswith("search[")
        assert rollout(env, DecoyExpert(p=0.0), task_id=task).won


def test_a_wrong_product_cannot_be_undone_at_budget_slack_one(shop):
    base = shop.unwrapped
    task = _tasks_with_decoy(shop, 1)[0]
    shop.reset(options={"task_id": task})
    shop.step(base.decoy_action())
    while True:  # back to the results and the expert from there: the budget runs out before the buy
        obs, r, term, trunc, info = shop.step(base.expert_action())
        if term or trunc:
            break
    assert trunc and not info["won"] and info["pivot_step"] == 0


@pytest.mark.parametrize("name", ["webshop_results", "searchqa_bridge"])
def test_the_pivot_and_the_branch_survive_snapshot_restore_and_pickle(name, shop, qa):
    env = shop if name == "webshop_results" else qa
    base = env.unwrapped
    task = _tasks_with_decoy(env, 1)[0]
    env.reset(options={"task_id": task})
    at_pivot = snapshot(env)
    env.step(base.decoy_action())
    on_branch = pickle.loads(pickle.dumps(snapshot(env)))
    expected = [base.decoy_action()]
    restore(env, at_pivot)
    assert base.at_pivot() and base.decoy_action() is not None
    restore(env, on_branch)
    assert not base.at_pivot() and base.decoy_action() == expected[0]
    while True:
        obs, r, term, trunc, info = env.step(base.decoy_action() or base.expert_action())
        if term or trunc:
            break
    assert not info["won"] and info["pivot_step"] == 0  # the click before the snapshot still counts


def test_other_starts_and_single_hop_questions_record_no_pivot():
    e = gym.make("prover/SearchQA-v0", split="train", data_sources=["single_hop"], max_turns=2)
    traj = rollout(e, ExpertPolicy(), task_id=e.unwrapped.task_ids()[0])
    assert traj.won and "pivot_step" not in traj.turns[-1].info and e.unwrapped.decoy_action() is None
    e.close()
    e = gym.make("prover/SearchQA-v0", split="train", data_sources=["bridge"], max_turns=3)  # a spare round
    traj = rollout(e, ExpertPolicy(), task_id=e.unwrapped.task_ids()[0])
    assert traj.won and "pivot_step" not in traj.turns[-1].info
    e.close()
    e = gym.make("prover/WebShop-v0", split="train")
    traj = rollout(e, ExpertPolicy(), task_id=e.unwrapped.task_ids()[0])
    assert "pivot_step" not in traj.turns[-1].info and not e.unwrapped.at_pivot() and e.unwrapped.decoy_action() is None
    e.close()


def test_bad_start_and_budget_name_the_fix():
    with pytest.raises(ValueError, match="'results'"):
        gym.make("prover/WebShop-v0", start="result")
    with pytest.raises(ValueError, match="needs start='item' or 'results'"):
        gym.make("prover/WebShop-v0", budget_slack=1)


def test_the_decoy_demonstrator_is_made_from_config_and_refuses_bad_input(qa):
    demo = make_demonstrator({"kind": "decoy", "p": 0.25})
    assert isinstance(demo, DecoyExpert) and demo.p == 0.25
    with pytest.raises(ValueError, match="unknown keys"):
        make_demonstrator({"kind": "decoy", "distractors": 1})
    with pytest.raises(ValueError, match="probability"):
        DecoyExpert(p=-0.1)
    alf = gym.make("prover/ALFWorld-v0", split="train", num_games=4, task_types=["pick_and_place_simple"])
    alf.reset()
    with pytest.raises(ValueError, match="decoy_action"):
        DecoyExpert(p=1.0).act(alf, "", {})
    alf.close()


def test_the_long_alfworld_setting_puts_ten_turns_between_pivot_and_outcome():
    spec = RECIPES["alfworld_pivot_long"]
    d = spec["sft"]["sft_demonstrator"]["distractors"]
    kwargs = {**spec["train_kwargs"], "num_games": 40}
    e = gym.make(spec["env_id"], **kwargs)
    for task in e.unwrapped.task_ids()[:4]:
        won = rollout(e, SkipExpert(p=0.0, distractors=d), task_id=task)
        lost = rollout(e, SkipExpert(p=1.0, distractors=d), task_id=task)
        assert won.won and not lost.won and lost.truncated
        for traj in (won, lost):
            pivot = traj.turns[-1].info["pivot_step"]
            assert pivot == 1 and len(traj.turns) - 1 - pivot >= 10
    e.close()
    # the policy's window keeps the pivot in view when the transform is due (after the take, the pivot
    # and d routine turns)
    assert spec["format"]["history_length"] >= d + 2
