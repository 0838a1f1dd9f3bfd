"""Lossless checks: speculative decoding must not change what the model says, only how fast it says it.

Correct speculative decoding is lossless (Leviathan et al. 2023): greedy output equal to the baseline's token
for token up to numerical near ties, decode-time logprobs equal to a prefill pass re-scoring the same tokens,
and so the same answers. Three per-profile tests, each a p-value against the host's floor (the baseline, or
the baseline and its A/A relaunch when ``compare.calibration`` measured one):

- **greedy** (T = 0): pairs whose outputs diverge where the baseline's top-2 logprob margin is *not* a near
  tie, or that loop where the baseline's does not ("hard" divergences), spec vs the A/A arm's hard
  divergences: one-sided Fisher exact. Without an A/A arm the floor is 0 hard divergences on as many pairs:
  the near-tie margin is then the whole model of numerical noise.
- **kl** (decode vs prefill): per-sample k3 (``divergence.kl_probe``) of the speculative arm against the
  floor's per-sample k3 by an exceedance (placement) test: x = speculative samples strictly above the
  floor's r-th largest value (r = max(1, ceil((1 - :data:`KL_FLOOR_QUANTILE`) m)): the maximum); under
  exchangeability the pooled ranks are uniform, so ``P(X >= x)`` is hypergeometric (exact, conservative
  with ties). It only counts as a violation when the arm's mean k3 also clears an absolute bound,
  ``max(KL_ABS_BOUND, KL_REL_BOUND x floor mean)`` nats/token (like SGLang's own MTP tests bound the
  decode-vs-prefill KL at T = 1; token-weighted, as theirs): a harmless kernel difference (1.25x the floor) is significant at enough
  samples but stays under it.
- **accuracy**: where a prompt has an expected answer (playbook ``prompts[].expected``), the share of
  samples whose answer contains it, baseline vs spec: one-sided Fisher exact ("the baseline answers right
  more often"), over all T > 0 samples (both arms sample the same prompts round by round).

:func:`lossless_member` folds a profile's tests into one p-value (Bonferroni over the tests present) that
joins the Holm family of the loop tests (``verdict.judge_all``); :func:`lossless_tests` runs them on a
profile's samples and :func:`measure_calibration` measures the floors from an A/A arm. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy import stats

from .cells import SampleObs, mean_of
from .tokens import tokenize
from .divergence import NEAR_TIE_MARGIN, Calibration, calibrate, kl_gap
from .pairing import greedy_report
from .stats import fisher_loops

#: The floor's quantile the KL exceedance test counts speculative samples above: its maximum. A state_leak at
#: one speculative step lifts only the upper ~10 % of samples (the bulk sits on the floor): on the sim, 60
#: probed samples per arm find it 83 % of the time above the floor's maximum, 43 % above its 95 % quantile.
KL_FLOOR_QUANTILE = 1.0
#: Absolute bound (nats/token, mean k3 over the arm's samples) a KL violation must also exceed ...
KL_ABS_BOUND = 2e-4
#: ... and this multiple of the floor's mean (a host whose floor is already high needs a larger gap).
KL_REL_BOUND = 2.0


@dataclass(frozen=True)
class LosslessTest:
    """One lossless test of one profile. ``name``: greedy | kl | accuracy; ``p_value``: one-sided p of the
    violation (1.0 when an absolute bound is not met: ``effect_ok`` False); ``counts``: the figures behind
    it; ``evidence``: one phrase."""

    name: str
    p_value: float
    raw_p: float
    effect_ok: bool
    evidence: str
    counts: dict

    def to_dict(self) -> dict:
        return asdict(self)


def exceedance_p(spec: Sequence[float], floor: Sequence[float],
                 quantile: float = KL_FLOOR_QUANTILE) -> tuple[int, float, int, float]:
    """``(x, threshold, r, p)``: x = values of ``spec`` strictly above ``threshold``, the r-th largest of
    ``floor`` (r = max(1, ceil((1 - quantile) * m))), and the exact one-sided p-value ``P(X >= x)`` when both
    samples come from one distribution (pooled ranks uniform: X >= x iff at least x of the top x + r - 1
    pooled values are spec — hypergeometric). Ties with the threshold count as not above (conservative).
    Raises ``ValueError`` on an empty sample."""
    s = np.asarray(spec, dtype=float)
    f = np.sort(np.asarray(floor, dtype=float))[::-1]
    n, m = s.size, f.size
    if n == 0 or m == 0:
        raise ValueError("the exceedance test needs values on both sides")
    r = max(1, math.ceil((1 - quantile) * m - 1e-9))
    thr = float(f[r - 1])
    x = int((s > thr).sum())
    if x == 0:
        return 0, thr, r, 1.0
    p = float(stats.hypergeom.sf(x - 1, n + m, n, x + r - 1))
    return x, thr, r, min(1.0, p)


def kl_test(spec_k3: Sequence[float], floor_k3: Sequence[float], *, source: str = "baseline",
            abs_bound: float = KL_ABS_BOUND, rel_bound: float = KL_REL_BOUND,
            spec_max: Sequence[float] | None = None, floor_max: Sequence[float] | None = None,
            spec_tokens: Sequence[int] | None = None, floor_tokens: Sequence[int] | None = None) -> LosslessTest | None:
    """The KL test (module docstring) of per-sample mean k3 (nats/token); None with fewer than 2 values a
    side. ``spec_max``/``floor_max``: per-sample *maximum* k3 over the tokens, the exceedance test's
    statistic when both are given (a state leak shows as spikes at rejected drafts, which a per-token mean
    dilutes); the absolute bound is always on the mean k3 over all tokens of the arm, token-weighted by
    ``spec_tokens``/``floor_tokens`` (tokens probed per sample) when given, as SGLang's test averages over
    tokens: a leak's long looping samples weigh in (on the sim, state_leak at one step clears 2e-4 in 96 %
    of 60-sample arms token-weighted, 87 % by the plain mean of sample means)."""
    if len(spec_k3) < 2 or len(floor_k3) < 2:
        return None
    by_max = bool(spec_max) and bool(floor_max) and len(spec_max) == len(spec_k3) and len(floor_max) == len(floor_k3)
    x, thr, r, p = exceedance_p(spec_max, floor_max) if by_max else exceedance_p(spec_k3, floor_k3)
    mean = _weighted_mean(spec_k3, spec_tokens)
    floor_mean = _weighted_mean(floor_k3, floor_tokens)
    bound = max(abs_bound, rel_bound * floor_mean)
    ok = mean > bound
    q = "maximum" if r == 1 else f"{r}th largest value"
    stat = "largest per-token k3" if by_max else "mean k3"
    ev = (f"decode vs prefill logprobs: {x}/{len(spec_k3)} speculative samples with a {stat} above the {source} "
          f"floor's {q} ({thr:.2g} nats, {len(floor_k3)} samples; exceedance p={p:.2g}), mean k3 "
          f"{mean:.2g} {'>' if ok else '<='} bound {bound:.2g}")
    return LosslessTest("kl", p if ok else 1.0, p, ok, ev,
                        {"above": x, "n": len(spec_k3), "floor_n": len(floor_k3), "floor_quantile": thr,
                         "floor_rank": r, "mean": mean, "floor_mean": floor_mean, "bound": bound,
                         "source": source, "statistic": "max_k3" if by_max else "mean_k3"})


def _weighted_mean(values: Sequence[float], weights: Sequence[int] | None) -> float:
    """Mean of ``values`` weighted by ``weights`` (tokens per sample) when every weight is known and positive in
    sum, else the plain mean."""
    if weights and len(weights) == len(values) and None not in weights and sum(weights) > 0:
        return float(np.dot(values, weights) / sum(weights))
    return float(np.mean(values))


def is_hard_divergence(pair) -> bool:
    """A greedy pair (``pairing.GreedyPair``) that diverges where the baseline's top-2 margin is known and not
    a near tie, or whose speculative output loops where the baseline's does not."""
    if pair.divergence.identical:
        return False
    return pair.near_tie is False or (pair.spec_loop_onset is not None and not pair.base_loops)


