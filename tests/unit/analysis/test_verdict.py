"""Verdict rules on synthetic cells: each verdict kind, its evidence sentence, and the exit code.

``healthy`` needs the loop-rate excess bounded below the margin (5 points by default): clean arms of 80
samples bound it (0/80 vs 0/80: one-sided 95 % Newcombe bound 3.3 %); 16 samples per arm do not."""

from __future__ import annotations

import dataclasses

import pytest

from mtp_remote.analysis.cells import SampleObs, summarize_cell
from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.divergence import Calibration
from mtp_remote.analysis.stopping import Design
from mtp_remote.analysis.verdict import exit_code, judge, judge_all, launch_failed

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


@dataclasses.dataclass(frozen=True)
class _NearMetrics(type(CLEAN)):
    """Metrics flagged as a near loop; the near-loop detector (analysis/degeneracy.py) sets ``near_loop``."""

    near_loop: bool = True


def test_a_length_cut_near_loop_counts_as_degenerate_and_a_finished_one_does_not():
    near = _NearMetrics(**{f.name: getattr(CLEAN, f.name) for f in dataclasses.fields(CLEAN)
                           if f.name != "near_loop"})
    cut = SampleObs("mtp", 0.7, "p0", 0, 0, near, "length", 2048, 10.0, None)
    done = SampleObs("mtp", 0.7, "p1", 0, 0, near, "stop", 300, 2.0, None)
    assert cut.is_degenerate and not cut.is_loop and not done.is_degenerate
    c = summarize_cell("mtp", 0.7, True, [cut, done])
    assert (c.loops, c.near_loops) == (1, 1)


def test_spec_looping_far_more_than_baseline_corrupts_output_and_the_evidence_names_the_arms():
    spec, ss = cells("mtp", {0.0: (0, 16), 0.7: (15, 16)}, spec=True)
    base, bs = cells("baseline", {0.0: (0, 16), 0.7: (0, 16)}, spec=False)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "spec-corrupts-output" and v.temperature == 0.7
    # T=0 is outside the family: one cell, p = Fisher's 2.83e-8 unadjusted
    assert v.evidence.startswith("loops: spec 15/16 vs baseline 0/16 degenerate at T=0.7 (p=2.8e-08, Holm over 1 test)")
    assert exit_code([v]) == 1


def test_holm_runs_over_every_speculative_profile_and_temperature_above_zero():
    spec_a, sa = cells("mtp", {0.7: (15, 16), 1.0: (0, 16)}, spec=True)
    spec_b, sb = cells("eagle", {0.7: (0, 16), 1.0: (0, 16)}, spec=True)
    base, bs = cells("baseline", {0.7: (0, 16), 1.0: (0, 16)}, spec=False)
    found = judge_all({"mtp": (spec_a, sa), "eagle": (spec_b, sb)}, base, bs)
    assert found["mtp"].kind == "spec-corrupts-output" and "Holm over 4 tests" in found["mtp"].evidence
    assert found["mtp"].p_value == pytest.approx(4 * 2.83e-8, rel=0.01)
    assert found["eagle"].kind == "inconclusive"


def test_a_baseline_that_loops_as_much_is_degenerate_only_when_the_excess_is_bounded():
    spec, _ = cells("mtp", {0.7: (9, 16)}, spec=True)
    base, _ = cells("baseline", {0.7: (8, 16)}, spec=False)
    v = judge("mtp", spec, base)  # 16 per arm cannot bound a 5-point excess at a 50 % base rate
    assert v.kind == "inconclusive" and "the baseline loops too" in v.evidence and "not ruled out" in v.evidence
    spec, _ = cells("mtp", {0.7: (300, 1000)}, spec=True)
    base, _ = cells("baseline", {0.7: (320, 1000)}, spec=False)
    v = judge("mtp", spec, base, design=Design(margin=0.1))
    assert v.kind == "base-model-degenerates" and "spec 300/1000 vs baseline 320/1000" in v.evidence
    assert exit_code([v]) == 0


def test_a_speculative_excess_over_a_looping_baseline_is_not_base_model_degenerates():
    spec, _ = cells("mtp", {0.7: (11, 20)}, spec=True)
    base, _ = cells("baseline", {0.7: (5, 20)}, spec=False)
    v = judge("mtp", spec, base)
    assert v.kind == "inconclusive" and "spec 11/20 vs baseline 5/20" in v.evidence


