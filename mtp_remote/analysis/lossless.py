"""Lossless checks: speculative decoding must not change what the model says, only how fast it says it.

Correct speculative decoding is lossless (Leviathan et al. 2023): greedy output equal to the baseline's token
for token up to numerical near ties, decode-time logprobs equal to a prefill pass re-scoring the same tokens,
and so the same answers. Three per-profile tests, each a p-value against the host's floor (the baseline, or
the baseline and its A/A relaunch when ``compare.calibration`` measured one):

- **greedy** (T = 0): pairs whose outputs diverge where the baseline's top-2 logprob margin is *not* a near
  tie, or that loop where the baseline's does not ("hard" divergences), spec vs the A/A arm's hard
  divergences (each counted at the near-tie margin the other A/A pairs calibrate: leave-one-out): one-sided
  Fisher exact; ``healthy`` needs it not significant at the run's alpha (a test, not a count). Without an A/A arm there is no measured floor (GPU kernels are not
  bit-identical across launches, issue 31): the test is reported but not judged (``judged`` False, p 1): it
  decides no ``spec-corrupts-output``; a hard divergence only keeps the profile from ``healthy``.
- **greedy bound** (a plan with no temperature above 0, where no loop bound can say ``healthy``):
  :func:`greedy_bound`, the one-sided upper bound of the per-prompt hard-divergence rate's excess over the A/A
  arm's (exact Clopper-Pearson limits, ``stats.exact_diff_upper_bound``; the raw rate without an A/A arm, a
  floor of 0 being the conservative assumption for a bound). ``healthy`` needs it below ``compare.greedy_margin``
  (:data:`GREEDY_MARGIN`, 10 %): 29 distinct identical prompts bound it under 10 % at 95 %, 59 under 5 % (the
  rule of three); :func:`prompts_to_close` gives how many identical prompts would. A prompt whose outputs
  diverged at a near tie is left out of the count (:func:`prompt_outcomes`: a later corrupt step would be hidden
  behind the flip): on a noisy host with long greedy outputs few prompts are left, and the verdict says so.
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
  more often"), over all T > 0 samples (both arms sample the same prompts round by round); a greedy-only plan
  (no T > 0 sample checked) compares its greedy answers, one per prompt (a speculative arm that breaks the
  answers of a model that answers right, as a real state fault does, is a lossless violation in words a user
  checks).

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
from .stats import exact_diff_upper_bound, fisher_loops

#: The floor's quantile the KL exceedance test counts speculative samples above: its maximum. A state_leak at
#: one speculative step lifts only the upper ~10 % of samples (the bulk sits on the floor): on the sim, 60
#: probed samples per arm find it 83 % of the time above the floor's maximum, 43 % above its 95 % quantile.
KL_FLOOR_QUANTILE = 1.0
#: What the evidence says of greedy divergence where the plan has no A/A arm (issue 31).
NO_FLOOR = "no A/A arm: greedy divergence not judged against a floor"
#: Per-prompt greedy divergence rate (hard divergences, excess over the A/A arm's) a greedy-only ``healthy``
#: must bound: ``compare.greedy_margin``'s default. 0 of 29 prompts bounds it at 9.8 % with 95 % confidence.
GREEDY_MARGIN = 0.10
#: Absolute bound (nats/token, mean k3 over the arm's samples) a KL violation must also exceed ...
KL_ABS_BOUND = 2e-4
#: ... and this multiple of the floor's mean (a host whose floor is already high needs a larger gap).
KL_REL_BOUND = 2.0
#: What the KL bound assumes, said in every KL evidence (issue 31): the multiple is not measured on a GPU host.
#: On the sim a healthy arm whose k3 is the floor's times 1.25 / 1.5 / 2 / 3 is flagged as the table of
#: docs/metrics.md ("The KL test") gives: at 2x and beyond the assumption fails and a healthy arm is called corrupt.
KL_ASSUMPTION = ("bound: the larger of {abs:g} and {rel:g}x the floor's mean, assuming a healthy verify path's "
                 "decode-vs-prefill gap is under {rel:g}x the floor's")


@dataclass(frozen=True)
class LosslessTest:
    """One lossless test of one profile. ``name``: greedy | kl | accuracy; ``p_value``: one-sided p of the
    violation (1.0 when an absolute bound is not met: ``effect_ok`` False, or when there is no measured floor:
    ``judged`` False, ``raw_p`` then against a floor of 0); ``counts``: the figures behind it; ``evidence``:
    one phrase."""

    name: str
    p_value: float
    raw_p: float
    effect_ok: bool
    evidence: str
    counts: dict
    judged: bool = True  # False: no measured floor (greedy without an A/A arm): reported, decides nothing

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
          f"{mean:.2g} {'>' if ok else '<='} bound {bound:.2g} ({KL_ASSUMPTION.format(abs=abs_bound, rel=rel_bound)})")
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
    baseline. None (no A/A arm): not judged (``judged`` False, ``p_value`` 1; ``raw_p`` against 0 of as many
    pairs, for the record). None without speculative pairs."""
    if not spec_pairs:
        return None
    h = sum(is_hard_divergence(g) for g in spec_pairs)
    n = len(spec_pairs)
    counts = {"hard": h, "n": n}
    if floor and floor[1]:
        ha, na = floor
        p = fisher_loops(h, n, ha, na)
        ev = f"greedy output diverges beyond a near tie on {h}/{n} prompts vs {ha}/{na} (A/A arm; p={p:.2g})"
        return LosslessTest("greedy", p, p, True, ev, counts | {"floor_hard": ha, "floor_n": na, "floor_source": "A/A"})
    ev = f"greedy output diverges beyond a near tie on {h}/{n} prompts ({NO_FLOOR})"
    return LosslessTest("greedy", 1.0, fisher_loops(h, n, 0, n), True, ev,
                        counts | {"floor_hard": None, "floor_n": None, "floor_source": "none"}, judged=False)


