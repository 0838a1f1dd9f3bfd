"""Monte Carlo of the whole decision pipeline (fixed seeds, a few seconds in all).

Each run is played as the runner drives it — baseline first, rounds of one sample per prompt, the runner's
early-stopping call after each round on samples.jsonl-shaped records — and judged by ``verdict.judge_all``
(``analysis.montecarlo``). Outcome rates come from the sim: ``state_leak`` with the nightly playbook's
prompts at T = 0.7 (3 speculative steps) looped 30/40, 37/40, 38/40, 25/40, 38/40 per prompt (168/200).
"""

from __future__ import annotations

import pytest

from mtp_remote.analysis.montecarlo import error_rates
from mtp_remote.analysis.stopping import Design

NIGHTLY_1 = Design(rounds=12, family=1, sequential=True)  # nightly.yaml: 5 prompts, budget 12 per prompt
NIGHTLY_2 = Design(rounds=12, family=2, sequential=True)  # ... with a second MTP profile
FIELD = Design(rounds=4, family=1)  # diagnose-mtp.yaml: 5 prompts x 4 samples, one look at the end
STATE_LEAK = [30 / 40, 37 / 40, 38 / 40, 25 / 40, 38 / 40]


@pytest.mark.parametrize("rate", [0.0, 0.05, 0.3])
@pytest.mark.parametrize("design", [NIGHTLY_2, FIELD], ids=["nightly-2-profiles", "field"])
def test_equal_loop_rates_rarely_give_a_wrong_spec_corrupts_output(design, rate):
    rates = {"baseline": rate, "mtp": rate} | ({"mtp2": rate} if design.family == 2 else {})
    r = error_rates(rates, design, trials=300, seed=11)
    assert r.any_corrupt <= 0.05, r.kinds


@pytest.mark.parametrize("design", [FIELD, Design(rounds=8, family=1, sequential=True)], ids=["field", "8-rounds"])
def test_a_ten_point_loop_excess_is_never_called_healthy(design):
    r = error_rates({"baseline": 0.0, "mtp": 0.10}, design, trials=300, seed=12)
    assert "healthy" not in r.kinds["mtp"] and "base-model-degenerates" not in r.kinds["mtp"], r.kinds


@pytest.mark.parametrize("design", [NIGHTLY_1, Design(rounds=16, family=1, sequential=True)],
                         ids=["nightly", "16-rounds"])
def test_a_ten_point_loop_excess_is_called_healthy_only_when_the_arm_happens_to_show_almost_no_loop(design):
    # with 60 or 80 clean samples per arm a clean server is healthy; a 10 % arm shows 0/60 with p = 0.9^60 =
    # 0.18 % (at most 1/80: 0.2 %): the rule's level at twice the margin, not zero
    r = error_rates({"baseline": 0.0, "mtp": 0.10}, design, trials=1000, seed=12)
    assert r.kinds["mtp"].get("healthy", 0) <= 0.005 and "base-model-degenerates" not in r.kinds["mtp"], r.kinds


def test_nightly_with_two_speculative_profiles_on_state_leak_corrupts_output_in_19_of_20_seeds():
    hits = 0
    for seed in range(20):
        r = error_rates({"baseline": 0.0, "mtp": STATE_LEAK, "mtp2": STATE_LEAK}, NIGHTLY_2, trials=1, seed=seed)
        hits += r.kinds["mtp"].get("spec-corrupts-output", 0) == 1 and r.kinds["mtp2"].get(
            "spec-corrupts-output", 0) == 1
    assert hits >= 19
    r = error_rates({"baseline": 0.0, "mtp": STATE_LEAK, "mtp2": STATE_LEAK}, NIGHTLY_2, trials=100, seed=99)
    assert r.mean_samples["mtp"] <= 15  # settled at the second look (10 samples) almost always


def test_a_looping_baseline_with_a_bounded_excess_is_base_model_degenerates_and_an_excess_over_it_is_not():
    big = Design(rounds=200, family=1)
    r = error_rates({"baseline": 0.5, "mtp": 0.5}, big, trials=30, seed=13)
    assert r.kinds["mtp"].get("base-model-degenerates", 0) >= 0.6  # 1000 per arm bound a 5-point excess
    r = error_rates({"baseline": 0.25, "mtp": 0.55}, FIELD, trials=200, seed=14)
    assert "base-model-degenerates" not in r.kinds["mtp"] and "healthy" not in r.kinds["mtp"]


