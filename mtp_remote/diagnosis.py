"""From stored samples to cells and verdicts (pure: dicts in, analysis objects out).

Samples (lines of ``samples.jsonl``) become :class:`~mtp_remote.analysis.verdict.SampleObs`, grouped into
cells by (profile, temperature); every speculative profile is judged against the baseline's cells at the
same temperatures; a profile that did not launch gets ``launch-failed:<cause>``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .analysis.degeneracy import analyze_text
from .runner import analysed_text
from .analysis.verdict import CellSummary, SampleObs, Verdict, judge, launch_failed, summarize_cell


@dataclass
class Diagnosis:
    cells: list[CellSummary]
    verdicts: list[Verdict]


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


def diagnose(*, baseline: str, profiles: dict[str, bool], samples: list[dict],
             launch_failures: dict[str, tuple[str, str]] | None = None, alpha: float = 0.05) -> Diagnosis:
    """Cells and verdicts.

    ``profiles`` maps profile name → speculative?; ``launch_failures`` maps profile → (cause, hint) for
    profiles that did not become ready."""
    launch_failures = launch_failures or {}
    by_cell: dict[tuple[str, float], list[SampleObs]] = defaultdict(list)
    for s in samples:
        if s["profile"] in profiles:
            by_cell[(s["profile"], float(s["temperature"]))].append(to_obs(s))
    cells = [summarize_cell(p, t, profiles[p], obs) for (p, t), obs in sorted(
        by_cell.items(), key=lambda kv: (list(profiles).index(kv[0][0]), kv[0][1]))]
    base_cells = [c for c in cells if c.profile == baseline]
    base_samples = [o for (p, _), obs in by_cell.items() if p == baseline for o in obs]
    spec_profiles = [p for p in profiles if p != baseline]
    verdicts = []
    for p in spec_profiles:
        if p in launch_failures:
            cause, hint = launch_failures[p]
            verdicts.append(launch_failed(p, cause, hint))
            continue
        spec_cells = [c for c in cells if c.profile == p]
        spec_samples = [o for (q, _), obs in by_cell.items() if q == p for o in obs]
        verdicts.append(judge(p, spec_cells, base_cells, spec_samples=spec_samples, base_samples=base_samples,
                              alpha=alpha, n_spec_profiles=len(spec_profiles)))
    return Diagnosis(cells=cells, verdicts=verdicts)