def prompt_outcomes(pairs: Sequence, hard: Sequence[bool]) -> tuple[int, int, int]:
    """``(hard, counted, censored)`` distinct prompts of greedy pairs (``pairing.GreedyPair``) with their hard
    flags: a prompt is *hard* when any of its pairs is; *censored* when it is not hard but diverged (at a near
    tie: its outputs differ from there on, so a later divergence beyond a near tie could not be seen); the
    others are identical. ``counted`` = hard + identical: the prompts a greedy bound can rest on (leaving the
    censored out is conservative when near ties and a corrupt step fall independently: a corrupt step before
    the first near-tie flip is seen, one after it is hidden, so the hard share of the counted prompts is at
    least the corrupt rate)."""
    by_prompt: dict[str, str] = {}
    for g, h in zip(pairs, hard):
        state = "hard" if h else ("censored" if not g.divergence.identical else "identical")
        old = by_prompt.get(g.prompt_id, "identical")
        by_prompt[g.prompt_id] = max(old, state, key=("identical", "censored", "hard").index)
    n_hard = sum(v == "hard" for v in by_prompt.values())
    censored = sum(v == "censored" for v in by_prompt.values())
    return n_hard, len(by_prompt) - censored, censored


@dataclass(frozen=True)
class GreedyBound:
    """The greedy bound of one profile (:func:`greedy_bound`). ``hard``/``prompts``: distinct prompts with a
    hard divergence against the baseline, and counted (hard or identical, :func:`prompt_outcomes`);
    ``censored``: prompts left out, diverged at a near tie; ``floor_hard``/``floor_prompts``: the A/A arm's,
    counted alike (None without one: floor 0 assumed, which only raises the bound); ``bound``: the one-sided
    upper bound (a rate in [0, 1]) of the per-prompt divergence rate's excess over the floor at
    ``confidence``; ``margin``: what ``healthy`` needs it below; ``prompts_needed``: counted prompts, all
    added ones identical and the floor at its rate, at which it would be (None beyond 100000)."""

    hard: int
    prompts: int
    censored: int
    floor_hard: int | None
    floor_prompts: int | None
    bound: float
    confidence: float
    margin: float
    prompts_needed: int | None

    @property
    def closed(self) -> bool:
        """The bound is below the margin: the greedy gate of a greedy-only plan is passed."""
        return self.bound < self.margin

    def phrase(self) -> str:
        """The evidence, e.g. "greedy output beyond a near tie on 0/29 prompts (A/A arm 0/29): per-prompt
        divergence rate under 9.9% at 95%" (the bound rounded up to 0.1 point; censored prompts named)."""
        floor = (f"A/A arm {self.floor_hard}/{self.floor_prompts}" if self.floor_prompts
                 else "no A/A arm: floor taken as 0")
        if self.censored:
            floor = f"{self.censored} more diverged at a near tie first, not counted; {floor}"
        rate = "excess over the A/A arm" if self.floor_hard else "per-prompt divergence rate"
        up = math.ceil(self.bound * 1000 - 1e-9) / 10
        return (f"greedy output beyond a near tie on {self.hard}/{self.prompts} prompts ({floor}): {rate} "
                f"{'under' if self.closed else 'up to'} {up:.1f}% at {self.confidence:.0%}")

    def to_dict(self) -> dict:
        return asdict(self) | {"closed": self.closed}


