"""The ``numeric_noise`` fault: a healthy server that is not bitwise (in process, no server).

Logit jitter that differs between the plain decode, speculative verify and prefill paths puts a small floor
under the KL probe on both arms; ``state_leak`` stays well above it (3 standard errors, the probe's rule).
"""

from __future__ import annotations

import random

import numpy as np

from mtp_remote.analysis.divergence import greedy_divergence, k3_estimates, kl_gap_flag
from mtp_remote.sim.decode import SamplingParams, Sequence, score_tokens
from mtp_remote.sim.engine import split_prompt_ids
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.model import ModelKnobs, ToyModel
from mtp_remote.sim.tokens import Vocab

VOCAB = Vocab()
PROMPTS = ["What is 2+2?", "What is the capital of France?", "List the prime numbers below 20.",
           "Why does water boil at a lower temperature at high altitude?"]
TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"


def run(prompt, *, temperature, spec=0, leak=False, noise=0.0, seed=0, max_new=1024):
    """(sequence, mean k3 of its decode logprobs against a prefill re-score)."""
    head, replay = split_prompt_ids(VOCAB.encode(TEMPLATE.format(prompt=prompt)))
    model = ToyModel.for_prompt(VOCAB.decode(head), VOCAB, ModelKnobs())
    seq = Sequence(model, SamplingParams(temperature=temperature, max_new_tokens=max_new, top_logprobs_num=2),
                   random.Random(seed), spec, leak, noise=noise)
    for t in replay:
        seq.state = model.step(seq.state, t)
    while not seq.finished:
        seq.step()
    prefill = score_tokens(model, list(replay) + seq.output_ids, noise=noise)[len(replay):]
    return seq, float(np.mean(k3_estimates(prefill, seq.logprobs)))


def k3s(n=3, **kw):
    return [run(p, temperature=0.7, seed=10 + i, **kw)[1] for p in PROMPTS for i in range(n)]


def test_numeric_noise_takes_a_sigma_and_defaults_to_two_hundredths_of_a_nat():
    assert parse_faults("numeric_noise=0.05").value("numeric_noise") == 0.05
    assert parse_faults("numeric_noise").value("numeric_noise") == 0.02


def test_without_noise_decode_and_prefill_agree_bitwise_and_with_it_both_arms_have_a_small_floor():
    assert max(k3s()) == 0.0
    plain, spec = k3s(noise=0.02), k3s(spec=3, noise=0.02)
    assert 0 < np.mean(plain) < 1e-3 and 0 < np.mean(spec) < 1e-3
    assert not kl_gap_flag(spec, plain)  # healthy speculation is not flagged against the noisy floor


def test_state_leak_is_flagged_by_the_kl_probe_above_the_noise_floor():
    floor = k3s(6, noise=0.02)  # per-sample k3 under state_leak is heavy-tailed: 24 probed samples
    leak = k3s(6, spec=3, leak=True, noise=0.02)
    assert np.mean(leak) > 10 * np.mean(floor) and kl_gap_flag(leak, floor)


def test_strong_noise_flips_a_greedy_token_without_any_loop():
    flips = []
    for p in PROMPTS:
        a, _ = run(p, temperature=0.0, noise=0.3)
        b, _ = run(p, temperature=0.0, spec=3, noise=0.3)
        d = greedy_divergence(b.output_ids, a.output_ids)
        if d.first_index is not None:
            top = a.top_logprobs[d.first_index]
            flips.append(top[0][0] - top[1][0])
    assert flips and max(flips) < 0.3  # the toy model's closest calls are near ties only under this jitter


def test_the_jitter_depends_on_the_launch_and_the_batch_so_two_launches_of_one_server_are_not_bitwise_equal():
    from mtp_remote.sim.decode import PLAIN, jittered

    head, replay = split_prompt_ids(VOCAB.encode(TEMPLATE.format(prompt=PROMPTS[0])))
    model = ToyModel.for_prompt(VOCAB.decode(head), VOCAB, ModelKnobs())
    st = model.initial_state()
    for t in replay:
        st = model.step(st, t)
    alone = jittered(model, st, 0.02, PLAIN)
    assert jittered(model, st, 0.02, PLAIN) == alone  # deterministic given path, batch and launch
    assert jittered(model, st, 0.02, PLAIN, 1, 7) != alone and jittered(model, st, 0.02, PLAIN, 8, 0) != alone
    lg = model.logits(st)
    assert max(abs(jittered(model, st, 0.02, PLAIN, 8, 7)[t] - w) for t, w in lg.items()) < 0.02 * 1.8
