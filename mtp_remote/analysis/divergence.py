"""Greedy-output comparison between arms: first divergence index, LCS ratio, and the KL probe estimator.

At temperature 0, correct speculative decoding reproduces the baseline's greedy output token for token
(acceptance only when the draft equals the target's argmax), so the first index where the two outputs
differ is direct evidence; SGLang's own tests only check 8 greedy tokens while failures live in long
reasoning blocks. Real kernels are not bitwise deterministic, so a flip at a *near tie* (the top-2 logprob
margin below a threshold) is reported as such, not as corruption. The KL probe re-scores generated tokens
by prefill and averages the k3 estimator of KL(decode || prefill) (Schulman 2020: ``exp(r) - 1 - r``,
``r = prefill logprob - decode logprob``; unbiased, non-negative); a profile is flagged when its mean exceeds
the baseline's floor by 3 standard errors. :class:`Calibration` holds a host's noise floors measured by an A/A
arm (greedy divergence, near-tie margin, KL floor, run-to-run speed spread). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .tokens import tokenize

#: Top-2 logprob margin (nats) under which a greedy flip counts as a near tie (without calibration).
NEAR_TIE_MARGIN = 0.05
#: The KL flag: spec mean k3 above the baseline floor by this many standard errors of the difference ...
KL_FLAG_SE = 3.0
#: ... and by at least this much (nats/token).
KL_MIN_GAP = 1e-4


@dataclass(frozen=True)
class GreedyDivergence:
    """Comparison of two greedy outputs, in tokens (ids when both sides had them, else text tokens).

    ``first_index``: first position where they differ (None when identical; when one is a prefix of
    the other, the shorter length). ``lcs_ratio``: 2 * LCS / (len_a + len_b), 1.0 for two empty outputs.
    """

    first_index: int | None
    lcs_ratio: float
    len_a: int
    len_b: int
    unit: str  # "ids" or "text-tokens"

    @property
    def identical(self) -> bool:
        return self.first_index is None


def _as_tokens(x: str | Sequence[int]) -> list:
    if isinstance(x, str):
        return [t for t, _ in tokenize(x)]
    return list(x)


def first_divergence(a: Sequence, b: Sequence) -> int | None:
    """First index where sequences ``a`` and ``b`` differ; None when equal (prefix -> shorter length)."""
    m = min(len(a), len(b))
    if m:
        try:
            x = np.asarray(a[:m])
            y = np.asarray(b[:m])
            diff = np.flatnonzero(x != y)
            if diff.size:
                return int(diff[0])
        except (TypeError, ValueError):  # pragma: no cover - mixed element types
            for i in range(m):
                if a[i] != b[i]:
                    return i
    return None if len(a) == len(b) else m


def lcs_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison & Dix 1986): O(len_a * len_b / 64)."""
    if not a or not b:
        return 0
    masks: dict = {}
    for i, x in enumerate(a):
        masks[x] = masks.get(x, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for y in b:
        u = v & masks.get(y, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - (v).bit_count()


def greedy_divergence(a: str | Sequence[int], b: str | Sequence[int]) -> GreedyDivergence:
    """Compare two greedy outputs: token-id sequences, or texts split by :func:`tokenize`.

    Mixing a text with ids compares text tokens of the text against the ids' string forms, which is
    meaningless; pass both as ids or both as text. A 32k x 32k comparison takes well under a second.
    """
    unit = "text-tokens" if isinstance(a, str) or isinstance(b, str) else "ids"
    ta, tb = _as_tokens(a), _as_tokens(b)
    total = len(ta) + len(tb)
    first = first_divergence(ta, tb)
    if first is None:
        ratio = 1.0
    else:
        prefix = first  # the common prefix is part of every LCS
        ratio = (2 * (prefix + lcs_length(ta[prefix:], tb[prefix:])) / total) if total else 1.0
    return GreedyDivergence(first_index=first, lcs_ratio=ratio, len_a=len(ta), len_b=len(tb), unit=unit)


@dataclass(frozen=True)
class KLProbe:
    """The KL probe of one sample: mean k3 over its tokens (nats/token) and where greedy flips were ties.

    ``near_tie_flip``: the first divergence (when given) sits where the baseline's top-2 logprob margin is
    below the threshold, so it is numerical noise rather than corruption.
    """

    mean_k3: float
    max_k3: float
    n_tokens: int
    near_tie_flip: bool | None


def k3_estimates(prefill_logprobs: Sequence[float], decode_logprobs: Sequence[float]) -> np.ndarray:
    """Per-token k3 = exp(r) - 1 - r with r = prefill logprob - decode logprob (natural logs).

    Both sequences are the logprobs of the *same generated tokens*: as sampled (decode) and re-scored by a
    prefill pass. Raises ``ValueError`` when the lengths differ.
    """
    p = np.asarray(prefill_logprobs, dtype=float)
    d = np.asarray(decode_logprobs, dtype=float)
    if p.shape != d.shape:
        raise ValueError(f"prefill and decode logprobs differ in length: {p.shape[0]} vs {d.shape[0]}")
    r = p - d
    return np.expm1(r) - r


def kl_probe(prefill_logprobs: Sequence[float], decode_logprobs: Sequence[float], *,
             divergence_index: int | None = None, top2_margins: Sequence[float] | None = None,
             near_tie_margin: float = NEAR_TIE_MARGIN) -> KLProbe:
    """Mean k3 estimator of one sample plus the near-tie rule for its greedy divergence.

    ``top2_margins[i]``: logprob(top-1) - logprob(top-2) of the reference (baseline) at position i.
    ``near_tie_flip`` is None when no divergence index or no margins are given.
    """
    k3 = k3_estimates(prefill_logprobs, decode_logprobs)
    flip = None
    if divergence_index is not None and top2_margins is not None and divergence_index < len(top2_margins):
        flip = bool(top2_margins[divergence_index] < near_tie_margin)
    return KLProbe(mean_k3=float(k3.mean()) if k3.size else 0.0, max_k3=float(k3.max()) if k3.size else 0.0,
                   n_tokens=int(k3.size), near_tie_flip=flip)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """``(mean, standard error)`` of the values; the error is 0 for fewer than two values."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return 0.0, 0.0
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0
    return float(a.mean()), se


@dataclass(frozen=True)
class KlGap:
    """The KL probe of one profile against a floor, in nats/token: ``mean``/``se``/``n`` of the profile's
    per-sample k3, ``floor_mean``/``floor_se``/``floor_n`` of the floor's, ``threshold`` = floor mean +
    max(``min_gap``, ``n_se`` standard errors of the difference), ``flagged`` when the mean exceeds it."""

    mean: float
    se: float
    n: int
    floor_mean: float
    floor_se: float
    floor_n: int
    threshold: float
    flagged: bool


def kl_gap(spec_k3: Sequence[float], base_k3: Sequence[float], n_se: float = KL_FLAG_SE,
           min_gap: float = KL_MIN_GAP) -> KlGap | None:
    """The profile's mean k3 over samples (nats/token) against the floor's: flagged when it exceeds the
    floor's mean by more than ``n_se`` standard errors of the difference (and by at least ``min_gap``, so a
    bitwise-exact baseline does not turn a rounding-level gap into a flag). ``base_k3``: per-sample k3 of the
    baseline (or of the calibration arm: this host's floor). None with fewer than two samples per side."""
    if len(spec_k3) < 2 or len(base_k3) < 2:
        return None
    ms, ss = mean_se(spec_k3)
    mb, sb = mean_se(base_k3)
    threshold = mb + max(min_gap, n_se * float(np.hypot(ss, sb)))
    return KlGap(ms, ss, len(spec_k3), mb, sb, len(base_k3), threshold, ms > threshold)


def kl_gap_flag(spec_k3: Sequence[float], base_k3: Sequence[float], n_se: float = KL_FLAG_SE,
                min_gap: float = KL_MIN_GAP) -> bool:
    """True when :func:`kl_gap` flags the profile (False with fewer than two samples per side)."""
    gap = kl_gap(spec_k3, base_k3, n_se, min_gap)
    return bool(gap and gap.flagged)


@dataclass(frozen=True)
class Calibration:
    """This host's noise floors, measured by an A/A arm (the baseline relaunched and sampled like it).

    ``greedy_pairs``/``greedy_diverged``: baseline vs A/A greedy outputs compared and how many differ;
    ``near_tie_margin``: the top-2 margin (nats) under which a greedy flip counts as a near tie — the default
    :data:`NEAR_TIE_MARGIN`, raised to just above the largest margin at which the A/A arm flipped;
    ``kl_floor``: per-sample mean k3 of the baseline and A/A arms (the floor the KL test compares with),
    ``kl_floor_max`` their per-sample largest per-token k3 and ``kl_floor_tokens`` the tokens probed per
    sample (empty when not recorded);
    ``speed_ratio``: A/A over baseline tokens/s (1 on a perfectly repeatable host), ``speed_spread``:
    ``|log speed_ratio|``, the run-to-run spread a speed verdict must exceed; ``greedy_hard``: A/A pairs
    that diverge beyond a near tie at the calibrated margin (``lossless.is_hard_divergence``: the greedy
    test's floor); ``aa_loops``: per temperature > 0, the A/A arm's loop test against the baseline
    (``{"aa": [k, n], "base": [k, n], "p": two-sided Fisher}``: an A/A arm that loops differently means the
    launch matters, which the loop test assumes it does not); ``greedy_prompts``/``greedy_hard_prompts``:
    distinct prompts counted (hard or identical, ``lossless.prompt_outcomes``: greedy repeats of one prompt
    are not independent, and a near-tie flip hides what follows) and those with a hard A/A divergence: the
    floor of the greedy-only bound (``lossless.greedy_bound``); ``aa_outcomes``: per temperature > 0 the A/A
    arm's ``(sample_index, degenerate)`` per sample, the loop test's second reference (the A/A contrast,
    ``stopping.contrast_p``; not written to summary.json, whose ``aa_loops`` has the counts).
    """

    greedy_pairs: int = 0
    greedy_diverged: int = 0
    near_tie_margin: float = NEAR_TIE_MARGIN
    kl_floor: tuple[float, ...] = ()
    speed_ratio: float | None = None
    speed_spread: float = 0.0
    greedy_hard: int = 0
    aa_loops: dict = field(default_factory=dict)
    kl_floor_max: tuple[float, ...] = ()
    kl_floor_tokens: tuple[int, ...] = ()
    greedy_prompts: int = 0
    greedy_hard_prompts: int = 0
    aa_outcomes: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        return {"greedy_pairs": self.greedy_pairs, "greedy_diverged": self.greedy_diverged,
                "greedy_hard": self.greedy_hard, "greedy_prompts": self.greedy_prompts,
                "greedy_hard_prompts": self.greedy_hard_prompts, "aa_loops": {str(k): v for k, v in self.aa_loops.items()},
                "near_tie_margin": self.near_tie_margin, "kl_floor_mean": mean_se(self.kl_floor)[0],
                "kl_floor_se": mean_se(self.kl_floor)[1], "kl_floor_n": len(self.kl_floor),
                "speed_ratio": self.speed_ratio, "speed_spread": self.speed_spread}


def calibrate(flip_margins: Sequence[float], greedy_pairs: int, greedy_diverged: int,
              kl_floor: Sequence[float], speed_ratio: float | None) -> Calibration:
    """A :class:`Calibration` from the A/A comparison: ``flip_margins`` are the baseline's top-2 margins at
    the first divergence of each diverged A/A greedy pair (nats); the near-tie margin becomes
    ``max(NEAR_TIE_MARGIN, 1.5 * max(flip_margins))``."""
    margin = max([NEAR_TIE_MARGIN] + [1.5 * m for m in flip_margins if np.isfinite(m)])
    spread = abs(float(np.log(speed_ratio))) if speed_ratio and speed_ratio > 0 else 0.0
    return Calibration(greedy_pairs, greedy_diverged, margin, tuple(float(x) for x in kl_floor), speed_ratio,
                       spread)