def test_a_greedy_baseline_loop_alone_is_not_base_model_degenerates():
    spec, ss = cells("mtp", {0.0: (2, 5), 0.7: (0, 20)}, spec=True)
    base, bs = cells("baseline", {0.0: (2, 5), 0.7: (0, 20)}, spec=False)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "inconclusive" and "loop excess up to 12.0% not ruled out" in v.evidence


def test_a_small_excess_is_inconclusive_and_says_how_many_samples_would_decide():
    spec, _ = cells("mtp", {0.7: (3, 8)}, spec=True)
    base, _ = cells("baseline", {0.7: (0, 8)}, spec=False)
    v = judge("mtp", spec, base)
    assert v.kind == "inconclusive" and "samples per arm would decide" in v.evidence
    assert v.comparisons[0]["samples_needed"] > 8


def test_one_loop_in_twenty_or_five_in_eighty_is_not_healthy():
    spec, _ = cells("mtp", {0.7: (1, 20)}, spec=True, latency=1.0)
    base, _ = cells("baseline", {0.7: (0, 20)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base)
    assert v.kind == "inconclusive" and "no large excess detected; loop excess up to 19.7% not ruled out" in v.evidence
    assert v.comparisons[0]["samples_needed"] is not None
    spec, _ = cells("mtp", {0.7: (5, 80)}, spec=True, latency=1.0)
    base, _ = cells("baseline", {0.7: (0, 80)}, spec=False, latency=2.0)
    assert judge("mtp", spec, base).kind == "spec-corrupts-output"  # one-sided Fisher p = 0.029


def test_acceptance_about_one_is_spec_ineffective():
    spec, _ss = cells("mtp", {0.7: (0, 80)}, spec=True, tokens=200, verify=190)
    base, _bs = cells("baseline", {0.7: (0, 80)}, spec=False)
    assert judge("mtp", spec, base).kind == "spec-ineffective"


def test_clean_but_slower_speculation_is_spec_slower():
    spec, _ss = cells("mtp", {0.7: (0, 80)}, spec=True, latency=3.0)
    base, _bs = cells("baseline", {0.7: (0, 80)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base)
    assert v.kind == "spec-slower" and "tokens/s 0.67x baseline" in v.evidence


def test_with_speed_not_judged_a_clean_slower_arm_is_healthy_and_the_ratio_says_not_judged():
    # compare.judge_speed: false (the CPU test hosts: interpreted kernels make every speculative arm slower)
    spec, _ss = cells("mtp", {0.7: (0, 80)}, spec=True, latency=3.0)
    base, _bs = cells("baseline", {0.7: (0, 80)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base, design=Design(judge_speed=False))
    assert v.kind == "healthy", v
    assert "tokens/s 0.67x baseline" in v.evidence and "(not judged: compare.judge_speed is false)" in v.evidence
    assert judge("mtp", spec, base, design=Design(judge_speed=True)).kind == "spec-slower"


def test_a_slowdown_within_the_hosts_run_to_run_spread_is_not_spec_slower():
    spec, _ss = cells("mtp", {0.7: (0, 80)}, spec=True, latency=2.2)
    base, _bs = cells("baseline", {0.7: (0, 80)}, spec=False, latency=2.0)
    assert judge("mtp", spec, base).kind == "spec-slower"
    v = judge("mtp", spec, base, calibration=Calibration(speed_ratio=0.8, speed_spread=0.22))
    assert v.kind == "healthy" and "run-to-run spread" in v.evidence


def test_clean_and_faster_speculation_within_the_margin_is_healthy():
    spec, ss = cells("mtp", {0.0: (0, 8), 0.7: (0, 80)}, spec=True, latency=1.0)
    base, bs = cells("baseline", {0.0: (0, 8), 0.7: (0, 80)}, spec=False, latency=2.0)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "healthy" and "tokens/s 2.00x baseline" in v.evidence and "no loop excess above 3.3% at 95%" in v.evidence
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


def _greedy_and_clean(margin_at_flip: float):
    spec, ss = cells("mtp", {0.0: (0, 4), 0.7: (0, 80)}, spec=True, latency=1.0)
    base, bs = cells("baseline", {0.0: (0, 4), 0.7: (0, 80)}, spec=False, latency=2.0)
    for s, b in zip(ss[:4], bs[:4]):
        b.output_ids, b.top2_margins = list(range(50)), [2.0] * 50
        s.output_ids = list(range(50))
    ss[0].output_ids = list(range(23)) + [999] + list(range(24, 50))
    bs[0].top2_margins[23] = margin_at_flip
    return spec, ss, base, bs


def test_greedy_divergence_at_a_near_tie_is_called_out_and_does_not_block_healthy():
    spec, ss, base, bs = _greedy_and_clean(0.01)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert "diverges at token 23 (1/4 prompts; 1 at a near tie)" in v.evidence
    assert v.comparisons[0]["greedy_near_tie_flips"] == 1 and v.kind == "healthy"


def test_greedy_divergence_away_from_a_near_tie_keeps_a_profile_from_healthy():
    spec, ss, base, bs = _greedy_and_clean(0.5)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "inconclusive" and "top-2 margin is 0.50 nats (not a near tie: > 0.05)" in v.evidence
    # a host whose A/A arm flips at margins up to 0.4 nats: 0.5 is within its noise (near tie below 0.6)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs, calibration=Calibration(near_tie_margin=0.6))
    assert v.kind == "healthy"


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
    assert exit_code([v]) == 1 and exit_code(["healthy", "spec-slower", "base-model-degenerates"]) == 0 \
        and exit_code(["healthy", "inconclusive"]) == 3 and exit_code(["inconclusive", "spec-corrupts-output"]) == 1


def test_a_server_that_dies_or_hangs_after_ready_is_crashed_or_hung_not_launch_failed():
    crashed = launch_failed("mtp", "cuda_illegal_memory", "illegal memory access in verify", after_ready=True)
    hung = launch_failed("mtp", "stalled", "no log output for 300 s", after_ready=True)
    assert crashed.kind == "crashed:cuda_illegal_memory" and hung.kind == "hung:stalled"
    assert exit_code([crashed]) == 1 and exit_code([hung]) == 1


def test_all_samples_of_each_arm_count_unpaired():
    ss = samples("mtp", 0.7, 8, 16, spec=True)
    for s in ss[:8]:
        s.prompt_id = "only-in-spec"  # no baseline sample shares their key: they count all the same
    bs = samples("baseline", 0.7, 0, 16, spec=False)
    spec = [summarize_cell("mtp", 0.7, True, ss)]
    base = [summarize_cell("baseline", 0.7, False, bs)]
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    row = v.comparisons[0]
    assert (row["spec_loops"], row["spec_n"], row["base_n"]) == (8, 16, 16)
    assert v.kind == "spec-corrupts-output"


def test_decode_logprobs_off_prefill_beyond_the_floor_and_the_bound_corrupt_output_with_no_loop():
    ss = samples("mtp", 0.7, 0, 8, spec=True)
    bs = samples("baseline", 0.7, 0, 8, spec=False)
    for i, (s, b) in enumerate(zip(ss, bs)):
        s.kl_k3 = 0.005 + 0.001 * (i % 2)  # state_leak's size on the sim
        b.kl_k3 = 0.0
    v = judge("mtp", [summarize_cell("mtp", 0.7, True, ss)], [summarize_cell("baseline", 0.7, False, bs)],
              spec_samples=ss, base_samples=bs)
    assert v.kind == "spec-corrupts-output" and v.kl_probe["flagged"], v.evidence
    assert v.evidence.startswith("lossless: decode vs prefill logprobs: 8/8 speculative samples with a mean k3 "
                                 "above the baseline floor's maximum"), v.evidence
    for s, b in zip(ss, bs):  # a noisy floor as large: no flag
        b.kl_k3 = s.kl_k3 + (0.002 if b.sample_index % 2 else -0.002)
    v = judge("mtp", [summarize_cell("mtp", 0.7, True, ss)], [summarize_cell("baseline", 0.7, False, bs)],
              spec_samples=ss, base_samples=bs)
    assert v.kind != "spec-corrupts-output" and not v.kl_probe["flagged"]


def test_a_harmless_kernel_difference_under_the_absolute_bound_is_a_warning_not_corruption():
    ss = samples("mtp", 0.7, 0, 80, spec=True)
    bs = samples("baseline", 0.7, 0, 80, spec=False)
    for i, (s, b) in enumerate(zip(ss, bs)):
        b.kl_k3 = 8e-5 * (1 + (i % 7) / 10)
        s.kl_k3 = 1.25 * 8e-5 * (1 + ((i + 3) % 7) / 10)  # 1.25x the floor: significant, under 2e-4
    v = judge("mtp", [summarize_cell("mtp", 0.7, True, ss)], [summarize_cell("baseline", 0.7, False, bs)],
              spec_samples=ss, base_samples=bs)
    assert v.kind == "healthy", v.evidence
    assert any(w.startswith("KL probe: decode vs prefill") and "under the bound" in w for w in v.warnings)


def test_an_aa_arm_sets_the_near_tie_margin_kl_floor_and_speed_spread():
    from mtp_remote.analysis.lossless import measure_calibration

    _, bs = cells("baseline", {0.0: (0, 4), 0.7: (0, 8)}, spec=False, latency=2.0)
    _, aa = cells("baseline-aa", {0.0: (0, 4), 0.7: (0, 8)}, spec=False, latency=2.5)
    for b, a in zip(bs[:4], aa[:4]):
        b.output_ids, b.top2_margins, a.output_ids = list(range(50)), [2.0] * 50, list(range(50))
    aa[0].output_ids = list(range(10)) + [999] * 40
    bs[0].top2_margins[10] = 0.4  # this host flips greedy tokens at a 0.4-nat margin
    for i, s in enumerate(bs + aa):
        s.kl_k3 = 0.001 * (i % 3)
    cal = measure_calibration(bs, aa)
    assert (cal.greedy_pairs, cal.greedy_diverged) == (4, 1) and cal.near_tie_margin == pytest.approx(0.6)
    assert len(cal.kl_floor) == 24 and cal.speed_ratio == pytest.approx(0.8)
    assert cal.speed_spread == pytest.approx(0.223, abs=1e-3) and cal.to_dict()["kl_floor_n"] == 24


def test_a_mean_k3_above_the_absolute_bound_keeps_a_profile_from_healthy_even_when_not_significant():
    ss = samples("mtp", 0.7, 0, 80, spec=True)
    bs = samples("baseline", 0.7, 0, 80, spec=False)
    for i, (s, b) in enumerate(zip(ss, bs)):
        b.kl_k3 = 8e-5
        s.kl_k3 = 8e-5 if i else 0.05  # one sample far off: the arm's mean 7e-4 > 2e-4, one exceedance only
    v = judge("mtp", [summarize_cell("mtp", 0.7, True, ss)], [summarize_cell("baseline", 0.7, False, bs)],
              spec_samples=ss, base_samples=bs)
    assert v.kind == "inconclusive" and "lossless check not passed: decode vs prefill" in v.evidence, v.evidence


def _greedy_only_divergent(n: int):
    """n greedy prompts, every speculative output diverging at token 5 where the baseline's margin is 2 nats (not
    a near tie), and 80 clean samples per arm at T = 0.7."""
    spec, ss = cells("mtp", {0.0: (0, n), 0.7: (0, 80)}, spec=True, latency=1.0)
    base, bs = cells("baseline", {0.0: (0, n), 0.7: (0, 80)}, spec=False, latency=2.0)
    for i, (s, b) in enumerate(zip(ss[:n], bs[:n])):
        s.prompt_id = b.prompt_id = f"g{i}"
        b.output_ids, b.top2_margins = list(range(50)), [2.0] * 50
        s.output_ids = list(range(5)) + [999] * 45
    return spec, ss, base, bs


def test_without_an_aa_arm_greedy_divergence_decides_no_corruption_and_says_so():
    # issue 31: 6/6 hard divergences vs a floor *assumed* 0 was spec-corrupts-output (p = 0.0011); real kernels
    # are not bit-identical, so without an A/A arm the greedy evidence only keeps the profile from healthy
    spec, ss, base, bs = _greedy_only_divergent(6)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "inconclusive", v.evidence
    assert "no A/A arm: greedy divergence not judged against a floor" in v.evidence
    assert v.lossless[0]["judged"] is False and v.lossless[0]["p_value"] == 1.0
    # with an A/A arm that never diverged, the same outputs are judged: corrupt
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs,
              calibration=Calibration(greedy_pairs=6, greedy_diverged=0))
    assert v.kind == "spec-corrupts-output" and "vs 0/6 (A/A arm; p=0.0011)" in v.evidence, v.evidence
    assert "no A/A arm" not in v.evidence


def test_without_an_aa_arm_identical_greedy_output_stays_healthy_and_says_greedy_was_not_judged():
    spec, ss, base, bs = _greedy_only_divergent(4)
    for s, b in zip(ss[:4], bs[:4]):
        s.output_ids = list(b.output_ids)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "healthy", v.evidence
    assert "lossless checks passed" not in v.evidence
    assert v.evidence.endswith("; no A/A arm: greedy divergence not judged against a floor"), v.evidence


def test_the_greedy_gate_is_a_fisher_test_against_the_aa_arm_not_a_count():
    # issue 31: "hard flips > floor" kept a healthy server from healthy in 22-58 % of noisy runs; 1/4 hard flips
    # vs 0/4 on the A/A arm is p = 0.5 (healthy); 4/6 vs 0/6 is p = 0.03 < alpha (not healthy; Holm-adjusted over
    # the loop cell and this member 0.061: not corrupt either)
    spec, ss, base, bs = _greedy_only_divergent(4)
    cal = Calibration(greedy_pairs=4, greedy_diverged=0)
    for s, b in zip(ss[1:4], bs[1:4]):
        s.output_ids = list(b.output_ids)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs, calibration=cal)
    assert v.kind == "healthy" and v.lossless[0]["counts"]["hard"] == 1 and v.lossless[0]["p_value"] == 0.5
    spec, ss, base, bs = _greedy_only_divergent(6)
    for s, b in zip(ss[4:6], bs[4:6]):
        s.output_ids = list(b.output_ids)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs, calibration=Calibration(greedy_pairs=6))
    assert v.kind == "inconclusive" and "4/6 prompts vs 0/6 (A/A arm; p=0.03)" in v.evidence, v.evidence


