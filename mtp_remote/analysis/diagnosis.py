"""From stored samples to cells and verdicts (pure: dicts in, analysis objects out).

Samples (lines of ``samples.jsonl``) become :class:`~mtp_remote.analysis.verdict.SampleObs`, grouped into
cells by (profile, temperature); every speculative profile is judged against the baseline's cells at the
same temperatures; a profile that did not launch gets ``launch-failed:<cause>``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from ..records.sample import KlProbe, Sample
from ..records.summary import DesignRecord
from .cells import CellSummary, SampleObs, summarize_cell
from .degeneracy import analyze_text
from .lossless import check_answer, measure_calibration
from .samples import analysed_text
from .stopping import Design
from .verdict import Verdict, judge_all, launch_failed, lossless_planned


@dataclass
class Diagnosis:
    """Cells, verdicts and — with an A/A arm — the host's calibration (``divergence.Calibration.to_dict`` plus
    ``profile``, the A/A arm's name, and ``baseline``, the arm it repeats: their cells are in ``cells``)."""

    cells: list[CellSummary]
    verdicts: list[Verdict]
    calibration: dict | None = None


def to_obs(s: Sample | dict, expected: str | None = None) -> SampleObs:
    """One samples.jsonl record → SampleObs (metrics recomputed from the text when absent); ``expected``: the
    prompt's expected answer (``answer_ok`` is then checked, ``lossless.check_answer``)."""
    s = Sample.of(s)
    metrics = None
    answer_ok = None
    if s.error is None:
        text = analysed_text(s.text or "", bool(s.think_opened_by_prompt))
        if expected is not None:
            answer_ok = check_answer(text, expected)
        metrics = analyze_text(text, s.output_ids)
    kl = s.kl or KlProbe()
    return SampleObs(profile=s.profile, temperature=float(s.temperature), prompt_id=s.prompt_id,
                     sample_index=int(s.sample_index), seed=s.seed, metrics=metrics, finish_reason=s.finish_reason,
                     completion_tokens=int(s.completion_tokens or 0), latency_s=float(s.latency_s or 0.0),
                     spec_verify_ct=s.spec_verify_ct, output_ids=s.output_ids, error=s.error, text=s.text,
                     kl_k3=kl.mean_k3, top2_margins=s.top2_margins, answer_ok=answer_ok, kl_max_k3=kl.max_k3,
                     kl_tokens=kl.n_tokens)


def _comparable(profile: str, temperature: float, greedy_fallback: dict[str, str]) -> bool:
    """Whether a (profile, temperature) cell is judged: not a T > 0 cell of a profile that verified greedily."""
    return not (temperature > 0 and profile in greedy_fallback)


def _not_compared_above_0(v: Verdict, line: str) -> Verdict:
    """``v`` with the reason its T > 0 cells were left out: a warning and a sentence after its evidence."""
    why = (f"T > 0 not compared: the speculative server verified its drafts greedily (its log: {line!r}), so its "
           f"T > 0 output is the target's argmax, not a sample of the baseline's distribution")
    return replace(v, evidence=f"{v.evidence}; {why}", warnings=[*v.warnings, why])


def design_of(playbook, n_spec_profiles: int, temperature: float | None = None,
              recorded: dict | None = None) -> Design:
    """The decision rule's design for a playbook (``config.Playbook``): rounds = samples per prompt at a
    temperature above 0 (``temperature`` when given), ``compare.alpha``/``margin``/``greedy_margin``/``spending``/``resumes``,
    sequential when ``early_stop``; the family is every (speculative profile, temperature > 0) cell plus one
    lossless member per speculative profile when the plan has lossless evidence. ``recorded``: the design
    the run's first launch recorded (``Design.to_dict``; a resume is a later look of it, never a new one)."""
    temps = [t for t in playbook.temperatures if t > 0]
    t = temperature if temperature is not None else (temps[0] if temps else 0.0)
    rounds = playbook.samples_at(t)
    cmp = playbook.compare
    lossless = lossless_planned(playbook.temperatures, kl_probe=bool(playbook.kl_probe),
                                expected_answers=any(p.expected is not None for p in playbook.prompts))
    design = Design(rounds=rounds, alpha=cmp.alpha, margin=cmp.margin, greedy_margin=cmp.greedy_margin,
                    family=max(1, n_spec_profiles * (len(temps) + lossless)), spending=cmp.spending,
                    sequential=bool(playbook.early_stop), resumes=cmp.resumes, judge_speed=cmp.judge_speed)
    if recorded:
        r = DesignRecord.of(recorded)
        first = (r.first_rounds_by_t or {}).get(f"{float(t):g}", r.first_rounds)
        design = replace(design, alpha=r.alpha, margin=r.margin, spending=r.spending, sequential=r.sequential,
                         resumes=r.resumes, reserve=r.reserve or design.reserve, first_rounds=first,
                         greedy_margin=r.greedy_margin if "greedy_margin" in r else design.greedy_margin)
    return design


