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


def test_reads_as_names_the_law_the_interval_admits():
    from wash.reporting.dilution import reads_as

    assert reads_as(-1.1, -0.9) == "1/N" and reads_as(-0.6, -0.4) == "1/sqrt(N)"
    assert reads_as(-1.2, -0.3) == "cannot tell" and reads_as(-0.9, -0.6) == "between the two"
    assert reads_as(-0.4, -0.1) == "flatter than 1/sqrt(N)" and reads_as(-1.5, -1.2) == "steeper than 1/N"
    assert reads_as(math.nan, math.nan) == "no fit"


def test_the_dilution_figure_draws_each_fit_from_n_1_beside_both_laws():
    from wash.reporting.data import folders
    from wash.reporting.dilution import dilution_figure, dilution_fits

    fits = dilution_fits(folders())
    spec = dilution_figure(fits)
    assert fits and spec is not None
    for panel in spec.panels:
        measured = [s for s in panel.series if not s.dash]
        assert measured and all(s.y[0] == pytest.approx(1.0) for s in measured)
        assert sorted(s.name for s in panel.series if s.dash) == ["1/N law", "1/sqrt(N) law"]
        drawn = [f for f in fits if f.measure == panel.title and f.ns[0] == 1]
        assert [s.name for s in measured] == [f.label for f in drawn]
