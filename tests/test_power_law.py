"""The dilution law's fit: the exponent of a signal above its null against N, with an interval."""

from __future__ import annotations

import math

import pytest

from wash.experiments.stats import power_law_exponent

NS = [1, 3, 5]


def test_an_exact_law_is_recovered_with_a_tight_interval():
    exact = [7.0 / n for n in NS]
    fit = power_law_exponent(NS, exact, [e - 1e-6 for e in exact], [e + 1e-6 for e in exact])
    assert fit.exponent == pytest.approx(-1.0)
    assert (fit.low, fit.high) == (pytest.approx(-1.0, abs=1e-3), pytest.approx(-1.0, abs=1e-3))
    assert fit.kept == fit.draws


def test_the_baseline_is_removed_before_the_logarithm_and_its_error_widens_the_interval():
    s = [0.1 + 0.3 / math.sqrt(n) for n in NS]  # 1/sqrt(N) above a null of 0.1
    lows, highs = [x - 0.01 for x in s], [x + 0.01 for x in s]
    fit = power_law_exponent(NS, s, lows, highs, baseline=0.1, baseline_se=0.003)
    assert fit.exponent == pytest.approx(-0.5) and fit.low < -0.5 < fit.high
    raw = power_law_exponent(NS, s, lows, highs)  # ignoring the null flattens the law
    assert raw.exponent > -0.4
    sure = power_law_exponent(NS, s, lows, highs, baseline=0.1, baseline_se=0.0)
    assert fit.high - fit.low > sure.high - sure.low


def test_a_cell_at_its_null_has_no_exponent_and_says_how_many_draws_were_kept():
    fit = power_law_exponent(NS, [0.5, 0.2, 0.1], [0.45, 0.15, 0.05], [0.55, 0.25, 0.15], baseline=0.1)
    assert math.isnan(fit.exponent) and 0 < fit.kept < fit.draws
    with pytest.raises(ValueError, match="two distinct"):
        power_law_exponent([3, 3], [1.0, 1.0], [0.9, 0.9], [1.1, 1.1])
