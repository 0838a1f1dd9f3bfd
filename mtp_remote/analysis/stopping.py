"""The decision rule from first sample to verdict: a group-sequential design on loop counts.

One rule decides both when sampling stops and what the verdict says, so a difference the stop rule declared
settled stays settled in the report:

- **Looks** at planned sample counts: a round is one sample per prompt (sample index ``j - 1`` of every
  prompt), ``rounds`` = K planned per arm. A sequential design looks after rounds 1, 2, 4, ... and K; the
  data at the look after round j are the samples with ``sample_index < j``. A fixed design looks once, at
  all samples.
- **Alpha spending**: look j gets the share ``w_j = (a(t_j) - a(t_{j-1})) / alpha`` of the error rate, with
  ``a`` a Lan-DeMets spending function (O'Brien-Fleming-like by default, Pocock-like as an option) at the
  information fraction ``t_j = j / K``. The shares sum to 1 and are combined by Bonferroni over looks, which
  is valid whatever the correlation between looks.
- **Excess test** (``spec-corrupts-output``): unpaired one-sided Fisher exact p_j of "spec loops more" on
  all samples of each arm at look j; the sequential p-value is ``min_j p_j / w_j`` (capped at 1). It is a
  valid p-value for the whole sequence (union bound), so Holm's adjustment over the family of (speculative
  profile, temperature > 0) cells applies to it. The runner stops a cell for efficacy when it is below
  ``alpha / family`` — the smallest Holm threshold, so Holm then rejects it at the verdict too.
- **Bound** (``healthy``/``base-model-degenerates`` need it): the one-sided Newcombe upper bound U of the
  loop-rate excess spec - base at confidence ``1 - alpha``, at the last look only (spending the bound's
  alpha over early looks would cost a 5-point margin a third more samples, and a clean arm has nothing to
  stop early for). At the last look the runner reports **no-excess** when it is below ``margin``; the
  verdict needs it below ``margin`` in every temperature > 0 cell of a profile (an intersection-union test
  at ``alpha``).

Arms run one after another (one server per profile, baseline first): the baseline stops on its own once its
loop rate is clearly below half the margin (:func:`baseline_settled`) or at its budget, then each speculative
arm is compared with all the baseline's samples. ``docs/metrics.md`` has the measured error rates
(``bench/bench_verdict_mc.py``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .stats import diff_upper_bound, fisher_loops, spending, wilson_interval

__all__ = ["Design", "SequentialTest", "StopDecision", "baseline_settled", "cell_decision",
           "is_degenerate_record", "look_counts", "samples_saved", "sequential_test", "stop_decision"]

SPENDING = ("obrien-fleming", "pocock")


@dataclass(frozen=True)
class Design:
    """The sampling plan and error rates of one comparison.

    ``rounds``: planned samples per prompt per arm (K); ``alpha``: family-wise error rate; ``margin``: the
    loop-rate excess (absolute, in [0, 1]) that matters; ``family``: number of (speculative profile,
    temperature > 0) cells tested together; ``spending``: one of :data:`SPENDING`; ``sequential``: looks
    during sampling (early stopping) or one look at the end.
    """

    rounds: int = 1
    alpha: float = 0.05
    margin: float = 0.05
    family: int = 1
    spending: str = "obrien-fleming"
    sequential: bool = False

    def looks(self) -> tuple[int, ...]:
        """Rounds after which the rule looks: 1, 2, 4, ... and K (sequential), or K alone."""
        k = max(1, self.rounds)
        if not self.sequential:
            return (k,)
        out, j = [], 1
        while j < k:
            out.append(j)
            j *= 2
        return (*out, k)

    def weights(self) -> dict[int, float]:
        """Share of alpha per look (sums to 1): increments of the spending function at ``j / K``."""
        return dict(_weights(self.looks(), max(1, self.rounds), self.alpha, self.spending))

    @property
    def alpha_cell(self) -> float:
        """The per-cell level that stops a cell for efficacy: ``alpha / family`` (Holm's smallest threshold)."""
        return self.alpha / max(1, self.family)


@lru_cache(maxsize=256)
def _weights(looks: tuple[int, ...], k: int, alpha: float, kind: str) -> tuple[tuple[int, float], ...]:
    if len(looks) == 1:
        return ((looks[0], 1.0),)
    out, prev = [], 0.0
    for j in looks:
        cur = spending(j / k, alpha, kind)
        out.append((j, (cur - prev) / alpha))
        prev = cur
    return tuple(out)


@dataclass(frozen=True)
class SequentialTest:
    """The rule applied to one (spec cell, baseline cell) pair.

    ``p_value``: sequential p (``min_j p_j / w_j``, capped at 1), ``look``: the round where it was reached;
    ``bound``: the upper bound of the loop-rate excess (fraction) at the last look, 1.0 before it;
    ``bound_look``: that look (None before it);
    ``k_spec``/``n_spec``: loops/samples of the spec arm at its last look; ``k_base``/``n_base``: the
    baseline's (all samples); ``last_look``: the last look reached (None: no look yet).
    """

    p_value: float
    look: int | None
    bound: float
    bound_look: int | None
    k_spec: int
    n_spec: int
    k_base: int
    n_base: int
    last_look: int | None


def is_degenerate_record(metrics: dict | None, finish_reason: str | None) -> bool:
    """Whether a stored sample counts as degenerate: a loop, or a near loop in an output cut at
    ``max_tokens`` (``finish_reason == "length"``). ``metrics`` is a samples.jsonl ``metrics`` dict."""
    m = metrics or {}
    return bool(m.get("loop")) or (finish_reason == "length" and bool(m.get("near_loop")))


def look_counts(outcomes: Iterable[tuple[int, bool]], design: Design) -> dict[int, tuple[int, int]]:
    """``{round: (degenerate, n)}`` at each look reached, from ``(sample_index, degenerate)`` pairs.

    A look after round j is reached when some sample has index ``j - 1`` or more (the round was sampled);
    its counts are the samples with index below j. The last look counts all samples (a fixed design's one
    look is always reached)."""
    rows = list(outcomes)
    if not rows:
        return {}
    top = max(i for i, _ in rows) + 1
    looks = design.looks()
    out = {}
    for j in looks:
        if j == looks[-1]:
            if not design.sequential or top >= j:
                out[j] = (sum(d for _, d in rows), len(rows))
        elif j <= top:
            sel = [d for i, d in rows if i < j]
            out[j] = (sum(sel), len(sel))
    return out


def sequential_test(spec_looks: dict[int, tuple[int, int]], k_base: int, n_base: int,
                    design: Design) -> SequentialTest:
    """The sequential p-value and excess bound of a spec arm (counts per look) against a baseline's counts."""
    w = design.weights()
    final = design.looks()[-1]
    best_p, best_look, best_u, u_look = 1.0, None, 1.0, None
    for j in sorted(spec_looks):
        k, n = spec_looks[j]
        share = w.get(j, 0.0)
        if share <= 0 or n == 0:
            continue
        p = min(1.0, fisher_loops(k, n, k_base, n_base) / share)
        if p < best_p or best_look is None:
            best_p, best_look = p, j
        if j == final:
            best_u, u_look = diff_upper_bound(k, n, k_base, n_base, 1 - design.alpha), j
    last = max(spec_looks) if spec_looks else None
    k, n = spec_looks[last] if last is not None else (0, 0)
    return SequentialTest(best_p, best_look, best_u, u_look, k, n, k_base, n_base, last)


@dataclass(frozen=True)
class StopDecision:
    """``outcome``: spec-loops-more | no-excess | baseline-clean | budget-spent | continue.

    ``p_value``: sequential p; ``threshold``: the per-cell level it is compared with; ``bound``: the excess
    (or, for a baseline, loop-rate) upper bound; ``reason``: one sentence."""

    outcome: str
    p_value: float
    threshold: float
    bound: float
    reason: str

    @property
    def settled(self) -> bool:
        return self.outcome != "continue"


def stop_decision(spec_looks: dict[int, tuple[int, int]], k_base: int, n_base: int,
                  design: Design) -> StopDecision:
    """Whether a spec cell is settled after the looks so far (module docstring)."""
    t = sequential_test(spec_looks, k_base, n_base, design)
    counts = f"spec {t.k_spec}/{t.n_spec} vs baseline {k_base}/{n_base}"
    thr = design.alpha_cell
    if t.p_value < thr:
        return StopDecision("spec-loops-more", t.p_value, thr, t.bound,
                            f"{counts}: sequential p={t.p_value:.2g} < {thr:.2g}")
    if t.bound < design.margin:
        return StopDecision("no-excess", t.p_value, thr, t.bound,
                            f"{counts}: excess at most {t.bound:.1%} < margin {design.margin:.0%}")
    if t.last_look is not None and t.last_look >= design.looks()[-1]:
        return StopDecision("budget-spent", t.p_value, thr, t.bound, f"{counts}: budget spent")
    return StopDecision("continue", t.p_value, thr, t.bound, f"{counts}: not settled")


def baseline_settled(base_looks: dict[int, tuple[int, int]], design: Design) -> StopDecision:
    """Whether a baseline cell, sampled before its speculative arms, has enough samples.

    **baseline-clean** once the one-sided Wilson upper bound of its loop rate (confidence ``1 - alpha * w_j``)
    is below half the margin at a look, **budget-spent** at the last look, else **continue**. A baseline that
    loops is sampled to its budget: ``base-model-degenerates`` needs the speculative excess bounded, which
    needs the baseline's samples."""
    if not base_looks:
        return StopDecision("continue", 1.0, design.alpha_cell, 1.0, "no baseline samples yet")
    w = design.weights()
    last = max(base_looks)
    k, n = base_looks[last]
    counts = f"baseline {k}/{n}"
    best = 1.0
    for j in sorted(base_looks):
        kj, nj = base_looks[j]
        if nj and w.get(j, 0) > 0:
            best = min(best, wilson_interval(kj, nj, 1 - 2 * design.alpha * w[j])[1])
    if best < design.margin / 2:
        return StopDecision("baseline-clean", 1.0, design.alpha_cell, best,
                            f"{counts}: loop rate at most {best:.1%} < {design.margin / 2:.1%}")
    if last >= design.looks()[-1]:
        return StopDecision("budget-spent", 1.0, design.alpha_cell, best, f"{counts}: budget spent")
    return StopDecision("continue", 1.0, design.alpha_cell, best, f"{counts}: not settled")


def cell_decision(records: Sequence[dict], *, profile: str, baseline: str, temperature: float,
                  design: Design) -> dict:
    """The runner's early-stopping state of one cell from stored samples.jsonl records (dicts).

    Failed requests are left out. Returns ``{"settled", "outcome", "reason", "n", "budget", "p", "bound"}``,
    ``n`` being the profile's stored successful samples at ``temperature``."""
    def outcomes(name: str) -> list[tuple[int, bool]]:
        return [(int(s["sample_index"]), is_degenerate_record(s.get("metrics"), s.get("finish_reason")))
                for s in records if s.get("error") is None and s["profile"] == name
                and float(s["temperature"]) == temperature]

    mine = outcomes(profile)
    if profile == baseline:
        d = baseline_settled(look_counts(mine, design), design)
    else:
        base = outcomes(baseline)
        d = stop_decision(look_counts(mine, design), sum(x for _, x in base), len(base), design)
    return {"settled": d.settled, "outcome": d.outcome, "reason": d.reason, "n": len(mine),
            "budget": design.rounds, "p": d.p_value, "bound": d.bound}


def samples_saved(samples_used: list[int], budget: int) -> tuple[int, float]:
    """``(samples saved, share of the fixed budget saved)`` over cells that each had ``budget`` samples."""
    total = budget * len(samples_used)
    saved = total - sum(min(budget, n) for n in samples_used)
    return saved, (saved / total if total else 0.0)


def min_looks_note(design: Design) -> str:
    """One phrase naming the design, for evidence strings: e.g. ``looks after rounds 1, 2, 4, 8``."""
    looks = design.looks()
    if len(looks) == 1:
        return "one look at the end"
    return f"looks after rounds {', '.join(map(str, looks))} ({design.spending} spending)"

