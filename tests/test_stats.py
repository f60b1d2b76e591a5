"""Standard errors and bootstrap intervals against hand-computed cases."""

import math

import pytest

from leaderboards.stats import bootstrap_ci, paired_difference_ci, standard_error, verdict


def test_standard_error_by_hand():
    assert standard_error([1, 0] * 10) == pytest.approx(math.sqrt(0.25 / 20))  # 20 episodes at 50%: ~11 points
    assert standard_error([1]) == 0.0 and standard_error([1, 1, 1]) == 0.0


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_n():
    small = [1, 0] * 10
    big = [1, 0] * 500
    m, lo, hi = bootstrap_ci(small)
    M, LO, HI = bootstrap_ci(big)
    assert m == M == 0.5 and lo < 0.5 < hi and LO < 0.5 < HI
    assert (HI - LO) < (hi - lo) / 4  # 50x the data: about 1/7 of the width
    # the 95% interval of a mean of 1000 fair coins is about +-1.96 * 0.0158
    assert HI - LO == pytest.approx(2 * 1.96 * math.sqrt(0.25 / 1000), rel=0.15)
    assert bootstrap_ci([1, 1, 1]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_paired_difference_and_verdict():
    a = [1] * 30 + [0] * 10
    b = [1] * 10 + [0] * 30
    d = paired_difference_ci(a, b)
    assert d[0] == pytest.approx(0.5) and d[1] > 0 and verdict(d).startswith("higher")
    same = paired_difference_ci([1, 0] * 10, [0, 1] * 10)
    assert same[1] < 0 < same[2] and verdict(same).startswith("within noise")
    assert verdict(paired_difference_ci(b, a)).startswith("lower")
    with pytest.raises(ValueError, match="paired"):
        paired_difference_ci([1], [1, 0])
