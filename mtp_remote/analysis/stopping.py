"""The decision rule from first sample to verdict: a group-sequential design on loop counts.

One rule decides both when sampling stops and what the verdict says, so a difference the stop rule declared
settled stays settled in the report:

- **Looks** at planned sample counts: a round is one sample per prompt (sample index ``j - 1`` of every
  prompt). The design is fixed at the run's first launch (:class:`Design`: K0 rounds, R resume looks at
  K0·2, K0·4, ...): a sequential design looks after rounds 1, 2, 4, ... and K0, then once per resume; the
  data at the look after round j are the samples with ``sample_index < j``, the baseline's those of the
  look's stage (:func:`stage_counts`). A fixed design looks at K0 and at each resume look.
- **Alpha spending**: the first run's looks share ``1 - reserve`` of alpha by a Lan-DeMets spending
  function (O'Brien-Fleming-like by default, Pocock-like as an option) at ``t_j = j / K0``, each resume look
  ``reserve / R``. The shares sum to 1 and are combined by Bonferroni over looks, which is valid whatever the
  correlation between looks and whatever made the user resume: a chain of resumes keeps the family-wise
  error at alpha.
- **Excess test** (``spec-corrupts-output``): unpaired one-sided Fisher exact p_j of "spec loops more" at
  look j; the sequential p-value is ``min_j p_j / w_j`` (capped at 1). It is a valid p-value for the whole
  sequence (union bound), so Holm's adjustment over the family (loop cells and lossless members) applies to
  it. The runner stops a cell for efficacy when it is below ``alpha / family`` — the smallest Holm
  threshold, so Holm then rejects it at the verdict too.
- **Bound** (``healthy``/``base-model-degenerates`` need it): the one-sided Newcombe upper bound U of the
  loop-rate excess spec - base at the run's last look, at confidence ``1 - alpha x`` its stage's share
  (``Design.bound_share``: ``1 - reserve`` for the first run, ``reserve / R`` for a resume), not spent over
  a stage's early looks (a clean arm has nothing to stop early for). At the last look the runner reports
  **no-excess** when it is below ``margin``; the verdict needs it below ``margin`` in every temperature > 0
  cell of a profile (an intersection-union test).

Arms run one after another (one server per profile, baseline first): the baseline stops on its own once its
loop rate is clearly below half the margin (:func:`baseline_settled`) or at its budget, then each speculative
arm is compared with the baseline's samples of each look's stage. ``docs/metrics.md`` has the measured error
rates (``bench/bench_verdict_mc.py``, ``bench/bench_verdicts.py``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .lossless import GREEDY_MARGIN
from ..records.sample import Sample, SampleMetrics
from .stats import diff_upper_bound, fisher_loops, spending, wilson_interval

__all__ = ["RESUME_RESERVE", "Design", "SequentialTest", "StopDecision", "baseline_settled", "cell_decision",
           "is_degenerate_record", "look_counts", "samples_saved", "sequential_test", "stage_counts", "stop_decision"]

SPENDING = ("obrien-fleming", "pocock")


#: Share of alpha a first run leaves to its resumes when the design allows them (``Design.resumes`` > 0).
RESUME_RESERVE = 0.2


@dataclass(frozen=True)
class Design:
    """The sampling plan and error rates of one comparison, fixed at the run's first launch.

    ``rounds``: samples per prompt per arm this run samples to (K); ``alpha``: family-wise error rate;
    ``margin``: the loop-rate excess (absolute, in [0, 1]) that matters; ``family``: number of tests judged
    together (loop cells and lossless members); ``spending``: one of :data:`SPENDING`; ``sequential``: looks
    during sampling (early stopping) or one look at the end; ``greedy_margin``: the per-prompt greedy
    divergence rate a plan without a temperature above 0 must bound for ``healthy`` (``lossless.greedy_bound``,
    at confidence ``1 - alpha``); ``judge_speed``: whether a tokens/s ratio below 1 is ``spec-slower``
    (``compare.judge_speed``).

    Resumes (``--resume --samples N``) are later looks of the same design, never a new one: ``first_rounds``
    (K0, the first run's rounds; None = ``rounds``) and ``resumes`` (R, the resume looks the design allows, at
    K0·2, K0·4, ... K0·2^R) are recorded at the first run (``summary.json`` ``design``). The first run spends
    ``1 - reserve`` of alpha over its own looks (spending function at ``j / K0``), each resume look
    ``reserve / R``; the excess bound gets the same shares, one per stage. By the union bound the family-wise
    error over the whole chain of resumes is at most ``alpha``, whatever made the user resume.
    """

    rounds: int = 1
    alpha: float = 0.05
    margin: float = 0.05
    family: int = 1
    spending: str = "obrien-fleming"
    sequential: bool = False
    first_rounds: int | None = None
    resumes: int = 0
    reserve: float = RESUME_RESERVE
    greedy_margin: float = GREEDY_MARGIN
    judge_speed: bool = True

    @property
    def k0(self) -> int:
        return max(1, self.first_rounds or self.rounds)

    def stage_ends(self) -> tuple[int, ...]:
        """The last round of each stage: K0 (the first run), then K0·2^s for each allowed resume."""
        return tuple(self.k0 * 2 ** s for s in range(self.resumes + 1))

    def all_looks(self) -> tuple[int, ...]:
        """Every look of the design: the first run's (1, 2, 4, ... K0 when sequential, else K0) and one per
        resume stage."""
        k0 = self.k0
        out, j = [], 1
        while self.sequential and j < k0:
            out.append(j)
            j *= 2
        return (*out, *self.stage_ends())

    def looks(self) -> tuple[int, ...]:
        """The looks this run can reach: those at or below ``rounds`` (at least the first run's last)."""
        return tuple(j for j in self.all_looks() if j <= max(self.rounds, self.k0))

    def stage_end(self, look: int) -> int:
        """The last round of the stage ``look`` belongs to (the baseline counts up to it)."""
        return next(e for e in self.stage_ends() if e >= look) if look <= self.stage_ends()[-1] else look

    def weights(self) -> dict[int, float]:
        """Share of alpha per look over the whole design (sums to at most 1)."""
        return dict(_weights(self.all_looks(), self.k0, self.alpha, self.spending, self.resumes, self.reserve))

    @property
    def alpha_cell(self) -> float:
        """The per-cell level that stops a cell for efficacy: ``alpha / family`` (Holm's smallest threshold)."""
        return self.alpha / max(1, self.family)

    def bound_share(self, look: int) -> float:
        """Share of alpha of the excess bound at ``look``: ``1 - reserve`` at the first run's last look,
        ``reserve / R`` at a resume look (0 elsewhere)."""
        if self.resumes <= 0:
            return 1.0 if look == self.k0 else 0.0
        if look == self.k0:
            return 1 - self.reserve
        return self.reserve / self.resumes if look in self.stage_ends() else 0.0

    @property
    def alpha_bound(self) -> float:
        """The bound's error rate at this run's last look (``1 -`` it is the confidence the evidence states)."""
        return self.alpha * (self.bound_share(self.looks()[-1]) or 1.0)

    @property
    def next_bound_alpha(self) -> float:
        """The bound's error rate at the design's next look after this run (a resume's), this run's when none is
        left: what more samples would be judged at (``stats.samples_needed``)."""
        later = [e for e in self.stage_ends() if e > self.looks()[-1]]
        return self.alpha * self.bound_share(later[0]) if later else self.alpha_bound

    def to_dict(self) -> dict:
        """The design as recorded in ``summary.json``: its looks and the alpha each spends."""
        w = self.weights()
        return {"first_rounds": self.k0, "rounds": self.rounds, "resumes": self.resumes,
                "reserve": self.reserve if self.resumes else 0.0, "alpha": self.alpha, "margin": self.margin,
                "greedy_margin": self.greedy_margin, "spending": self.spending, "sequential": self.sequential, "family": self.family,
                "looks": list(self.all_looks()), "alpha_per_look": {str(j): self.alpha * w[j] for j in w},
                "bound_alpha_per_stage": {str(e): self.alpha * self.bound_share(e) for e in self.stage_ends()}}


@lru_cache(maxsize=256)
def _weights(looks: tuple[int, ...], k0: int, alpha: float, kind: str, resumes: int,
             reserve: float) -> tuple[tuple[int, float], ...]:
    first = [j for j in looks if j <= k0]
    share0 = 1.0 - (reserve if resumes > 0 else 0.0)
    out, prev = [], 0.0
    if len(first) == 1:
        out.append((first[0], share0))
    else:
        for j in first:
            cur = spending(j / k0, alpha, kind)
            out.append((j, share0 * (cur - prev) / alpha))
            prev = cur
    out += [(j, reserve / resumes) for j in looks if j > k0]
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


def is_degenerate_record(metrics: SampleMetrics | dict | None, finish_reason: str | None) -> bool:
    """Whether a stored sample counts as degenerate: a loop, or a near loop in an output cut at
    ``max_tokens`` (``finish_reason == "length"``). ``metrics``: a sample's stored ``metrics``."""
    m = SampleMetrics.of({} if metrics is None else metrics)
    return bool(m.loop) or (finish_reason == "length" and bool(m.near_loop))


def look_counts(outcomes: Iterable[tuple[int, bool]], design: Design) -> dict[int, tuple[int, int]]:
    """``{round: (degenerate, n)}`` at each look reached, from ``(sample_index, degenerate)`` pairs.

    A look after round j is reached when some sample has index ``j - 1`` or more (the round was sampled);
    its counts are the samples with index below j; the run's last look counts all its samples (a resume
    samples to a look of the design, ``experiment.diagnose._at_a_look``). The last look of a fixed design is always reached
    (with what was sampled)."""
    rows = list(outcomes)
    if not rows:
        return {}
    top = max(i for i, _ in rows) + 1
    looks = design.looks()
    out = {}
    for j in looks:
        if j <= top or (j == looks[-1] and not design.sequential):
            sel = [d for i, d in rows if i < j or j == looks[-1]]
            out[j] = (sum(sel), len(sel))
    return out


def stage_counts(outcomes: Iterable[tuple[int, bool]], design: Design) -> dict[int, tuple[int, int]]:
    """``{stage end: (degenerate, n)}`` of a baseline: its samples with index below each stage's end (the last
    stage this run reaches: all its samples). A look compares the spec arm with the baseline of its own stage, so
    a look's data never change once its stage is complete (resumes add later stages, they do not redo
    earlier looks)."""
    rows = list(outcomes)
    ends = [e for e in design.stage_ends() if e <= max(design.rounds, design.k0)]
    out = {}
    for e in ends:
        sel = [d for i, d in rows if i < e or e == ends[-1]]
        out[e] = (sum(sel), len(sel))
    return out


def sequential_test(spec_looks: dict[int, tuple[int, int]], k_base: int | dict[int, tuple[int, int]],
                    n_base: int | None, design: Design) -> SequentialTest:
    """The sequential p-value and excess bound of a spec arm (counts per look) against the baseline: its
    counts (``k_base``, ``n_base``), or ``{stage end: (k, n)}`` (:func:`stage_counts`, ``n_base`` None) so
    each look uses its own stage's baseline."""
    w = design.weights()
    final = design.looks()[-1]
    staged = k_base if isinstance(k_base, dict) else None

    def base_at(j: int) -> tuple[int, int]:
        if staged is None:
            return int(k_base), int(n_base or 0)
        e = design.stage_end(j)
        return staged.get(e) or staged[max(staged)] if staged else (0, 0)

    best_p, best_look, best_u, u_look = 1.0, None, 1.0, None
    for j in sorted(spec_looks):
        k, n = spec_looks[j]
        share = w.get(j, 0.0)
        kb, nb = base_at(j)
        if share <= 0 or n == 0:
            continue
        p = min(1.0, fisher_loops(k, n, kb, nb) / share)
        if p < best_p or best_look is None:
            best_p, best_look = p, j
        if j == final:
            best_u, u_look = diff_upper_bound(k, n, kb, nb, 1 - design.alpha * (design.bound_share(j) or 1.0)), j
    last = max(spec_looks) if spec_looks else None
    k, n = spec_looks[last] if last is not None else (0, 0)
    kb, nb = base_at(last) if last is not None else base_at(final)
    return SequentialTest(best_p, best_look, best_u, u_look, k, n, kb, nb, last)


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


def stop_decision(spec_looks: dict[int, tuple[int, int]], k_base: int | dict[int, tuple[int, int]],
                  n_base: int | None, design: Design, aa: dict[int, tuple[int, int]] | None = None) -> StopDecision:
    """Whether a spec cell is settled after the looks so far (module docstring); the baseline as in
    :func:`sequential_test`. ``aa``: the A/A arm's stage counts (the baseline relaunched,
    ``compare.calibration``): the loop excess then settles the cell only beyond both launches of the baseline
    (:func:`contrast_p`)."""
    t = sequential_test(spec_looks, k_base, n_base, design)
    t_aa = sequential_test(spec_looks, aa, None, design) if aa else None
    p = contrast_p(t, t_aa)
    counts = f"spec {t.k_spec}/{t.n_spec} vs baseline {t.k_base}/{t.n_base}" + \
        (f" and its A/A relaunch {t_aa.k_base}/{t_aa.n_base}" if t_aa else "")
    thr = design.alpha_cell
    if p < thr:
        return StopDecision("spec-loops-more", p, thr, t.bound, f"{counts}: sequential p={p:.2g} < {thr:.2g}")
    if t.bound < design.margin:
        return StopDecision("no-excess", p, thr, t.bound,
                            f"{counts}: loop excess at most {math.ceil(t.bound * 1000 - 1e-9) / 10:.1f}% < "
                            f"margin {design.margin:.0%}")
    if t.last_look is not None and t.last_look >= design.looks()[-1]:
        return StopDecision("budget-spent", p, thr, t.bound, f"{counts}: budget spent")
    return StopDecision("continue", p, thr, t.bound, f"{counts}: not settled")


def contrast_p(vs_base: SequentialTest, vs_aa: SequentialTest | None) -> float:
    """The loop test's p-value with the A/A contrast required (issue 31): with an A/A arm, the larger of the
    sequential p against the baseline and against its A/A relaunch — an intersection-union test (Berger 1982):
    the speculative arm is called worse only when it loops more than *each* launch of the baseline, which keeps
    its level without a multiplicity correction and makes a launch-to-launch shift of the loop rate (the
    baseline's launch drawn low) far less likely to pass as corruption. Without one, the p against the
    baseline."""
    return vs_base.p_value if vs_aa is None else max(vs_base.p_value, vs_aa.p_value)


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


def cell_decision(records: Sequence[Sample | dict], *, profile: str, baseline: str, temperature: float,
                  design: Design, aa: str | None = None) -> dict:
    """The runner's early-stopping state of one cell from stored samples.jsonl records.

    Failed requests are left out. ``aa``: the A/A arm's profile name (``compare.calibration``): a speculative
    cell with its samples among ``records`` is tested against both launches of the baseline
    (:func:`stop_decision`). Returns ``{"settled", "outcome", "reason", "n", "budget", "p", "bound"}``,
    ``n`` being the profile's stored successful samples at ``temperature``."""
    records = [Sample.of(s) for s in records]

    def outcomes(name: str) -> list[tuple[int, bool]]:
        return [(int(s.sample_index), is_degenerate_record(s.metrics, s.finish_reason))
                for s in records if s.error is None and s.profile == name and float(s.temperature) == temperature]

    mine = outcomes(profile)
    if profile == baseline:
        d = baseline_settled(look_counts(mine, design), design)
    else:
        relaunch = outcomes(aa) if aa and aa != profile else []
        d = stop_decision(look_counts(mine, design), stage_counts(outcomes(baseline), design), None, design,
                          stage_counts(relaunch, design) if relaunch else None)
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

