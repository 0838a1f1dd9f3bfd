"""Greedy comparison, LCS ratio, KL probe and pairing of samples across arms."""

from __future__ import annotations

import math

import pytest

from mtp_remote.analysis.cells import SampleObs
from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.divergence import greedy_divergence, k3_estimates, kl_gap_flag, kl_probe, lcs_length
from mtp_remote.analysis.pairing import greedy_report, pair_samples


def test_identical_greedy_outputs_have_no_divergence_and_full_lcs():
    g = greedy_divergence([1, 2, 3, 4], [1, 2, 3, 4])
    assert g.identical and g.lcs_ratio == 1.0 and g.unit == "ids"


def test_first_divergence_index_and_lcs_ratio_on_ids():
    g = greedy_divergence([1, 2, 3, 4, 5, 6], [1, 2, 9, 4, 5, 6])
    assert g.first_index == 2 and g.lcs_ratio == pytest.approx(2 * 5 / 12)
    assert greedy_divergence([1, 2, 3], [1, 2, 3, 4]).first_index == 3


def test_texts_are_compared_by_corpus_tokens():
    g = greedy_divergence("The answer is 4.", "The answer is four.")
    assert (g.first_index, g.unit, g.len_a) == (3, "text-tokens", 5)


def test_lcs_length_matches_the_classic_example():
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
    assert lcs_length([], [1]) == 0


def test_k3_is_zero_when_prefill_agrees_and_positive_otherwise():
    assert k3_estimates([-1.0, -2.0], [-1.0, -2.0]).tolist() == [0.0, 0.0]
    r = -0.5
    assert k3_estimates([-1.5], [-1.0])[0] == pytest.approx(math.exp(r) - 1 - r)
    with pytest.raises(ValueError):
        k3_estimates([0.0], [0.0, 1.0])


def test_a_divergence_at_a_near_tie_is_a_flip_not_corruption():
    probe = kl_probe([-0.1, -0.2, -0.3], [-0.1, -0.2, -0.3], divergence_index=1, top2_margins=[2.0, 0.01, 3.0])
    assert probe.near_tie_flip is True and probe.mean_k3 == 0.0
    assert kl_probe([-0.1], [-0.1], divergence_index=0, top2_margins=[1.5]).near_tie_flip is False


def test_kl_gap_flags_a_profile_whose_mean_k3_exceeds_the_baseline_by_the_margin():
    assert kl_gap_flag([0.05, 0.07], [0.001, 0.002]) is True
    assert kl_gap_flag([0.003], [0.001]) is False


def _obs(profile, t, prompt, idx, seed, ids=None, text=None):
    return SampleObs(profile, t, prompt, idx, seed, analyze_text(text or "ok"), "stop", 10, 1.0, None,
                     output_ids=ids, text=text)


def test_samples_pair_by_temperature_prompt_index_and_seed():
    spec = [_obs("mtp", 0.7, "p1", 0, 1), _obs("mtp", 0.7, "p1", 1, 2), _obs("mtp", 0.7, "p2", 0, 3)]
    base = [_obs("base", 0.7, "p1", 1, 2), _obs("base", 0.7, "p1", 0, 1), _obs("base", 0.0, "p2", 0, 3)]
    pairs = pair_samples(spec, base)
    assert [(s.prompt_id, s.sample_index, b.sample_index) for s, b in pairs] == [("p1", 0, 0), ("p1", 1, 1)]


def test_greedy_report_prefers_ids_and_falls_back_to_text():
    spec = [_obs("mtp", 0.0, "p1", 0, None, ids=[1, 2, 3]), _obs("mtp", 0.0, "p2", 0, None, text="a b c")]
    base = [_obs("base", 0.0, "p1", 0, None, ids=[1, 2, 4]), _obs("base", 0.0, "p2", 0, None, text="a b c")]
    report = greedy_report(spec, base)
    assert [(g.prompt_id, g.divergence.first_index, g.divergence.unit) for g in report] == [
        ("p1", 2, "ids"), ("p2", None, "text-tokens")]
