import random

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prover_gym import check_snapshot, restore, snapshot


@pytest.fixture(scope="module")
def env():
    e = gym.make("prover/WebShop-v0", split="test")
    yield e
    e.close()


def play(env, policy, max_steps=15):
    total, done, info = 0.0, False, {}
    while not done:
        obs, reward, term, trunc, info = env.step(policy(env, info))
        total += reward
        done = term or trunc
    return total, info


def expert(env, info):
    return env.unwrapped.expert_action()


def test_check_env():
    e = gym.make("prover/WebShop-v0", split="test")
    check_env(e.unwrapped)


def test_bundled_catalogue_and_splits(env):
    base = env.unwrapped
    assert 2500 <= len(base.catalog) <= 5000
    assert len(base.task_ids()) == 500 and len(base.goals) > 3000
    assert len({p["category"] for p in base.catalog.products}) == 5
    train = gym.make("prover/WebShop-v0", split="train").unwrapped
    assert not set(train.task_ids()) & set(base.task_ids())


def test_expert_wins_every_bundled_test_goal(env):
    steps = []
    for task_id in env.unwrapped.task_ids():
        env.reset(options={"task_id": task_id})
        total, info = play(env, expert)
        assert total == 1.0 and info["won"] and info["task_score"] == 1.0, (task_id, info.get("reward_info"))
        steps.append(info["step"])
    assert max(steps) <= 15


def test_random_agent_is_far_below_the_expert(env):
    rng = random.Random(0)

    def random_policy(env, info):
        actions = info.get("admissible_actions") or env.unwrapped.admissible_actions()
        a = rng.choice(actions)
        return "search[" + env.unwrapped.task().split(" with ")[0].lower() + "]" if a == "search[<query>]" else a

    scores, wins = [], 0
    for seed in range(150):
        _, info0 = env.reset(seed=seed)
        total, info = play(env, lambda e, i: random_policy(e, i or info0))  # noqa: B023 - played now
        scores.append(total)
        wins += bool(info.get("won"))
    assert wins / 150 < 0.1 and sum(scores) / 150 < 0.5


def test_page_machine_quirks(env):
    env.reset(seed=1)
    obs, _, _, _, info = env.step("search[green tea]")
    assert info["page"] == "results" and "Next >" in obs and "< Prev" not in obs
    catalog = env.unwrapped.catalog
    first = next(a for a in info["available_actions"]["clickables"][2:] if catalog.by_asin[a.upper()]["options"])
    # search works from any page; click[search] is rejected; Next > exists even past the last page
    assert env.step("click[search]")[4]["error"]
    for _ in range(5):
        obs, _, _, _, info = env.step("click[next >]")
    assert info["page"] == "results" and "Page 6 (Total results: 50)" in obs and obs.endswith("< Prev [SEP] Next >")
    env.step("search[green tea]")
    obs, _, _, _, info = env.step(f"click[{first}]")
    option = next(c for c in info["available_actions"]["clickables"][6:])
    env.step(f"click[{option}]")
    # back from a sub-page keeps the options; < Prev from the item page clears them
    env.step("click[description]")
    env.step("click[< prev]")
    assert snapshot(env).state.options
    env.step("click[< prev]")
    st_ = snapshot(env).state
    assert st_.page == "results" and st_.options == () and st_.visited
    env.step("click[back to search]")
    assert snapshot(env).state.visited == frozenset()


@pytest.mark.parametrize(
    "action",
    [
        "",
        "click[",
        "click[]",
        "buy",
        "click[nothing here]",
        "CLICK[search]",
        "search[]",
        "x" * 100_000,
        "click[\ud800]",
        "search",
        "[click]",
        "\x00",
    ],
)
def test_bad_actions_keep_state(env, action):
    env.reset(seed=2)
    env.step("search[coffee beans]")
    before = snapshot(env)
    obs, reward, term, trunc, info = env.step(action)
    assert obs.startswith("Invalid action: ") and info["error"] and reward == 0.0 and not term and not trunc
    assert snapshot(env).state == before.state and info["step"] == 2


def test_search_is_accepted_on_every_page_and_lowercased(env):
    env.reset(seed=2)
    env.step("search[coffee beans]")
    env.step(f"click[{env.unwrapped.shop.clickables(snapshot(env).state)[2]}]")
    obs, _, _, _, info = env.step("search[Green TEA]")
    assert info["page"] == "results" and snapshot(env).state.keywords == "green tea"


def test_no_feedback_mode_returns_the_page_unchanged():
    e = gym.make("prover/WebShop-v0", split="test", invalid_feedback=False)
    obs0, _ = e.reset(seed=0)
    obs1, *_ = e.step("click[nowhere]")
    assert obs1 == obs0


ACTIONS = st.one_of(
    st.sampled_from(
        [
            "search[green tea]",
            "search[dress black]",
            "click[next >]",
            "click[< prev]",
            "click[back to search]",
            "click[buy now]",
            "click[description]",
            "bogus",
        ]
    ),
    st.integers(0, 12).map(lambda i: f"#{i}"),
)


def _do(env, action):
    if action.startswith("#"):
        clickables = env.unwrapped.shop.clickables(env.unwrapped._state)
        action = f"click[{clickables[int(action[1:]) % len(clickables)]}]" if clickables else "click[x]"
    return env.step(action)


