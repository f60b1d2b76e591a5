"""Optional metric sinks besides ``metrics.jsonl``: TensorBoard and Weights & Biases."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class TensorBoardSink:
    """Metrics as TensorBoard scalars under ``out/tensorboard`` (needs the tensorboard package)."""

    def __init__(self, out: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # torch's writer needs the tensorboard package
            raise RuntimeError("loggers: tensorboard needs `pip install tensorboard`") from exc
        self.writer = SummaryWriter(str(out / "tensorboard"))

    def log(self, row: dict, step: int) -> None:
        """Every numeric value of ``row`` as a scalar at ``step``."""
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the writer."""
        self.writer.close()


class WandbSink:
    """Metrics to a Weights & Biases run (offline unless WANDB_MODE says otherwise), one run per out_dir so a resume
    continues it."""

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
        """Every numeric value of ``row`` at ``step``."""
        self.run.log({k: v for k, v in row.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        """Finish the run."""
        self.run.finish()


def make_sink(kind: str, cfg, out: Path):
    """The sink of ``kind`` (tensorboard or wandb) for a run writing to ``out``."""
    return TensorBoardSink(out) if kind == "tensorboard" else WandbSink(cfg, out)
