"""The toy model and its speculative decoder: lossless when healthy, looping and over-accepting with state_leak.

These run the model in-process (no server): the statistical properties the diagnosis relies on, on the
field playbook's prompts with its prompt template (think block opened by the template).
"""

from __future__ import annotations

import random

import pytest

from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.sim.args import parse_server_args
from mtp_remote.sim.decode import SamplingParams, Sequence, score_tokens
from mtp_remote.sim.engine import knobs_for, leak_active, split_prompt_ids
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.mitigation import fault_active
from mtp_remote.sim.model import ModelKnobs, ToyModel
from mtp_remote.sim.tokens import IM_END, Vocab

PROMPTS = ["What is 2+2?", "What is the capital of France?", "List the prime numbers below 20.",
           "Why does water boil at a lower temperature at high altitude?",
           "Write a Python function that sorts a list of numbers."]
TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"
VOCAB = Vocab()


def decode(prompt: str, *, temperature: float, spec: int = 0, leak: bool = False, seed: int = 0,
           max_new: int = 2048, knobs: ModelKnobs | None = None, accept_all: bool = False) -> Sequence:
    ids = VOCAB.encode(TEMPLATE.format(prompt=prompt))
    head, replay = split_prompt_ids(ids)
    model = ToyModel.for_prompt(VOCAB.decode(head), VOCAB, knobs or ModelKnobs())
    seq = Sequence(model, SamplingParams(temperature=temperature, max_new_tokens=max_new), random.Random(seed),
                   spec, leak, accept_all=accept_all)
    for t in replay:
        seq.state = model.step(seq.state, t)
    while not seq.finished:
        seq.step()
    return seq


def loops(seq: Sequence) -> bool:
    return analyze_text(VOCAB.decode([t for t in seq.output_ids if t != IM_END])).loop is not None


def sample_cell(*, spec: int, leak: bool = False, knobs=None, n: int = 8, temperature: float = 0.7,
                accept_all: bool = False):
    seqs = [decode(p, temperature=temperature, spec=spec, leak=leak, seed=1000 + i, knobs=knobs,
                   accept_all=accept_all)
            for p in PROMPTS for i in range(n)]
    n_loops = sum(loops(s) for s in seqs)
    tokens = sum(len(s.output_ids) for s in seqs)
    accept = tokens / sum(s.verify_ct for s in seqs) if spec else None
    return n_loops, len(seqs), accept


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_with_speculation_equals_greedy_without_token_for_token(prompt):
    plain = decode(prompt, temperature=0.0)
    spec = decode(prompt, temperature=0.0, spec=3)
    assert spec.output_ids == plain.output_ids
    assert plain.finish_reason == {"type": "stop", "matched": IM_END}
    text = VOCAB.decode(plain.output_ids)
    assert "</think>" in text and 60 <= len(plain.output_ids) <= 400
    assert not loops(plain)


def test_healthy_reasoning_restates_the_question_then_answers():
    text = VOCAB.decode(decode("What is 2+2?", temperature=0.0).output_ids)
    assert text.startswith("The user's question is 2+2.")
    assert text.split("</think>")[1].strip().startswith("The answer is 2+2 = 4.")


def test_healthy_baseline_and_speculation_rarely_loop_at_t07_and_acceptance_is_in_range():
    base_loops, n, _ = sample_cell(spec=0)
    spec_loops, _, accept = sample_cell(spec=3)
    assert base_loops <= 0.05 * n and spec_loops <= 0.05 * n
    assert 2.5 <= accept <= 3.5
    _, _, greedy_accept = sample_cell(spec=3, n=1, temperature=0.0)
    assert 2.5 <= greedy_accept <= 3.5


def test_state_leak_makes_most_t07_samples_loop_and_raises_acceptance():
    _, _, healthy_accept = sample_cell(spec=3)
    leak_loops, n, leak_accept = sample_cell(spec=3, leak=True)
    assert leak_loops >= 0.6 * n
    assert leak_accept > healthy_accept + 0.3


def test_state_leak_shows_as_an_early_greedy_divergence():
    plain = decode("What is 2+2?", temperature=0.0)
    leaky = decode("What is 2+2?", temperature=0.0, spec=3, leak=True)
    first = next(i for i, (a, b) in enumerate(zip(plain.output_ids, leaky.output_ids)) if a != b)
    assert first < 150
    assert loops(leaky)


