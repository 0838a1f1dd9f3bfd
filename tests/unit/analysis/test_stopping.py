"""Early stopping: settles fast when speculation breaks, stays honest when it does not."""

from __future__ import annotations

import pytest

from mtp_remote.analysis.stopping import (
    StopRule,
    baseline_settled,
    diff_upper_bound,
    samples_saved,
    simulate_stopping,
    stop_decision,
)


def test_a_spec_cell_that_loops_almost_always_settles_after_two_rounds():
    d = stop_decision(7, 8, 0, 8)
    assert d.settled and d.outcome == "spec-loops-more"
    assert d.p_value == pytest.approx(8 / 11440)  # C(8,7) C(8,0) / C(16,7) and d.threshold == pytest.approx(0.05 / 8)


def test_too_few_samples_keep_sampling_and_the_budget_ends_it():
    assert stop_decision(2, 4, 0, 4).outcome == "continue"
    assert stop_decision(5, 32, 3, 32).outcome == "budget-spent"


def test_two_clean_arms_settle_as_no_excess_once_the_bound_is_below_the_margin():
    assert stop_decision(0, 12, 0, 12).outcome == "continue"
    d = stop_decision(0, 16, 0, 16)
    assert d.outcome == "no-excess" and d.diff_upper < 0.2


def test_difference_bound_is_one_sided_newcombe():
    assert diff_upper_bound(0, 16, 0, 16, 0.975) == pytest.approx(3.8415 / (16 + 3.8415), rel=1e-3)
    assert diff_upper_bound(0, 0, 0, 16, 0.975) == 1.0


def test_state_leak_like_arms_settle_within_forty_percent_of_a_32_sample_budget():
    sim = simulate_stopping(0.8, 0.05, StopRule(budget=32, round_size=4), trials=1000)
    assert sim.fraction_of_budget <= 0.40
    assert sim.settled_within[12] >= 0.9          # 12 = 37.5 % of the budget
    assert sim.outcomes == {"spec-loops-more": 1.0}


def test_equal_arms_rarely_claim_spec_loops_more():
    sim = simulate_stopping(0.4, 0.4, trials=1000, seed=1)
    assert sim.outcomes.get("spec-loops-more", 0.0) <= 0.05


def test_samples_saved_counts_against_the_fixed_budget():
    assert samples_saved([8, 12, 32], 32) == (44, pytest.approx(44 / 96))


def test_a_baseline_sampled_first_stops_once_clearly_clean_or_clearly_degenerate():
    assert baseline_settled(0, 12).outcome == "continue"
    assert baseline_settled(0, 16).outcome == "baseline-clean"
    assert baseline_settled(12, 16).outcome == "baseline-degenerate"
    assert baseline_settled(4, 32).outcome == "budget-spent"