def test_the_aa_floor_counts_each_aa_flip_at_the_margin_the_other_pairs_calibrate():
    from mtp_remote.analysis.lossless import measure_calibration

    _, bs = cells("baseline", {0.0: (0, 4)}, spec=False)
    _, aa = cells("baseline-aa", {0.0: (0, 4)}, spec=False)
    for b, a in zip(bs, aa):
        b.output_ids, b.top2_margins, a.output_ids = list(range(50)), [2.0] * 50, list(range(50))
    aa[0].output_ids = list(range(10)) + [999] * 40
    aa[1].output_ids = list(range(20)) + [999] * 40
    bs[0].top2_margins[10], bs[1].top2_margins[20] = 0.02, 0.3  # a near tie; a flip at 0.3 nats
    cal = measure_calibration(bs, aa)
    # in-sample the margin (1.5 x 0.3 = 0.45) covers both flips; left out, the 0.3 flip is beyond 1.5 x 0.02
    assert cal.near_tie_margin == pytest.approx(0.45) and cal.greedy_hard == 1


def _greedy_only(n: int, hard: int = 0):
    """A greedy-only plan (T = 0, one sample of each of n distinct prompts, as the real CPU hosts run): the first
    ``hard`` speculative outputs diverge at token 5 where the baseline's margin is 2 nats, the rest are identical."""
    spec, ss = cells("mtp", {0.0: (0, n)}, spec=True, latency=1.0)
    base, bs = cells("baseline", {0.0: (0, n)}, spec=False, latency=2.0)
    for i, (s, b) in enumerate(zip(ss, bs)):
        s.prompt_id = b.prompt_id = f"g{i}"
        b.output_ids, b.top2_margins = list(range(50)), [2.0] * 50
        s.output_ids = list(range(5)) + [999] * 45 if i < hard else list(range(50))
    return spec, ss, base, bs