def test_base_loops_fault_loops_with_and_without_speculation():
    knobs = knobs_for(parse_faults("base_loops"))
    base, n, _ = sample_cell(spec=0, knobs=knobs)
    spec, _, _ = sample_cell(spec=3, knobs=knobs)
    assert base >= 0.5 * n and spec >= 0.5 * n


def test_low_accept_fault_gives_acceptance_near_one_and_fine_output():
    knobs = knobs_for(parse_faults("low_accept"))
    n_loops, n, accept = sample_cell(spec=3, knobs=knobs, n=4)
    assert accept < 1.2 and n_loops <= 0.05 * n


def test_decode_logprobs_equal_prefill_scoring_when_healthy_and_differ_under_state_leak():
    for leak, should_match in ((False, True), (True, False)):
        seq = decode("What is 2+2?", temperature=0.7, spec=3, leak=leak, seed=7, max_new=400)
        ids = VOCAB.encode(TEMPLATE.format(prompt="What is 2+2?"))
        head, replay = split_prompt_ids(ids)
        model = ToyModel.for_prompt(VOCAB.decode(head), VOCAB, ModelKnobs())
        prefill = score_tokens(model, replay + seq.output_ids)[len(replay):]
        same = all(abs(a - b) < 1e-9 for a, b in zip(prefill, seq.logprobs))
        assert same is should_match


@pytest.mark.parametrize(("flags", "leaks"), [
    ([], True), (["--disable-radix-cache"], True), (["--disable-cuda-graph"], True),
    (["--disable-overlap-schedule"], False), (["--mamba-scheduler-strategy", "extra_buffer"], False)])
def test_state_leak_is_cured_by_no_overlap_or_extra_buffer_not_by_disabling_radix_cache(flags, leaks):
    args, _ = parse_server_args(["--model", "/models/Qwen3.6-27B", "--speculative-algorithm", "NEXTN", *flags])
    assert leak_active(args, parse_faults("state_leak")) is leaks
    baseline, _ = parse_server_args(["--model", "/models/Qwen3.6-27B"])
    assert leak_active(baseline, parse_faults("state_leak")) is False


def test_accept_all_drafts_diverges_greedy_early_without_loops_with_acceptance_at_the_maximum():
    """The real engine's lossless-only fault (``real-hybrid-overaccept``): every draft accepted."""
    for prompt in PROMPTS:
        plain = decode(prompt, temperature=0.0)
        over = decode(prompt, temperature=0.0, spec=3, accept_all=True)
        first = next(i for i, (a, b) in enumerate(zip(plain.output_ids, over.output_ids)) if a != b)
        assert first < 16, prompt  # wrong from the first draft the head gets wrong
        assert len(over.output_ids) / over.verify_ct > 3.9  # k + 1 = 4 with 3 draft steps
        assert not loops(over) and not loops(plain)
    n_loops, n, accept = sample_cell(spec=3, n=4, accept_all=True)
    assert n_loops == 0 and accept > 3.9


def test_accept_all_drafts_reports_the_targets_own_logprobs_so_prefill_scoring_agrees():
    seq = decode("What is 2+2?", temperature=0.7, spec=3, seed=7, max_new=400, accept_all=True)
    ids = VOCAB.encode(TEMPLATE.format(prompt="What is 2+2?"))
    head, replay = split_prompt_ids(ids)
    model = ToyModel.for_prompt(VOCAB.decode(head), VOCAB, ModelKnobs())
    prefill = score_tokens(model, replay + seq.output_ids)[len(replay):]
    assert max(abs(a - b) for a, b in zip(prefill, seq.logprobs)) < 1e-9  # the KL probe's floor


def test_accept_all_drafts_needs_speculation_and_no_flag_cures_it():
    faults = parse_faults("accept_all_drafts")
    baseline, _ = parse_server_args(["--model", "/models/Qwen3.6-27B"])
    assert fault_active("accept_all_drafts", baseline, faults) is False
    for extra in ([], ["--disable-overlap-schedule"], ["--mamba-scheduler-strategy", "extra_buffer"]):
        args, _ = parse_server_args(["--model", "/models/Qwen3.6-27B", "--speculative-algorithm", "NEXTN", *extra])
        assert fault_active("accept_all_drafts", args, faults) is True
