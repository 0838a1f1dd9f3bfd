"""The decision rule: looks at planned rounds, alpha spent over them, and the runner's call on stored samples."""

from __future__ import annotations

import pytest

from mtp_remote.analysis.stats import fisher_loops
from mtp_remote.analysis.stopping import (
    Design,
    baseline_settled,
    cell_decision,
    look_counts,
    samples_saved,
    sequential_test,
    stop_decision,
)

NIGHTLY = Design(rounds=8, family=2, sequential=True)  # 5 prompts x 8 rounds, two speculative profiles


def test_a_sequential_design_looks_after_rounds_one_two_four_and_the_last():
    assert NIGHTLY.looks() == (1, 2, 4, 8) and Design(rounds=5, sequential=True).looks() == (1, 2, 4, 5)
    assert Design(rounds=8).looks() == (8,) and Design(rounds=8).weights() == {8: 1.0}
    w = NIGHTLY.weights()
    assert sum(w.values()) == pytest.approx(1.0) and w[1] < 1e-5 < w[2] < w[4] < w[8]
    assert w[8] > 0.85  # O'Brien-Fleming-like: nearly the whole alpha at the planned end
    pocock = Design(rounds=8, sequential=True, spending="pocock").weights()
    assert pocock[1] > 0.15 and sum(pocock.values()) == pytest.approx(1.0)


def test_look_counts_take_the_samples_of_the_rounds_before_each_look():
    outcomes = [(i, i < 2) for i in range(3) for _ in range(5)]  # rounds 0-2, the first two loop
    assert look_counts(outcomes, NIGHTLY) == {1: (5, 5), 2: (10, 10)}
    full = outcomes + [(i, False) for i in range(3, 8) for _ in range(5)]
    assert look_counts(full, NIGHTLY) == {1: (5, 5), 2: (10, 10), 4: (10, 20), 8: (10, 40)}
    assert look_counts(outcomes, Design(rounds=8)) == {8: (10, 15)}  # a fixed design: one look, all samples


def test_the_sequential_p_value_is_the_best_look_over_its_share_of_alpha():
    t = sequential_test({1: (5, 5), 2: (10, 10)}, 0, 40, NIGHTLY)
    w = NIGHTLY.weights()
    assert t.look == 2 and t.p_value == pytest.approx(fisher_loops(10, 10, 0, 40) / w[2])
    assert (t.k_spec, t.n_spec, t.last_look) == (10, 10, 2)


def test_a_spec_cell_that_loops_almost_always_settles_at_the_second_look():
    assert stop_decision({1: (5, 5)}, 0, 40, NIGHTLY).outcome == "continue"  # 1 look share ~1e-6
    d = stop_decision({1: (5, 5), 2: (9, 10)}, 0, 40, NIGHTLY)
    assert d.outcome == "spec-loops-more" and d.threshold == pytest.approx(0.025)
    assert "spec 9/10 vs baseline 0/40" in d.reason


def test_the_excess_is_bounded_at_the_last_look_only_and_no_excess_needs_it_below_the_margin():
    assert stop_decision({8: (0, 40)}, 0, 40, NIGHTLY).outcome == "budget-spent"  # 0/40: bound 6.4 % > 5 %
    early = stop_decision({1: (0, 60), 2: (0, 120), 4: (0, 240)}, 0, 400, NIGHTLY)
    assert early.outcome == "continue" and early.bound == 1.0
    d = stop_decision({1: (0, 10), 2: (0, 20), 4: (0, 40), 8: (0, 80)}, 0, 80, NIGHTLY)
    assert d.outcome == "no-excess" and d.bound == pytest.approx(0.0327, abs=1e-3)


def test_a_baseline_stops_early_only_when_clearly_clean_and_loops_are_sampled_to_the_budget():
    assert baseline_settled({1: (0, 5), 2: (0, 10)}, NIGHTLY).outcome == "continue"
    assert baseline_settled({1: (0, 100), 2: (0, 200), 4: (0, 400)}, NIGHTLY).outcome == "baseline-clean"
    assert baseline_settled({1: (3, 5), 2: (6, 10), 4: (12, 20)}, NIGHTLY).outcome == "continue"
    assert baseline_settled({1: (3, 5), 2: (6, 10), 4: (12, 20), 8: (24, 40)}, NIGHTLY).outcome == "budget-spent"


def record(profile, index, loop, *, error=None, near=False, finish="stop"):
    return {"profile": profile, "temperature": 0.7, "sample_index": index, "error": error,
            "finish_reason": finish, "metrics": {"loop": {"period": 6} if loop else None, "near_loop": near}}


def test_the_runner_decision_reads_stored_records_and_counts_length_cut_near_loops():
    recs = [record("baseline", i, False) for i in range(8) for _ in range(5)]
    recs += [record("mtp", i, True, finish="length") for i in range(2) for _ in range(4)]
    recs += [record("mtp", i, False, near=True, finish="length") for i in range(2)]  # near loops, cut: degenerate
    recs += [record("mtp", 0, True, error="HTTP 500")]  # a failed request is not a sample
    d = cell_decision(recs, profile="mtp", baseline="baseline", temperature=0.7, design=NIGHTLY)
    assert d["settled"] and d["outcome"] == "spec-loops-more" and d["n"] == 10
    b = cell_decision(recs, profile="baseline", baseline="baseline", temperature=0.7, design=NIGHTLY)
    assert b["outcome"] == "budget-spent" and b["n"] == 40


def test_samples_saved_counts_against_the_fixed_budget():
    assert samples_saved([8, 32, 12], 32) == (44, pytest.approx(44 / 96))
