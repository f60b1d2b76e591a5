"""Judges on recorded trajectories from both envs: every kind proposes on its side (default: the
successful trajectory's decisive turn), config swapping, and the LLM and agentic judges against a
loopback chat server."""

import json
from pathlib import Path

import gymnasium as gym
import pytest
from conftest import ChatHandler, SlipPolicy

import judges
from agents.baselines import ExpertPolicy
from agents.rollout import rollout
from judges import Proposal

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "judges"


def group_for(env_id):
    env = gym.make(env_id, split="test")
    if env_id == "prover/WebShop-v0":
        bad = SlipPolicy(
            lambda a: a.startswith("click[") and a not in ("click[buy now]",) and not a.startswith("click[b0"),
            "click[buy now]",
        )
        seed = next(s for s in range(50) if env.unwrapped.goals[int(env.unwrapped.task_ids()[s])]["goal_options"])
    else:
        bad = SlipPolicy(lambda a: a.startswith("search["), "answer[nobody at all]")
        seed = 3
    good = rollout(env, ExpertPolicy(), seed=seed)
    failed = rollout(env, bad, seed=seed)
    pivot = next(k for k, (a, b) in enumerate(zip(failed.turns, good.turns)) if a.action != b.action)
    assert good.won and not failed.won
    return [good, failed, good], pivot


@pytest.fixture(scope="module", params=["prover/SearchQA-v0", "prover/WebShop-v0"])
def group(request):
    return group_for(request.param)


@pytest.mark.parametrize("config", ["random.yaml", "first_divergence.yaml", "last_shared_state.yaml", "oracle.yaml"])
def test_every_kind_proposes_the_successful_trajectorys_decision_by_default(group, config):
    trajs, pivot = group
    judge = judges.make(f"{CONFIGS}/{config}")  # swapping judges is a config change
    assert judge.side == "won"
    p = judge.propose(trajs)
    assert isinstance(p, Proposal) and p.valid_for(trajs) and trajs[p.trajectory].won
    if "random" not in config:  # the won run's action at the turn where the failed run departed from it
        assert (p.trajectory, p.start, p.end) == (0, pivot, pivot)


@pytest.mark.parametrize("kind", ["random", "first_divergence", "last_shared_state", "oracle"])
def test_side_failed_and_any(group, kind):
    trajs, pivot = group
    p = judges.make({"kind": kind, "side": "failed"}).propose(trajs)
    assert p.valid_for(trajs) and not trajs[p.trajectory].won
    if kind != "random":
        assert (p.trajectory, p.start) == (1, pivot)
    sides = {
        trajs[judges.make({"kind": "random", "side": "any", "seed": s}).propose(trajs).trajectory].won
        for s in range(12)
    }
    assert sides == {True, False}  # side=any: any trajectory of the group, whatever its outcome
    with pytest.raises(ValueError, match="side="):
        judges.make({"kind": kind, "side": "winners"})


def test_no_proposal_without_mixed_outcomes(group):
    trajs, _ = group
    for kind in ("random", "first_divergence", "last_shared_state", "oracle", "exhaustive"):
        judge = judges.make({"kind": kind})
        assert judge.propose([trajs[0], trajs[0]]) is None and judge.propose([trajs[1]]) is None


def test_unknown_kind_and_missing_config():
    with pytest.raises(ValueError, match="judge kind"):
        judges.make({"kind": "psychic"})
    with pytest.raises(FileNotFoundError, match="configs/judges"):
        judges.make("configs/judges/nope.yaml")


def _llm(url):
    return judges.make({"kind": "openai", "model": "tiny", "base_url": url, "backoff": 0.01, "max_retries": 1})


def test_llm_judge_valid_reply_and_prompt(chat_server, group):
    trajs, pivot = group
    ChatHandler.plan = [
        {"content": f'Sure! {{"trajectory": 0, "start": {pivot}, "end": {pivot}, "reason": "chose well"}}'}
    ]
    judge = _llm(chat_server)
    assert judge.propose(trajs) == Proposal(0, pivot, pivot, "chose well")
    prompt = ChatHandler.seen[0]["body"]["messages"][0]["content"]
    assert "Attempt 1 (FAILURE):" in prompt and "Attempt 0 (SUCCESS):" in prompt and f"turn {pivot}:" in prompt
    assert "ONE successful attempt that most likely made it succeed" in prompt
    assert ChatHandler.seen[0]["body"]["temperature"] == 0.0
    # side=failed asks for the mistake and accepts only a failed attempt
    ChatHandler.plan = [
        {"content": '{"trajectory": 0, "start": 0, "end": 0}'},
        {"content": f'{{"trajectory": 1, "start": {pivot}, "end": {pivot}}}'},
    ]
    failed_side = judges.make(
        {
            "kind": "openai",
            "model": "tiny",
            "base_url": chat_server,
            "backoff": 0.01,
            "max_retries": 1,
            "side": "failed",
        }
    )
    assert failed_side.propose(trajs) == Proposal(1, pivot, pivot, "") and failed_side.stats["malformed"] == 1
    assert "ONE failed attempt that most likely made it fail" in ChatHandler.seen[-2]["body"]["messages"][0]["content"]


