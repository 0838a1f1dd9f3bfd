"""Cells to verdicts: per-cell summaries and one verdict per speculative profile, with its evidence.

The runner hands one :class:`SampleObs` per request; :func:`summarize_cell` pools a (profile, temperature)
cell into a :class:`CellSummary`; :func:`judge` compares a speculative profile's cells with the baseline's
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
from .degeneracy import TextMetrics
from .pairing import greedy_report, pair_samples
from .stats import fisher_loops, holm, ratio_ci, samples_needed, wilson_interval

BASE_DEGENERATE_RATE = 0.25
MIN_SAMPLES = 4
SUGGESTIVE_EXCESS = 0.10
INEFFECTIVE_ACCEPT = 1.2
SLOWER_RATIO = 0.95
INFLATED_ACCEPT = 1.10  # warn when acceptance over all samples exceeds the non-looping one by this factor

KINDS = ("spec-corrupts-output", "base-model-degenerates", "healthy", "spec-ineffective", "spec-slower",
         "inconclusive", "launch-failed:<cause>")


@dataclass
class SampleObs:
    """What the runner hands over for one request.

    ``metrics`` is None when the request failed (then ``error`` says why). ``latency_s``: wall seconds for
    the whole request. ``spec_verify_ct``: verify steps reported by a speculative server (None otherwise).
    ``output_ids``/``text``: the output, used for the greedy comparison at T=0 (ids preferred).
    """

    profile: str
    temperature: float
    prompt_id: str
    sample_index: int
    seed: int | None
    metrics: TextMetrics | None
    finish_reason: str | None
    completion_tokens: int
    latency_s: float
    spec_verify_ct: int | None
    output_ids: list[int] | None = None
    error: str | None = None
    text: str | None = None

    @property
    def ok(self) -> bool:
        return self.metrics is not None and self.error is None

    @property
    def is_loop(self) -> bool:
        return bool(self.metrics is not None and self.metrics.is_loop)

    @property
    def tokens_per_s(self) -> float | None:
        """completion_tokens / latency_s, None for failed requests or a non-positive latency."""
        if not self.ok or self.latency_s <= 0:
            return None
        return self.completion_tokens / self.latency_s

    @property
    def accept_length(self) -> float | None:
        """Per-request acceptance length as SGLang computes it: completion_tokens / spec_verify_ct."""
        if not self.ok or not self.spec_verify_ct:
            return None
        return self.completion_tokens / self.spec_verify_ct


@dataclass
class CellSummary:
    """One (profile, temperature) cell, all prompts pooled.

    ``n``: analysed samples (failed requests excluded, counted in ``n_errors``). ``loop_ci``: 95 % Wilson
    interval. ``accept_length``: sum(completion_tokens) / sum(spec_verify_ct) (token-weighted, as SGLang's
    server-wide figure); ``*_nonloop``: the same over non-looping samples. ``tokens_per_s``: mean of the
    per-sample completion_tokens / latency_s. Rates are in [0, 1]; None where undefined.
    """

    profile: str
    temperature: float
    speculative: bool
    n: int
    n_errors: int
    loops: int
    loop_rate: float
    loop_ci: tuple[float, float]
    accept_length: float | None
    accept_length_nonloop: float | None
    tokens_per_s: float | None
    tokens_per_s_nonloop: float | None
    think_closed_rate: float | None
    finish_length_rate: float
    mean_completion_tokens: float
    steps_per_s: float | None = None
    mean_seq_rep_4: float | None = None
    loop_onsets: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _accept(samples: Sequence[SampleObs]) -> float | None:
    rows = [s for s in samples if s.spec_verify_ct]
    if not rows:
        return None
    return sum(s.completion_tokens for s in rows) / sum(s.spec_verify_ct for s in rows)


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarize_cell(profile: str, temperature: float, speculative: bool,
                   samples: Sequence[SampleObs]) -> CellSummary:
    """Pool one cell's samples (any prompts) into a :class:`CellSummary`; never raises on empty input."""
    ok = [s for s in samples if s.ok]
    n = len(ok)
    loops = sum(s.is_loop for s in ok)
    clean = [s for s in ok if not s.is_loop]
    think = [s.metrics.think_closed for s in ok if s.metrics.think_closed is not None]
    steps = _mean(s.spec_verify_ct / s.latency_s for s in ok if s.spec_verify_ct and s.latency_s > 0)
    return CellSummary(
        profile=profile, temperature=float(temperature), speculative=speculative, n=n,
        n_errors=len(samples) - n, loops=loops, loop_rate=loops / n if n else 0.0,
        loop_ci=wilson_interval(loops, n),
        accept_length=_accept(ok) if speculative else None,
        accept_length_nonloop=_accept(clean) if speculative else None,
        tokens_per_s=_mean(s.tokens_per_s for s in ok),
        tokens_per_s_nonloop=_mean(s.tokens_per_s for s in clean),
        think_closed_rate=sum(think) / len(think) if think else None,
        finish_length_rate=sum(s.finish_reason == "length" for s in ok) / n if n else 0.0,
        mean_completion_tokens=sum(s.completion_tokens for s in ok) / n if n else 0.0,
        steps_per_s=steps if speculative else None,
        mean_seq_rep_4=_mean(s.metrics.seq_rep_4 for s in ok),
        loop_onsets=[s.metrics.loop.start_token for s in ok if s.metrics.loop],
    )


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
    first = min(g.divergence.first_index for g in diverged)
    return f"greedy output diverges at token {first} ({len(diverged)}/{len(pairs)} prompts)"


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
    """Pooled non-looping tokens/s ratio spec/base and its bootstrap interval (when samples are given)."""
    a = [s.tokens_per_s for s in spec_samples if s.ok and not s.is_loop and s.tokens_per_s is not None]
    b = [s.tokens_per_s for s in base_samples if s.ok and not s.is_loop and s.tokens_per_s is not None]
    ci = ratio_ci(a, b)
    if ci is not None:
        return ci[0], ci
    ratios = [_ratio(s.tokens_per_s_nonloop, b.tokens_per_s_nonloop)
              for s in spec_cells for b in base_cells if b.temperature == s.temperature]
    return _mean(ratios), None


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
    warnings += _warnings(spec_cells, rows)
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
    small = [r for r in rows if min(r["spec_n"], r["base_n"]) < MIN_SAMPLES]
    open_ = [r for r in rows if r["spec_loop_rate"] - r["base_loop_rate"] >= SUGGESTIVE_EXCESS]
    if small or open_:
        r = (open_ or small)[0]
        need = r["samples_needed"]
        more = (f"about {need} samples per arm would decide" if need else
                f"at least {MIN_SAMPLES} samples per arm are needed")
        return verdict("inconclusive", f"{loops_of(r)} is not conclusive; {more}{tail}", r)
    decisive = min(rows, key=lambda r: r["p_adjusted"])
    accepts = [c.accept_length_nonloop for c in spec_cells if c.accept_length_nonloop is not None]
    accept = _mean(accepts)
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
