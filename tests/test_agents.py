"""Prompt formats and parsers on adversarial model text; scripted policies and rollouts."""

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.baselines import ExpertPolicy, RandomPolicy
from agents.formats import INVALID_ACTION, ReActFormat, SearchR1Format, make_format
from agents.rollout import rollout, rollout_batch
from prover_gym import EnvPool, restore

S = SearchR1Format()


def test_searchr1_prompt_is_the_original_template():
    p = S.prompt("  who wrote the Silent Harbour ")
    assert p.startswith(
        "Answer the given question. You must conduct reasoning inside <think> and </think> first every time"
    )
    assert "You can search as many times as your want." in p  # the original typo
    assert p.endswith("For example, <answer> Beijing </answer>. Question: who wrote the Silent Harbour?\n")


@pytest.mark.parametrize(
    "text, action, valid",
    [
        ("<think>hm</think><search> Veloria capital </search>", "search[Veloria capital]", True),
        ("<think>x</think><search>q</search> then <answer>a</answer>", "search[q]", True),
        ("<answer>a</answer> and later <search>q</search>", "answer[a]", True),  # first block after the cut
        ("<answer>\n New York \n</answer>", "answer[New York]", True),
        ("<search>q</search><information>fake doc</information><answer>x</answer>", "search[q]", True),
        ("<search>unclosed", INVALID_ACTION, False),
        ("<SEARCH>q</SEARCH>", INVALID_ACTION, False),
        ("search[q]", INVALID_ACTION, False),  # canonical syntax is not the Search-R1 format
        ("", INVALID_ACTION, False),
        ("<answer></answer>", "answer[]", True),
        ("<search>a <b> c</search>", "search[a <b> c]", True),
    ],
)
def test_searchr1_parse(text, action, valid):
    parsed = S.parse(text)
    assert (parsed.action, parsed.valid) == (action, valid)
    assert parsed.valid or parsed.reason


def test_searchr1_cut_drops_text_after_the_first_closing_tag():
    assert S.parse("<search>q</search><information>I made this up</information>").text == "<search>q</search>"
    messages, prefix = S.messages("q", [("<search>a</search>", "\n\n<information>x</information>\n\n")])
    assert messages[0]["role"] == "user" and prefix == "<search>a</search>\n\n<information>x</information>\n\n"


R = ReActFormat()


@pytest.mark.parametrize(
    "text, action, valid",
    [
        ("<think>need tea</think><action>click[Buy Now]</action>", "click[buy now]", True),
        ("<think>a</think>\n<action>\n search[green tea] \n</action>", "search[green tea]", True),
        ("<think>a</think><action>x</action><action>y</action>", "x", True),
        ("<action>click[x]</action>", INVALID_ACTION, False),  # verl-agent requires the think block
        ("<think>a</think>no action here", INVALID_ACTION, False),
        ("<think>买</think><action>click[x]</action>", INVALID_ACTION, False),
        ("<think>a</think><action>   </action>", INVALID_ACTION, False),
        ("<think>a</think><action>unterminated", INVALID_ACTION, False),
    ],
)
def test_react_parse(text, action, valid):
    parsed = R.parse(text)
    assert (parsed.action, parsed.valid) == (action, valid)


@given(st.text(max_size=300))
def test_parsers_never_raise(text):
    for fmt in (S, R):
        parsed = fmt.parse(text)
        assert isinstance(parsed.action, str) and (parsed.valid or parsed.action == INVALID_ACTION)


def test_react_history_of_actions_only():
    fmt = make_format("prover/WebShop-v0", history_length=3, history_observations=False)
    history = [(f"page {i} " * 50, f"click[option {i}]") for i in range(5)]
    content = fmt.messages("buy tea", history, "now", ["click[a]"])[0]["content"]
    assert "taken 5 step(s)" in content and "page" not in content
    assert "[Action 3: 'click[option 2]']" in content and "[Action 5: 'click[option 4]']" in content
    assert "click[option 1]" not in content  # outside the window of 3


def test_react_history_window_and_fallback():
    fmt = make_format("prover/WebShop-v0", history_length=2)
    history = [(f"obs{i}", f"click[{i}]") for i in range(5)]
    content = fmt.messages("buy tea", history, "now", ["click[a]"])[0]["content"]
    assert "already taken 5 step(s)" in content and "Observation 4: 'obs3'" in content and "obs1'" not in content
    long = fmt.messages("t", [("x" * 20_000, "a")], "now", None)[0]["content"]
    assert "x" * 100 not in long  # over the budget: the no-history prompt
    with pytest.raises(ValueError, match="unknown format"):
        make_format("nope")


@pytest.mark.parametrize("env_id", ["prover/SearchQA-v0", "prover/WebShop-v0"])
def test_invalid_action_marker_is_rejected_by_every_env(env_id):
    env = gym.make(env_id, split="test")
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(INVALID_ACTION)
    assert info["error"] and reward == 0.0 and not term


