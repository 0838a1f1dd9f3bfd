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
   run-to-run spread when calibrated); without samples, a point ratio below :data:`SLOWER_RATIO`.
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
from .cells import CellSummary, SampleObs, mean_of
from .divergence import NEAR_TIE_MARGIN, Calibration
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

    ``p_value``/``temperature``: the deciding comparison (Holm-adjusted p). ``comparisons``: one dict per
    temperature (spec/base degenerate counts and n, p, adjusted p, excess bound and its confidence, samples
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
    comparisons: list[dict]
    warnings: list[str] = field(default_factory=list)
    kl_probe: dict | None = None
    lossless: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


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


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def _fmt_t(t: float) -> str:
    return f"{t:g}"


def _rows(spec_cells, base_cells, spec_samples, design: Design, base_samples=(), aa_outcomes=None) -> list[dict]:
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
        rows.append(row)
    return rows


def _greedy_loops(rows: list[dict]) -> str:
    """The greedy cell's loops as the lead of a lossless verdict, when the speculative arm loops on more prompts
    than the baseline: ``"loops: spec 3/8 vs baseline 0/8 degenerate at T=0 (greedy: the same prompts); "``.
    Greedy loop counts are no test of their own (one output per prompt; the greedy lossless test judges T = 0),
    but they are the symptom a user looks for first; empty otherwise."""
    r = next((r for r in rows if r["temperature"] == 0.0 and r["spec_loops"] > r["base_loops"]), None)
    if r is None:
        return ""
    only = r.get("greedy_spec_only_loops")
    where = f", {only} of them where the baseline's output does not loop" if only else ""
    return f"loops: {_counts(r)} (greedy: the same prompts{where}); "


def _greedy(pairs, rows, near_tie_margin: float) -> tuple[str, str | None]:
    """(evidence phrase, the first divergence beyond a near tie in words or None) of the greedy pairs
    (``pairing.greedy_report``); fills the T = 0 row."""
    if not pairs:
        return "", None
    diverged = [g for g in pairs if not g.divergence.identical]
    spec_only_loops = [g for g in pairs if g.spec_loop_onset is not None and not g.base_loops]
    hard = [g for g in diverged if g.near_tie is False]
    ties = sum(bool(g.near_tie) for g in diverged)
    for r in rows:
        if r["temperature"] == 0.0:
            r.update(greedy_pairs=len(pairs), greedy_diverged=len(diverged), greedy_near_tie_flips=ties,
                     greedy_hard_flips=len(hard), greedy_spec_only_loops=len(spec_only_loops),
                     greedy_first_divergence=min((g.divergence.first_index for g in diverged), default=None),
                     greedy_min_lcs_ratio=min(g.divergence.lcs_ratio for g in pairs))
    if not diverged:
        return f"greedy output identical to baseline on {len(pairs)}/{len(pairs)} prompts", None
    first = min(diverged, key=lambda g: g.divergence.first_index)
    note = f"; {ties} at a near tie" if ties else ""
    phrase = (f"greedy output diverges at token {first.divergence.first_index} "
              f"({len(diverged)}/{len(pairs)} prompts{note})")
    gate = None
    if spec_only_loops:
        gate = f"greedy output loops on {len(spec_only_loops)}/{len(pairs)} prompts where the baseline's does not"
    elif hard:
        g = min(hard, key=lambda g: g.divergence.first_index)
        gate = (f"greedy output diverges at token {g.divergence.first_index} of prompt {g.prompt_id} where the "
                f"baseline's top-2 margin is {g.margin:.2f} nats (not a near tie: > {near_tie_margin:.2g})")
    return phrase, gate


def _warnings(spec_cells, rows) -> list[str]:
    out = []
    for c in spec_cells:
        if c.loops and c.accept_length and c.accept_length_nonloop and \
                c.accept_length >= INFLATED_ACCEPT * c.accept_length_nonloop:
            out.append(f"T={_fmt_t(c.temperature)}: acceptance {c.accept_length:.2f} is inflated by loops "
                       f"({c.loops}/{c.n}); non-looping samples: {c.accept_length_nonloop:.2f}")
        elif c.loops and c.accept_length and c.accept_length_nonloop is None:
            out.append(f"T={_fmt_t(c.temperature)}: acceptance {c.accept_length:.2f} comes from looping samples "
                       f"only ({c.loops}/{c.n})")
    for r in rows:
        if r["spec_loops"] > r["base_loops"] and (r["speed_ratio"] or 0) > (r["speed_ratio_nonloop"] or 0) > 0:
            out.append(f"T={_fmt_t(r['temperature'])}: tokens/s ratio {r['speed_ratio']:.2f} is inflated by "
                       f"loops; non-looping samples: {r['speed_ratio_nonloop']:.2f}")
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


def _counts(r: dict) -> str:
    return (f"spec {r['spec_loops']}/{r['spec_n']} vs baseline {r['base_loops']}/{r['base_n']} degenerate "
            f"at T={_fmt_t(r['temperature'])}")


def _launch_note(fam: list[dict], corrupt: list[dict], alpha: float) -> str:
    """The phrase for a loop excess over the baseline that the A/A contrast did not confirm (the speculative
    arm loops more than the baseline's launch but not more than its A/A relaunch): '' when there is none."""
    for r in fam:
        if r in corrupt or "p_vs_aa" not in r or not r["p"]:
            continue
        holm = r["p_adjusted"] / r["p"]
        if r["p_vs_base"] * holm < alpha:
            return (f"; the excess over the baseline (p={_fmt_p(min(1.0, r['p_vs_base'] * holm))}) is not one over "
                    f"its A/A relaunch ({r['aa_loops']}/{r['aa_n']} degenerate, p={_fmt_p(r['p_adjusted'])}): the "
                    f"baseline's two launches differ by as much, so it is not called corruption")
    return ""


def _need(r: dict, design: Design) -> str:
    n = r.get("samples_needed")
    if n:
        return f"about {n} samples per arm would decide"
    return (f"an excess this close to the {design.margin:.0%} margin needs more than 100000 samples per arm; "
            f"raise compare.margin or accept the finding")


def bound_up(bound: float) -> str:
    """An excess bound as the evidence states it: rounded *up* to 0.1 point (4.31 % -> "4.4%"), so the words
    never claim more than the bound."""
    return f"{math.ceil(bound * 1000 - 1e-9) / 10:.1f}%"


def _greedy_need(gb: GreedyBound) -> str:
    """What would close an open greedy bound, in words (the evidence's "about N samples per arm" for greedy)."""
    if gb.prompts_needed is None:
        return "no number of identical prompts closes it at this floor (raise compare.greedy_margin)"
    return (f"{gb.prompts_needed} distinct prompts with greedy output identical beyond near ties would close it "
            f"({gb.prompts_needed - gb.prompts} more than this run's {gb.prompts})" + _censored(gb))


def _censored(gb: GreedyBound) -> str:
    """The note on prompts a near-tie flip left out of the count, '' without any."""
    if not gb.censored:
        return ""
    return (f"; {gb.censored} of {gb.censored + gb.prompts} diverged at a near tie first and are not counted "
            f"(shorter greedy outputs, max_tokens, leave fewer)")


def _greedy_next(gb: GreedyBound, tests: Sequence[LosslessTest], gate: str | None) -> str | None:
    """What closes a greedy-only plan's open gate (the ``next:`` line reads it from the T = 0 row), None when
    nothing is open: an A/A arm where a hard divergence has no floor to be judged against, more distinct prompts
    where the bound is above the margin (the ``next:`` line adds the command that runs again)."""
    if gate is not None and any(t.name == "greedy" and not t.judged and t.counts["hard"] for t in tests):
        return "measure this host's floor: set `compare.calibration: true` (an A/A arm) in the playbook"
    if gate is None and not gb.closed:
        if gb.prompts_needed is None:
            return "raise `compare.greedy_margin`: no number of identical prompts closes the gate at this floor"
        return (f"give the playbook at least {gb.prompts_needed} distinct prompts ({gb.prompts_needed - gb.prompts} "
                f"more): that many with greedy output identical beyond near ties bound the per-prompt divergence "
                f"rate under {gb.margin:.0%} at {gb.confidence:.0%}{_censored(gb)}")
    return None


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


def _judge_one(profile, spec_cells, base_cells, spec_samples, base_samples, rows, design: Design,
               calibration: Calibration | None, lossless: list[LosslessTest], lossless_p: dict | None,
               kl: dict | None) -> Verdict:
    near_tie = calibration.near_tie_margin if calibration else NEAR_TIE_MARGIN
    pairs = greedy_report(spec_samples, base_samples, near_tie)
    greedy, greedy_detail = _greedy(pairs, rows, near_tie)
    gb = greedy_bound(pairs, (calibration.greedy_hard_prompts, calibration.greedy_prompts) if calibration else None,
                      confidence=1 - design.alpha, margin=design.greedy_margin)
    row0 = next((r for r in rows if r["temperature"] == 0.0), None)
    if gb is not None and row0 is not None:
        row0.update(greedy_bound=gb.to_dict())
    warnings = _warnings(spec_cells, rows)
    for t in lossless:
        if t.name == "kl" and not t.effect_ok and t.raw_p < design.alpha:
            warnings.append(f"KL probe: {t.evidence}: a difference from the floor, under the bound (a kernel "
                            f"difference, not corruption)")
    tail = f"; {greedy}" if greedy else ""
    m = next((r["family"] for r in rows if "family" in r), design.family)
    if kl is not None:
        kl["flagged"] = any(t.name == "kl" and t.p_value < design.alpha for t in lossless)
    holm_note = f"Holm over {m} test{'s' if m > 1 else ''}"

    unfloored = any(t.name == "greedy" and not t.judged for t in lossless)

    def verdict(kind, evidence, row=None, p=None):
        if unfloored and NO_FLOOR not in evidence:
            evidence += f"; {NO_FLOOR}"
        return Verdict(profile, kind, evidence, p if p is not None else (row.get("p_adjusted") if row else None),
                       row["temperature"] if row else None, rows, warnings, kl, [t.to_dict() for t in lossless])

    def tested(r):
        aa = (f", the larger of its tests against the baseline and against the baseline's A/A relaunch "
              f"({r['aa_loops']}/{r['aa_n']})" if "p_vs_aa" in r else "")
        return f"{_counts(r)} (p={_fmt_p(r['p_adjusted'])}{aa}, {holm_note})"

    def excess(r):
        return f"{_counts(r)}: no large excess detected; loop excess up to {bound_up(r['bound'])} not ruled out"

    fam = [r for r in rows if r["in_family"]]
    corrupt = [r for r in fam if r["p_adjusted"] < design.alpha]
    tail = _launch_note(fam, corrupt, design.alpha) + tail
    broken = lossless_p is not None and lossless_p["p_adjusted"] < design.alpha
    violated = [t for t in lossless if t.p_value < design.alpha] if broken else []
    lossless_ev = "; ".join(f"lossless: {t.evidence}" for t in violated)
    if corrupt:
        r = min(corrupt, key=lambda r: r["p_adjusted"])
        return verdict("spec-corrupts-output", f"loops: {tested(r)}" + (f"; {lossless_ev}" if violated else "")
                       + tail, r)
    if broken:
        loops = "; ".join(_counts(r) for r in fam)
        return verdict("spec-corrupts-output",
                       _greedy_loops(rows) + f"{lossless_ev} (lossless p={_fmt_p(lossless_p['p_adjusted'])}, {holm_note}; "
                       f"Bonferroni over {len(lossless)} check{'s' if len(lossless) > 1 else ''})"
                       + (f"; loops: {loops}" if loops else "") + tail,
                       min(fam, key=lambda r: r["p_adjusted"]) if fam else None, p=lossless_p["p_adjusted"])
    if not rows:
        return verdict("inconclusive", "no temperature has both a speculative and a baseline cell")
    gate = _lossless_pass(lossless, design.alpha, greedy_detail)
    if not fam:  # greedy only: the greedy bound stands in for the loop bound
        if gb is None or row0 is None:
            return verdict("inconclusive", f"no temperature above 0 was compared: loop rates cannot be bounded{tail}")
        row0["greedy_next"] = _greedy_next(gb, lossless, gate)
        if gate is not None:
            return verdict("inconclusive", f"{gate}; {gb.phrase()}{tail}", row0)
        if not gb.closed:
            return verdict("inconclusive", f"{gb.phrase()} (healthy needs it below {gb.margin:.0%}); "
                           f"{_greedy_need(gb)}{tail}", row0)
        decisive, loops = row0, gb.phrase()
    else:
        conf = f"{(1 - design.alpha_bound) * 100:.4g}%"
        open_ = [r for r in fam if r["bound"] >= design.margin]
        worst = max(open_, key=lambda r: r["bound"]) if open_ else None
        degenerate = [r for r in fam if r["base_loops"] >= 2 and r["base_loop_rate"] >= BASE_DEGENERATE_RATE]
        if degenerate:
            r = max(degenerate, key=lambda r: r["base_loop_rate"])
            if worst is None and gate is None:
                return verdict("base-model-degenerates",
                               f"the baseline loops too: {_counts(r)}; no speculative loop excess above "
                               f"{bound_up(max(x['bound'] for x in fam))} at {conf} (margin {design.margin:.0%})"
                               f"{tail}", r)
            if worst is not None:
                return verdict("inconclusive", f"the baseline loops too, but {excess(worst)} (margin "
                               f"{design.margin:.0%}); {_need(worst, design)}{tail}", worst)
        if worst is not None:
            return verdict("inconclusive", f"{excess(worst)} (healthy needs it below {design.margin:.0%}); "
                           f"{_need(worst, design)}" + (f"; {gate}" if gate else "") + tail, worst)
        if gate is not None:
            return verdict("inconclusive", f"{gate}; loop rates: " + "; ".join(_counts(r) for r in fam) + tail,
                           min(fam, key=lambda r: r["p_adjusted"]))
        decisive = max(fam, key=lambda r: r["bound"])
        loops = f"{_counts(decisive)}, no loop excess above {bound_up(decisive['bound'])} at {conf}"
    accepts = [c.accept_length_nonloop for c in spec_cells if c.accept_length_nonloop is not None]
    accept = mean_of(accepts)
    ratio, ci = _speed(spec_cells, base_cells, spec_samples, base_samples)
    spread = calibration.speed_spread if calibration else 0.0
    speed = ""
    if ratio is not None:
        speed = f"tokens/s {ratio:.2f}x baseline" + (f" (95% CI {ci[1]:.2f}-{ci[2]:.2f})" if ci else "")
        if spread:
            speed += f", run-to-run spread ±{spread:.0%}"
    if any(t.judged for t in lossless):
        loops += "; lossless checks passed (" + ", ".join(t.name for t in lossless if t.judged) + ")"
    if accept is not None and accept <= INEFFECTIVE_ACCEPT:
        return verdict("spec-ineffective", f"acceptance length {accept:.2f} (about 1: drafts are rejected)"
                       + (f"; {speed}" if speed else "") + f"; {loops}", decisive)
    limit = math.exp(-spread)
    if ratio is not None and ((ci is not None and ci[2] < limit) or (ci is None and ratio < SLOWER_RATIO * limit)):
        return verdict("spec-slower", f"{speed}; {loops}" + (f"; acceptance {accept:.2f}" if accept is not None
                                                             else ""), decisive)
    parts = [loops]
    if accept is not None:
        parts.append(f"acceptance {accept:.2f}")
    if speed:
        parts.append(speed)
    return verdict("healthy", "; ".join(parts) + tail, decisive)


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
    family = [r for rows in per.values() for r in rows if r["in_family"]]
    lossless_rows = {name: {"p": p} for name, p in members.items() if p is not None}
    everything = family + list(lossless_rows.values())
    for r, a in zip(everything, holm([r["p"] for r in everything])):
        r["p_adjusted"] = a
        r["family"] = len(everything)
    for rows in per.values():
        for r in rows:
            r.setdefault("p_adjusted", r["p"])
    return {name: _judge_one(name, list(spec[name][0]), list(base_cells), list(spec[name][1]), base_samples,
                             per[name], design, calibration, checks[name][0], lossless_rows.get(name),
                             checks[name][1]) for name in spec}


def judge(profile: str, spec_cells: Sequence[CellSummary], base_cells: Sequence[CellSummary], *,
          spec_samples: Sequence[SampleObs] = (), base_samples: Sequence[SampleObs] = (),
          design: Design | None = None, calibration: Calibration | None = None) -> Verdict:
    """The verdict on one speculative profile (:func:`judge_all` with a family of this profile's cells)."""
    return judge_all({profile: (spec_cells, spec_samples)}, base_cells, base_samples, design=design,
                     calibration=calibration)[profile]
