"""Optional metric sinks of the trainer (W&B, TensorBoard) and config validation."""

import sys
import types
from pathlib import Path

import pytest

from trainers.config import TrainConfig
from trainers.train import make_sink


def test_unknown_logger_is_refused():
    with pytest.raises(ValueError, match="loggers"):
        TrainConfig(loggers=["mlflow"])


def test_wandb_sink_logs_numeric_metrics_offline(tmp_path, monkeypatch):
    calls = {"init": None, "log": [], "finished": False}

    class Run:
        def log(self, data, step):
            calls["log"].append((step, data))

        def finish(self):
            calls["finished"] = True

    fake = types.SimpleNamespace(init=lambda **kw: calls.__setitem__("init", kw) or Run())
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = TrainConfig(loggers=["wandb"], out_dir=str(tmp_path))
    sink = make_sink("wandb", cfg, tmp_path)
    sink.log({"iteration": 1, "success": 0.5, "rollout_digest": "abc"}, 1)
    sink.close()
    import os

    assert os.environ["WANDB_MODE"] == "offline"
    assert calls["init"]["project"] == "prover-gym" and calls["init"]["config"]["loggers"] == ["wandb"]
    assert calls["log"] == [(1, {"iteration": 1, "success": 0.5})] and calls["finished"]


def test_missing_tensorboard_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with pytest.raises(RuntimeError, match="pip install tensorboard"):
        make_sink("tensorboard", TrainConfig(), tmp_path)


def test_every_metrics_row_key_is_a_documented_metric(tmp_path, bundled_dir):
    """metrics.jsonl uses only the names in trainers.train.METRICS (plus the per-group prefixes), and the
    README's metrics table names them."""
    from trainers.config import load_config
    from trainers.train import METRIC_PREFIXES, METRICS, Trainer

    cfg = load_config(
        None,
        [
            "env_kwargs={split: train, max_turns: 1}",
            "tasks_per_iteration=2",
            "group_size=2",
            "max_tokens=6",
            "iterations=1",
            "sft_steps=0",
            "method=prover",
            "rollout_engine={kind: hf}",
            "probe_kwargs={split: test, max_turns: 1}",
            "probe_tasks=2",
            f"out_dir={tmp_path}",
        ],
    )
    trainer = Trainer(cfg)
    (row,) = trainer.run()
    trainer.close()
    unknown = [k for k in row if k not in METRICS and not k.startswith(METRIC_PREFIXES)]
    assert not unknown, unknown
    readme = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    assert [m for m in METRICS if f"`{m}`" not in readme] == []