@pytest.mark.parametrize(
    "first",
    [
        "no json here",
        '{"trajectory": 1, "start": 0, "end": 0}',
        '{"trajectory": 0, "start": 5, "end": 99}',
        '{"trajectory": "x"}',
        "{broken",
    ],
)
def test_llm_judge_retries_once_then_accepts(chat_server, group, first):
    trajs, _ = group
    ChatHandler.plan = [{"content": first}, {"content": json.dumps({"trajectory": 0, "start": 0, "end": 0})}]
    judge = _llm(chat_server)
    assert judge.propose(trajs) == Proposal(0, 0, 0, "")
    assert judge.stats["malformed"] == 1
    retry_msgs = ChatHandler.seen[1]["body"]["messages"]
    assert retry_msgs[-1]["role"] == "user" and "cannot be used" in retry_msgs[-1]["content"]


def test_llm_judge_returns_none_when_the_model_or_server_will_not_cooperate(chat_server, group):
    trajs, _ = group
    ChatHandler.plan = [{"content": "no"}, {"content": "still no"}]
    judge = _llm(chat_server)
    assert judge.propose(trajs) is None and judge.stats["malformed"] == 2
    ChatHandler.plan = [500]
    assert judge.propose(trajs) is None and judge.stats["backend_errors"] == 1


def test_precision_against_the_oracle(group):
    from trainers.judge_eval import precision_against_oracle

    trajs, pivot = group
    assert (
        precision_against_oracle(judges.make({"kind": "first_divergence", "side": "failed"}), [trajs])["precision"]
        == 1.0
    )

    class WrongTurn:
        def propose(self, g):
            n = len(g[1].turns)
            return Proposal(1, (pivot + 1) % n, (pivot + 1) % n) if n > 1 else None

    result = precision_against_oracle(WrongTurn(), [trajs, trajs])
    assert result["proposals"] in (0, 2) and (result["precision"] in (None, 0.0))
    none = precision_against_oracle(judges.make({"kind": "oracle", "side": "failed"}), [[trajs[0]]])
    assert none == {"groups": 1, "proposals": 0, "hits": 0, "precision": None}


def _agentic(url, **kw):
    return judges.make(
        {
            "kind": "agentic",
            **kw,
            "backend": {"kind": "openai", "model": "tiny", "base_url": url, "backoff": 0.01, "max_retries": 1},
        }
    )


def test_agentic_judge_uses_tools_then_proposes(chat_server, group):
    trajs, pivot = group
    ChatHandler.plan = [
        {"tool_calls": [("compare", {"a": 0, "b": 1})]},
        {"tool_calls": [("view_turn", {"trajectory": 1, "turn": pivot})]},
        {"tool_calls": [("propose_segment", {"trajectory": 1, "start": 0, "end": 0})]},  # a failure: refused
        {"tool_calls": [("propose_segment", {"trajectory": 0, "start": pivot, "end": pivot, "reason": "good"})]},
    ]
    judge = _agentic(chat_server)
    assert judge.propose(trajs) == Proposal(0, pivot, pivot, "good")
    assert judge.stats["tool_calls"] == 4 and judge.stats["invalid_proposals"] == 1
    sent = ChatHandler.seen[1]["body"]
    assert [t["function"]["name"] for t in sent["tools"]] == ["view_turn", "compare", "propose_segment"]
    assert "SUCCESSFUL attempt that most likely made it succeed" in sent["tools"][2]["function"]["description"]
    tool_msg = sent["messages"][-1]
    assert tool_msg["role"] == "tool" and f"first difference at turn {pivot}" in tool_msg["content"]


