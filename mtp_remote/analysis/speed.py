"""Speed ratios with confidence intervals: Welch's t on log tokens/s, from per-arm summaries.

A speed comparison is a ratio of typical per-request speeds, so it is estimated on the log scale: per arm
the mean and variance of log(tokens/s) over its samples (:class:`LogSpeed`, three numbers, so a summary can
be stored in a JSON document and compared later with an arm from another run or host). A contrast adds and
subtracts arm means — candidate vs baseline, candidate vs the top candidate on the same host, or two
candidates' ratios to their own hosts' baselines — and :func:`log_contrast` gives its point estimate
``exp(sum)`` (a ratio of geometric means) and the interval ``exp(sum ± t·se)`` with the Welch–Satterthwaite
degrees of freedom (Welch 1947, "The generalization of 'Student's' problem when several different population
variances are involved", Biometrika 34; the approximate df for a linear combination of means is Satterthwaite
1946). Two arms are *distinguishable* when the interval of their contrast excludes 1 — a direct test, not
"the two intervals vs the baseline do not overlap", which is far more conservative and ignores that both
share the baseline's noise (Schenker & Gentleman 2001, "On judging the significance of differences by
examining the overlap between confidence intervals", The American Statistician 55). Pure; scipy for the t
quantile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache


@dataclass(frozen=True)
class LogSpeed:
    """One arm's per-sample speeds on the log scale: ``n`` samples, ``mean`` and ``var`` (ddof = 1; 0 for a
    single sample) of ln(tokens/s)."""

    n: int
    mean: float
    var: float

    @classmethod
    def of(cls, tokens_per_s: Iterable[float | None]) -> LogSpeed | None:
        """The summary of positive tokens/s values (None and non-positive values dropped); None when empty."""
        logs = [math.log(x) for x in tokens_per_s if x is not None and x > 0]
        if not logs:
            return None
        m = sum(logs) / len(logs)
        v = sum((x - m) ** 2 for x in logs) / (len(logs) - 1) if len(logs) > 1 else 0.0
        return cls(n=len(logs), mean=m, var=v)

    @classmethod
    def from_dict(cls, d: dict | None) -> LogSpeed | None:
        return cls(n=int(d["n"]), mean=float(d["mean"]), var=float(d["var"])) if d else None

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def geometric_mean(self) -> float:
        """exp(mean): the typical tokens/s."""
        return math.exp(self.mean)


@dataclass(frozen=True)
class SpeedRatio:
    """``ratio`` = exp(contrast of log means) with its ``low``/``high`` bounds at ``confidence``; ``se`` the
    contrast's standard error on the log scale, ``df`` its Welch–Satterthwaite degrees of freedom (inf when
    the contrast has no spread)."""

    ratio: float
    low: float
    high: float
    se: float
    df: float
    confidence: float = 0.95

    @property
    def excludes_one(self) -> bool:
        """True when the interval lies wholly above or below 1 (the arms are distinguishable)."""
        return self.low > 1.0 or self.high < 1.0


@lru_cache(maxsize=4096)
def _t(q: float, df: float) -> float:
    from scipy import stats  # deferred: scipy costs ~0.3 s to import and only speed intervals need it here

    return float(stats.t.ppf(q, df)) if math.isfinite(df) else float(stats.norm.ppf(q))


def log_contrast(plus: Sequence[LogSpeed], minus: Sequence[LogSpeed],
                 confidence: float = 0.95) -> SpeedRatio | None:
    """exp(Σ plus.mean − Σ minus.mean) with a Welch t interval; arms are independent samples.

    ``log_contrast([cand], [base])`` is the candidate's speed over the baseline's; ``log_contrast([a, base_b],
    [base_a, b])`` compares two ratios measured against different baselines (different hosts). None when an
    arm is missing or has fewer than two samples (no variance estimate)."""
    arms = list(plus) + list(minus)
    if not arms or any(a is None or a.n < 2 for a in arms):
        return None
    diff = sum(a.mean for a in plus) - sum(a.mean for a in minus)
    parts = [a.var / a.n for a in arms]
    var = sum(parts)
    if var <= 0:
        r = math.exp(diff)
        return SpeedRatio(r, r, r, 0.0, math.inf, confidence)
    # Welch–Satterthwaite: (Σ v_i/n_i)² / Σ (v_i/n_i)² / (n_i − 1)
    df = var ** 2 / sum(p ** 2 / (a.n - 1) for p, a in zip(parts, arms))
    se = math.sqrt(var)
    half = _t(0.5 + confidence / 2, round(df, 6)) * se
    return SpeedRatio(math.exp(diff), math.exp(diff - half), math.exp(diff + half), se, df, confidence)
