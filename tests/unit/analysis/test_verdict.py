"""Verdict rules on synthetic cells: each verdict kind, its evidence sentence, and the exit code."""

from __future__ import annotations

import pytest

from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.verdict import SampleObs, exit_code, judge, launch_failed, summarize_cell

LOOP = analyze_text("<think>\nThe question is 2+2." + " The user's question is 2+2." * 40)
CLEAN = analyze_text("<think>\nTwo plus two is four.\n</think>\nThe answer is 4.")


def samples(profile, temperature, loops, n, *, spec, tokens=200, latency=2.0, verify=None, start=0):
    out = []
    for i in range(n):
        looping = i < loops
        out.append(SampleObs(
            profile=profile, temperature=temperature, prompt_id=f"p{i % 4}", sample_index=start + i,
            seed=i, metrics=LOOP if looping else CLEAN, finish_reason="length" if looping else "stop",
            completion_tokens=tokens, latency_s=latency,
            spec_verify_ct=(verify or tokens // 3) if spec else None))
    return out


def cells(profile, plan, *, spec, **kw):
    """plan: {temperature: (loops, n)} -> (cells, samples)."""
    all_samples, out = [], []
    for t, (k, n) in plan.items():
        s = samples(profile, t, k, n, spec=spec, **kw)
        all_samples += s
        out.append(summarize_cell(profile, t, spec, s))
    return out, all_samples


def test_summarize_cell_pools_loops_speed_and_acceptance():
    s = samples("mtp", 0.7, 3, 8, spec=True, tokens=300, latency=3.0, verify=100)
    s.append(SampleObs("mtp", 0.7, "p9", 99, None, None, None, 0, 0.0, None, error="timeout"))
    c = summarize_cell("mtp", 0.7, True, s)
    assert (c.n, c.n_errors, c.loops) == (8, 1, 3)
    assert c.loop_rate == pytest.approx(3 / 8) and c.loop_ci[0] < 3 / 8 < c.loop_ci[1]
    assert c.accept_length == pytest.approx(3.0) and c.tokens_per_s == pytest.approx(100.0)
    assert c.finish_length_rate == pytest.approx(3 / 8) and c.think_closed_rate == pytest.approx(5 / 8)


def test_spec_looping_far_more_than_baseline_corrupts_output():
    spec, ss = cells("mtp", {0.0: (0, 16), 0.7: (15, 16)}, spec=True)
    base, bs = cells("baseline", {0.0: (0, 16), 0.7: (0, 16)}, spec=False)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "spec-corrupts-output" and v.temperature == 0.7
    assert v.evidence.startswith("loops 15/16 vs 0/16 at T=0.7 (p=5.7e-08)")  # 2.83e-8 x 2 (Holm, 2 temps)
    assert exit_code([v]) == 1


def test_baseline_that_loops_as_much_means_the_base_model_degenerates():
    spec, _ = cells("mtp", {0.7: (9, 16)}, spec=True)
    base, _ = cells("baseline", {0.7: (8, 16)}, spec=False)
    v = judge("mtp", spec, base)
    assert v.kind == "base-model-degenerates" and "9/16 vs 8/16" in v.evidence
    assert exit_code([v]) == 0


def test_a_small_excess_is_inconclusive_and_says_how_many_samples_would_decide():
    spec, _ = cells("mtp", {0.7: (3, 8)}, spec=True)
    base, _ = cells("baseline", {0.7: (0, 8)}, spec=False)
    v = judge("mtp", spec, base)
    assert v.kind == "inconclusive" and "samples per arm would decide" in v.evidence


def test_acceptance_about_one_is_spec_ineffective():
    spec, _ss = cells("mtp", {0.7: (0, 16)}, spec=True, tokens=200, verify=190)
    base, _bs = cells("baseline", {0.7: (0, 16)}, spec=False)
    assert judge("mtp", spec, base).kind == "spec-ineffective"


def test_clean_but_slower_speculation_is_spec_slower():
    spec, _ss = cells("mtp", {0.7: (0, 16)}, spec=True, latency=3.0)
    base, _bs = cells("baseline", {0.7: (0, 16)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base)
    assert v.kind == "spec-slower" and "tokens/s 0.67x baseline" in v.evidence


def test_clean_and_faster_speculation_is_healthy():
    spec, ss = cells("mtp", {0.0: (0, 8), 0.7: (0, 16)}, spec=True, latency=1.0)
    base, bs = cells("baseline", {0.0: (0, 8), 0.7: (0, 16)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "healthy" and "tokens/s 2.00x baseline" in v.evidence
    assert exit_code([v]) == 0


def test_greedy_divergence_is_reported_with_its_first_token():
    spec, ss = cells("mtp", {0.0: (0, 4)}, spec=True)
    base, bs = cells("baseline", {0.0: (0, 4)}, spec=False)
    for i, (s, b) in enumerate(zip(ss, bs)):
        b.output_ids = list(range(50))
        s.output_ids = list(range(23)) + [999] + list(range(24, 50)) if i == 0 else list(range(50))
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert "greedy output diverges at token 23 (1/4 prompts)" in v.evidence
    assert v.comparisons[0]["greedy_first_divergence"] == 23


def test_high_acceptance_while_looping_is_warned_about():
    ss = samples("mtp", 0.7, 8, 16, spec=True, tokens=300, verify=100)
    for s in ss[:8]:
        s.spec_verify_ct = 60  # looping samples accept 5 tokens per step
    spec = [summarize_cell("mtp", 0.7, True, ss)]
    base, _ = cells("baseline", {0.7: (0, 16)}, spec=False)
    v = judge("mtp", spec, base)
    assert any("inflated by loops" in w for w in v.warnings)


def test_launch_failure_is_a_verdict_that_fails_the_run():
    v = launch_failed("mtp", "cuda_oom", "lower --mem-fraction-static")
    assert v.kind == "launch-failed:cuda_oom" and v.to_dict()["evidence"] == "lower --mem-fraction-static"
    assert exit_code([v]) == 1 and exit_code(["healthy", "spec-slower", "inconclusive"]) == 0


def test_loops_count_only_against_matched_baseline_samples():
    ss = samples("mtp", 0.7, 8, 16, spec=True)
    for s in ss[:8]:
        s.prompt_id = "only-in-spec"  # the looping prompts were never asked of the baseline
    bs = samples("baseline", 0.7, 0, 16, spec=False)
    spec = [summarize_cell("mtp", 0.7, True, ss)]
    base = [summarize_cell("baseline", 0.7, False, bs)]
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    row = v.comparisons[0]
    assert (row["spec_loops"], row["spec_n"], row["base_n"]) == (0, 8, 8)
    assert v.kind != "spec-corrupts-output" and any("matched pairs" in w for w in v.warnings)


def test_greedy_divergence_at_a_near_tie_is_called_out():
    spec, ss = cells("mtp", {0.0: (0, 4)}, spec=True)
    base, bs = cells("baseline", {0.0: (0, 4)}, spec=False)
    for i, (s, b) in enumerate(zip(ss, bs)):
        b.output_ids, b.top2_margins = list(range(50)), [2.0] * 50
        s.output_ids = list(range(50))
    ss[0].output_ids = list(range(23)) + [999] + list(range(24, 50))
    bs[0].top2_margins[23] = 0.01
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert "diverges at token 23 (1/4 prompts; 1 at a near tie)" in v.evidence
    assert v.comparisons[0]["greedy_near_tie_flips"] == 1


def test_a_kl_probe_gap_over_the_baseline_is_warned_about():
    ss = samples("mtp", 0.7, 0, 8, spec=True)
    bs = samples("baseline", 0.7, 0, 8, spec=False)
    for s in ss:
        s.kl_k3 = 0.08
    for b in bs:
        b.kl_k3 = 0.001
    v = judge("mtp", [summarize_cell("mtp", 0.7, True, ss)], [summarize_cell("baseline", 0.7, False, bs)])
    assert any(w.startswith("KL probe: mean k3 0.08 vs baseline 0.001") for w in v.warnings)
