"""Cells to verdicts: per-cell summaries and one verdict per speculative profile, with its evidence.

The runner hands one :class:`SampleObs` per request; :func:`summarize_cell` pools a (profile, temperature)
cell into a :class:`CellSummary` (both defined in ``cells.py``, re-exported here); :func:`judge` compares a speculative profile's cells with the baseline's
cells at the same temperatures and returns a :class:`Verdict` whose ``evidence`` is one sentence. The rules
(thresholds are the module constants) are documented in ``docs/metrics.md``:

1. ``spec-corrupts-output``: at some temperature the spec arm loops more than its matched baseline with a
   one-sided Fisher p below ``alpha`` after Holm adjustment over the temperatures, multiplied by the number
   of speculative profiles (Bonferroni over profiles, Holm over temperatures).
2. ``base-model-degenerates``: otherwise, when the baseline itself loops in at least
   :data:`BASE_DEGENERATE_RATE` of its samples (and at least 2) at some temperature.
3. ``inconclusive``: otherwise, when a matched cell has fewer than :data:`MIN_SAMPLES` samples, or the spec
   arm loops at least :data:`SUGGESTIVE_EXCESS` more often without significance; the evidence says how many
   samples per arm a decision would need (``stats.samples_needed``).
4. ``spec-ineffective``: acceptance length (non-looping samples) at most :data:`INEFFECTIVE_ACCEPT`.
5. ``spec-slower``: spec tokens/s over non-looping samples below the baseline's (the bootstrap interval of the
   ratio entirely below 1 when samples are given, else a point ratio below :data:`SLOWER_RATIO`).
6. ``healthy`` otherwise. At T=0, paired greedy outputs that diverge are reported in the evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from ..errors import EXIT_CORRUPT, EXIT_HEALTHY
from .cells import CellSummary, SampleObs, mean_of, summarize_cell
from .divergence import kl_gap_flag
from .pairing import greedy_report, pair_samples
from .stats import fisher_loops, holm, ratio_ci, samples_needed
from .stopping import diff_upper_bound

__all__ = ["KINDS", "CellSummary", "SampleObs", "Verdict", "exit_code", "judge", "launch_failed",
           "summarize_cell"]

BASE_DEGENERATE_RATE = 0.25
MIN_SAMPLES = 4
SUGGESTIVE_EXCESS = 0.10
INEFFECTIVE_ACCEPT = 1.2
SLOWER_RATIO = 0.95
NO_EXCESS_MARGIN = 0.20  # healthy only when the one-sided upper bound of the loop-rate excess is below this
INFLATED_ACCEPT = 1.10  # warn when acceptance over all samples exceeds the non-looping one by this factor

KINDS = ("spec-corrupts-output", "base-model-degenerates", "healthy", "spec-ineffective", "spec-slower",
         "inconclusive", "launch-failed:<cause>")


@dataclass
class Verdict:
    """The verdict on one speculative profile; ``kind`` is one of :data:`KINDS`.

    ``p_value``/``temperature``: the deciding comparison (adjusted p). ``comparisons``: one dict per
    temperature (spec/base loops and n, p, adjusted p, speed ratio, acceptance, greedy divergence).
    """

    profile: str
    kind: str
    evidence: str
    p_value: float | None
    temperature: float | None
    comparisons: list[dict]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def launch_failed(profile: str, cause: str, hint: str) -> Verdict:
    """Verdict for a profile whose server never became ready: ``launch-failed:<cause>``, the hint as evidence."""
    return Verdict(profile=profile, kind=f"launch-failed:{cause}", evidence=hint, p_value=None,
                   temperature=None, comparisons=[])


def exit_code(verdicts: Iterable[Verdict | str]) -> int:
    """1 (``errors.EXIT_CORRUPT``) if any verdict is ``spec-corrupts-output`` or ``launch-failed:*``, else 0.

    ``base-model-degenerates``, ``inconclusive``, ``spec-ineffective`` and ``spec-slower`` exit 0: they are
    findings, not a broken speculative decoder (the report shows them).
    """
    for v in verdicts:
        kind = v if isinstance(v, str) else v.kind
        if kind == "spec-corrupts-output" or kind.startswith("launch-failed"):
            return EXIT_CORRUPT
    return EXIT_HEALTHY


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt_p(p: float) -> str:
    return f"{p:.2g}"


def _fmt_t(t: float) -> str:
    return f"{t:g}"


def _compare(spec_cells, base_cells, n_spec_profiles: int) -> list[dict]:
    base_by_t = {float(c.temperature): c for c in base_cells}
    rows = []
    for sc in sorted(spec_cells, key=lambda c: c.temperature):
        bc = base_by_t.get(float(sc.temperature))
        if bc is None:
            continue
        p = fisher_loops(sc.loops, sc.n, bc.loops, bc.n)
        rows.append({
            "temperature": float(sc.temperature), "spec_loops": sc.loops, "spec_n": sc.n,
            "base_loops": bc.loops, "base_n": bc.n, "spec_loop_rate": sc.loop_rate,
            "base_loop_rate": bc.loop_rate, "spec_loop_ci": list(sc.loop_ci), "base_loop_ci": list(bc.loop_ci),
            "p": p,
            "speed_ratio": _ratio(sc.tokens_per_s, bc.tokens_per_s),
            "speed_ratio_nonloop": _ratio(sc.tokens_per_s_nonloop, bc.tokens_per_s_nonloop),
            "accept_length": sc.accept_length, "accept_length_nonloop": sc.accept_length_nonloop,
            "samples_needed": samples_needed(sc.loops, sc.n, bc.loops, bc.n),
        })
    adjusted = holm([r["p"] for r in rows])
    for r, a in zip(rows, adjusted):
        r["p_adjusted"] = min(1.0, a * max(1, n_spec_profiles))
    return rows


def _greedy(spec_samples, base_samples, rows) -> str:
    pairs = greedy_report(spec_samples, base_samples)
    if not pairs:
        return ""
    diverged = [g for g in pairs if not g.divergence.identical]
    for r in rows:
        if r["temperature"] == 0.0:
            r["greedy_pairs"] = len(pairs)
            r["greedy_diverged"] = len(diverged)
            r["greedy_first_divergence"] = min((g.divergence.first_index for g in diverged), default=None)
            r["greedy_min_lcs_ratio"] = min(g.divergence.lcs_ratio for g in pairs)
    if not diverged:
        return f"greedy output identical to baseline on {len(pairs)}/{len(pairs)} prompts"
    first = min(diverged, key=lambda g: g.divergence.first_index)
    ties = sum(bool(g.near_tie) for g in diverged)
    for r in rows:
        if r["temperature"] == 0.0:
            r["greedy_near_tie_flips"] = ties
    note = f"; {ties} at a near tie" if ties else ""
    return (f"greedy output diverges at token {first.divergence.first_index} "
            f"({len(diverged)}/{len(pairs)} prompts{note})")


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


def _kl_warning(spec_cells, base_cells) -> list[str]:
    spec = [c.mean_kl_k3 for c in spec_cells if c.mean_kl_k3 is not None]
    base = [c.mean_kl_k3 for c in base_cells if c.mean_kl_k3 is not None]
    if kl_gap_flag(spec, base):
        return [(f"KL probe: mean k3 {sum(spec) / len(spec):.3g} vs baseline {sum(base) / len(base):.3g} "
                 f"nats/token: speculative tokens are less likely under a clean prefill")]
    return []


def _speed(spec_cells, base_cells, spec_samples, base_samples) -> tuple[float | None, tuple | None]:
    """Pooled non-looping tokens/s ratio spec/base and its bootstrap interval (when samples are given)."""
    a = [s.tokens_per_s for s in spec_samples if s.ok and not s.is_loop and s.tokens_per_s is not None]
    b = [s.tokens_per_s for s in base_samples if s.ok and not s.is_loop and s.tokens_per_s is not None]
    ci = ratio_ci(a, b)
    if ci is not None:
        return ci[0], ci
    ratios = [_ratio(s.tokens_per_s_nonloop, b.tokens_per_s_nonloop)
              for s in spec_cells for b in base_cells if b.temperature == s.temperature]
    return mean_of(ratios), None


def _matched(spec_cells, base_cells, spec_samples, base_samples, warnings):
    """Cells restricted to samples that pair across arms (prompt, index, seed), where some do not pair."""
    if not spec_samples or not base_samples:
        return list(spec_cells), list(base_cells)
    pairs = pair_samples(spec_samples, base_samples)
    if not pairs:
        warnings.append("no sample pairs with a baseline sample by (prompt, index, seed): pooled cells compared")
        return list(spec_cells), list(base_cells)
    by_t: dict[float, list] = {}
    for s, b in pairs:
        by_t.setdefault(float(s.temperature), []).append((s, b))
    base_by_t = {float(c.temperature): c for c in base_cells}
    spec_out, base_out = [], dict(base_by_t)
    for sc in spec_cells:
        t = float(sc.temperature)
        pp, bc = by_t.get(t), base_by_t.get(t)
        if not pp or bc is None or len(pp) == sc.n + sc.n_errors == bc.n + bc.n_errors:
            spec_out.append(sc)
            continue
        warnings.append(f"T={_fmt_t(t)}: compared on the {len(pp)} matched pairs only "
                        f"(spec {sc.n + sc.n_errors}, baseline {bc.n + bc.n_errors} samples)")
        spec_out.append(summarize_cell(sc.profile, t, sc.speculative, [s for s, _ in pp]))
        base_out[t] = summarize_cell(bc.profile, t, bc.speculative, [b for _, b in pp])
    return spec_out, list(base_out.values())


def judge(profile: str, spec_cells: Sequence[CellSummary], base_cells: Sequence[CellSummary], *,
          spec_samples: Sequence[SampleObs] = (), base_samples: Sequence[SampleObs] = (),
          alpha: float = 0.05, n_spec_profiles: int = 1) -> Verdict:
    """Verdict on one speculative profile against the baseline (rules in the module docstring).

    Cells are matched by temperature; spec cells without a baseline cell at their temperature are ignored.
    ``spec_samples``/``base_samples`` enable the greedy comparison, bootstrap speed intervals, and the
    matching rule: where some samples of a cell have no counterpart (same prompt, index, seed) in the other
    arm, both cells are recomputed from the matched pairs only (and a warning says so).
    """
    warnings: list[str] = []
    spec_cells, base_cells = _matched(spec_cells, base_cells, spec_samples, base_samples, warnings)
    rows = _compare(spec_cells, base_cells, n_spec_profiles)
    greedy = _greedy(spec_samples, base_samples, rows)
    warnings += _warnings(spec_cells, rows) + _kl_warning(spec_cells, base_cells)
    tail = f"; {greedy}" if greedy else ""

    def verdict(kind, evidence, row=None):
        return Verdict(profile, kind, evidence, row["p_adjusted"] if row else None,
                       row["temperature"] if row else None, rows, warnings)

    def loops_of(r):
        return (f"loops {r['spec_loops']}/{r['spec_n']} vs {r['base_loops']}/{r['base_n']} "
                f"at T={_fmt_t(r['temperature'])} (p={_fmt_p(r['p_adjusted'])})")

    if not rows:
        return verdict("inconclusive", "no temperature has both a speculative and a baseline cell")
    significant = [r for r in rows if r["p_adjusted"] < alpha and r["spec_loop_rate"] > r["base_loop_rate"]]
    if significant:
        r = min(significant, key=lambda r: r["p_adjusted"])
        return verdict("spec-corrupts-output", loops_of(r) + tail, r)
    degenerate = [r for r in rows if r["base_loops"] >= 2 and r["base_loop_rate"] >= BASE_DEGENERATE_RATE]
    if degenerate:
        r = max(degenerate, key=lambda r: r["base_loop_rate"])
        return verdict("base-model-degenerates", f"the baseline loops too: {loops_of(r)}{tail}", r)
    # at T=0 one greedy sample per prompt is the evidence (compared token by token), not a sample count
    small = [r for r in rows if min(r["spec_n"], r["base_n"]) < MIN_SAMPLES
             and not (r["temperature"] == 0 and r.get("greedy_pairs"))]
    open_ = [r for r in rows if r["spec_loop_rate"] - r["base_loop_rate"] >= SUGGESTIVE_EXCESS]
    if small or open_:
        r = (open_ or small)[0]
        need = r["samples_needed"]
        more = (f"about {need} samples per arm would decide" if need else
                f"at least {MIN_SAMPLES} samples per arm are needed")
        return verdict("inconclusive", f"{loops_of(r)} is not conclusive; {more}{tail}", r)
    unbounded = [(r, diff_upper_bound(r["spec_loops"], r["spec_n"], r["base_loops"], r["base_n"], 1 - alpha))
                 for r in rows if r["temperature"] > 0]
    unbounded = [(r, u) for r, u in unbounded if u >= NO_EXCESS_MARGIN]
    if unbounded:  # "no significant difference" is not "no difference": say how much cannot be ruled out
        r, u = max(unbounded, key=lambda ru: ru[1])
        return verdict("inconclusive", f"{loops_of(r)}: a loop-rate excess up to {u:.0%} cannot be ruled out "
                       f"(healthy needs it below {NO_EXCESS_MARGIN:.0%}); raise samples{tail}", r)
    decisive = min(rows, key=lambda r: (r["p_adjusted"], -min(r["spec_n"], r["base_n"])))
    accepts = [c.accept_length_nonloop for c in spec_cells if c.accept_length_nonloop is not None]
    accept = mean_of(accepts)
    ratio, ci = _speed(spec_cells, base_cells, spec_samples, base_samples)
    speed = ""
    if ratio is not None:
        speed = f"tokens/s {ratio:.2f}x baseline" + (f" (95% CI {ci[1]:.2f}-{ci[2]:.2f})" if ci else "")
    if accept is not None and accept <= INEFFECTIVE_ACCEPT:
        return verdict("spec-ineffective", f"acceptance length {accept:.2f} (about 1: drafts are rejected)"
                       + (f"; {speed}" if speed else "") + f"; {loops_of(decisive)}", decisive)
    if ratio is not None and ((ci is not None and ci[2] < 1.0) or (ci is None and ratio < SLOWER_RATIO)):
        return verdict("spec-slower", f"{speed}; {loops_of(decisive)}"
                       + (f"; acceptance {accept:.2f}" if accept is not None else ""), decisive)
    parts = [loops_of(decisive)]
    if accept is not None:
        parts.append(f"acceptance {accept:.2f}")
    if speed:
        parts.append(speed)
    return verdict("healthy", "; ".join(parts) + tail, decisive)
