"""Tests of the difference between two runs of the same experiment (pure: numbers in, numbers out).

Used by ``mtp-remote compare RUN_A RUN_B`` and by the nightly regression check:

- loop rate: one- or two-sided Fisher exact test on the 2x2 table of loops / non-loops
  (:func:`mtp_remote.analysis.stats.fisher_loops`, and ``scipy.stats.fisher_exact`` for two-sided);
- speed between two runs with per-sample data: Welch's t-test and the Mann-Whitney U test on the per-sample
  decode speeds (tokens/s = completion_tokens / latency_s), ``scipy.stats.ttest_ind(equal_var=False)`` and
  ``scipy.stats.mannwhitneyu``;
- speed of tonight against the history: where only one figure per earlier run is stored, the spread *between
  runs* is what matters (one night's per-sample spread understates it). The new run's mean is tested
  against a one-sided t prediction interval of the earlier runs' means: t = (mean - x) / (sd * sqrt(1 + 1/k))
  with k - 1 degrees of freedom (k >= 3 earlier runs needed).

- loop rate of tonight against the history: the same cell's earlier nights pooled (Fisher, as above), and,
  where those nights vary beyond their binomial spread (a launch or a night that loops more or less: the
  intra-class correlation rho > 0, Kleinman's moment estimator for unequal n), the beta-binomial predictive
  tail of tonight's count, ``scipy.stats.betabinom``; p is the larger of the two
  (:func:`loops_vs_history`).

scipy is imported inside the functions (it costs ~0.4 s at import; the CLI must start instantly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .stats import fisher_loops

#: Fewest earlier good runs before the speed of a new run is tested against their spread.
MIN_HISTORY_RUNS = 3


@dataclass
class LoopDiff:
    """Loop counts of two arms (``a`` earlier/reference, ``b`` later) and the Fisher p-values.

    ``p_worse``: one-sided p that ``b`` loops more than ``a``; ``p_two_sided``: either direction."""

    loops_a: int
    n_a: int
    loops_b: int
    n_b: int
    p_worse: float
    p_two_sided: float

    @property
    def rate_a(self) -> float | None:
        return self.loops_a / self.n_a if self.n_a else None

    @property
    def rate_b(self) -> float | None:
        return self.loops_b / self.n_b if self.n_b else None

    def to_dict(self) -> dict:
        return {**asdict(self), "rate_a": self.rate_a, "rate_b": self.rate_b}


def loop_diff(loops_a: int, n_a: int, loops_b: int, n_b: int) -> LoopDiff:
    """Fisher exact tests of ``b``'s loop rate against ``a``'s. p = 1.0 when either arm is empty.
    Raises ValueError for counts outside 0 <= loops <= n."""
    from scipy import stats  # deferred: heavy import

    worse = fisher_loops(loops_b, n_b, loops_a, n_a)
    if n_a == 0 or n_b == 0:
        both = 1.0
    else:
        both = float(stats.fisher_exact([[loops_b, n_b - loops_b], [loops_a, n_a - loops_a]]).pvalue)
    return LoopDiff(loops_a, n_a, loops_b, n_b, p_worse=worse, p_two_sided=both)


@dataclass
class SpeedDiff:
    """Per-sample speeds of two runs (tokens/s): sizes, means, ratio b/a, Welch and Mann-Whitney p-values
    (two-sided; None when either side has fewer than 2 samples)."""

    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    ratio: float | None
    p_welch: float | None
    p_mannwhitney: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def speed_diff(a: Sequence[float], b: Sequence[float]) -> SpeedDiff:
    """Welch's t-test and the Mann-Whitney U test of two samples of per-request speeds (any unit)."""
    a = [float(x) for x in a if x is not None and math.isfinite(x)]
    b = [float(x) for x in b if x is not None and math.isfinite(x)]
    mean_a = sum(a) / len(a) if a else None
    mean_b = sum(b) / len(b) if b else None
    ratio = mean_b / mean_a if mean_a and mean_b is not None else None
    p_welch = p_mw = None
    if len(a) >= 2 and len(b) >= 2:
        from scipy import stats  # deferred: heavy import

        if len(set(a)) > 1 or len(set(b)) > 1:
            p_welch = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
        else:
            p_welch = 1.0 if a[0] == b[0] else 0.0
        p_mw = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    return SpeedDiff(len(a), len(b), mean_a, mean_b, ratio, p_welch, p_mw)


