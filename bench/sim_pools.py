"""Samples decoded by the sim's model in process (no server): per sample the text metrics, the finish reason,
the KL probe (a T = 1 generation with the sample's seed, re-scored by prefill: mean k3) and the expected-answer
check — what the runner stores for a request, without HTTP. Used by ``bench_verdicts.py`` and the tests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from mtp_remote.analysis.degeneracy import analyze_text
from mtp_remote.analysis.divergence import k3_estimates
from mtp_remote.analysis.lossless import check_answer
from mtp_remote.sim.decode import SamplingParams, Sequence, score_tokens
from mtp_remote.sim.engine import split_prompt_ids
from mtp_remote.sim.model import ModelKnobs, ToyModel
from mtp_remote.sim.tokens import IM_END, Vocab

#: The nightly playbook's prompts with the expected answers its playbook gives (None: no check).
PROMPTS = [("What is 2+2?", "4"), ("What is the capital of France?", "Paris"),
           ("List the prime numbers below 20.", None),
           ("Why does water boil at a lower temperature at high altitude?", None),
           ("Write a Python function that sorts a list of numbers.", None)]
TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"


@dataclass(frozen=True)
class Arm:
    """A server profile as the sim decodes it: speculative steps (0: none), the state_leak fault, the
    numeric_noise sigma (nats)."""

    steps: int = 0
    leak: bool = False
    noise: float = 0.0


class SimDecoder:
    """Decodes prompts of :data:`PROMPTS` for an :class:`Arm` (models built once per prompt)."""

    def __init__(self, max_new: int = 2048):
        self.vocab = Vocab()
        self.max_new = max_new
        self._prompts = []
        for text, _ in PROMPTS:
            head, replay = split_prompt_ids(self.vocab.encode(TEMPLATE.format(prompt=text)))
            self._prompts.append((ToyModel.for_prompt(self.vocab.decode(head), self.vocab, ModelKnobs()), replay))

    def _decode(self, j: int, arm: Arm, temperature: float, seed: int) -> Sequence:
        model, replay = self._prompts[j]
        seq = Sequence(model, SamplingParams(temperature=temperature, max_new_tokens=self.max_new),
                       random.Random(seed), arm.steps, arm.leak, noise=arm.noise)
        for t in replay:
            seq.state = model.step(seq.state, t)
        while not seq.finished:
            seq.step()
        return seq

    def probe(self, j: int, arm: Arm, seed: int) -> tuple[float, float, int]:
        """The KL probe of one request: a T = 1 generation re-scored by prefill, (mean k3, max k3, tokens)."""
        model, replay = self._prompts[j]
        seq = self._decode(j, arm, 1.0, seed)
        pre = score_tokens(model, list(replay) + seq.output_ids, arm.noise)[len(replay):]
        k = k3_estimates(pre, seq.logprobs)
        return (float(k.mean()), float(k.max()), int(k.size)) if k.size else (0.0, 0.0, 0)

    def k3(self, j: int, arm: Arm, seed: int) -> float:
        """The KL probe's mean k3 of one request (nats/token)."""
        return self.probe(j, arm, seed)[0]

    def sample(self, j: int, arm: Arm, seed: int, *, temperature: float = 0.7, kl: bool = True) -> tuple:
        """``(metrics, finish_reason, {"kl_k3", "answer_ok"})`` of one request (the montecarlo ``Draw`` shape)."""
        seq = self._decode(j, arm, temperature, seed)
        text = "<think>\n" + self.vocab.decode([t for t in seq.output_ids if t != IM_END])
        expected = PROMPTS[j][1]
        mean, top, n = self.probe(j, arm, seed) if kl else (None, None, None)
        extra = {"kl_k3": mean, "kl_max_k3": top, "kl_tokens": n,
                 "answer_ok": check_answer(text, expected) if expected else None}
        return analyze_text(text), seq.finish_reason["type"], extra