def test_a_greedy_only_plan_is_healthy_from_29_identical_prompts_and_states_the_bound():
    # issue 31: with no temperature above 0 there is no loop bound, so healthy was unreachable; the greedy bound
    # takes its place: 0 of 29 distinct prompts bounds the per-prompt divergence rate at 1 - 0.05^(1/29) = 9.81 %
    spec, ss, base, bs = _greedy_only(29)
    cal = Calibration(greedy_pairs=29, greedy_prompts=29)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs, calibration=cal)
    assert v.kind == "healthy", v.evidence
    assert v.evidence.startswith("greedy output beyond a near tie on 0/29 prompts (A/A arm 0/29): per-prompt "
                                 "divergence rate under 9.9% at 95%; lossless checks passed (greedy)"), v.evidence
    (row,) = v.comparisons
    assert row["greedy_bound"]["bound"] == pytest.approx(1 - 0.05 ** (1 / 29))
    assert row["greedy_bound"]["closed"] and row["greedy_bound"]["prompts_needed"] == 29
    assert row["greedy_next"] is None


def test_a_greedy_only_plan_one_prompt_short_is_inconclusive_and_names_the_prompts_that_close_the_gate():
    spec, ss, base, bs = _greedy_only(6)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs,
              calibration=Calibration(greedy_pairs=6, greedy_prompts=6))
    assert v.kind == "inconclusive", v.evidence
    assert ("0/6 prompts (A/A arm 0/6): per-prompt divergence rate up to 39.4% at 95% (healthy needs it below 10%); "
            "29 distinct prompts with greedy output identical beyond near ties would close it (23 more than this "
            "run's 6)") in v.evidence, v.evidence
    assert "at least 29 distinct prompts (23 more)" in v.comparisons[0]["greedy_next"]
    # a 5 % margin needs 59
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs, design=Design(greedy_margin=0.05),
              calibration=Calibration(greedy_pairs=6, greedy_prompts=6))
    assert v.comparisons[0]["greedy_bound"]["prompts_needed"] == 59


