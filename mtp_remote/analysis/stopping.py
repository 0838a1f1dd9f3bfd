"""Early stopping: is a (speculative cell, baseline cell) comparison settled after the samples so far?

The runner samples in rounds of ``round_size`` per arm up to ``budget`` per cell and asks
:func:`stop_decision` after each round. The rule is group-sequential with the error rates split evenly
over the planned looks (Bonferroni over ``K = ceil(budget / round_size)`` looks, which is valid whatever
the looks' correlation, so the overall error rates stay below ``alpha`` and ``beta``):

- **spec-loops-more** (efficacy): the one-sided Fisher exact p that the spec arm loops more is below
  ``alpha / K``. A verdict made at that point is ``spec-corrupts-output`` at level ``alpha``.
- **no-excess** (futility): the one-sided upper bound, at confidence ``1 - beta / K``, of the loop-rate
  difference spec - base (Newcombe 1998 hybrid score interval, method 10) is below ``margin``: whatever the
  remaining samples would show, the spec arm does not loop ``margin`` more often than the baseline.
- **budget-spent** when ``n >= budget`` on both arms, **continue** otherwise.

A baseline cell serves several speculative profiles; the runner stops sampling it once every comparison
that uses it is settled. :func:`simulate_stopping` measures the rule (samples used, error rates) on
Bernoulli arms; ``docs/metrics.md`` reports the figures. Pure (seeded random numbers only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .stats import fisher_loops, wilson_interval


@dataclass(frozen=True)
class StopRule:
    """Sampling plan and error rates. ``budget``/``round_size``: samples per arm per cell; ``margin``: the
    loop-rate excess (absolute, in [0, 1]) that matters."""

    budget: int = 32
    round_size: int = 4
    alpha: float = 0.05
    beta: float = 0.2
    margin: float = 0.2

    @property
    def looks(self) -> int:
        return max(1, math.ceil(self.budget / max(1, self.round_size)))

    @property
    def alpha_per_look(self) -> float:
        return self.alpha / self.looks

    @property
    def beta_per_look(self) -> float:
        return self.beta / self.looks


@dataclass(frozen=True)
class StopDecision:
    """``outcome``: spec-loops-more | no-excess | budget-spent | continue; ``settled`` for all but continue.

    ``p_value``: one-sided Fisher p; ``threshold``: the per-look alpha it is compared with;
    ``diff_upper``: upper bound of spec - base loop rate at the per-look futility confidence.
    """

    outcome: str
    p_value: float
    threshold: float
    diff_upper: float
    reason: str

    @property
    def settled(self) -> bool:
        return self.outcome != "continue"


def diff_upper_bound(k_spec: int, n_spec: int, k_base: int, n_base: int, confidence: float) -> float:
    """One-sided upper bound of p_spec - p_base (Newcombe hybrid score); 1.0 when an arm is empty."""
    if n_spec == 0 or n_base == 0:
        return 1.0
    two_sided = 2 * confidence - 1  # the one-sided bound is one end of this two-sided interval
    _, u1 = wilson_interval(k_spec, n_spec, two_sided)
    l2, _ = wilson_interval(k_base, n_base, two_sided)
    p1, p2 = k_spec / n_spec, k_base / n_base
    return min(1.0, p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def stop_decision(k_spec: int, n_spec: int, k_base: int, n_base: int,
                  rule: StopRule = StopRule()) -> StopDecision:
    """Whether a comparison is settled after ``n_*`` samples per arm with ``k_*`` loops (module docstring)."""
    p = fisher_loops(k_spec, n_spec, k_base, n_base)
    upper = diff_upper_bound(k_spec, n_spec, k_base, n_base, 1 - rule.beta_per_look)
    counts = f"{k_spec}/{n_spec} vs {k_base}/{n_base}"
    if p < rule.alpha_per_look:
        return StopDecision("spec-loops-more", p, rule.alpha_per_look, upper,
                            f"loops {counts}: p={p:.2g} < {rule.alpha_per_look:.2g} (alpha over {rule.looks} looks)")
    if upper < rule.margin:
        return StopDecision("no-excess", p, rule.alpha_per_look, upper,
                            f"loops {counts}: excess at most {upper:.2f} < margin {rule.margin:.2f}")
    if min(n_spec, n_base) >= rule.budget:
        return StopDecision("budget-spent", p, rule.alpha_per_look, upper, f"loops {counts}: budget spent")
    return StopDecision("continue", p, rule.alpha_per_look, upper, f"loops {counts}: not settled")


@dataclass
class StoppingSimulation:
    """Outcome of :func:`simulate_stopping`: ``mean_samples`` per arm, ``fraction_of_budget`` (mean),
    ``settled_within[n]``: share of trials decided (efficacy or futility) with at most n samples per arm, ``outcomes``: shares."""

    mean_samples: float
    fraction_of_budget: float
    settled_within: dict[int, float]
    outcomes: dict[str, float] = field(default_factory=dict)


def simulate_stopping(p_spec: float, p_base: float, rule: StopRule = StopRule(), *, trials: int = 2000,
                      seed: int = 0) -> StoppingSimulation:
    """Run the rule on ``trials`` pairs of Bernoulli(p_spec) / Bernoulli(p_base) arms (seeded numpy)."""
    rng = np.random.default_rng(seed)
    spec = rng.random((trials, rule.budget)) < p_spec
    base = rng.random((trials, rule.budget)) < p_base
    looks = [min(rule.budget, rule.round_size * (i + 1)) for i in range(rule.looks)]
    used, decided, outcomes = [], [], {}
    memo: dict[tuple[int, int, int], StopDecision] = {}
    for t in range(trials):
        cs, cb = np.cumsum(spec[t]), np.cumsum(base[t])
        for n in looks:
            key = (int(cs[n - 1]), int(cb[n - 1]), n)
            if key not in memo:
                memo[key] = stop_decision(key[0], n, key[1], n, rule)
            d = memo[key]
            if d.settled:
                break
        used.append(n)
        decided.append(d.outcome in ("spec-loops-more", "no-excess"))
        outcomes[d.outcome] = outcomes.get(d.outcome, 0) + 1
    arr, ok = np.asarray(used), np.asarray(decided)
    return StoppingSimulation(
        mean_samples=float(arr.mean()), fraction_of_budget=float(arr.mean() / rule.budget),
        settled_within={n: float(np.mean(ok & (arr <= n))) for n in looks},
        outcomes={k: v / trials for k, v in sorted(outcomes.items())})


def samples_saved(samples_used: list[int], budget: int) -> tuple[int, float]:
    """``(samples saved, share of the fixed budget saved)`` over cells that each had ``budget`` samples."""
    total = budget * len(samples_used)
    saved = total - sum(min(budget, n) for n in samples_used)
    return saved, (saved / total if total else 0.0)


def baseline_settled(k_base: int, n_base: int, rule: StopRule = StopRule()) -> StopDecision:
    """Whether a baseline cell has enough samples before its speculative arms are sampled.

    Arms run one after another (one server launch per profile, baseline first), so the baseline cannot wait
    for the comparisons. It stops once its loop rate is known to be small — the one-sided Wilson upper bound at
    confidence ``1 - beta / K`` is below ``margin`` (**clean**) — or is clearly large — the lower bound at
    ``1 - alpha / K`` exceeds ``margin`` (**degenerate**: the model loops without speculation) — or at the
    budget. ``p_value`` is not used here (1.0)."""
    if n_base == 0:
        return StopDecision("continue", 1.0, rule.alpha_per_look, 1.0, "no baseline samples yet")
    _, upper = wilson_interval(k_base, n_base, 2 * (1 - rule.beta_per_look) - 1)
    lower, _ = wilson_interval(k_base, n_base, 2 * (1 - rule.alpha_per_look) - 1)
    counts = f"baseline loops {k_base}/{n_base}"
    if upper < rule.margin:
        return StopDecision("baseline-clean", 1.0, rule.alpha_per_look, upper,
                            f"{counts}: rate at most {upper:.2f} < margin {rule.margin:.2f}")
    if lower > rule.margin:
        return StopDecision("baseline-degenerate", 1.0, rule.alpha_per_look, upper,
                            f"{counts}: rate at least {lower:.2f} > margin {rule.margin:.2f}")
    if n_base >= rule.budget:
        return StopDecision("budget-spent", 1.0, rule.alpha_per_look, upper, f"{counts}: budget spent")
    return StopDecision("continue", 1.0, rule.alpha_per_look, upper, f"{counts}: not settled")
