"""Optional metric sinks besides ``metrics.jsonl``: TensorBoard and Weights & Biases."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class TensorBoardSink:
    def __init__(self, out: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # torch's writer needs the tensorboard package
            raise RuntimeError("loggers: tensorboard needs `pip install tensorboard`") from exc
        self.writer = SummaryWriter(str(out / "tensorboard"))

    def log(self, row: dict, step: int) -> None:
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    def __init__(self, cfg, out: Path):
        try:
            import wandb
        except ImportError as exc:
            raise RuntimeError("loggers: wandb needs `pip install wandb`") from exc
        os.environ.setdefault("WANDB_MODE", "offline")  # no network unless the user says so
        self.run = wandb.init(
            project=cfg.wandb_project,
            dir=str(out),
            config=cfg.to_dict(),
            resume="allow",
            id=hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12],
        )

    def log(self, row: dict, step: int) -> None:
        self.run.log({k: v for k, v in row.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        self.run.finish()


def make_sink(kind: str, cfg, out: Path):
    return TensorBoardSink(out) if kind == "tensorboard" else WandbSink(cfg, out)
