"""Lossless checks (analysis/lossless.py) and the rule's properties at small size: exact exceedance p-values,
the answer check, a chain of resumes that keeps the family-wise error at alpha, the bound said rounded up."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mtp_remote.analysis.lossless import check_answer, exceedance_p, kl_test
from mtp_remote.analysis.montecarlo import error_rates
from mtp_remote.analysis.stopping import Design, look_counts, stage_counts
from mtp_remote.analysis.verdict import bound_up


def test_the_exceedance_p_value_is_exact_when_every_spec_sample_is_above_the_floor_maximum():
    x, thr, r, p = exceedance_p([5.0] * 4, [1.0, 2.0, 3.0])
    assert (x, thr, r) == (4, 3.0, 1)
    assert p == pytest.approx(1 / math.comb(7, 4))  # the top 4 of 7 pooled ranks are all spec


def test_the_exceedance_test_holds_its_level_when_both_arms_come_from_one_distribution():
    rng = np.random.default_rng(0)
    hits = sum(exceedance_p(rng.lognormal(size=30), rng.lognormal(size=60))[3] < 0.05 for _ in range(2000))
    assert hits / 2000 <= 0.055


def test_a_floor_of_zeros_with_every_spec_sample_nonzero_is_flagged_and_a_small_gap_is_not():
    t = kl_test([1e-3] * 10, [0.0] * 20)
    assert t.p_value < 1e-6 and t.effect_ok
    small = kl_test([1.0e-4] * 10, [0.0] * 20)  # significant, under the 2e-4 absolute bound
    assert small.raw_p < 1e-6 and small.p_value == 1.0 and not small.effect_ok


def test_the_exceedance_test_runs_on_the_largest_per_token_k3_when_both_sides_have_it():
    # a leak spikes at rejected drafts: the sample's mean stays on the floor, its largest per-token k3 does not
    t = kl_test([3e-4] * 10, [1e-4] * 20, spec_max=[0.5] * 10, floor_max=[0.003] * 20)
    assert t.counts["statistic"] == "max_k3" and t.counts["above"] == 10 and t.p_value < 1e-6
    assert "with a largest per-token k3 above the baseline floor's maximum" in t.evidence


@pytest.mark.parametrize("text, expected, ok", [
    ("<think>\nhmm\n</think>\nThe answer is 2+2 = 4.", "4", True),
    ("<think>\nis it 4?\n</think>\nThe answer is 5.", "4", False),  # the reasoning does not count
    ("<think>\nThe user's question is 2+2." * 3, "4", False),  # never answered
    ("The capital is paris.", "Paris", True),
    ("It is 14.", "4", False),
    ("About 4.5 of them.", "4", False),
])
def test_an_expected_answer_is_found_as_whole_tokens_in_the_answer_only(text, expected, ok):
    assert check_answer(text, expected) is ok


def test_the_bound_is_said_rounded_up():
    assert bound_up(0.0431) == "4.4%" and bound_up(0.05) == "5.0%" and bound_up(0.0401) == "4.1%"


def test_a_resume_is_a_later_look_of_the_first_runs_design_and_spends_no_more_than_alpha():
    first = Design(rounds=12, sequential=True, resumes=3)
    resumed = Design(rounds=24, first_rounds=12, sequential=True, resumes=3)
    assert first.all_looks() == resumed.all_looks() == (1, 2, 4, 8, 12, 24, 48, 96)
    assert resumed.looks() == (1, 2, 4, 8, 12, 24) and first.weights() == resumed.weights()
    assert sum(first.weights().values()) == pytest.approx(1.0)
    assert first.alpha_bound == pytest.approx(0.04) and resumed.alpha_bound == pytest.approx(0.05 * 0.2 / 3)


def test_an_early_look_keeps_its_data_when_a_resume_adds_baseline_samples():
    d = Design(rounds=24, first_rounds=12, sequential=True, resumes=3)
    base = [(i, i >= 12) for i in range(24)]  # the resume's baseline samples all loop
    assert stage_counts(base, d) == {12: (0, 12), 24: (12, 24)}
    spec = [(i, False) for i in range(24)]
    assert look_counts(spec, d)[12] == (0, 12)


@pytest.mark.parametrize("rate", [0.05, 0.2])
def test_following_the_next_step_advice_three_times_keeps_the_family_wise_error_at_alpha(rate):
    r = error_rates({"baseline": rate, "mtp": rate}, Design(rounds=2, sequential=True, resumes=3), trials=120,
                    seed=3, resumes=3)
    assert r.any_corrupt <= 0.05, r.kinds


def test_a_loop_excess_at_the_margin_is_rarely_called_healthy():
    # 0/60 at a true 5 %: 0.95^60 = 4.6 %, and the one-sided Wilson bound of 0/60 at 96 % is 4.9 % < 5 %:
    # the rule's level at the margin is the binomial's, a little above the nominal 4 % (docs/metrics.md)
    r = error_rates({"baseline": 0.0, "mtp": 0.05}, Design(rounds=12, sequential=True, resumes=3), trials=300,
                    seed=4)
    assert r.kinds["mtp"].get("healthy", 0) <= 0.07, r.kinds


@pytest.mark.parametrize("k, n", [(0, 29), (0, 59), (3, 60), (10, 10), (1, 7)])
def test_the_exact_limits_are_scipys_clopper_pearson_interval_at_twice_the_one_sided_error(k, n):
    from scipy.stats import binomtest

    from mtp_remote.analysis.stats import clopper_pearson

    ci = binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact")
    assert clopper_pearson(k, n, 0.95) == pytest.approx((ci.low, ci.high), abs=1e-9)


@pytest.mark.parametrize("margin, prompts", [(0.10, 29), (0.05, 59), (0.20, 14)])
def test_identical_prompts_that_close_the_greedy_gate_follow_the_rule_of_three(margin, prompts):
    from mtp_remote.analysis.lossless import greedy_rate_bound, prompts_to_close

    assert prompts_to_close(0, 3, None, 0.95, margin) == prompts
    assert greedy_rate_bound(0, prompts, None, 0.95) < margin <= greedy_rate_bound(0, prompts - 1, None, 0.95)
    assert prompts_to_close(0, prompts + 5, None, 0.95, margin) == prompts + 5  # already closed: as many as it has


def test_prompts_to_close_keeps_the_observed_divergences_and_the_floors_rate():
    from mtp_remote.analysis.lossless import greedy_rate_bound, prompts_to_close

    # 6 of 30 prompts diverge, no floor: 116 prompts (86 more, all identical) bound 6/116 under 10 %
    assert prompts_to_close(6, 30, None, 0.95, 0.10) == 116
    assert greedy_rate_bound(6, 116, None, 0.95) < 0.10 <= greedy_rate_bound(6, 115, None, 0.95)
    # an A/A arm diverging on 1 of 10 prompts (kept at 10 %): the excess of 0/15 over 2/15 is bounded under 10 %
    assert prompts_to_close(0, 10, (1, 10), 0.95, 0.10) == 15
    assert prompts_to_close(1, 10, None, 0.95, 0.10, max_n=20) is None  # not within max_n