def greedy_test(spec_pairs: Sequence, floor: tuple[int, int] | None = None) -> LosslessTest | None:
    """The greedy test (module docstring); ``floor``: (hard divergences, pairs) of the A/A arm against the
    baseline (None: no A/A arm, floor 0 of as many pairs). None without speculative pairs."""
    if not spec_pairs:
        return None
    h = sum(is_hard_divergence(g) for g in spec_pairs)
    n = len(spec_pairs)
    if floor and floor[1]:
        ha, na, src = floor[0], floor[1], "A/A"
    else:
        ha, na, src = 0, n, "assumed"
    p = fisher_loops(h, n, ha, na)
    ev = (f"greedy output diverges beyond a near tie on {h}/{n} prompts vs {ha}/{na} "
          f"({'A/A arm' if src == 'A/A' else 'floor assumed 0 without an A/A arm'}; p={p:.2g})")
    return LosslessTest("greedy", p, p, True, ev, {"hard": h, "n": n, "floor_hard": ha, "floor_n": na,
                                                   "floor_source": src})


_NORM = re.compile(r"\s+")


def answer_part(text: str) -> str:
    """The answer of an output: the text after the last ``</think>`` when there is one, the whole text when
    there is no think block, '' when ``<think>`` never closed (the model never answered)."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    return "" if "<think>" in text else text


def check_answer(text: str, expected: str) -> bool:
    """Whether the answer part of ``text`` (:func:`answer_part`) contains ``expected`` as a whole run of
    tokens (``degeneracy.tokenize``, case-folded): "4" matches "The answer is 4." but not "14" or "4.5"."""
    want = [t.casefold() for t, _ in tokenize(_NORM.sub(" ", expected.strip()))]
    if not want:
        return True
    got = [t.casefold() for t, _ in tokenize(answer_part(text))]
    k = len(want)
    for i in range(len(got) - k + 1):
        if got[i:i + k] == want:
            nxt = got[i + k] if i + k < len(got) else ""
            if k == 1 and nxt == "." and i + k + 1 < len(got) and got[i + k + 1].isdigit():
                continue  # "4" inside "4.5"
            return True
    return False


def accuracy_test(spec_correct: Sequence[bool], base_correct: Sequence[bool]) -> LosslessTest | None:
    """The accuracy test (module docstring); None when an arm has no checked sample."""
    if not spec_correct or not base_correct:
        return None
    ks, n = sum(map(bool, spec_correct)), len(spec_correct)
    kb, nb = sum(map(bool, base_correct)), len(base_correct)
    p = fisher_loops(n - ks, n, nb - kb, nb)  # "spec is wrong more often"
    ev = f"expected answers: spec {ks}/{n} right vs baseline {kb}/{nb} (p={p:.2g})"
    return LosslessTest("accuracy", p, p, True, ev, {"spec_right": ks, "spec_n": n, "base_right": kb,
                                                     "base_n": nb})


def lossless_tests(spec_samples, base_samples, calibration: Calibration | None,
                   near_tie: float) -> tuple[list[LosslessTest], dict | None]:
    """A profile's lossless tests (greedy, kl, accuracy: those with data) from its samples and the baseline's
    (``cells.SampleObs``), and the KL probe summary for ``Verdict.kl_probe`` (mean k3 ± SE against the floor,
    the test's figures; ``flagged`` is set by the verdict). ``near_tie``: the near-tie margin (nats)."""
    tests: list[LosslessTest] = []
    pairs = greedy_report(spec_samples, base_samples, near_tie)
    floor = (calibration.greedy_hard, calibration.greedy_pairs) if calibration else None
    g = greedy_test(pairs, floor)
    if g is not None:
        tests.append(g)
    probed = [s for s in spec_samples if s.ok and s.kl_k3 is not None]
    spec = [s.kl_k3 for s in probed]
    calibrated = bool(calibration and calibration.kl_floor)
    base = [s for s in base_samples if s.ok and s.kl_k3 is not None]
    floor = list(calibration.kl_floor) if calibrated else [s.kl_k3 for s in base]
    floor_max = list(calibration.kl_floor_max) if calibrated else [s.kl_max_k3 for s in base]
    spec_max = [s.kl_max_k3 for s in probed]
    if None in spec_max or None in floor_max:
        spec_max = floor_max = None
    spec_tokens = [s.kl_tokens for s in probed]
    floor_tokens = list(calibration.kl_floor_tokens) if calibrated else [s.kl_tokens for s in base]
    source = "A/A" if calibrated else "baseline"
    k = kl_test(spec, floor, source=source, spec_max=spec_max, floor_max=floor_max, spec_tokens=spec_tokens,
                floor_tokens=floor_tokens)
    probe = None
    if k is not None:
        tests.append(k)
        gap = kl_gap(spec, floor)
        probe = {**asdict(gap), "floor_source": "calibration" if calibrated else "baseline",
                 "threshold": k.counts["bound"], "above": k.counts["above"], "floor_quantile":
                 k.counts["floor_quantile"], "p": k.raw_p, "flagged": False}
    right = [bool(s.answer_ok) for s in spec_samples if s.ok and s.answer_ok is not None and s.temperature > 0]
    base_right = [bool(s.answer_ok) for s in base_samples if s.ok and s.answer_ok is not None and s.temperature > 0]
    a = accuracy_test(right, base_right)
    if a is not None:
        tests.append(a)
    return tests, probe


def measure_calibration(base_samples: Sequence[SampleObs], aa_samples: Sequence[SampleObs]) -> Calibration:
    """This host's noise floors from the baseline and its A/A relaunch (``compare.calibration``): greedy
    pairs that diverge and the baseline's top-2 margins where they flip, the A/A pairs still beyond a near
    tie at the calibrated margin (the greedy test's floor), per-sample k3 of both arms, the A/A over
    baseline tokens/s ratio over non-degenerate samples (``divergence.calibrate``), and per temperature > 0
    the A/A arm's loop counts against the baseline's (two-sided Fisher: the launch effect the loop test
    assumes away)."""
    from scipy.stats import fisher_exact

    pairs = greedy_report(aa_samples, base_samples, NEAR_TIE_MARGIN)
    diverged = [g for g in pairs if not g.divergence.identical]
    flips = [g.margin for g in diverged if g.margin is not None]
    probed = [s for s in [*base_samples, *aa_samples] if s.ok and s.kl_k3 is not None]
    kl = [s.kl_k3 for s in probed]
    kl_max = [s.kl_max_k3 for s in probed]
    kl_tokens = [s.kl_tokens for s in probed]

    def speed(samples):
        return mean_of(s.tokens_per_s for s in samples if s.ok and not s.is_degenerate)

    aa_speed, base_speed = speed(aa_samples), speed(base_samples)
    ratio = aa_speed / base_speed if aa_speed is not None and base_speed else None
    cal = calibrate(flips, len(pairs), len(diverged), kl, ratio)
    hard = sum(is_hard_divergence(g) for g in greedy_report(aa_samples, base_samples, cal.near_tie_margin))
    loops = {}
    for t in sorted({float(s.temperature) for s in aa_samples if s.temperature > 0}):
        a = [s.is_degenerate for s in aa_samples if s.ok and float(s.temperature) == t]
        b = [s.is_degenerate for s in base_samples if s.ok and float(s.temperature) == t]
        if a and b:
            p = float(fisher_exact([[sum(a), len(a) - sum(a)], [sum(b), len(b) - sum(b)]]).pvalue)
            loops[t] = {"aa": [sum(a), len(a)], "base": [sum(b), len(b)], "p": p}
    return replace(cal, greedy_hard=hard, aa_loops=loops,
                   kl_floor_max=tuple(kl_max) if None not in kl_max else (),
                   kl_floor_tokens=tuple(kl_tokens) if None not in kl_tokens else ())


def lossless_member(tests: Sequence[LosslessTest]) -> float | None:
    """The profile's lossless p-value for the Holm family: Bonferroni over its tests (``min p x count``);
    None without a test."""
    if not tests:
        return None
    return min(1.0, len(tests) * min(t.p_value for t in tests))
