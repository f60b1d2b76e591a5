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


def test_t_quantiles_by_table():
    from leaderboards.stats import t_quantile

    assert t_quantile(1) == pytest.approx(12.706) and t_quantile(4) == pytest.approx(2.776)
    assert t_quantile(30) == pytest.approx(2.042) and t_quantile(200) == pytest.approx(1.972, abs=0.005)
    with pytest.raises(ValueError):
        t_quantile(0)


def test_seed_paired_difference_by_hand():
    from leaderboards.stats import seed_paired_difference, seed_verdict

    a = {0: 0.50, 1: 0.54, 2: 0.47, 3: 0.52}
    b = {0: 0.45, 1: 0.50, 2: 0.44, 3: 0.47, 9: 0.1}  # seed 9 has no partner: left out
    d = seed_paired_difference(a, b)
    diffs = [0.05, 0.04, 0.03, 0.05]
    mean = sum(diffs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / 3)
    assert d["seeds"] == [0, 1, 2, 3] and d["diff"] == pytest.approx(mean) and d["sd"] == pytest.approx(sd)
    assert d["low"] == pytest.approx(mean - 3.182 * sd / 2) and d["high"] == pytest.approx(mean + 3.182 * sd / 2)
    assert seed_verdict(d).startswith("higher") and "over 4 seeds" in seed_verdict(d)
    noisy = seed_paired_difference({0: 0.5, 1: 0.4}, {0: 0.45, 1: 0.46})
    assert noisy["low"] < 0 < noisy["high"] and seed_verdict(noisy).startswith("within noise")
    # one seed: a difference, but no interval and no claim, however many eval tasks stood behind it
    one = seed_paired_difference({0: 0.9}, {0: 0.1})
    assert one["low"] is None and one["high"] is None and seed_verdict(one).startswith("no claim: 1 training seed")


def test_detectable_difference_shrinks_with_seeds():
    from leaderboards.stats import detectable_difference

    # SD 1.5 points per seed pair: 8 seeds detect ~1.7 points at 80% power
    assert detectable_difference(0.015, 8) == pytest.approx((2.365 + 0.8416) * 0.015 / math.sqrt(8))
    assert detectable_difference(0.015, 8) < detectable_difference(0.015, 3)
    assert detectable_difference(0.015, 1) == math.inf


def test_wilson_interval_is_within_zero_and_one_and_matches_known_values():
    from leaderboards.stats import wilson

    assert wilson(0, 30)[0] == 0.0 and abs(wilson(0, 30)[1] - 0.1135) < 1e-4  # no float below 0 at k = 0
    assert wilson(30, 30)[1] == 1.0 and abs(wilson(30, 30)[0] - 0.8865) < 1e-4
    low, high = wilson(12, 38)
    assert abs(low - 0.1908) < 1e-4 and abs(high - 0.4746) < 1e-4
