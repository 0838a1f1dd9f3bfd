"""The A/A contrast (issue 31): with an A/A arm (the baseline relaunched, ``compare.calibration``) a speculative
arm's loop excess is called corruption only beyond *both* launches of the baseline — an intersection-union test,
``stopping.contrast_p`` — in the verdict, in the runner's early stopping and in the Monte Carlo harness alike."""

from __future__ import annotations

import numpy as np
import pytest

from mtp_remote.analysis.lossless import measure_calibration
from mtp_remote.analysis.montecarlo import simulate_chain
from mtp_remote.analysis.stopping import Design, cell_decision, look_counts, stage_counts, stop_decision
from mtp_remote.analysis.verdict import judge_all
from tests.unit.analysis.test_verdict import cells, samples

T = 0.7


def _records(profile: str, loops: int, n: int) -> list[dict]:
    return [{"profile": profile, "temperature": T, "prompt_id": f"p{i % 5}", "sample_index": i // 5, "error": None,
             "finish_reason": "length" if i < loops else "stop",
             "metrics": {"loop": {"period": 6} if i < loops else None, "near_loop": False}} for i in range(n)]


def test_the_contrast_p_is_the_larger_of_the_tests_against_each_launch_of_the_baseline():
    d = Design(rounds=4, family=1)
    spec = look_counts([(i // 5, i < 12) for i in range(20)], d)
    base = stage_counts([(i // 5, False) for i in range(20)], d)
    aa = stage_counts([(i // 5, i < 8) for i in range(20)], d)
    alone = stop_decision(spec, base, None, d)
    both = stop_decision(spec, base, None, d, aa)
    assert alone.outcome == "spec-loops-more" and alone.p_value < 1e-4  # 12/20 vs 0/20
    assert both.outcome != "spec-loops-more" and both.p_value > 0.05  # 12/20 vs 8/20: not beyond the relaunch
    assert both.p_value == pytest.approx(stop_decision(spec, aa, None, d).p_value)
    assert "its A/A relaunch 8/20" in both.reason


def test_early_stopping_waits_for_the_aa_arm_when_the_playbook_has_one():
    d = Design(rounds=12, family=1, sequential=True)
    records = _records("baseline", 0, 60) + _records("baseline-aa", 6, 60) + _records("mtp", 8, 10)
    without = cell_decision(records, profile="mtp", baseline="baseline", temperature=T, design=d)
    with_aa = cell_decision(records, profile="mtp", baseline="baseline", temperature=T, design=d, aa="baseline-aa")
    assert without["settled"] and without["outcome"] == "spec-loops-more"
    assert not with_aa["settled"] and with_aa["p"] > without["p"]
    # the A/A arm's own cell is judged against the baseline alone (it is not its own reference)
    own = cell_decision(records, profile="baseline-aa", baseline="baseline", temperature=T, design=d, aa="baseline-aa")
    assert "A/A relaunch" not in own["reason"] and own["n"] == 60


def _judge(spec_loops: int, aa_loops: int, n: int = 40, design: Design | None = None):
    spec_cells, ss = cells("mtp", {T: (spec_loops, n)}, spec=True)
    base_cells, bs = cells("baseline", {T: (0, n)}, spec=False)
    aa = samples("baseline-aa", T, aa_loops, n, spec=False)
    cal = measure_calibration(bs, aa)
    return judge_all({"mtp": (spec_cells, ss)}, base_cells, bs, design=design or Design(rounds=n // 4),
                     calibration=cal)["mtp"]


def test_a_loop_excess_the_aa_relaunch_shares_is_not_called_corruption_and_the_evidence_says_why():
    v = _judge(spec_loops=8, aa_loops=6)
    assert v.kind == "inconclusive", v.evidence
    assert "is not one over its A/A relaunch (6/40 degenerate" in v.evidence
    (row,) = v.comparisons
    assert row["p_vs_base"] < 0.01 and row["p_vs_aa"] > 0.3 and row["p"] == row["p_vs_aa"]
    assert (row["aa_loops"], row["aa_n"]) == (6, 40)


def test_a_loop_excess_beyond_both_launches_is_corruption_and_names_the_relaunch():
    v = _judge(spec_loops=30, aa_loops=1)
    assert v.kind == "spec-corrupts-output", v.evidence
    assert "the larger of its tests against the baseline and against the baseline's A/A relaunch (1/40)" in v.evidence
    (row,) = v.comparisons
    assert row["p"] == max(row["p_vs_base"], row["p_vs_aa"]) < 0.001
    assert "a resumed run" not in v.evidence


def test_a_loop_verdict_at_a_resume_look_says_its_samples_pool_launches_and_how_to_confirm():
    # the launch effect over a chain of resumes is not held by the contrast (8.3 % at a spread of 0.5, docs)
    resumed = Design(rounds=10, first_rounds=5, resumes=3)
    v = _judge(spec_loops=30, aa_loops=1, design=resumed)
    assert v.kind == "spec-corrupts-output", v.evidence
    assert "a resumed run: its samples pool several launches per arm" in v.evidence
    assert "confirm with a new run (not --resume)" in v.evidence


def test_the_monte_carlo_harness_judges_the_aa_arm_as_the_floor_not_as_a_profile():
    rng = np.random.default_rng(3)
    design = Design(rounds=12, family=1, sequential=True, resumes=3)
    (out,) = simulate_chain({"baseline": 0.0, "baseline-aa": 0.0, "mtp": 0.8}, design, resumes=0, rng=rng,
                            aa="baseline-aa")
    assert set(out.verdicts) == {"mtp"} and out.verdicts["mtp"] == "spec-corrupts-output"
    assert out.samples["baseline-aa"] == 60 and out.samples["mtp"] < 60  # stopped early, beyond both launches