def test_a_greedy_only_plan_without_an_aa_arm_bounds_the_raw_rate_and_a_hard_divergence_asks_for_one():
    spec, ss, base, bs = _greedy_only(29)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "healthy" and "0/29 prompts (no A/A arm: floor taken as 0): per-prompt divergence rate under " \
        "9.9% at 95%" in v.evidence, v.evidence
    assert v.evidence.endswith("no A/A arm: greedy divergence not judged against a floor")
    spec, ss, base, bs = _greedy_only(59, hard=1)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs)
    assert v.kind == "inconclusive" and "lossless check not passed" in v.evidence, v.evidence
    assert "compare.calibration: true" in v.comparisons[0]["greedy_next"]


def test_on_a_host_whose_aa_arm_diverges_the_bound_is_on_the_excess_over_its_floor():
    # 3 of 60 prompts diverge beyond a near tie in both the speculative and the A/A arm: not significant, and the
    # exact square-and-add bound of the excess (3/60 - 3/60) is 8.3 % at 95 %: under a 10 % margin
    spec, ss, base, bs = _greedy_only(60, hard=3)
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs,
              calibration=Calibration(greedy_pairs=60, greedy_prompts=60, greedy_hard=3, greedy_hard_prompts=3))
    gb = v.comparisons[0]["greedy_bound"]
    assert (gb["hard"], gb["floor_hard"]) == (3, 3) and gb["bound"] == pytest.approx(0.0826, abs=5e-4)
    assert v.kind == "healthy" and "excess over the A/A arm under 8.3% at 95%" in v.evidence, v.evidence


def test_a_prompt_that_flipped_at_a_near_tie_is_not_counted_for_the_greedy_bound():
    # a near-tie flip hides whatever follows it: 29 prompts, 5 of them flipped at a 0.01-nat tie, leave 24
    # counted (0 of 24 bounds the rate at 11.7 %: not under 10 %), and the evidence says why
    spec, ss, base, bs = _greedy_only(29, hard=5)
    for b in bs[:5]:
        b.top2_margins = [2.0] * 5 + [0.01] + [2.0] * 44
    v = judge("mtp", spec, base, spec_samples=ss, base_samples=bs,
              calibration=Calibration(greedy_pairs=29, greedy_prompts=29))
    gb = v.comparisons[0]["greedy_bound"]
    assert (gb["hard"], gb["prompts"], gb["censored"]) == (0, 24, 5) and not gb["closed"]
    assert v.kind == "inconclusive" and "(5 more diverged at a near tie first, not counted; A/A arm 0/29)" in \
        v.evidence, v.evidence
    assert "5 of 29 diverged at a near tie first and are not counted" in v.comparisons[0]["greedy_next"]
