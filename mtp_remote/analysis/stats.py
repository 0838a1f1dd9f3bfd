"""Statistics for loop counts and speeds: intervals, exact tests, multiplicity correction, sample sizes.

Everything a verdict rests on: Wilson score intervals for loop rates, the one-sided Fisher exact test
(scipy) of "the speculative arm loops more than the baseline", the one-sided Newcombe bound of the loop-rate
excess (and its exact Clopper-Pearson form for the greedy divergence rate), Holm's step-down adjustment across (speculative profile, temperature) cells, the Lan-DeMets alpha
spending functions of the group-sequential design (``stopping.py``), bootstrap intervals for tokens/s ratios
(scipy.stats.bootstrap), and the number of samples a still-open comparison would need. Pure: counts and
arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist

import numpy as np
from scipy import stats

_NORMAL = NormalDist()


@lru_cache(maxsize=4096)
def _z(p: float) -> float:
    """Standard normal quantile (stdlib, cached: the Monte Carlo asks for the same few levels millions of times)."""
    return _NORMAL.inv_cdf(p)


def _check_proportion(k: int, n: int, confidence: float) -> None:
    """Raise ``ValueError`` unless ``0 <= k <= n`` and ``0 < confidence < 1``."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``k / n`` (Wilson 1927), both ends in [0, 1].

    Returns ``(0.0, 1.0)`` for ``n == 0``. Raises ``ValueError`` unless ``0 <= k <= n`` and
    ``0 < confidence < 1``.
    """
    _check_proportion(k, n, confidence)
    if n == 0:
        return 0.0, 1.0
    z = _z(0.5 + confidence / 2)
    phat = k / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact one-sided limits of a proportion ``k / n`` (Clopper & Pearson 1934): ``(lower, upper)``, *each* at
    ``confidence`` on its own (together the two-sided interval at ``2 confidence - 1``), from the beta
    quantiles ``B(1 - c; k, n - k + 1)`` and ``B(c; k + 1, n - k)``. With ``k = 0`` the upper limit is
    ``1 - (1 - c)^(1/n)``, about ``3 / n`` at 95 % ("rule of three": 0 of 29 is under 10 %, 0 of 59 under 5 %).
    ``(0.0, 1.0)`` for ``n == 0``. Raises ``ValueError`` unless ``0 <= k <= n`` and ``0 < confidence < 1``."""
    _check_proportion(k, n, confidence)
    if n == 0:
        return 0.0, 1.0
    lo = 0.0 if k == 0 else float(stats.beta.ppf(1 - confidence, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(confidence, k + 1, n - k))
    return lo, hi


def exact_diff_upper_bound(k_spec: int, n_spec: int, k_base: int, n_base: int, confidence: float) -> float:
    """One-sided upper bound of ``p_spec - p_base`` at ``confidence``: Newcombe's square-and-add (the method of
    :func:`diff_upper_bound`, "MOVER", Zou & Donner 2008) built from exact :func:`clopper_pearson` limits
    instead of Wilson's. With ``k_base = 0`` it is the spec arm's exact upper limit (0 of 29 -> 9.8 % at 95 %);
    1.0 when an arm is empty."""
    if n_spec == 0 or n_base == 0:
        return 1.0
    _, u1 = clopper_pearson(k_spec, n_spec, confidence)
    l2, _ = clopper_pearson(k_base, n_base, confidence)
    p1, p2 = k_spec / n_spec, k_base / n_base
    return min(1.0, p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


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
    return _fisher(int(k_spec), int(n_spec), int(k_base), int(n_base))


@lru_cache(maxsize=65536)
def _fisher(k_spec: int, n_spec: int, k_base: int, n_base: int) -> float:
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


def diff_upper_bound(k_spec: int, n_spec: int, k_base: int, n_base: int, confidence: float) -> float:
    """One-sided upper bound of p_spec - p_base at ``confidence`` (Newcombe 1998 hybrid score interval, method
    10, built from the two Wilson intervals); 1.0 when an arm is empty. With no baseline loop the bound is the
    spec arm's Wilson upper bound."""
    if n_spec == 0 or n_base == 0:
        return 1.0
    two_sided = 2 * confidence - 1  # the one-sided bound is one end of this two-sided interval
    _, u1 = wilson_interval(k_spec, n_spec, two_sided)
    l2, _ = wilson_interval(k_base, n_base, two_sided)
    p1, p2 = k_spec / n_spec, k_base / n_base
    return min(1.0, p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def bound_p_value(k_spec: int, n_spec: int, k_base: int, n_base: int, margin: float) -> float:
    """p-value of the bound test of "the excess p_spec - p_base is at least ``margin``" (what a loop-free cure
    rejects): the smallest alpha at which :func:`exact_diff_upper_bound` at confidence ``1 - alpha`` is below
    ``margin`` (bisection; the bound falls as alpha grows). Exact Clopper-Pearson limits, not Wilson's: a
    Wilson-based bound runs over its level at small rates (2/120 vs 0/120 is 4.99 % by Wilson while
    P(<= 2 of 120 | 5 %) = 5.7 %; measured 9.0 % false "loop-free" for one candidate at the margin at 120 samples,
    docs/metrics.md). With no baseline loop it is the binomial tail P(X <= k_spec | n_spec, margin). 1.0 when even
    the point estimate is not below the margin or an arm is empty. Holm's step-down over these p-values controls
    the family-wise rate of false "below the margin" claims over several candidates
    (``search.ranking.familywise_loop_free``)."""
    def below(alpha: float) -> bool:
        return exact_diff_upper_bound(k_spec, n_spec, k_base, n_base, 1 - alpha) < margin

    if n_spec == 0 or n_base == 0 or k_spec / n_spec - k_base / n_base >= margin or not below(0.5 - 1e-9):
        return 1.0
    lo, hi = 1e-12, 0.5  # at alpha = hi the bound is below the margin; find the smallest such alpha
    if below(lo):
        return lo
    for _ in range(50):
        mid = math.sqrt(lo * hi)
        if below(mid):
            hi = mid
        else:
            lo = mid
    return hi


def spending(t: float, alpha: float, kind: str = "obrien-fleming") -> float:
    """Alpha spent by information fraction ``t`` in [0, 1] (Lan & DeMets 1983): ``obrien-fleming``
    ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``, ``pocock`` ``alpha ln(1 + (e - 1) t)``. Both reach ``alpha``
    at ``t = 1``. Raises ``ValueError`` on another kind."""
    t = min(1.0, max(0.0, t))
    if t == 0:
        return 0.0
    if kind == "obrien-fleming":
        return 2 - 2 * _NORMAL.cdf(_z(1 - alpha / 2) / math.sqrt(t))
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    raise ValueError(f"unknown spending function {kind!r}; choose obrien-fleming or pocock")


def samples_needed(k_spec: int, n_spec: int, k_base: int, n_base: int, *, alpha: float = 0.05,
                   power: float = 0.8, margin: float | None = None, max_n: int = 100_000,
                   bound_alpha: float | None = None) -> int | None:
    """Samples per arm at which the observed loop rates would settle the comparison, with power ``power``.

    Two ways to settle: *detect* — Fisher's one-sided test at ``alpha`` (pass the multiplicity-adjusted
    level) on the expected counts, sized from the observed rates by Cohen's h and stepped up until exact (a
    baseline rate of 0 is taken as ``0.5 / (n_base + 1)``); *bound* (with ``margin``) — the one-sided
    Newcombe upper bound of the excess at confidence ``1 - alpha`` falls below ``margin`` on the expected
    counts at the observed rates (the spec rate taken as at least the baseline's) with power ``power`` too:
    the bound is taken at confidence ``Phi(z_{1 - bound_alpha} + z_power)`` (``bound_alpha`` default
    ``alpha``), i.e. the expected bound plus ``z_power`` of its own spread meets the margin — the n at which
    the *expected* bound meets it would decide only about half the time. Returns the smaller; None
    only when neither is reachable within ``max_n`` (an observed excess of about ``margin`` or more that is
    too small to detect).
    """
    if n_spec <= 0 or n_base <= 0:
        return None
    p1 = k_spec / n_spec
    p0 = max(k_base / n_base, 0.5 / (n_base + 1))
    found: list[int] = []
    if p1 > p0:
        h = 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p0))
        z = _z(1 - alpha) + _z(power)
        n = max(2, math.ceil((z / h) ** 2))
        while n <= max_n:
            if fisher_loops(round(p1 * n), n, round(p0 * n), n) < alpha:
                found.append(n)
                break
            n = math.ceil(n * 1.1) + 1
    if margin is not None:
        b = k_base / n_base
        s = max(b, k_spec / n_spec)
        conf = _NORMAL.cdf(_z(1 - (bound_alpha or alpha)) + _z(power))
        n = 2
        while s - b < margin and n <= min(max_n, found[0] if found else max_n):
            if diff_upper_bound(round(s * n), n, round(b * n), n, conf) < margin:
                found.append(n)
                break
            n = math.ceil(n * 1.1) + 1
    return min(found) if found else None
