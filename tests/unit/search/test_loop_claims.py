"""Family-wise error of the claims ``mitigate`` and ``bisect`` make (issue 31): with seven candidates tried, one
looking clean by chance was called a cure; bisect judged every test at alpha however many it made."""

from __future__ import annotations

import pytest

from scipy import stats

from mtp_remote.analysis.stats import bound_p_value, exact_diff_upper_bound
from mtp_remote.search.bisect import test_alpha as bisect_level
from mtp_remote.search.mitigate import CandidateResult
from mtp_remote.search.ranking import familywise_loop_free, pick_best, rank_results, recommendation
from mtp_remote.search.ranking_mc import bisect_rates, loop_claim_rates


@pytest.mark.parametrize("counts", [(0, 60, 0, 60), (0, 100, 0, 100), (2, 120, 1, 120)])
def test_the_bound_p_value_is_the_alpha_at_which_the_bound_meets_the_margin(counts):
    p = bound_p_value(*counts, 0.05)
    assert 0 < p < 0.5
    assert exact_diff_upper_bound(*counts, 1 - p * 1.01) < 0.05 < exact_diff_upper_bound(*counts, 1 - p * 0.99)
    assert bound_p_value(5, 20, 0, 20, 0.05) == 1.0  # the point estimate is already above the margin


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_with_a_clean_baseline_the_bound_p_value_is_the_exact_binomial_tail_at_the_margin(k):
    # the test's size at the margin is then exactly its level: P(p <= alpha | rate = margin) <= alpha (the
    # Wilson-based bound called 2/120 loop-free at alpha 0.05, an event of probability 5.75 % at the margin)
    assert bound_p_value(k, 120, 0, 120, 0.05) == pytest.approx(stats.binom.cdf(k, 120, 0.05), rel=1e-6)
    assert (bound_p_value(k, 120, 0, 120, 0.05) < 0.05) == (k <= 1)


def _row(name, loops, n, verdict="inconclusive", status="loop-free"):
    return CandidateResult(name=name, change=f"change {name}", source="built-in", status=status, verdict=verdict,
                           evidence="ev", loops=loops, n=n, base_loops=0, base_n=n, flag_changes=1,
                           bound_p=bound_p_value(loops, n, 0, n, 0.05), speed_vs_baseline=1.2)


def test_loop_free_is_holm_adjusted_over_the_candidates_and_an_unshown_clean_row_is_no_loops_seen():
    # 0/100 vs 0/100: p = 0.95^100 = 0.0059 alone; over 3 candidates Holm needs 0.017 for the smallest: still
    # loop-free; 0/60: p = 0.046 alone, over 7 it needs 0.0071: no longer shown
    three = [_row("a", 0, 100, "healthy"), _row("b", 3, 20, "inconclusive", "undecided"), _row("c", 0, 20)]
    familywise_loop_free(three, 0.05)
    assert [r.status for r in three] == ["loop-free", "undecided", "no-loops-seen"]
    assert three[0].family == 3 and three[0].bound_p_adjusted == pytest.approx(3 * three[0].bound_p)
    assert "loop-free not shown over 3 candidates" in three[2].evidence
    seven = [_row("a", 0, 60, "healthy")] + [_row(f"x{i}", 4, 20, "inconclusive", "undecided") for i in range(6)]
    familywise_loop_free(seven, 0.05)
    assert seven[0].status == "no-loops-seen" and seven[0].family == 7
    familywise_loop_free(seven, 0.05)  # idempotent: one note, one status
    assert seven[0].evidence.count("loop-free not shown") == 1


def test_a_no_loops_seen_pick_is_recommended_as_such_not_as_loop_free():
    rows = [_row("c", 0, 20)]
    familywise_loop_free(rows, 0.05)
    ranked = rank_results(rows)
    best = pick_best(ranked)
    doc = {"profile": "mtp", "host": "h", "rows": [r.to_dict() for r in ranked], "best": best.name}
    text = recommendation(doc)
    assert best.name == "c" and "no loop seen in 20 samples, but loop-free not shown over the 1 candidate(s)" in text
    assert "loop-free," not in text


def test_bisect_spends_alpha_over_its_tests():
    levels = [bisect_level(0.05, i) for i in range(1, 1000)]
    assert levels[:3] == pytest.approx([0.025, 0.05 / 6, 0.05 / 12]) and sum(levels) < 0.05


def test_the_monte_carlo_runs_the_claims_through_the_real_rule():
    out = loop_claim_rates([0.05] * 3, 0.0, 4, trials=6, seed=0)
    assert out["false_after"] == 0.0 and out["false_before"] > 0  # 20 samples: 0 loops is common, never shown
    out = loop_claim_rates([0.0], 0.0, 24, trials=3, seed=0)
    assert out["found_after"] == 1.0 and out["picked"] == 1.0  # 0/120 vs 0/120: shown loop-free
    out = bisect_rates(4, 0.8, 4, trials=3, seed=0)
    assert out["right"] == 1.0
