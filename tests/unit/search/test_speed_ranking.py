"""Speed intervals and the tie-aware ranking of ``mitigate``: Welch on ln(tokens/s) agrees with scipy's
own Welch test, ties with #1 are marked when the samples cannot tell, the pick prefers the smaller change, and
the Monte Carlo of the ranking gives ~95 % coverage and almost never a wrong untied winner."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mtp_remote.analysis.speed import LogSpeed, log_contrast
from mtp_remote.search.mitigate import CandidateResult
from mtp_remote.search.mitigation_report import render_markdown, table_rows
from mtp_remote.search.ranking import flag_changes, pick_best, rank_results, recommendation, speed_fields
from mtp_remote.search.ranking_mc import ranking_error_rates


def test_the_log_ratio_interval_is_scipys_welch_interval_on_log_speeds():
    rng = np.random.default_rng(3)
    a, b = 130 * rng.lognormal(0, 0.2, 15), 100 * rng.lognormal(0, 0.1, 20)
    r = log_contrast([LogSpeed.of(a)], [LogSpeed.of(b)])
    ci = stats.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(0.95)
    assert r.ratio == pytest.approx(math.exp(np.log(a).mean() - np.log(b).mean()))
    assert (r.low, r.high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    assert r.excludes_one and 10 < r.df < 35


def test_an_arm_with_one_sample_has_a_point_estimate_but_no_interval():
    one, many = LogSpeed.of([120.0]), LogSpeed.of([100.0, 110.0, 90.0])
    f = speed_fields(one, many, many)
    assert f["speed_vs_baseline"] == pytest.approx(120 / (100 * 110 * 90) ** (1 / 3))
    assert f["speed_ci"] is None and f["speed_cost_ci"] is None
    assert LogSpeed.of([None, 0.0, -1.0]) is None and log_contrast([many], [None]) is None


def test_speed_cost_interval_is_one_minus_the_ratio_to_the_reference():
    rng = np.random.default_rng(0)
    ref, cand = LogSpeed.of(200 * rng.lognormal(0, 0.1, 20)), LogSpeed.of(150 * rng.lognormal(0, 0.1, 20))
    f = speed_fields(cand, None, ref)
    lo, hi = f["speed_cost_ci"]
    assert lo < f["speed_cost"] < hi and 0.15 < f["speed_cost"] < 0.35 and f["speed_vs_baseline"] is None


def test_flag_changes_count_added_removed_and_changed_flags():
    ref = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]
    assert flag_changes(ref + ["--disable-overlap-schedule"], ref) == 1
    assert flag_changes(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
                         "--disable-cuda-graph"], ref) == 2
    assert flag_changes(["--speculative-algorithm", "NEXTN"], ref) == 1 and flag_changes(ref, ref) == 0


def _row(name, speeds, base, changes=1, host=None):
    ls, bls = LogSpeed.of(speeds), LogSpeed.of(base)
    f = speed_fields(ls, bls)
    return CandidateResult(name=name, change=f"change {name}", source="built-in", status="loop-free",
                           flag_changes=changes, log_speed=ls.to_dict(), base_log_speed=bls.to_dict(), host=host,
                           speed_vs_baseline=f["speed_vs_baseline"], speed_ci=f["speed_ci"])


def test_an_indistinguishable_runner_up_with_the_smaller_change_is_recommended_and_said_so():
    rng = np.random.default_rng(7)
    base, noise = 100 * rng.lognormal(0, 0.2, 12), rng.lognormal(0, 0.2, 12)  # same spread, 1.5 % apart
    fast = _row("two-flags", 131 * noise, base, changes=2)
    close = _row("no-overlap", 129 * noise, base, changes=1)
    slow = _row("no-cuda-graph", 60 * rng.lognormal(0, 0.05, 12), base, changes=1)
    ranked = rank_results([slow, close, fast])
    assert [r.name for r in ranked] == ["two-flags", "no-overlap", "no-cuda-graph"]
    assert [r.rank for r in ranked] == [1, 2, 3]
    assert ranked[1].tied_with == "two-flags" and ranked[2].tied_with is None and ranked[0].tied_with is None
    assert pick_best(ranked).name == "no-overlap"
    doc = {"profile": "mtp", "host": "h", "run_id": "r", "rows": [r.to_dict() for r in ranked], "best": "no-overlap"}
    text = recommendation(doc)
    assert text.startswith("Best: **no-overlap** or two-flags: their speeds are not distinguishable with 12 "
                           "non-looping samples each; no-overlap has the smaller change (1 flag(s)).")
    assert [row[0] for row in table_rows(doc)] == ["1", "2 =#1", "3"]
    md = render_markdown(doc)
    assert "tied with #1 (not distinguishable at these samples)" in md
    assert f"{ranked[0].speed_vs_baseline:.2f}x [{ranked[0].speed_ci[0]:.2f}–{ranked[0].speed_ci[1]:.2f}]" in md


def test_a_clearly_faster_candidate_is_alone_at_the_top():
    rng = np.random.default_rng(1)
    base = 100 * rng.lognormal(0, 0.1, 20)
    ranked = rank_results([_row("a", 140 * rng.lognormal(0, 0.1, 20), base, 3),
                           _row("b", 105 * rng.lognormal(0, 0.1, 20), base, 1)])
    assert ranked[1].tied_with is None and pick_best(ranked).name == "a"
    assert recommendation({"rows": [r.to_dict() for r in ranked], "best": "a"}).startswith("Best: **a** (change a)")


def test_across_hosts_the_tie_test_compares_ratios_to_each_hosts_own_baseline():
    rng = np.random.default_rng(2)
    n1, n2 = rng.lognormal(0, 0.1, 20), rng.lognormal(0, 0.1, 20)
    # host y is twice as fast overall: its candidate's tokens/s is higher, its ratio to its baseline is not
    x = _row("a", 130 * n1, 100 * n2, host="x")
    y = _row("b", 250 * n1, 200 * n2, host="y")
    ranked = rank_results([y, x])
    assert ranked[0].name == "a" and ranked[0].speed_vs_baseline / ranked[1].speed_vs_baseline == pytest.approx(1.04)
    # 4 % apart with four arms of 20 at sd 0.1 on two hosts: the interval of the ratio of ratios spans 1
    assert ranked[1].tied_with == "a"
    far = _row("c", 220 * n1, 200 * n2, host="y")
    assert rank_results([far, x])[1].tied_with is None


@pytest.mark.parametrize("n", [12, 20])
def test_monte_carlo_coverage_is_near_95_percent_and_a_wrong_untied_winner_is_rare(n):
    out = ranking_error_rates([1.30, 1.25, 1.0], n=n, sigma=0.2, trials=400, seed=11)
    assert 0.92 <= out["coverage"] <= 0.98, out
    assert out["wrong_first"] > 0.1, out  # the point estimate alone picks a slower candidate often
    assert out["wrong_first_untied"] <= 0.03, out


@pytest.mark.parametrize("verdict,loops,status", [
    ("healthy", 0, "loop-free"), ("spec-slower", 0, "loop-free"), ("inconclusive", 0, "loop-free"), ("inconclusive", 2, "undecided"),
    ("spec-corrupts-output", 9, "corrupts"), ("launch-failed:cuda_oom", None, "launch-failed"),
    ("crashed:scheduler_died", 1, "crashed"), ("hung:stalled", 0, "crashed"), (None, None, "pending"),
])
def test_a_candidate_whose_server_crashed_while_sampling_is_a_crash_not_undecided(verdict, loops, status):
    from mtp_remote.search.mitigate import status_of

    assert status_of(verdict, loops) == status


def test_crashed_candidates_rank_below_every_loop_free_and_corrupting_one():
    rows = [CandidateResult(name=n, change=n, source="built-in", status=s, speed_vs_baseline=v)
            for n, s, v in [("c", "crashed", 2.0), ("k", "corrupts", 1.5), ("f", "loop-free", 0.9)]]
    assert [r.name for r in rank_results(rows)] == ["f", "k", "c"]
