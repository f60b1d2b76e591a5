import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from prover_gym.searchqa.env import INVALID_SEARCHR1

REQUIRED_INFO = {"task_id", "task", "won", "admissible_actions", "step"}


def run(env, actions, **reset_kwargs):
    obs, info = env.reset(**reset_kwargs)
    out = [(obs, info)]
    for a in actions:
        out.append(env.step(a))
    return out


def test_check_env_passes(make_searchqa):
    env = make_searchqa(split="test")
    check_env(env.unwrapped, skip_render_check=False)
    check_env(env)


def test_gym_make_and_info_keys(make_searchqa):
    env = make_searchqa(split="train")
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs.endswith("?")
    assert REQUIRED_INFO <= set(info)
    assert info["admissible_actions"] is None and info["step"] == 0 and info["won"] is False
    assert info["task"] and info["data_source"] in {"single_hop", "bridge", "comparison", "three_hop"}
    assert obs == info["task"].strip() if info["task"].strip().endswith("?") else info["task"].strip() + "?"


def test_reset_picks_tasks_deterministically(make_searchqa):
    env = make_searchqa(split="test")
    ids = env.unwrapped.task_ids()
    assert len(ids) > 500 and len(set(ids)) == len(ids)
    assert env.reset(seed=7)[1]["task_id"] == ids[7]
    assert env.reset(seed=7 + len(ids))[1]["task_id"] == ids[7]
    assert env.reset(options={"task_id": ids[42]})[1]["task_id"] == ids[42]
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "no-such-task"})


def test_search_observation_is_searchr1_formatted(make_searchqa):
    env = make_searchqa(split="test")
    obs, info = env.reset(seed=0)
    action = env.unwrapped.expert_action()
    assert action.startswith("search[")
    obs, reward, term, trunc, info = env.step(action)
    assert obs.startswith('\n\n<information>Doc 1(Title: "') and obs.endswith("</information>\n\n")
    assert "\nDoc 2(Title: " in obs and "\nDoc 3(Title: " in obs
    assert reward == 0.0 and not term and not trunc
    assert info["n_searches"] == 1 and len(info["retrieved_ids"][0]) == 3


def test_plain_format_and_topk(make_searchqa):
    env = make_searchqa(split="test", obs_format="plain", topk=5)
    env.reset(seed=0)
    obs, *_ = env.step(env.unwrapped.expert_action())
    assert obs.startswith("Doc 1(Title: ") and "Doc 5(Title: " in obs and "<information>" not in obs


def test_observation_cut_to_max_obs_tokens(make_searchqa):
    env = make_searchqa(split="test", max_obs_tokens=20, obs_format="plain")
    env.reset(seed=0)
    obs, *_ = env.step(env.unwrapped.expert_action())
    assert len(obs.split()) == 20


def test_expert_wins_every_bundled_test_question(make_searchqa, bundled_dir):
    """The expert follows the gold search path; every search must surface the supporting passage."""
    env = make_searchqa(split="test")
    base = env.unwrapped
    per_family = {}
    for task_id in base.task_ids():
        obs, info = env.reset(options={"task_id": task_id})
        example = base.examples[base._by_id[task_id]]
        done, reward = False, 0.0
        while not done:
            obs, reward, term, trunc, info = env.step(base.expert_action())
            done = term or trunc
        assert reward == 1.0 and info["won"] and term and not trunc, task_id
        assert len(info["retrieved_ids"]) == len(example.gold_queries)
        for support, retrieved in zip(example.support_ids, info["retrieved_ids"]):
            assert set(support) <= set(retrieved), (task_id, support, retrieved)
        per_family[info["data_source"]] = per_family.get(info["data_source"], 0) + 1
    assert set(per_family) == {"single_hop", "bridge", "comparison", "three_hop"}
    assert min(per_family.values()) >= 100


def test_answer_rewards_em_f1_subem(make_searchqa):
    env = make_searchqa(split="test", reward="f1")
    _, info = env.reset(seed=1)
    gold = info["gold_answers"][0]
    obs, reward, term, trunc, info = env.step(f"answer[the {gold} !]")
    assert term and reward == 1.0 and info["won"] and info["em"] == 1.0 and obs == ""
    env.reset(seed=1)
    _, reward, term, _, info = env.step(f"answer[{gold} and more words]")
    assert term and info["em"] == 0.0 and not info["won"] and 0 < reward < 1 and info["subem"] == 1.0


