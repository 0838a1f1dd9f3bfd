"""From stored samples to cells and verdicts (pure: dicts in, analysis objects out).

Samples (lines of ``samples.jsonl``) become :class:`~mtp_remote.analysis.verdict.SampleObs`, grouped into
cells by (profile, temperature); every speculative profile is judged against the baseline's cells at the
same temperatures; a profile that did not launch gets ``launch-failed:<cause>``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .cells import CellSummary, SampleObs, summarize_cell
from .degeneracy import analyze_text
from .samples import analysed_text
from .stopping import Design
from .verdict import Verdict, judge_all, launch_failed, measure_calibration


@dataclass
class Diagnosis:
    """Cells, verdicts and — with an A/A arm — the host's calibration (``divergence.Calibration.to_dict`` plus
    ``profile``, the A/A arm's name, and ``baseline``, the arm it repeats: their cells are in ``cells``)."""

    cells: list[CellSummary]
    verdicts: list[Verdict]
    calibration: dict | None = None


def to_obs(s: dict) -> SampleObs:
    """One samples.jsonl record → SampleObs (metrics recomputed from the text when absent)."""
    metrics = None
    if s.get("error") is None:
        metrics = analyze_text(analysed_text(s.get("text") or "", bool(s.get("think_opened_by_prompt"))),
                               s.get("output_ids"))
    return SampleObs(profile=s["profile"], temperature=float(s["temperature"]), prompt_id=s["prompt_id"],
                     sample_index=int(s["sample_index"]), seed=s.get("seed"), metrics=metrics,
                     finish_reason=s.get("finish_reason"), completion_tokens=int(s.get("completion_tokens") or 0),
                     latency_s=float(s.get("latency_s") or 0.0), spec_verify_ct=s.get("spec_verify_ct"),
                     output_ids=s.get("output_ids"), error=s.get("error"), text=s.get("text"),
                     kl_k3=(s.get("kl") or {}).get("mean_k3"), top2_margins=s.get("top2_margins"))


def design_of(playbook, n_spec_profiles: int, temperature: float | None = None) -> Design:
    """The decision rule's design for a playbook (``config.Playbook``): rounds = samples per prompt at a
    temperature above 0 (``temperature`` when given), ``compare.alpha``/``margin``/``spending``, sequential
    when ``early_stop``; the family is every (speculative profile, temperature > 0) cell."""
    temps = [t for t in playbook.temperatures if t > 0]
    rounds = playbook.samples_at(temperature if temperature is not None else (temps[0] if temps else 0.0))
    cmp = playbook.compare
    return Design(rounds=rounds, alpha=cmp.alpha, margin=cmp.margin,
                  family=max(1, n_spec_profiles * len(temps)), spending=cmp.spending,
                  sequential=bool(playbook.early_stop))


def diagnose(*, baseline: str, profiles: dict[str, bool], samples: list[dict],
             launch_failures: dict[str, tuple] | None = None, alpha: float = 0.05,
             design: Design | None = None, calibration_profile: str | None = None) -> Diagnosis:
    """Cells and verdicts.

    ``profiles`` maps profile name → speculative?; ``launch_failures`` maps profile → (cause, hint) for
    profiles that did not become ready, or (cause, hint, after_ready) — ``after_ready`` True for a server
    that crashed or hung while sampling. ``design``: the decision rule the run sampled with (default: one
    look at the end at ``alpha``). ``calibration_profile``: the A/A arm (the baseline relaunched), not
    judged; it calibrates the others' verdicts."""
    launch_failures = launch_failures or {}
    by_cell: dict[tuple[str, float], list[SampleObs]] = defaultdict(list)
    for s in samples:
        if s["profile"] in profiles:
            by_cell[(s["profile"], float(s["temperature"]))].append(to_obs(s))
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
    judged = {p: ([c for c in cells if c.profile == p], [o for (q, _), obs in by_cell.items() if q == p for o in obs])
              for p in spec_profiles if p not in launch_failures}
    found = judge_all(judged, base_cells, base_samples, design=design, calibration=calibration)
    verdicts = []
    for p in spec_profiles:
        if p in launch_failures:
            cause, hint, *rest = launch_failures[p]
            verdicts.append(launch_failed(p, cause, hint, after_ready=bool(rest and rest[0])))
        else:
            verdicts.append(found[p])
    cal = {**calibration.to_dict(), "profile": calibration_profile, "baseline": baseline} if calibration else None
    return Diagnosis(cells=cells, verdicts=verdicts, calibration=cal)
