"""Cells to verdicts: one verdict per speculative profile, with its evidence, by the rule that stopped sampling.

The runner hands one :class:`SampleObs` per request; :func:`summarize_cell` pools a (profile, temperature)
cell into a :class:`CellSummary` (both in ``cells.py``); :func:`judge_all` judges every
speculative profile against the baseline with the group-sequential rule of ``stopping.py`` (the same code the
runner's early stopping calls) and returns one :class:`Verdict` each. A sample counts as *degenerate* when it
loops, or when it was cut at ``max_tokens`` inside a near loop. Rules, first match wins (``docs/metrics.md``):

1. ``spec-corrupts-output``: a temperature > 0 cell whose sequential p-value (unpaired one-sided Fisher,
   alpha spent over the looks and resumes), Holm-adjusted over the run's family — every (speculative profile,
   temperature > 0) cell plus one lossless member per profile (``lossless.py``: greedy, KL, accuracy vs the
   host's floor; greedy only with an A/A arm, else the evidence says "no A/A arm: greedy divergence not
   judged against a floor") — is below ``alpha``; or the profile's lossless member is, loops or not. A cell the stop
   rule settled as "spec loops more" always ends here.
2. ``base-model-degenerates``: the baseline loops in at least :data:`BASE_DEGENERATE_RATE` of a T > 0 cell (and
   at least 2 samples), the speculative excess is bounded below the margin in every T > 0 cell and the
   lossless checks pass.
3. ``inconclusive``: the excess is not bounded below the margin ("no large excess detected; loop excess up to
   X % not ruled out"), no temperature above 0 was compared, or a lossless check did not pass; the evidence
   gives the samples per arm that would decide (``stats.samples_needed``, power 0.8). Exits 3.
4. ``spec-ineffective``: acceptance length (non-degenerate samples) at most :data:`INEFFECTIVE_ACCEPT`.
5. ``spec-slower``: the bootstrap interval of the non-degenerate tokens/s ratio lies below 1 (below the host's
   run-to-run spread when calibrated); without samples, a point ratio below :data:`SLOWER_RATIO`. Not where the
   playbook's ``compare.judge_speed`` is false (the ratio is then given as not judged).
6. ``healthy`` otherwise: every T > 0 excess bounded below the margin (said rounded up, :func:`bound_up`)
   and every lossless check passed. A plan with no temperature above 0 (greedy only: the real CPU hosts) has
   no loop bound; there the greedy bound takes its place (``lossless.greedy_bound``): the exact upper bound
   of the per-prompt hard-divergence rate's excess over the A/A arm's, at ``1 - alpha``, below
   ``Design.greedy_margin`` (0 of 29 distinct prompts for 10 %, 0 of 59 for 5 %); the T = 0 row then carries
   ``greedy_bound`` and ``greedy_next`` (what closes the gate, for the ``next:`` line).

A server that crashed or hung after it was ready is ``crashed:<cause>`` / ``hung:<cause>``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from ..errors import EXIT_CORRUPT, EXIT_HEALTHY, EXIT_INCONCLUSIVE, EXIT_RUN_FAILED
from ..records.summary import Comparison
from .cells import CellSummary, SampleObs, mean_of
from .divergence import NEAR_TIE_MARGIN, Calibration
from .evidence import (counts_phrase, fmt_p, fmt_t, greedy_loops_lead, greedy_need, greedy_next, greedy_phrase,
                       launch_note, need_phrase, resumed_note)
from .lossless import NO_FLOOR, GreedyBound, LosslessTest, greedy_bound, lossless_member, lossless_tests
from .pairing import greedy_report
from .stats import holm, ratio_ci, samples_needed
from .stopping import Design, contrast_p, look_counts, sequential_test, stage_counts

__all__ = ["FAILURE_PREFIXES", "KINDS", "Verdict", "bound_up", "exit_code", "is_failure", "judge", "judge_all",
           "launch_failed", "lossless_planned"]

BASE_DEGENERATE_RATE = 0.25
INEFFECTIVE_ACCEPT = 1.2
SLOWER_RATIO = 0.95
INFLATED_ACCEPT = 1.10  # warn when acceptance over all samples exceeds the non-looping one by this factor
HANG_CAUSES = frozenset({"stalled", "watchdog_timeout", "hang", "hung"})

KINDS = ("spec-corrupts-output", "base-model-degenerates", "healthy", "spec-ineffective", "spec-slower",
         "inconclusive", "launch-failed:<cause>", "crashed:<cause>", "hung:<cause>")
FAILURE_PREFIXES = ("launch-failed", "crashed", "hung")


@dataclass
class Verdict:
    """The verdict on one speculative profile; ``kind`` is one of :data:`KINDS`.

    ``p_value``/``temperature``: the deciding comparison (Holm-adjusted p). ``comparisons``: one record per
    temperature (:class:`~mtp_remote.records.summary.Comparison`: (spec/base degenerate counts and n, p, adjusted p, excess bound and its confidence, samples
    needed, speed ratio, acceptance, greedy divergence). ``kl_probe``: the KL probe against its floor when
    both sides had two probed samples (``divergence.KlGap`` as a dict, plus ``floor_source``:
    ``"calibration"`` or ``"baseline"``, and the KL test's ``above``, ``p``, ``threshold`` — its absolute
    bound — and ``flagged``). ``lossless``: every lossless test (``lossless.LosslessTest.to_dict``).
    """

    profile: str
    kind: str
    evidence: str
    p_value: float | None
    temperature: float | None
    comparisons: list[Comparison]
    warnings: list[str] = field(default_factory=list)
    kl_probe: dict | None = None
    lossless: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The verdict as ``summary.json`` holds it (plain values)."""
        return {**asdict(self), "comparisons": [Comparison.of(c).to_dict() for c in self.comparisons]}


def is_failure(kind: str) -> bool:
    """A profile that did not run to a loop-rate verdict: ``launch-failed:*``, ``crashed:*``, ``hung:*``."""
    return kind.startswith(FAILURE_PREFIXES)


def launch_failed(profile: str, cause: str, hint: str, *, after_ready: bool = False) -> Verdict:
    """Verdict for a profile whose server failed, the hint as evidence: ``launch-failed:<cause>`` when it
    never became ready; after it was ready, ``hung:<cause>`` for a stall or watchdog cause
    (:data:`HANG_CAUSES`), else ``crashed:<cause>``."""
    prefix = "launch-failed"
    if after_ready:
        prefix = "hung" if cause in HANG_CAUSES else "crashed"
    return Verdict(profile=profile, kind=f"{prefix}:{cause}", evidence=hint, p_value=None,
                   temperature=None, comparisons=[])


#: Launch failures that say nothing of the profile's flags — the host's port was taken (between two profiles:
#: another server started meanwhile), the workdir or the python were not usable, the record not writable: the
#: profile could not be tried, so the run could not be done (exit 2), never "corrupts output" (exit 1).
HOST_CAUSES = frozenset({"port_in_use", "workdir_not_private", "workdir_not_writable", "no_python",
                         "record_write_failed"})


def exit_code(verdicts: Iterable[Verdict | str]) -> int:
    """1 (``errors.EXIT_CORRUPT``) if any verdict is ``spec-corrupts-output`` or a failure (:func:`is_failure`)
    of the profile itself, else 2 (``errors.EXIT_RUN_FAILED``) if a profile could not be tried
    (``launch-failed:`` a :data:`HOST_CAUSES` cause), else 3 (``errors.EXIT_INCONCLUSIVE``) if any is
    ``inconclusive`` (a nightly in CI must not pass without evidence), else 0. ``base-model-degenerates``,
    ``spec-ineffective`` and ``spec-slower`` exit 0: they are findings, not a broken speculative decoder (the
    report shows them)."""
    kinds = [v if isinstance(v, str) else v.kind for v in verdicts]
    untried = {f"launch-failed:{c}" for c in HOST_CAUSES}
    if any(k == "spec-corrupts-output" or (is_failure(k) and k not in untried) for k in kinds):
        return EXIT_CORRUPT
    if any(k in untried for k in kinds):
        return EXIT_RUN_FAILED
    if "inconclusive" in kinds:
        return EXIT_INCONCLUSIVE
    return EXIT_HEALTHY


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _rows(spec_cells, base_cells, spec_samples, design: Design, base_samples=(),
          aa_outcomes=None) -> list[Comparison]:
    """One comparison row per temperature present in both arms; T > 0 rows carry the sequential test, with
    ``aa_outcomes`` (the A/A arm's ``(sample_index, degenerate)`` per temperature) the A/A contrast: ``p`` is
    then :func:`~.stopping.contrast_p` (``p_vs_base``, ``p_vs_aa``, ``aa_loops``/``aa_n`` beside it)."""
    base_by_t = {float(c.temperature): c for c in base_cells}
    rows = []
    for sc in sorted(spec_cells, key=lambda c: c.temperature):
        t = float(sc.temperature)
        bc = base_by_t.get(t)
        if bc is None:
            continue
        row = {
            "temperature": t, "spec_loops": sc.loops, "spec_n": sc.n, "base_loops": bc.loops, "base_n": bc.n,
            "spec_loop_rate": sc.loop_rate, "base_loop_rate": bc.loop_rate, "spec_loop_ci": list(sc.loop_ci),
            "base_loop_ci": list(bc.loop_ci), "spec_near_loops": sc.near_loops, "base_near_loops": bc.near_loops,
            "speed_ratio": _ratio(sc.tokens_per_s, bc.tokens_per_s),
            "speed_ratio_nonloop": _ratio(sc.tokens_per_s_nonloop, bc.tokens_per_s_nonloop),
            "accept_length": sc.accept_length, "accept_length_nonloop": sc.accept_length_nonloop,
            "in_family": t > 0,
        }
        if t > 0:
            outcomes = [(s.sample_index, s.is_degenerate) for s in spec_samples
                        if s.ok and float(s.temperature) == t]
            looks = look_counts(outcomes, design) if outcomes else {design.looks()[-1]: (sc.loops, sc.n)}
            base_out = [(s.sample_index, s.is_degenerate) for s in base_samples if s.ok and float(s.temperature) == t]
            base = stage_counts(base_out, design) if base_out else {design.stage_end(design.looks()[-1]): (bc.loops, bc.n)}
            test = sequential_test(looks, base, None, design)
            relaunch = (aa_outcomes or {}).get(t)
            if relaunch:
                t_aa = sequential_test(looks, stage_counts(list(relaunch), design), None, design)
                row.update(p_vs_base=test.p_value, p_vs_aa=t_aa.p_value, aa_loops=sum(d for _, d in relaunch),
                           aa_n=len(relaunch))
            row.update(p=contrast_p(test, t_aa if relaunch else None), p_look=test.look, bound=test.bound, bound_look=test.bound_look,
                       bound_confidence=1 - design.alpha_bound,
                       samples_needed=samples_needed(sc.loops, sc.n, bc.loops, bc.n, alpha=design.alpha_cell,
                                                     margin=design.margin, bound_alpha=design.next_bound_alpha))
        else:  # greedy: loop counts reported, not tested (the greedy lossless test judges T = 0)
            row.update(p=None, p_look=None, bound=None, bound_look=None, samples_needed=None)
        rows.append(Comparison.model_validate(row))
    return rows


def _warnings(spec_cells, rows) -> list[str]:
    out = []
    for c in spec_cells:
        if c.loops and c.accept_length and c.accept_length_nonloop and \
                c.accept_length >= INFLATED_ACCEPT * c.accept_length_nonloop:
            out.append(f"T={fmt_t(c.temperature)}: acceptance {c.accept_length:.2f} is inflated by loops "
                       f"({c.loops}/{c.n}); non-looping samples: {c.accept_length_nonloop:.2f}")
        elif c.loops and c.accept_length and c.accept_length_nonloop is None:
            out.append(f"T={fmt_t(c.temperature)}: acceptance {c.accept_length:.2f} comes from looping samples "
                       f"only ({c.loops}/{c.n})")
    for r in rows:
        if r.spec_loops > r.base_loops and (r.speed_ratio or 0) > (r.speed_ratio_nonloop or 0) > 0:
            out.append(f"T={fmt_t(r.temperature)}: tokens/s ratio {r.speed_ratio:.2f} is inflated by "
                       f"loops; non-looping samples: {r.speed_ratio_nonloop:.2f}")
    return out


def _speed(spec_cells, base_cells, spec_samples, base_samples) -> tuple[float | None, tuple | None]:
    """Pooled non-degenerate tokens/s ratio spec/base and its bootstrap interval (when samples are given)."""
    a = [s.tokens_per_s for s in spec_samples if s.ok and not s.is_degenerate and s.tokens_per_s is not None]
    b = [s.tokens_per_s for s in base_samples if s.ok and not s.is_degenerate and s.tokens_per_s is not None]
    ci = ratio_ci(a, b)
    if ci is not None:
        return ci[0], ci
    ratios = [_ratio(s.tokens_per_s_nonloop, b.tokens_per_s_nonloop)
              for s in spec_cells for b in base_cells if b.temperature == s.temperature]
    return mean_of(ratios), None


def bound_up(bound: float) -> str:
    """An excess bound as the evidence states it: rounded *up* to 0.1 point (4.31 % -> "4.4%"), so the words
    never claim more than the bound."""
    return f"{math.ceil(bound * 1000 - 1e-9) / 10:.1f}%"


def _lossless_pass(tests: Sequence[LosslessTest], alpha: float, greedy_detail: str | None) -> str | None:
    """None when every lossless test passes (``healthy`` needs it), else the phrase saying which does not:
    a test at p < ``alpha`` on its own — for greedy with an A/A arm the one-sided Fisher test of hard
    divergences against the A/A arm's (a test, not a count: issue 31) — a greedy divergence beyond a near tie
    where there is no A/A arm to judge it against (``greedy_detail``: the first such divergence, in words), or
    a mean k3 above the KL test's absolute bound even where the exceedance test is not significant (SGLang's
    own test passes only below its bound)."""
    for t in sorted(tests, key=lambda t: t.p_value):
        greedy_open = t.name == "greedy" and not t.judged and t.counts["hard"] > 0  # no floor to test against
        kl_open = t.name == "kl" and t.effect_ok  # the arm's mean k3 above the absolute bound: not lossless
        if t.p_value < alpha or greedy_open or kl_open:
            detail = f"{greedy_detail}; " if t.name == "greedy" and greedy_detail else ""
            return f"lossless check not passed: {detail}{t.evidence}"
    return None


@dataclass
class _Member:
    """A profile's lossless member of the Holm family: its p, and once adjusted its adjusted p and the family."""

    p: float
    p_adjusted: float | None = None
    family: int | None = None


@dataclass
class _Case:
    """What one profile's verdict is written from, once worked out: its comparison rows, warnings, KL probe,
    lossless tests, whether greedy went unjudged (no floor), the evidence's tail and the Holm note."""

    profile: str
    rows: list[Comparison]
    warnings: list[str]
    kl: dict | None
    lossless: list[LosslessTest]
    unfloored: bool
    tail: str
    holm_note: str

    def verdict(self, kind: str, evidence: str, row: Comparison | None = None, p: float | None = None) -> Verdict:
        """The verdict ``kind`` with ``evidence``, decided by ``row`` (its adjusted p unless ``p`` is given)."""
        if self.unfloored and NO_FLOOR not in evidence:
            evidence += f"; {NO_FLOOR}"
        return Verdict(self.profile, kind, evidence, p if p is not None else (row.p_adjusted if row else None),
                       row.temperature if row else None, self.rows, self.warnings, self.kl,
                       [t.to_dict() for t in self.lossless])

    def tested(self, r: Comparison) -> str:
        aa = (f", the larger of its tests against the baseline and against the baseline's A/A relaunch "
              f"({r.aa_loops}/{r.aa_n})" if "p_vs_aa" in r else "")
        return f"{counts_phrase(r)} (p={fmt_p(r.p_adjusted)}{aa}, {self.holm_note})"


def _judge_one(profile, spec_cells, base_cells, spec_samples, base_samples, rows: list[Comparison], design: Design,
               calibration: Calibration | None, lossless: list[LosslessTest], lossless_p: _Member | None,
               kl: dict | None) -> Verdict:
    """One profile's verdict by the rules of the module docstring, first match wins: corrupt (a loop cell or the
    lossless member below alpha), then the bounds (greedy-only: the greedy bound; else every T > 0 excess),
    then acceptance and speed."""
    near_tie = calibration.near_tie_margin if calibration else NEAR_TIE_MARGIN
    pairs = greedy_report(spec_samples, base_samples, near_tie)
    greedy, greedy_detail = greedy_phrase(pairs, rows, near_tie)
    gb = greedy_bound(pairs, (calibration.greedy_hard_prompts, calibration.greedy_prompts) if calibration else None,
                      confidence=1 - design.alpha, margin=design.greedy_margin)
    row0 = next((r for r in rows if r.temperature == 0.0), None)
    if gb is not None and row0 is not None:
        row0.greedy_bound = gb.to_dict()
    warnings = _warnings(spec_cells, rows)
    for t in lossless:
        if t.name == "kl" and not t.effect_ok and t.raw_p < design.alpha:
            warnings.append(f"KL probe: {t.evidence}: a difference from the floor, under the bound (a kernel "
                            f"difference, not corruption)")
    m = next((r.family for r in rows if "family" in r), design.family)
    if kl is not None:
        kl["flagged"] = any(t.name == "kl" and t.p_value < design.alpha for t in lossless)
    fam = [r for r in rows if r.in_family]
    note = launch_note(fam, [r for r in fam if r.p_adjusted < design.alpha], design.alpha)
    case = _Case(profile, rows, warnings, kl, lossless, any(t.name == "greedy" and not t.judged for t in lossless),
                 note + (f"; {greedy}" if greedy else ""), f"Holm over {m} test{'s' if m > 1 else ''}")
    found = _corrupt(case, design, lossless_p)
    if found is not None:
        return found
    if not rows:
        return case.verdict("inconclusive", "no temperature has both a speculative and a baseline cell")
    gate = _lossless_pass(lossless, design.alpha, greedy_detail)
    found, decisive, loops = _greedy_only(case, gb, row0, gate) if not fam else _bounded(case, fam, design, gate)
    if found is not None:
        return found
    return _by_speed(case, decisive, loops, spec_cells, base_cells, spec_samples, base_samples, calibration,
                     judge_speed=design.judge_speed)


def _corrupt(case: _Case, design: Design, lossless_p: _Member | None) -> Verdict | None:
    """``spec-corrupts-output`` when a T > 0 loop cell or the profile's lossless member is below alpha after
    Holm's adjustment, else None."""
    fam = [r for r in case.rows if r.in_family]
    corrupt = [r for r in fam if r.p_adjusted < design.alpha]
    broken = lossless_p is not None and lossless_p.p_adjusted < design.alpha
    violated = [t for t in case.lossless if t.p_value < design.alpha] if broken else []
    lossless_ev = "; ".join(f"lossless: {t.evidence}" for t in violated)
    if corrupt:
        r = min(corrupt, key=lambda r: r.p_adjusted)
        return case.verdict("spec-corrupts-output", f"loops: {case.tested(r)}" + resumed_note(design)
                            + (f"; {lossless_ev}" if violated else "") + case.tail, r)
    if broken:
        n = len(case.lossless)
        loops = "; ".join(counts_phrase(r) for r in fam)
        return case.verdict("spec-corrupts-output",
                            greedy_loops_lead(case.rows) + f"{lossless_ev} (lossless p={fmt_p(lossless_p.p_adjusted)}, "
                            f"{case.holm_note}; Bonferroni over {n} check{'s' if n > 1 else ''})"
                            + (f"; loops: {loops}" if loops else "") + case.tail,
                            min(fam, key=lambda r: r.p_adjusted) if fam else None, p=lossless_p.p_adjusted)
    return None


def _greedy_only(case: _Case, gb: GreedyBound | None, row0: Comparison | None,
                 gate: str | None) -> tuple[Verdict | None, Comparison | None, str]:
    """A plan without a T > 0 cell: the greedy bound stands in for the loop bound. ``(verdict, None, "")`` when
    it decides (inconclusive), else ``(None, the T = 0 row, the bound in words)`` for the speed rules."""
    if gb is None or row0 is None:
        return (case.verdict("inconclusive", f"no temperature above 0 was compared: loop rates cannot be bounded"
                                             f"{case.tail}"), None, "")
    row0.greedy_next = greedy_next(gb, case.lossless, gate)
    if gate is not None:
        return case.verdict("inconclusive", f"{gate}; {gb.phrase()}{case.tail}", row0), None, ""
    if not gb.closed:
        return (case.verdict("inconclusive", f"{gb.phrase()} (healthy needs it below {gb.margin:.0%}); "
                                             f"{greedy_need(gb)}{case.tail}", row0), None, "")
    return None, row0, gb.phrase()


def _bounded(case: _Case, fam: list[Comparison], design: Design,
             gate: str | None) -> tuple[Verdict | None, Comparison | None, str]:
    """The T > 0 cells' excess bounds: ``base-model-degenerates`` or ``inconclusive`` when they decide, else
    ``(None, the decisive row, the loops in words)`` for the speed rules."""
    conf = f"{(1 - design.alpha_bound) * 100:.4g}%"
    open_ = [r for r in fam if r.bound >= design.margin]
    worst = max(open_, key=lambda r: r.bound) if open_ else None
    degenerate = [r for r in fam if r.base_loops >= 2 and r.base_loop_rate >= BASE_DEGENERATE_RATE]

    def excess(r: Comparison) -> str:
        return f"{counts_phrase(r)}: no large excess detected; loop excess up to {bound_up(r.bound)} not ruled out"

    if degenerate:
        r = max(degenerate, key=lambda r: r.base_loop_rate)
        if worst is None and gate is None:
            return case.verdict("base-model-degenerates",
                                f"the baseline loops too: {counts_phrase(r)}; no speculative loop excess above "
                                f"{bound_up(max(x.bound for x in fam))} at {conf} (margin {design.margin:.0%})"
                                f"{case.tail}", r), None, ""
        if worst is not None:
            return case.verdict("inconclusive", f"the baseline loops too, but {excess(worst)} (margin "
                                f"{design.margin:.0%}); {need_phrase(worst, design)}{case.tail}", worst), None, ""
    if worst is not None:
        return case.verdict("inconclusive", f"{excess(worst)} (healthy needs it below {design.margin:.0%}); "
                            f"{need_phrase(worst, design)}" + (f"; {gate}" if gate else "") + case.tail, worst), None, ""
    if gate is not None:
        return case.verdict("inconclusive", f"{gate}; loop rates: " + "; ".join(counts_phrase(r) for r in fam)
                            + case.tail, min(fam, key=lambda r: r.p_adjusted)), None, ""
    decisive = max(fam, key=lambda r: r.bound)
    return None, decisive, f"{counts_phrase(decisive)}, no loop excess above {bound_up(decisive.bound)} at {conf}"


def _by_speed(case: _Case, decisive: Comparison, loops: str, spec_cells, base_cells, spec_samples, base_samples,
              calibration: Calibration | None, *, judge_speed: bool = True) -> Verdict:
    """Once no loop or lossless rule decided: ``spec-ineffective``, ``spec-slower`` or ``healthy`` by acceptance
    and the tokens/s ratio (against the host's run-to-run spread when calibrated); with ``judge_speed`` false
    (``compare.judge_speed``) the ratio is given, marked not judged, and never makes ``spec-slower``."""
    accepts = [c.accept_length_nonloop for c in spec_cells if c.accept_length_nonloop is not None]
    accept = mean_of(accepts)
    ratio, ci = _speed(spec_cells, base_cells, spec_samples, base_samples)
    spread = calibration.speed_spread if calibration else 0.0
    speed = ""
    if ratio is not None:
        speed = f"tokens/s {ratio:.2f}x baseline" + (f" (95% CI {ci[1]:.2f}-{ci[2]:.2f})" if ci else "")
        if spread:
            speed += f", run-to-run spread ±{spread:.0%}"
        if not judge_speed:
            speed += " (not judged: compare.judge_speed is false)"
    if any(t.judged for t in case.lossless):
        loops += "; lossless checks passed (" + ", ".join(t.name for t in case.lossless if t.judged) + ")"
    if accept is not None and accept <= INEFFECTIVE_ACCEPT:
        return case.verdict("spec-ineffective", f"acceptance length {accept:.2f} (about 1: drafts are rejected)"
                            + (f"; {speed}" if speed else "") + f"; {loops}", decisive)
    limit = math.exp(-spread)
    if judge_speed and ratio is not None and ((ci is not None and ci[2] < limit)
                                              or (ci is None and ratio < SLOWER_RATIO * limit)):
        return case.verdict("spec-slower", f"{speed}; {loops}" + (f"; acceptance {accept:.2f}" if accept is not None
                                                                  else ""), decisive)
    parts = [loops]
    if accept is not None:
        parts.append(f"acceptance {accept:.2f}")
    if speed:
        parts.append(speed)
    return case.verdict("healthy", "; ".join(parts) + case.tail, decisive)


def lossless_planned(temperatures: Sequence[float], *, kl_probe: bool, expected_answers: bool) -> bool:
    """Whether a run of this plan has lossless evidence (a T = 0 cell, the KL probe, or expected answers): each
    speculative profile then adds one lossless member to the Holm family (``diagnosis.design_of``)."""
    return any(float(t) == 0 for t in temperatures) or kl_probe or expected_answers


def judge_all(spec: Mapping[str, tuple[Sequence[CellSummary], Sequence[SampleObs]]],
              base_cells: Sequence[CellSummary], base_samples: Sequence[SampleObs] = (), *,
              design: Design | None = None, calibration: Calibration | None = None) -> dict[str, Verdict]:
    """Verdicts on every speculative profile (``spec``: profile -> (cells, samples)) against the baseline.

    Cells are matched by temperature (spec cells without a baseline cell at theirs are ignored). All samples
    of each arm count (unpaired); ``design`` is the one the runner stopped sampling with (default: one look at
    the end, ``alpha`` 0.05, margin 5 points); its ``family`` is raised to the number of tests judged here
    when smaller: every (profile, T > 0) loop cell plus one lossless member per profile with lossless
    evidence (``lossless.lossless_member``), Holm-adjusted together. Samples enable the sequential looks
    (by ``sample_index``), the lossless tests, bootstrap speed intervals. ``calibration``: the host's noise
    floors (A/A arm)."""
    design = design or Design()
    near_tie = calibration.near_tie_margin if calibration else NEAR_TIE_MARGIN
    checks = {name: lossless_tests(list(samples), list(base_samples), calibration, near_tie)
              for name, (_, samples) in spec.items()}
    members = {name: lossless_member(tests) for name, (tests, _) in checks.items()}
    base_t = {float(c.temperature) for c in base_cells}
    n_family = sum(1 for cells, _ in spec.values() for c in cells if c.temperature > 0 and c.temperature in base_t)
    n_family += sum(p is not None for p in members.values())
    design = replace(design, family=max(design.family, n_family))
    aa = calibration.aa_outcomes if calibration else None
    per = {name: _rows(cells, base_cells, samples, design, base_samples, aa) for name, (cells, samples) in spec.items()}
    family = [r for rows in per.values() for r in rows if r.in_family]
    lossless_rows = {name: _Member(p) for name, p in members.items() if p is not None}
    everything = family + list(lossless_rows.values())
    for r, a in zip(everything, holm([r.p for r in everything])):
        r.p_adjusted = a
        r.family = len(everything)
    for rows in per.values():
        for r in rows:
            if "p_adjusted" not in r:
                r.p_adjusted = r.p
    return {name: _judge_one(name, list(spec[name][0]), list(base_cells), list(spec[name][1]), base_samples,
                             per[name], design, calibration, checks[name][0], lossless_rows.get(name),
                             checks[name][1]) for name in spec}


def judge(profile: str, spec_cells: Sequence[CellSummary], base_cells: Sequence[CellSummary], *,
          spec_samples: Sequence[SampleObs] = (), base_samples: Sequence[SampleObs] = (),
          design: Design | None = None, calibration: Calibration | None = None) -> Verdict:
    """The verdict on one speculative profile (:func:`judge_all` with a family of this profile's cells)."""
    return judge_all({profile: (spec_cells, spec_samples)}, base_cells, base_samples, design=design,
                     calibration=calibration)[profile]
