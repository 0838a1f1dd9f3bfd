"""Cells to verdicts: one verdict per speculative profile, with its evidence, by the rule that stopped sampling.

The runner hands one :class:`SampleObs` per request; :func:`summarize_cell` pools a (profile, temperature)
cell into a :class:`CellSummary` (both in ``cells.py``); :func:`judge_all` judges every
speculative profile against the baseline with the group-sequential rule of ``stopping.py`` (the same code the
runner's early stopping calls) and returns one :class:`Verdict` each. A sample counts as *degenerate* when it
loops, or when it was cut at ``max_tokens`` inside a near loop. Rules, first match wins (``docs/metrics.md``):

1. ``spec-corrupts-output``: a temperature > 0 cell whose sequential p-value (unpaired one-sided Fisher on all
   samples of each arm, alpha spent over the looks), Holm-adjusted over every (speculative profile,
   temperature > 0) cell of the run, is below ``alpha``. A cell the stop rule settled as "spec loops more"
   always ends here.
2. ``base-model-degenerates``: the baseline loops in at least :data:`BASE_DEGENERATE_RATE` of a T > 0 cell (and
   at least 2 samples) *and* the speculative excess is bounded below the margin in every T > 0 cell.
3. ``inconclusive``: the excess is not bounded below the margin ("no large excess detected; up to X % not
   ruled out"), no temperature above 0 was compared, or the greedy gate (T = 0) failed; the evidence gives
   the samples per arm that would decide (``stats.samples_needed`` at the adjusted alpha).
4. ``spec-ineffective``: acceptance length (non-degenerate samples) at most :data:`INEFFECTIVE_ACCEPT`.
5. ``spec-slower``: the bootstrap interval of the non-degenerate tokens/s ratio lies below 1 (below the host's
   run-to-run spread when calibrated); without samples, a point ratio below :data:`SLOWER_RATIO`.
6. ``healthy`` otherwise: every T > 0 excess bounded below the margin and the greedy gate passed.

T = 0 is gatekeeping evidence outside the Holm family: a greedy output that loops where the baseline's does
not, or diverges from it where the baseline's top-2 margin is not a near tie, keeps a profile from
``healthy``. A server that crashed or hung after it was ready is ``crashed:<cause>`` / ``hung:<cause>``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from ..errors import EXIT_CORRUPT, EXIT_HEALTHY
from .cells import CellSummary, SampleObs, mean_of
from .divergence import NEAR_TIE_MARGIN, Calibration, calibrate, kl_gap
from .pairing import greedy_report
from .stats import fisher_loops, holm, ratio_ci, samples_needed
from .stopping import Design, look_counts, sequential_test

__all__ = ["FAILURE_PREFIXES", "KINDS", "Verdict", "exit_code", "is_failure", "judge", "judge_all", "launch_failed",
           "measure_calibration"]

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

    ``p_value``/``temperature``: the deciding comparison (Holm-adjusted sequential p). ``comparisons``: one
    dict per temperature (spec/base degenerate counts and n, p, adjusted p, excess bound, samples needed,
    speed ratio, acceptance, greedy divergence). ``kl_probe``: the KL probe against its floor when both
    sides had two probed samples (``divergence.KlGap`` as a dict, plus ``floor_source``: ``"calibration"``
    for the A/A arm's floor, ``"baseline"`` otherwise).
    """

    profile: str
    kind: str
    evidence: str
    p_value: float | None
    temperature: float | None
    comparisons: list[dict]
    warnings: list[str] = field(default_factory=list)
    kl_probe: dict | None = None

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


def exit_code(verdicts: Iterable[Verdict | str]) -> int:
    """1 (``errors.EXIT_CORRUPT``) if any verdict is ``spec-corrupts-output`` or a failure (:func:`is_failure`),
    else 0. ``base-model-degenerates``, ``inconclusive``, ``spec-ineffective`` and ``spec-slower`` exit 0: they
    are findings, not a broken speculative decoder (the report shows them)."""
    for v in verdicts:
        kind = v if isinstance(v, str) else v.kind
        if kind == "spec-corrupts-output" or is_failure(kind):
            return EXIT_CORRUPT
    return EXIT_HEALTHY


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def _fmt_t(t: float) -> str:
    return f"{t:g}"