def test_final_round_accepts_only_an_answer(make_searchqa):
    env = make_searchqa(split="test", max_turns=2)
    env.reset(seed=0)
    for _ in range(2):
        obs, r, term, trunc, info = env.step("search[anything at all]")
        assert "<information>" in obs and not term and not trunc
    obs, r, term, trunc, info = env.step("search[one more]")
    assert obs == "" and r == 0.0 and not term and trunc and info["n_searches"] == 2
    assert "no searches left" in info["error"]
    # stepping after the end never raises
    obs, r, term, trunc, info = env.step("answer[x]")
    assert r == 0.0 and trunc and "reset" in obs


def test_max_steps_overrides_max_turns(make_searchqa):
    env = make_searchqa(split="test", max_steps=2)
    assert env.unwrapped.max_turns == 1
    env.reset(seed=0)
    env.step("search[a]")
    _, _, term, trunc, _ = env.step("search[b]")
    assert trunc and not term


BAD_ACTIONS = [
    "",
    " ",
    "x" * 100_000,
    "search[",
    "search]",
    "answer",
    "[search]",
    "search[]",
    "jump[over]",
    "SEARCH",
    "search[" + "q" * 5000 + "]",
    "\x00\x01\x02",
    "\ud800\udfff broken surrogates",
    "搜索[北京]",
    "search(who)",
]


@pytest.mark.parametrize("action", BAD_ACTIONS, ids=range(len(BAD_ACTIONS)))
def test_bad_actions_never_raise_and_keep_state(make_searchqa, action):
    env = make_searchqa(split="test")
    env.reset(seed=3)
    env.step(env.unwrapped.expert_action())
    from prover_gym import snapshot

    before = snapshot(env)
    obs, reward, term, trunc, info = env.step(action)
    assert obs == INVALID_SEARCHR1 and reward == 0.0 and not term and not trunc
    assert info["error"] and info["step"] == 2 and info["n_searches"] == 1
    after = snapshot(env)
    assert after.state == before.state and after.step == before.step + 1
    assert after.core[1:5] == before.core[1:5] and after.core[6] == before.core[6]


def test_non_string_actions_are_rejected_not_raised(make_searchqa):
    env = make_searchqa(split="test", obs_format="plain")
    env.reset(seed=0)
    for bad in (None, 42, ["search[x]"], {"a": 1}):
        obs, reward, term, trunc, info = env.step(bad)
        assert "must be a str" in info["error"] and "Invalid action" in obs


def test_brackets_inside_query_and_unicode_search(make_searchqa):
    env = make_searchqa(split="test")
    env.reset(seed=0)
    obs, _, _, _, info = env.step("search[foo [bar]] baz]")
    assert info["query"] == "foo [bar]] baz" and "<information>" in obs
    obs, _, _, _, info = env.step("search[北京 Röntgen]")
    assert obs.startswith("\n\n<information>") and info["n_searches"] == 2


def test_determinism_same_actions_same_everything(make_searchqa):
    a, b = make_searchqa(split="train"), make_searchqa(split="train")
    actions = ["search[University]", "bogus", "search[painter born 1901]", "answer[nobody]"]
    ra, rb = run(a, actions, seed=11), run(b, actions, seed=11)
    assert ra == rb


def test_bad_constructor_arguments_are_named():
    with pytest.raises(ValueError, match="obs_format"):
        gym.make("prover/SearchQA-v0", obs_format="html")
    with pytest.raises(ValueError, match="reward"):
        gym.make("prover/SearchQA-v0", reward="bleu")
    with pytest.raises(ValueError, match="split='dev'"):
        gym.make("prover/SearchQA-v0", split="dev")
    with pytest.raises(ValueError, match="search_url"):
        gym.make("prover/SearchQA-v0", retriever="http")


def test_data_sources_filter_is_an_easy_split(make_searchqa):
    env = make_searchqa(split="test", data_sources=["single_hop"])
    ids = env.unwrapped.task_ids()
    assert len(ids) == 250 and all(
        env.reset(options={"task_id": t})[1]["data_source"] == "single_hop" for t in ids[:20]
    )
    full = make_searchqa(split="test")
    assert env.unwrapped.fingerprint() != full.unwrapped.fingerprint()
    with pytest.raises(ValueError, match="selects no question"):
        make_searchqa(split="test", data_sources=["nq"])
