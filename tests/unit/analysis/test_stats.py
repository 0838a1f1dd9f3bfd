"""Intervals, exact tests and multiplicity correction against known values."""

from __future__ import annotations

import math

import pytest

from mtp_remote.analysis.stats import (
    diff_upper_bound,
    fisher_loops,
    holm,
    ratio_ci,
    samples_needed,
    spending,
    wilson_interval,
)


def test_wilson_interval_matches_the_textbook_values():
    lo, hi = wilson_interval(15, 16)
    assert (round(lo, 4), round(hi, 4)) == (0.7167, 0.9889)
    assert wilson_interval(0, 16)[0] == 0.0 and wilson_interval(0, 16)[1] == pytest.approx(0.1936, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(5, 4)


def test_fisher_is_one_sided_towards_spec_looping_more():
    assert fisher_loops(15, 16, 0, 16) == pytest.approx(16 / 565722720)  # C(16,15) / C(32,15)
    assert fisher_loops(0, 16, 15, 16) == pytest.approx(1.0)
    assert fisher_loops(3, 3, 0, 0) == 1.0


def test_holm_adjusts_step_down_and_keeps_input_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([]) == []


def test_ratio_ci_brackets_the_ratio_of_means():
    spec = [20.0, 22.0, 21.0, 19.0, 20.5, 21.5]
    base = [10.0, 11.0, 10.5, 9.5, 10.2, 10.8]
    ratio, lo, hi = ratio_ci(spec, base)
    assert ratio == pytest.approx(sum(spec) / sum(base))
    assert 1.8 < lo < ratio < hi < 2.2
    assert ratio_ci([1.0], base) is None


def test_samples_needed_is_a_size_where_the_observed_rates_would_be_significant():
    n = samples_needed(3, 8, 0, 8)
    assert n is not None and 8 < n < 64
    assert fisher_loops(round(3 / 8 * n), n, round(0.5 / 9 * n), n) < 0.05
    assert samples_needed(0, 8, 2, 8) is None  # no excess to detect, and no margin to bound it below


def test_samples_needed_uses_the_adjusted_alpha_and_can_bound_a_null_excess():
    assert samples_needed(3, 8, 0, 8, alpha=0.05 / 4) > samples_needed(3, 8, 0, 8, alpha=0.05)
    n = samples_needed(0, 20, 0, 20, margin=0.05)  # 0/n vs 0/n: the bound below 5 % with 80 % power
    assert n is not None and 100 < n < 140
    assert 50 < samples_needed(0, 20, 0, 20, margin=0.05, power=0.5) < 60  # the expected bound alone: ~55
    assert diff_upper_bound(0, n, 0, n, 0.95) < 0.05 <= diff_upper_bound(0, 45, 0, 45, 0.95)


def test_spending_functions_reach_alpha_and_obrien_fleming_spends_little_early():
    assert spending(1.0, 0.05) == pytest.approx(0.05) and spending(1.0, 0.05, "pocock") == pytest.approx(0.05)
    assert spending(0.25, 0.05) == pytest.approx(8.9e-05, rel=0.02)  # 2 - 2 Phi(1.96 / 0.5)
    assert spending(0.25, 0.05, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 4))
    with pytest.raises(ValueError, match="obrien-fleming or pocock"):
        spending(0.5, 0.05, "haybittle")