def test_agentic_judge_text_tool_calls_and_limits(chat_server, group):
    trajs, pivot = group
    ChatHandler.plan = [
        {"content": "thinking..."},
        {
            "content": '<tool_call>{"name": "propose_segment", "arguments": '
            f'{{"trajectory": 1, "start": {pivot}, "end": {pivot}}}}}</tool_call>'
        },
    ]
    assert _agentic(chat_server, side="failed").propose(trajs) == Proposal(1, pivot, pivot, "")
    ChatHandler.plan = [{"tool_calls": [("view_turn", {"trajectory": 9, "turn": 0})]}] * 3
    judge = _agentic(chat_server, max_calls=3)
    assert judge.propose(trajs) is None and judge.stats["tool_calls"] == 3
    ChatHandler.plan = [500]
    assert judge.propose(trajs) is None and judge.stats["backend_errors"] == 1
    with pytest.raises(ValueError, match="backend"):
        judges.make({"kind": "agentic"})


def test_hf_judge_over_the_tiny_model_returns_none_not_an_error(group, tmp_path):
    from agents.tiny_model import build_tiny_model

    trajs, _ = group
    model = build_tiny_model(tmp_path / "m", ["a b c"] * 20, vocab_size=300, num_hidden_layers=1)
    judge = judges.make({"kind": "hf", "model_path": str(model), "max_tokens": 4})
    assert judge.propose(trajs) is None and judge.stats["malformed"] == 2


def test_agentic_judge_over_the_tiny_hf_model_is_bounded(group, tmp_path):
    from agents.tiny_model import build_tiny_model

    trajs, _ = group
    model = build_tiny_model(tmp_path / "m", ["<tool_call>{}</tool_call>"] * 20, vocab_size=300, num_hidden_layers=1)
    judge = judges.make(
        {"kind": "agentic", "max_calls": 2, "backend": {"kind": "hf", "model_path": str(model), "max_tokens": 4}}
    )
    assert judge.propose(trajs) is None and judge.stats["calls"] == 2


def test_localisation_against_the_recorded_pivot_in_the_one_measurement_home():
    """trainers.judge_eval holds every judge measure: localisation reads the named trajectory's recorded
    pivot (info["pivot_step"] of its last step), from proposals and from credit records alike, and
    verified_precision reports it beside precision and agreement."""
    import dataclasses

    from trainers.judge_eval import NoisyExpert, localisation, localised, verified_precision
    from trainers.verification import ValueEstimator

    trajs, pivot = group_for("prover/SearchQA-v0")
    assert localised(trajs, Proposal(0, pivot, pivot)) is None  # the env records no pivot here
    marked = []
    for t in trajs:
        last = dataclasses.replace(t.turns[-1], info={**t.turns[-1].info, "pivot_step": pivot})
        marked.append(dataclasses.replace(t, turns=[*t.turns[:-1], last]))
    assert localised(marked, Proposal(0, pivot, pivot)) is True
    other = (pivot + 1) % len(marked[0].turns)
    assert localised(marked, Proposal(0, other, other)) is False
    records = [{"pivot_step": 1, "hit_pivot": True}, {"pivot_step": 0, "hit_pivot": False}, {"pivot_step": None}]
    assert localisation(records) == {"known": 2, "hits": 1, "localisation": 0.5}
    assert localisation([])["localisation"] is None

    env = gym.make("prover/SearchQA-v0", split="test")
    stats = verified_precision(
        judges.make({"kind": "first_divergence"}), [marked], ValueEstimator(env, NoisyExpert(0.3, seed=0), 2)
    )
    assert stats["proposals"] == 1 and stats["pivot_known"] == 1 and stats["localisation"] == 1.0
    unmarked = verified_precision(
        judges.make({"kind": "first_divergence"}), [trajs], ValueEstimator(env, NoisyExpert(0.3, seed=0), 2)
    )
    assert unmarked["pivot_known"] == 0 and unmarked["localisation"] is None
    assert unmarked["precision"] == stats["precision"]  # same proposal, same continuations
    env.close()


def test_the_precision_table_shows_localisation_only_where_a_pivot_is_recorded():
    from leaderboards.report import _precision_table

    row = {"env": "a", "judge": "oracle", "groups": 4, "proposals": 4, "precision": 0.5, "mean_a_seg": 0.1}
    header, body = _precision_table([{**row, "agreement": 1.0}])
    assert "hit pivot" not in header and len(body[0]) == len(header)
    header, body = _precision_table([{**row, "pivot_known": 4, "localisation": 0.75}, row])
    assert header[-1] == "hit pivot" and body[0][-1] == "75.0" and body[1][-1] == "n/a"