def greedy_rate_bound(hard: int, prompts: int, floor: tuple[int, int] | None, confidence: float) -> float:
    """One-sided upper bound at ``confidence`` of the per-prompt hard-divergence rate minus the A/A arm's
    (``floor``: (hard prompts, prompts); None: 0 of as many). ``stats.exact_diff_upper_bound``: with a floor
    of 0 it is the exact Clopper-Pearson limit ``1 - (1 - c)^(1/n)`` for 0 of n. 1.0 without prompts."""
    fh, fn = floor if floor and floor[1] else (0, prompts)
    return exact_diff_upper_bound(hard, prompts, fh, fn, confidence)


def prompts_to_close(hard: int, prompts: int, floor: tuple[int, int] | None, confidence: float,
                     margin: float, max_n: int = 100_000) -> int | None:
    """The smallest number of counted greedy prompts at which :func:`greedy_rate_bound` falls below
    ``margin``, the prompts added all identical and the A/A arm (run on the same prompts) diverging at its
    observed rate; ``prompts`` when it already is, None when not within ``max_n``. 0 hard, no floor, 95 %:
    29 for a 10 % margin, 59 for 5 % (the rule of three)."""
    fh, fn = floor if floor and floor[1] else (0, 0)
    rate = fh / fn if fn else 0.0

    def bound(n: int) -> float:
        return greedy_rate_bound(hard, n, (round(rate * n), n), confidence)

    if prompts and bound(prompts) < margin:
        return prompts
    lo, hi = max(prompts, 1), max(prompts, 1)
    while bound(hi) >= margin:  # the bound falls as identical prompts are added: double, then bisect
        lo, hi = hi, hi * 2
        if hi > max_n:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if bound(mid) >= margin else (lo, mid)
    return hi