@dataclass
class SpeedVsHistory:
    """A run's mean speed against the means of ``k`` earlier runs: their mean and between-run standard
    deviation, the t statistic of the shortfall and its one-sided p (None when k < MIN_HISTORY_RUNS)."""

    value: float
    k: int
    history_mean: float | None
    history_sd: float | None
    t: float | None
    p_slower: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def speed_vs_history(value: float, earlier: Sequence[float]) -> SpeedVsHistory:
    """One-sided prediction-interval test that ``value`` is slower than the earlier runs' means.

    t = (mean(earlier) - value) / (sd(earlier) * sqrt(1 + 1/k)), p = P(T_{k-1} >= t). A zero spread gives
    p = 0 for any shortfall (and 1 otherwise)."""
    xs = [float(x) for x in earlier if x is not None and math.isfinite(x)]
    k = len(xs)
    if k < MIN_HISTORY_RUNS:
        return SpeedVsHistory(value, k, sum(xs) / k if k else None, None, None, None)
    from scipy import stats  # deferred: heavy import

    m = sum(xs) / k
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (k - 1))
    if sd == 0:
        return SpeedVsHistory(value, k, m, 0.0, None, 0.0 if value < m else 1.0)
    t = (m - value) / (sd * math.sqrt(1 + 1 / k))
    return SpeedVsHistory(value, k, m, sd, t, float(stats.t.sf(t, k - 1)))


@dataclass
class LoopsVsHistory:
    """Tonight's loops ``loops``/``n`` against ``k`` earlier nights of the same cell: their pooled
    ``history_loops``/``history_n``, the nights' intra-class correlation ``rho`` (0: no spread beyond binomial),
    the pooled Fisher p, the beta-binomial predictive p (None when rho is 0) and ``p_worse``, the larger."""

    loops: int
    n: int
    k: int
    history_loops: int
    history_n: int
    rho: float
    p_fisher: float
    p_betabinom: float | None
    p_worse: float

    def to_dict(self) -> dict:
        return asdict(self)


def overdispersion(groups: Sequence[Sequence[tuple[int, int]]]) -> float:
    """The intra-class correlation rho of loop counts over nights (launches): ``groups`` holds one list of
    ``(loops, n)`` per arm (each arm's nights around its own rate), pooled into one estimate of the host's
    launch-to-launch spread. Kleinman's (1973) moment estimator for unequal n, per arm S = sum n_i (p_i - p)^2,
    the expected p(1-p)(k-1) and the scale p(1-p)(n0-1)(k-1), n0 = (N - sum n_i^2 / N) / (k - 1); rho = (sum S -
    sum expected) / sum scale, clipped to [0, 1). Arms with fewer than 2 nights, or without a loop (or a
    non-loop), add nothing; 0 when none is left."""
    num = den = 0.0
    for counts in groups:
        counts = [(int(x), int(n)) for x, n in counts if n]
        k, big_n = len(counts), sum(n for _x, n in counts)
        p = sum(x for x, _n in counts) / big_n if big_n else 0.0
        if k < 2 or p <= 0.0 or p >= 1.0:
            continue
        n0 = (big_n - sum(n * n for _x, n in counts) / big_n) / (k - 1)
        if n0 <= 1.0:
            continue
        num += sum(n * (x / n - p) ** 2 for x, n in counts) - p * (1 - p) * (k - 1)
        den += p * (1 - p) * (n0 - 1) * (k - 1)
    return min(max(num / den, 0.0), 0.999) if den else 0.0


def loops_vs_history(loops: int, n: int, earlier: Sequence[tuple[int, int]],
                     spread: Sequence[Sequence[tuple[int, int]]] = ()) -> LoopsVsHistory:
    """One-sided test that tonight's ``loops``/``n`` loops more than the earlier nights ``[(loops, n), ...]``
    of the same cell. p is the larger of the pooled Fisher exact test and, when the nights are overdispersed
    (:func:`overdispersion` rho > 0 over this cell's nights and the other arms' nights in ``spread``), the
    beta-binomial predictive P(X >= loops) with the pooled rate and rho (a night's launch effect is then part of
    what tonight is compared with). Raises ValueError for counts outside 0 <= loops <= n."""
    hist = [(int(x), int(m)) for x, m in earlier if m]
    hx, hn = sum(x for x, _m in hist), sum(m for _x, m in hist)
    fisher = loop_diff(hx, hn, loops, n).p_worse
    rho = overdispersion([hist, *spread])
    bb = None
    if rho > 0.0 and n and 0 < hx < hn:
        from scipy import stats  # deferred: heavy import

        mu = hx / hn
        a, b = mu * (1.0 / rho - 1.0), (1.0 - mu) * (1.0 / rho - 1.0)
        bb = float(stats.betabinom.sf(loops - 1, n, a, b))
    return LoopsVsHistory(loops, n, len(hist), hx, hn, rho, fisher, bb, max(fisher, bb if bb is not None else 0.0))
