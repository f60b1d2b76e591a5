"""Every script in examples/ runs (users copy from them, so they must keep working)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_has_a_test():
    tested = {"branch_mid_episode", "judge_from_config", "train_prover_tiny", "evaluate_openai_model"}
    assert {p.stem for p in (ROOT / "examples").glob("*.py")} == tested


def test_branch_mid_episode():
    outcomes = _load("branch_mid_episode").main()
    assert outcomes["expert"][0] and not outcomes["hasty"][0]  # same state, different continuations


def test_judge_from_config():
    out = _load("judge_from_config").main()
    assert out["proposal"] is not None and out["a_seg"] > 0  # the judge's segment verifies positive


def test_train_prover_tiny(tmp_path, bundled_dir):
    rows = _load("train_prover_tiny").main(str(tmp_path / "run"), iterations=2)
    assert [r["iteration"] for r in rows] == [1, 2]
    assert sum(r["prover/verified_segments"] for r in rows) > 0
    assert (tmp_path / "run" / "checkpoint").is_dir()


def test_evaluate_openai_model(chat_server, bundled_dir):
    from conftest import ChatHandler

    ChatHandler.plan = [{"content": "<answer>none</answer>"}] * 100
    results = _load("evaluate_openai_model").main(["--base-url", chat_server, "--model", "m", "--episodes", "1"])
    assert set(results) == {"prover/SearchQA-v0", "prover/WebShop-v0", "prover/ALFWorld-v0"}
    assert len(ChatHandler.seen) >= 3  # every env asked the server