def _rows(spec_cells, base_cells, spec_samples, design: Design) -> list[dict]:
    """One comparison row per temperature present in both arms; T > 0 rows carry the sequential test."""
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
            test = sequential_test(looks, bc.loops, bc.n, design)
            row.update(p=test.p_value, p_look=test.look, bound=test.bound, bound_look=test.bound_look,
                       samples_needed=samples_needed(sc.loops, sc.n, bc.loops, bc.n, alpha=design.alpha_cell,
                                                     margin=design.margin))
        else:  # greedy: reported, not tested (gatekeeping evidence)
            row.update(p=fisher_loops(sc.loops, sc.n, bc.loops, bc.n), p_look=None, bound=None,
                       bound_look=None, samples_needed=None)
        rows.append(row)
    return rows


def _greedy(spec_samples, base_samples, rows, near_tie_margin: float) -> tuple[str, str | None]:
    """(evidence phrase, reason the T = 0 gate fails or None)."""
    pairs = greedy_report(spec_samples, base_samples, near_tie_margin)
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
                f"baseline's top-2 margin is {g.margin:.2f} nats (not a near tie, < {near_tie_margin:.2g})")
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


def _kl_probe(spec_cells, base_cells, spec_samples, base_samples, calibration) -> tuple[dict | None, list[str]]:
    """The KL probe (``Verdict.kl_probe``) and its warning when flagged. Per-sample k3 when samples are given
    (else cell means); the floor is the calibration's when measured."""
    spec = [s.kl_k3 for s in spec_samples if s.ok and s.kl_k3 is not None]
    base = [s.kl_k3 for s in base_samples if s.ok and s.kl_k3 is not None]
    if not spec_samples:
        spec = [c.mean_kl_k3 for c in spec_cells if c.mean_kl_k3 is not None]
        base = [c.mean_kl_k3 for c in base_cells if c.mean_kl_k3 is not None]
    calibrated = bool(calibration and calibration.kl_floor)
    gap = kl_gap(spec, list(calibration.kl_floor) if calibrated else base)
    if gap is None:
        return None, []
    probe = {**asdict(gap), "floor_source": "calibration" if calibrated else "baseline"}
    if gap.flagged:
        return probe, [(f"KL probe: mean k3 {gap.mean:.3g} vs floor {gap.floor_mean:.3g} nats/token "
                        f"(more than 3 standard errors above): speculative tokens are less likely under a clean "
                        f"prefill")]
    return probe, []


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


def _need(r: dict, design: Design) -> str:
    n = r.get("samples_needed")
    if n:
        return f"about {n} samples per arm would decide"
    return (f"an excess this close to the {design.margin:.0%} margin needs more than 100000 samples per arm; "
            f"raise compare.margin or accept the finding")


def _judge_one(profile, spec_cells, base_cells, spec_samples, base_samples, rows, design: Design,
               calibration: Calibration | None) -> Verdict:
    near_tie = calibration.near_tie_margin if calibration else NEAR_TIE_MARGIN
    greedy, gate = _greedy(spec_samples, base_samples, rows, near_tie)
    kl, kl_warning = _kl_probe(spec_cells, base_cells, spec_samples, base_samples, calibration)
    warnings = _warnings(spec_cells, rows) + kl_warning
    tail = f"; {greedy}" if greedy else ""
    m = next((r["family"] for r in rows if "family" in r), design.family)

    def verdict(kind, evidence, row=None):
        return Verdict(profile, kind, evidence, row.get("p_adjusted") if row else None,
                       row["temperature"] if row else None, rows, warnings, kl)

    def tested(r):
        return f"{_counts(r)} (p={_fmt_p(r['p_adjusted'])}, Holm over {m} cell{'s' if m > 1 else ''})"

    def excess(r):
        return f"{_counts(r)}: no large excess detected; up to {r['bound']:.0%} not ruled out"

    if not rows:
        return verdict("inconclusive", "no temperature has both a speculative and a baseline cell")
    fam = [r for r in rows if r["in_family"]]
    corrupt = [r for r in fam if r["p_adjusted"] < design.alpha]
    if corrupt:
        r = min(corrupt, key=lambda r: r["p_adjusted"])
        return verdict("spec-corrupts-output", f"loops: {tested(r)}{tail}", r)
    if not fam:
        return verdict("inconclusive", f"no temperature above 0 was compared: loop rates cannot be bounded{tail}")
    open_ = [r for r in fam if r["bound"] >= design.margin]
    worst = max(open_, key=lambda r: r["bound"]) if open_ else None
    degenerate = [r for r in fam if r["base_loops"] >= 2 and r["base_loop_rate"] >= BASE_DEGENERATE_RATE]
    if degenerate:
        r = max(degenerate, key=lambda r: r["base_loop_rate"])
        if worst is None and gate is None:
            return verdict("base-model-degenerates",
                           f"the baseline loops too: {_counts(r)}; the speculative excess is below "
                           f"{max(x['bound'] for x in fam):.0%} (margin {design.margin:.0%}){tail}", r)
        if worst is not None:
            return verdict("inconclusive", f"the baseline loops too, but {excess(worst)} (margin "
                           f"{design.margin:.0%}); {_need(worst, design)}{tail}", worst)
    if worst is not None:
        return verdict("inconclusive", f"{excess(worst)} (healthy needs it below {design.margin:.0%}); "
                       f"{_need(worst, design)}{tail}", worst)
    if gate is not None:
        return verdict("inconclusive", f"{gate}; loop rates: " + "; ".join(_counts(r) for r in fam),
                       min(fam, key=lambda r: r["p_adjusted"]))
    decisive = max(fam, key=lambda r: r["bound"])
    bound = f"excess below {decisive['bound']:.0%}"
    accepts = [c.accept_length_nonloop for c in spec_cells if c.accept_length_nonloop is not None]
    accept = mean_of(accepts)
    ratio, ci = _speed(spec_cells, base_cells, spec_samples, base_samples)
    spread = calibration.speed_spread if calibration else 0.0
    speed = ""
    if ratio is not None:
        speed = f"tokens/s {ratio:.2f}x baseline" + (f" (95% CI {ci[1]:.2f}-{ci[2]:.2f})" if ci else "")
        if spread:
            speed += f", run-to-run spread ±{spread:.0%}"
    loops = f"{_counts(decisive)}, {bound}"
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