def _run(env, actions):
    out = []
    for a in actions:
        out.append(_do(env, a))
        if out[-1][2] or out[-1][3]:
            break
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 1 << 30))
def test_the_snapshot_contract_holds(env, seed):
    """prover_gym.check_snapshot from random points of random play (clicks, searches, bad input)."""
    assert check_snapshot(env, episodes=1, seed=seed)["episodes"] == 1


def test_item_start_with_a_tight_budget_makes_every_click_pivotal():
    """start='item' opens on the target's item page; budget_slack=0 allows exactly the goal's option clicks
    and the purchase, so the expert wins and one wrong option click fails the episode."""
    from agents.baselines import ExpertPolicy
    from agents.rollout import rollout
    from prover_gym import snapshot

    env = gym.make("prover/WebShop-v0", split="test", start="item", budget_slack=0)
    obs, info = env.reset(seed=3)
    assert "Buy Now" in obs and "click[buy now]" in info["admissible_actions"]
    seed = next(
        s
        for s in range(50)
        if env.unwrapped.goals[int(env.unwrapped.task_ids()[s])]["goal_options"]
        and (env.reset(seed=s) and env.unwrapped.goal_option_count() >= 1)
    )
    good = rollout(env, ExpertPolicy(), seed=seed)
    assert good.won and len(good.turns) == env.unwrapped.goal_option_count() + 1
    env.reset(seed=seed)
    right = {t.action for t in good.turns}
    wrong = next(
        a
        for a in env.unwrapped.admissible_actions()
        if a not in right
        and a
        not in ("click[< prev]", "click[back to search]", "click[description]", "click[features]", "click[reviews]")
    )
    snap = snapshot(env)
    env.step(wrong)
    done = False
    while not done:
        _, _, term, trunc, info = env.step(env.unwrapped.expert_action())
        done = term or trunc
    assert not info["won"]  # the budget had no step left to undo the wrong option
    restore(env, snap)  # the per-task budget is part of the exact state
    for turn in good.turns:
        _, _, term, trunc, info = env.step(turn.action)
    assert info["won"] and term
    with pytest.raises(ValueError, match="budget_slack"):
        gym.make("prover/WebShop-v0", split="test", budget_slack=0)
    with pytest.raises(ValueError, match="start="):
        gym.make("prover/WebShop-v0", split="test", start="cart")


def test_item_start_records_the_deciding_turn_as_the_pivot():
    """start='item' (the hasty control): a lost episode's pivot_step is its buy; a won one's is the last step
    where a buy would have lost (the last option click), also with a detour after it, and across a restore
    taken after it; a goal needing no option: the buy; a run that spends its budget without buying records
    None; start='search' omits the key."""
    from prover_gym import snapshot

    env = gym.make("prover/WebShop-v0", split="test", start="item", budget_slack=2)
    seed = next(s for s in range(50) if env.reset(seed=s) and env.unwrapped.goal_option_count() >= 2)
    env.reset(seed=seed)
    snap = snapshot(env)
    steps, info, done = 0, {}, False
    while not done:  # the expert: options, then the buy
        _, _, term, trunc, info = env.step(env.unwrapped.expert_action())
        steps, done = steps + 1, term or trunc
        assert done or "pivot_step" not in info  # only the final step carries it
    options = env.unwrapped.goal_option_count()
    assert info["won"] and steps == options + 1 and info["pivot_step"] == options - 1  # the last option click
    restore(env, snap)
    _, _, _, _, info = env.step(env.unwrapped.expert_action())  # one option, then the hasty buy
    _, _, term, _, info = env.step("click[buy now]")
    assert term and not info["won"] and info["pivot_step"] == 1
    restore(env, snap)
    for _ in range(options):  # every option, a detour where a buy would already win, then the buy
        env.step(env.unwrapped.expert_action())
    after_options = snapshot(env)
    for action in ("click[description]", "click[< prev]", "click[buy now]"):
        _, _, term, _, info = env.step(action)
    assert term and info["won"] and info["pivot_step"] == options - 1
    other = gym.make("prover/WebShop-v0", split="test", start="item", budget_slack=2)
    restore(other, after_options)  # the last losing state travels in the snapshot
    _, _, term, _, info = other.step("click[buy now]")
    assert term and info["won"] and info["pivot_step"] == options - 1
    restore(env, snap)
    done = False
    while not done:  # never buys: the budget runs out
        _, _, term, trunc, info = env.step(
            "click[description]" if info.get("page") != "description" else "click[< prev]"
        )
        done = term or trunc
    assert trunc and not term and info["pivot_step"] is None
    bare = next((s for s in range(300) if env.reset(seed=s) and env.unwrapped.goal_option_count() == 0), None)
    assert bare is not None, "the bundled test goals include some that need no option"
    env.reset(seed=bare)  # no option to choose: the buy decides
    _, _, term, _, info = env.step("click[buy now]")
    assert term and info["pivot_step"] == 0
    env = gym.make("prover/WebShop-v0", split="test")
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, term, trunc, info = env.step(env.unwrapped.expert_action())
        done = term or trunc
    assert info["won"] and "pivot_step" not in info