def record_design(playbook, n_spec_profiles: int) -> dict:
    """What a first run records of its design (run.json and summary.json ``design``): ``Design.to_dict`` at the
    main temperature plus the first run's rounds per temperature."""
    d = design_of(playbook, n_spec_profiles).to_dict()
    d["first_rounds_by_t"] = {f"{float(t):g}": playbook.samples_at(t) for t in playbook.temperatures}
    return d


def diagnose(*, baseline: str, profiles: dict[str, bool], samples: list[Sample | dict],
             launch_failures: dict[str, tuple] | None = None, alpha: float = 0.05,
             design: Design | None = None, calibration_profile: str | None = None,
             expected: dict[str, str] | None = None, greedy_fallback: dict[str, str] | None = None) -> Diagnosis:
    """Cells and verdicts.

    ``profiles`` maps profile name → speculative?; ``launch_failures`` maps profile → (cause, hint) for
    profiles that did not become ready, or (cause, hint, after_ready) — ``after_ready`` True for a server
    that crashed or hung while sampling. ``design``: the decision rule the run sampled with (default: one
    look at the end at ``alpha``). ``calibration_profile``: the A/A arm (the baseline relaunched), not
    judged; it calibrates the others' verdicts. ``expected``: prompt id → expected answer (the accuracy
    check). ``greedy_fallback``: profile → the server's log line saying it verified drafts greedily at T > 0
    (``remote.logs.greedy_verification_fallback``): that profile's T > 0 cells are not judged (its output there
    is the target's argmax, not a sample of the baseline's distribution: loop rates would differ by
    construction), and its verdict says so in a warning and after its evidence."""
    expected = expected or {}
    greedy_fallback = greedy_fallback or {}
    launch_failures = launch_failures or {}
    by_cell: dict[tuple[str, float], list[SampleObs]] = defaultdict(list)
    for s in map(Sample.of, samples):
        if s.profile in profiles:
            by_cell[(s.profile, float(s.temperature))].append(to_obs(s, expected.get(s.prompt_id)))
    cells = [summarize_cell(p, t, profiles[p], obs) for (p, t), obs in sorted(
        by_cell.items(), key=lambda kv: (list(profiles).index(kv[0][0]), kv[0][1]))]
    base_cells = [c for c in cells if c.profile == baseline]
    base_samples = [o for (p, _), obs in by_cell.items() if p == baseline for o in obs]
    spec_profiles = [p for p in profiles if p not in (baseline, calibration_profile)]
    calibration = None
    if calibration_profile in profiles and calibration_profile not in launch_failures:
        aa = [o for (p, _), obs in by_cell.items() if p == calibration_profile for o in obs]
        calibration = measure_calibration(base_samples, aa) if aa else None
    design = design or Design(alpha=alpha)
    judged = {p: ([c for c in cells if c.profile == p and _comparable(p, c.temperature, greedy_fallback)],
                  [o for (q, t), obs in by_cell.items() if q == p and _comparable(p, t, greedy_fallback) for o in obs])
              for p in spec_profiles if p not in launch_failures}
    found = judge_all(judged, base_cells, base_samples, design=design, calibration=calibration)
    for p, line in greedy_fallback.items():
        if p in found and any(c.profile == p and c.temperature > 0 for c in cells):
            found[p] = _not_compared_above_0(found[p], line)
    verdicts = []
    for p in spec_profiles:
        if p in launch_failures:
            cause, hint, *rest = launch_failures[p]
            verdicts.append(launch_failed(p, cause, hint, after_ready=bool(rest and rest[0])))
        else:
            verdicts.append(found[p])
    cal = {**calibration.to_dict(), "profile": calibration_profile, "baseline": baseline} if calibration else None
    return Diagnosis(cells=cells, verdicts=verdicts, calibration=cal)