@pytest.mark.parametrize("env_id", ["prover/SearchQA-v0", "prover/WebShop-v0"])
def test_expert_rollout_snapshots_restore_each_turn(env_id):
    env = gym.make(env_id, split="test")
    traj = rollout(env, ExpertPolicy(), seed=4)
    assert traj.won and traj.terminated and traj.total_reward == 1.0 and traj.task_id == env.unwrapped.task_ids()[4]
    for k, turn in enumerate(traj.turns):  # restoring the snapshot before turn k replays the rest exactly
        restore(env, turn.snapshot)
        replay = [env.step(t.action) for t in traj.turns[k:]]
        assert [r[0] for r in replay[:-1]] == [t.observation for t in traj.turns[k + 1 :]]
        assert [r[1] for r in replay] == [t.reward for t in traj.turns[k:]]


def test_random_policy_far_below_expert_on_searchqa():
    env = gym.make("prover/SearchQA-v0", split="test")
    wins = sum(rollout(env, RandomPolicy(seed), seed=seed).won for seed in range(60))
    assert wins <= 3


def test_rollout_batch_through_a_process_pool_equals_sequential():
    seeds = [1, 2, 3]
    with EnvPool("prover/WebShop-v0", 3, backend="process", split="test") as pool:
        batch = rollout_batch(pool, ExpertPolicy(), seeds=seeds)
    env = gym.make("prover/WebShop-v0", split="test")
    for seed, traj in zip(seeds, batch):
        ref = rollout(env, ExpertPolicy(), seed=seed)
        assert [t.action for t in traj.turns] == [t.action for t in ref.turns] and traj.won == ref.won
        assert [t.snapshot.state for t in traj.turns] == [t.snapshot.state for t in ref.turns]


def test_hasty_demonstrator_buys_before_the_last_option_on_webshop():
    """WebShop (item start): where the expert would click a further goal option, the hasty action is
    the purchase; p=1 buys after the first option and misses the goal, p=0 is the expert."""
    from agents.baselines import HastyExpert, make_demonstrator

    env = gym.make("prover/WebShop-v0", split="test", start="item", budget_slack=1)
    two = next(t for t in env.unwrapped.task_ids()[:50] if len(rollout(env, ExpertPolicy(), task_id=t).turns) == 3)
    env.reset(options={"task_id": two})
    assert env.unwrapped.hasty_action() is None  # nothing chosen yet: no purchase to rush
    hasty = rollout(env, HastyExpert(1.0), task_id=two)
    assert [t.action for t in hasty.turns][1] == "click[buy now]" and len(hasty.turns) == 2 and not hasty.won
    assert [t.action for t in rollout(env, HastyExpert(0.0), task_id=two).turns] == [
        t.action for t in rollout(env, ExpertPolicy(), task_id=two).turns
    ]
    assert isinstance(make_demonstrator({}), ExpertPolicy) and not isinstance(make_demonstrator({}), HastyExpert)
    assert make_demonstrator({"kind": "hasty", "p": 0.3}).p == 0.3
    for bad in ({"kind": "lazy"}, {"kind": "hasty", "q": 1}):
        with pytest.raises(ValueError, match="sft_demonstrator"):
            make_demonstrator(bad)
    with pytest.raises(ValueError, match="probability"):
        HastyExpert(1.5)
    with pytest.raises(ValueError, match="hasty_action"):
        rollout(gym.make("prover/SearchQA-v0", split="test", max_turns=2), HastyExpert(1.0))


def test_hasty_demonstrator_skips_opening_on_alfworld_and_that_is_final_without_slack():
    from agents.baselines import HastyExpert

    kw = dict(
        split="valid_unseen",
        task_types=["pick_and_place_simple"],
        max_receptacles=5,
        num_distractors=1,
        max_steps=15,
        num_games=1200,
        start="object",
        budget_slack=0,
    )
    env = gym.make("prover/ALFWorld-v0", **kw)
    for task in env.unwrapped.task_ids()[:40]:
        plan = [t.action for t in rollout(env, ExpertPolicy(), task_id=task).turns]
        if any(a.startswith("open ") for a in plan):
            break
    else:
        pytest.fail("no game with a closed target receptacle among the first 40")
    hasty = rollout(env, HastyExpert(1.0), task_id=task)
    k = next(i for i, a in enumerate(plan) if a.startswith("open "))
    assert [t.action for t in hasty.turns][: k + 1] == plan[:k] + [plan[k + 1]]  # the move, unopened
    assert not hasty.won and len(hasty.turns) == len(plan)  # the lost step was the budget's last spare
    assert rollout(env, ExpertPolicy(), task_id=task).won
