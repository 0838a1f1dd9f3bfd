"""Statistics for loop counts and speeds: intervals, exact tests, multiplicity correction, sample sizes.

Everything a verdict rests on: Wilson score intervals for loop rates, the one-sided Fisher exact test
(scipy) of "the speculative arm loops more than its matched baseline", Holm's step-down adjustment across
speculative profiles, bootstrap intervals for tokens/s ratios (scipy.stats.bootstrap), and the number of
samples a still-open comparison would need. Pure: counts and arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``k / n`` (Wilson 1927), both ends in [0, 1].

    Returns ``(0.0, 1.0)`` for ``n == 0``. Raises ``ValueError`` unless ``0 <= k <= n`` and
    ``0 < confidence < 1``.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    phat = k / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def fisher_loops(k_spec: int, n_spec: int, k_base: int, n_base: int) -> float:
    """One-sided Fisher exact p-value that the speculative arm loops *more* than the baseline.

    2x2 table ``[[k_spec, n_spec - k_spec], [k_base, n_base - k_base]]``, ``alternative="greater"``
    (scipy.stats.fisher_exact). 1.0 when either arm is empty. Raises ``ValueError`` on counts outside
    ``0 <= k <= n``.
    """
    for k, n in ((k_spec, n_spec), (k_base, n_base)):
        if n < 0 or k < 0 or k > n:
            raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n_spec == 0 or n_base == 0:
        return 1.0
    table = [[k_spec, n_spec - k_spec], [k_base, n_base - k_base]]
    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values, in the input order; each in [0, 1], monotone in rank."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        adjusted[i] = running
    return adjusted


def ratio_ci(spec: Sequence[float], base: Sequence[float], confidence: float = 0.95,
             n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float] | None:
    """``(ratio, low, high)`` of mean(spec) / mean(base) with a percentile bootstrap interval.

    Independent resampling of the two arms (scipy.stats.bootstrap, ``method="percentile"``, fixed
    ``seed`` so reports are reproducible). Used for tokens/s ratios. None when an arm has fewer than two
    values or the baseline mean is not positive.
    """
    a = np.asarray(spec, dtype=float)
    b = np.asarray(base, dtype=float)
    if a.size < 2 or b.size < 2 or b.mean() <= 0:
        return None
    ratio = float(a.mean() / b.mean())
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return ratio, ratio, ratio

    def stat(x, y, axis=-1):
        return np.mean(x, axis=axis) / np.mean(y, axis=axis)

    res = stats.bootstrap((a, b), stat, confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", vectorized=True, paired=False,
                          random_state=np.random.default_rng(seed))
    low, high = res.confidence_interval
    return ratio, float(low), float(high)


def samples_needed(k_spec: int, n_spec: int, k_base: int, n_base: int, *, alpha: float = 0.05,
                   power: float = 0.8, max_n: int = 4096) -> int | None:
    """Samples per arm at which Fisher's one-sided test would detect the observed loop rates.

    Uses the observed rates (a baseline rate of 0 is taken as ``0.5 / (n_base + 1)``, a spec rate equal to
    it as "no effect") in the arcsine (Cohen's h) approximation, then steps up until the exact Fisher test
    on the expected counts reaches ``alpha``. None when the spec rate is not above the baseline's (no
    sample size would show an excess) or more than ``max_n`` would be needed.
    """
    if n_spec <= 0 or n_base <= 0:
        return None
    p1 = k_spec / n_spec
    p0 = max(k_base / n_base, 0.5 / (n_base + 1))
    if p1 <= p0:
        return None
    h = 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p0))
    z = stats.norm.ppf(1 - alpha) + stats.norm.ppf(power)
    n = max(2, math.ceil((z / h) ** 2))
    while n <= max_n:
        if fisher_loops(round(p1 * n), n, round(p0 * n), n) < alpha:
            return n
        n = math.ceil(n * 1.1) + 1
    return None