def greedy_bound(spec_pairs: Sequence, floor: tuple[int, int] | None, *, confidence: float,
                 margin: float = GREEDY_MARGIN) -> GreedyBound | None:
    """The greedy bound (module docstring) of a profile's greedy pairs (``pairing.GreedyPair``), counted by
    distinct prompt (:func:`prompt_outcomes` with ``is_hard_divergence``: prompts that diverged at a near tie
    are left out); ``floor``: the A/A arm's (hard prompts, counted prompts), None without an A/A arm. None
    without pairs."""
    if not spec_pairs:
        return None
    hard, counted, censored = prompt_outcomes(spec_pairs, [is_hard_divergence(g) for g in spec_pairs])
    floor = floor if floor and floor[1] else None
    b = greedy_rate_bound(hard, counted, floor, confidence) if counted else 1.0
    return GreedyBound(hard, counted, censored, floor[0] if floor else None, floor[1] if floor else None, b,
                       confidence, margin, prompts_to_close(hard, counted, floor, confidence, margin))


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
    sampled = any(s.temperature > 0 and s.answer_ok is not None for s in spec_samples)
    right = [bool(s.answer_ok) for s in spec_samples
             if s.ok and s.answer_ok is not None and (s.temperature > 0) == sampled]
    base_right = [bool(s.answer_ok) for s in base_samples
                  if s.ok and s.answer_ok is not None and (s.temperature > 0) == sampled]
    a = accuracy_test(right, base_right)
    if a is not None:
        tests.append(a)
    return tests, probe


def _leave_one_out_hard(pairs: Sequence) -> list[bool]:
    """Per A/A greedy pair (``pairing.GreedyPair`` at the default margin): a hard divergence at the near-tie
    margin calibrated from the *other* pairs' flips — the floor the speculative arm's hard divergences are
    tested against. In-sample it is 0 by construction (the margin is set above every A/A flip), which made any
    noisy speculative flip above the floor (issue 31)."""
    margins = [None if g.divergence.identical else g.margin for g in pairs]
    hard = []
    for i, g in enumerate(pairs):
        if g.divergence.identical:
            hard.append(False)
            continue
        others = [m for k, m in enumerate(margins) if k != i and m is not None]
        near_tie = calibrate(others, 0, 0, (), None).near_tie_margin
        hard.append(bool((g.margin is not None and g.margin >= near_tie)
                         or (g.spec_loop_onset is not None and not g.base_loops)))
    return hard


def measure_calibration(base_samples: Sequence[SampleObs], aa_samples: Sequence[SampleObs]) -> Calibration:
    """This host's noise floors from the baseline and its A/A relaunch (``compare.calibration``): greedy
    pairs that diverge and the baseline's top-2 margins where they flip, the A/A pairs still beyond a near
    tie, each at the margin calibrated from the other pairs' flips (leave-one-out: the greedy test's floor), per-sample k3 of both arms, the A/A over
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
    hard = _leave_one_out_hard(pairs)
    hard_prompts, counted, _ = prompt_outcomes(pairs, hard)
    loops, outcomes = {}, {}
    for t in sorted({float(s.temperature) for s in aa_samples if s.temperature > 0}):
        outcomes[t] = tuple((s.sample_index, s.is_degenerate) for s in aa_samples
                            if s.ok and float(s.temperature) == t)
        a = [d for _, d in outcomes[t]]
        b = [s.is_degenerate for s in base_samples if s.ok and float(s.temperature) == t]
        if a and b:
            p = float(fisher_exact([[sum(a), len(a) - sum(a)], [sum(b), len(b) - sum(b)]]).pvalue)
            loops[t] = {"aa": [sum(a), len(a)], "base": [sum(b), len(b)], "p": p}
    return replace(cal, greedy_hard=sum(hard), aa_loops=loops, aa_outcomes=outcomes, greedy_prompts=counted,
                   greedy_hard_prompts=hard_prompts,
                   kl_floor_max=tuple(kl_max) if None not in kl_max else (),
                   kl_floor_tokens=tuple(kl_tokens) if None not in kl_tokens else ())


def lossless_member(tests: Sequence[LosslessTest]) -> float | None:
    """The profile's lossless p-value for the Holm family: Bonferroni over its judged tests
    (``min p x count``); None without one (a test without a measured floor is not judged)."""
    judged = [t for t in tests if t.judged]
    if not judged:
        return None
    return min(1.0, len(judged) * min(t.p_value for t in judged))
