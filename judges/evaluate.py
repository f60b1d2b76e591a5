"""Moved: judge measurement lives in ``trainers.judge_eval`` (the material, verified precision, localisation
against the recorded pivot, and the privileged precision against the expert). This module keeps the old
import path working, with a DeprecationWarning."""

from __future__ import annotations

import warnings

_MOVED = ("NoisyExpert", "OneSlip", "slip_groups", "precision_against_oracle")


def __getattr__(name: str):
    if name in _MOVED:
        warnings.warn(f"judges.evaluate.{name} moved to trainers.judge_eval.{name}", DeprecationWarning, stacklevel=2)
        from trainers import judge_eval

        return getattr(judge_eval, name)
    raise AttributeError(f"module 'judges.evaluate' has no attribute {name!r}")