def sim_draw(noise: float, *, leak: bool = False, max_new: int = 768):
    """Outcomes decoded by the sim's model in process (field prompts, template opening <think>)."""
    import random

    from mtp_remote.analysis.degeneracy import analyze_text
    from mtp_remote.sim.decode import SamplingParams, Sequence
    from mtp_remote.sim.engine import split_prompt_ids
    from mtp_remote.sim.model import ModelKnobs, ToyModel
    from mtp_remote.sim.tokens import IM_END, Vocab

    vocab = Vocab()
    prompts = ["What is 2+2?", "What is the capital of France?", "List the prime numbers below 20.",
               "Why does water boil at a lower temperature at high altitude?",
               "Write a Python function that sorts a list of numbers."]
    template = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"

    def draw(profile, j, i, rng):
        head, replay = split_prompt_ids(vocab.encode(template.format(prompt=prompts[j])))
        model = ToyModel.for_prompt(vocab.decode(head), vocab, ModelKnobs())
        seq = Sequence(model, SamplingParams(temperature=0.7, max_new_tokens=max_new),
                       random.Random(int(rng.integers(1 << 31))), 0 if profile == "baseline" else 3,
                       leak and profile != "baseline", noise=noise)
        for t in replay:
            seq.state = model.step(seq.state, t)
        while not seq.finished:
            seq.step()
        text = "<think>\n" + vocab.decode([t for t in seq.output_ids if t != IM_END])
        return analyze_text(text), seq.finish_reason["type"]

    return draw


def test_a_healthy_server_with_numeric_noise_never_corrupts_output_decoded_by_the_sim():
    import numpy as np

    from mtp_remote.analysis.montecarlo import simulate_run

    for seed in range(2):  # nightly, two MTP profiles, strong bf16-like jitter (0.3 nats) on every path
        out = simulate_run({"baseline": None, "mtp": None, "mtp2": None}, NIGHTLY_2, rng=np.random.default_rng(seed),
                           draw=sim_draw(0.3))
        assert "spec-corrupts-output" not in out.verdicts.values(), out.evidence
    r = error_rates({"baseline": 0.0, "mtp": 0.0, "mtp2": 0.0}, NIGHTLY_2, trials=300, seed=15)
    assert r.any_corrupt == 0  # the sim's healthy arms loop 0/40 with or without noise
    assert r.kinds["mtp"] == {"healthy": 1.0}  # 60 clean samples per arm bound the excess below 5 points


def test_nightly_on_state_leak_decoded_by_the_sim_corrupts_output_for_both_profiles():
    import numpy as np

    from mtp_remote.analysis.montecarlo import simulate_run

    out = simulate_run({"baseline": None, "mtp": None, "mtp2": None}, NIGHTLY_2, rng=np.random.default_rng(3),
                       draw=sim_draw(0.0, leak=True))
    assert out.verdicts == {"mtp": "spec-corrupts-output", "mtp2": "spec-corrupts-output"}, out.evidence
    assert out.samples["mtp"] == out.samples["mtp2"] == 10  # settled at the second look


def test_state_leak_at_one_speculative_step_on_the_nightly_playbook_is_not_healthy():
    # nightly.yaml: 12 per prompt, early stopping, the KL probe and expected answers on (one lossless member);
    # loops ~7 % at one step (often 0/60 at the nightly's size), so the lossless checks must keep it from healthy
    import numpy as np

    from bench.sim_pools import Arm, SimDecoder
    from mtp_remote.analysis.montecarlo import simulate_run

    dec = SimDecoder(max_new=2048)
    arms = {"baseline": Arm(0, False, 0.02), "mtp": Arm(1, True, 0.02)}
    out = simulate_run({"baseline": None, "mtp": None}, Design(rounds=12, family=2, sequential=True, resumes=3),
                       rng=np.random.default_rng(5),
                       draw=lambda p, j, i, rng: dec.sample(j, arms[p], int(rng.integers(1 << 30))))
    assert out.verdicts["mtp"] != "healthy", out.evidence