def judge_all(spec: Mapping[str, tuple[Sequence[CellSummary], Sequence[SampleObs]]],
              base_cells: Sequence[CellSummary], base_samples: Sequence[SampleObs] = (), *,
              design: Design | None = None, calibration: Calibration | None = None) -> dict[str, Verdict]:
    """Verdicts on every speculative profile (``spec``: profile -> (cells, samples)) against the baseline.

    Cells are matched by temperature (spec cells without a baseline cell at theirs are ignored). All samples
    of each arm count (unpaired); ``design`` is the one the runner stopped sampling with (default: one look at
    the end, ``alpha`` 0.05, margin 5 points); its ``family`` is raised to the number of T > 0 cells judged
    here when smaller. Samples enable the sequential looks (by ``sample_index``), the greedy gate, bootstrap
    speed intervals and per-sample KL. ``calibration``: the host's noise floors (A/A arm)."""
    design = design or Design()
    base_t = {float(c.temperature) for c in base_cells}
    n_family = sum(1 for cells, _ in spec.values() for c in cells if c.temperature > 0 and c.temperature in base_t)
    design = replace(design, family=max(design.family, n_family))
    per = {name: _rows(cells, base_cells, samples, design) for name, (cells, samples) in spec.items()}
    family = [r for rows in per.values() for r in rows if r["in_family"]]
    for r, a in zip(family, holm([r["p"] for r in family])):
        r["p_adjusted"] = a
        r["family"] = len(family)
    for rows in per.values():
        for r in rows:
            r.setdefault("p_adjusted", r["p"])
    return {name: _judge_one(name, list(spec[name][0]), list(base_cells), list(spec[name][1]), base_samples,
                             per[name], design, calibration) for name in spec}


def measure_calibration(base_samples: Sequence[SampleObs], aa_samples: Sequence[SampleObs]) -> Calibration:
    """This host's noise floors from the baseline and its A/A relaunch (``compare.calibration``): greedy
    pairs that diverge and the baseline's top-2 margins where they flip, per-sample k3 of both arms, and
    the A/A over baseline tokens/s ratio over non-degenerate samples (``divergence.calibrate``)."""
    pairs = greedy_report(aa_samples, base_samples, NEAR_TIE_MARGIN)
    diverged = [g for g in pairs if not g.divergence.identical]
    flips = [g.margin for g in diverged if g.margin is not None]
    kl = [s.kl_k3 for s in [*base_samples, *aa_samples] if s.ok and s.kl_k3 is not None]

    def speed(samples):
        return mean_of(s.tokens_per_s for s in samples if s.ok and not s.is_degenerate)

    return calibrate(flips, len(pairs), len(diverged), kl, _ratio(speed(aa_samples), speed(base_samples)))


def judge(profile: str, spec_cells: Sequence[CellSummary], base_cells: Sequence[CellSummary], *,
          spec_samples: Sequence[SampleObs] = (), base_samples: Sequence[SampleObs] = (),
          design: Design | None = None, calibration: Calibration | None = None) -> Verdict:
    """The verdict on one speculative profile (:func:`judge_all` with a family of this profile's cells)."""
    return judge_all({profile: (spec_cells, spec_samples)}, base_cells, base_samples, design=design,
                     calibration=calibration)[profile]
