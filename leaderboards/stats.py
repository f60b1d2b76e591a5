"""Uncertainty of success rates: standard errors and confidence intervals.

Two kinds of noise, two intervals, never confused:
- *eval noise* of one trained policy: a success rate over n eval episodes has a standard error of
  sqrt(p (1 - p) / n) (20 episodes are +-10 points at p = 0.5); the bootstrap over eval tasks
  (``bootstrap_ci``, ``paired_difference_ci``) measures only this. Between two methods it treats
  the training runs as fixed: it says how sure we are about *these two checkpoints*, not whether
  another training seed would agree (about 14% of eval tasks flip between equivalent runs).
- *training noise*: whether method A beats method B is a question about training runs, so the unit
  is the training seed. ``seed_paired_difference`` pairs the runs by seed (same tasks, same
  sampling keys: common random numbers) and gives a Student-t interval over the per-seed
  differences. One seed gives no between-method interval at all.
A difference is claimed only when its seed-level interval excludes 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion k / n (nan, nan for n = 0)."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))  # exact 0 / 1 where rounding would cross them


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


# two-sided 97.5% quantiles of Student's t, df 1..30 (beyond: the normal's 1.96 is within 2%)
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (a 95% two-sided interval)."""
    if df < 1:
        raise ValueError(f"t_quantile needs df >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df  # Cornish-Fisher's first term


def seed_paired_difference(a: dict, b: dict) -> dict:
    """Method a - method b over training seeds: ``a`` and ``b`` map seed -> success rate (each the
    mean over the same eval tasks). Returns ``seeds`` (the paired seeds), ``per_seed`` differences,
    ``diff`` (their mean), ``sd`` (their standard deviation) and, with >= 2 seeds, the paired-t 95%
    interval ``low``..``high``; with fewer, ``low`` and ``high`` are None (no between-method claim)."""
    seeds = sorted(set(a) & set(b))
    d = [float(a[s]) - float(b[s]) for s in seeds]
    out: dict = {"seeds": seeds, "per_seed": d, "diff": sum(d) / len(d) if d else math.nan}
    if len(d) < 2:
        return {**out, "sd": None, "low": None, "high": None}
    mean = out["diff"]
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    half = t_quantile(len(d) - 1) * sd / math.sqrt(len(d))
    return {**out, "sd": sd, "low": mean - half, "high": mean + half}


def seed_verdict(diff: dict, unit: str = "points", scale: float = 100.0) -> str:
    """Words for a seed-level difference (``seed_paired_difference``): which way, within noise, or no
    claim at all when fewer than two seeds are paired."""
    n = len(diff["seeds"])
    if diff["low"] is None:
        return (
            f"no claim: {n} training seed{'s' if n != 1 else ''} ({diff['diff'] * scale:+.1f} {unit}); a "
            "between-method interval needs >= 2 paired seeds"
        )
    return verdict((diff["diff"], diff["low"], diff["high"]), unit, scale).replace(
        "(95% CI", f"(95% CI over {n} seeds,"
    )


def detectable_difference(sd: float, seeds: int, *, power: float = 0.8) -> float:
    """The smallest true paired difference a two-sided 5% paired-t test over ``seeds`` seeds detects
    with probability ``power``, given the per-seed difference SD ``sd`` (normal approximation with
    the t quantile: (t_{0.975, n-1} + z_power) * sd / sqrt(n))."""
    if seeds < 2:
        return math.inf
    z = {0.8: 0.8416, 0.9: 1.2816}.get(power)
    if z is None:
        raise ValueError("power: 0.8 or 0.9")
    return (t_quantile(seeds - 1) + z) * sd / math.sqrt(seeds)
