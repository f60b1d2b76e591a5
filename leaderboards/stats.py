"""Uncertainty of success rates: standard errors and bootstrap confidence intervals.

A success rate over n episodes has a standard error of sqrt(p (1 - p) / n): 20 episodes are +-10
points at p = 0.5. Differences between methods are compared *paired* (the same eval tasks, the same
seeds), and a difference is claimed only when its interval excludes 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def standard_error(successes: Sequence[float]) -> float:
    """sqrt(p (1 - p) / n) of a 0/1 sample (0 for fewer than 2)."""
    n = len(successes)
    if n < 2:
        return 0.0
    p = sum(successes) / n
    return math.sqrt(p * (1 - p) / n)


def bootstrap_ci(
    values: Sequence[float], *, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap interval of the mean at level 1 - alpha."""
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    lo = means[int(math.floor(alpha / 2 * (n_boot - 1)))]
    hi = means[int(math.ceil((1 - alpha / 2) * (n_boot - 1)))]
    return sum(values) / n, lo, hi


def paired_difference_ci(
    a: Sequence[float], b: Sequence[float], *, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """(mean of a - b, low, high) over paired units (the same task / seed in both), resampling the pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    return bootstrap_ci([x - y for x, y in zip(a, b)], n_boot=n_boot, alpha=alpha, seed=seed)


def verdict(diff: tuple[float, float, float], unit: str = "points", scale: float = 100.0) -> str:
    """Words for a difference and its interval: which way it goes, or that it is within noise."""
    mean, lo, hi = diff
    span = f"{mean * scale:+.1f} {unit} (95% CI {lo * scale:+.1f} to {hi * scale:+.1f})"
    if lo > 0:
        return f"higher: {span}"
    if hi < 0:
        return f"lower: {span}"
    return f"within noise: {span}, the interval includes 0"
