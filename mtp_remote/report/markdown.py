"""Render ``report.md`` from a summary document (and, for excerpts, the stored samples).

Renderers read documents, never the network: ``render_markdown(doc, samples)`` is pure apart from loading
its jinja2 template from the package.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from ..outside_text import fence
from ..records.sample import Sample, SampleMetrics
from ..records.summary import Calibration, Summary, aa_profile_name
from .accounting import time_split_line

EXCERPT_CHARS = 600


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def num(x, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def sig(x, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures (k3 values span 1e-6 to 1), "–" for None."""
    return "–" if x is None else f"{x:.{digits}g}"


#: One line on what the A/A arm is, shared by report.md and report.html.
AA_EXPLAINED = ("An A/A arm relaunches the baseline unchanged and samples it the same way: whatever differs between "
                "the two is this host's run-to-run noise, not speculative decoding, so it is measured, not judged, "
                "and sets the floors the verdicts must clear.")


def calibration_arms(doc: Summary | dict) -> tuple[str, str]:
    """(A/A arm, baseline) names of a calibrated summary; summaries written before the calibration named its
    arms read ``<baseline>-aa``."""
    doc = Summary.of(doc)
    cal = doc.calibration or Calibration()
    base = cal.baseline or doc.playbook.baseline
    return cal.profile or aa_profile_name(base), base


def calibration_rows(doc: Summary | dict) -> list[dict]:
    """The A/A arm's cells beside the baseline's, per temperature: ``[{"temperature": 0.7, "aa": cell,
    "base": cell}]`` (a cell is a summary's :class:`~mtp_remote.records.summary.CellRecord`, or None when that
    arm has none at T); empty without a calibration."""
    doc = Summary.of(doc)
    if not doc.calibration:
        return []
    aa, base = calibration_arms(doc)
    cells = {(c.profile, c.temperature): c for c in doc.cells}
    temps = sorted({t for (p, t) in cells if p in (aa, base)})
    return [{"temperature": t, "aa": cells.get((aa, t)), "base": cells.get((base, t))} for t in temps]


def kl_probes(doc: Summary | dict) -> list[dict]:
    """``[{"profile": ..., **verdict.kl_probe}]`` for every verdict whose KL probe was measured (mean, se, n,
    floor_mean, floor_se, floor_n, threshold, flagged, floor_source; nats/token)."""
    return [{"profile": v.profile, **v.kl_probe} for v in Summary.of(doc).verdicts if v.kl_probe]


def arm_counts(doc: Summary | dict, profile: str) -> str:
    """The loop counts of a profile against the baseline at each temperature, naming both arms:
    ``"T=0.7: mtp 16/20 vs baseline 0/20"`` (joined by "; "; "–" when the profile has no cells)."""
    doc = Summary.of(doc)
    baseline = doc.playbook.baseline
    cells = {(c.profile, c.temperature): c for c in doc.cells}
    parts = []
    for (p, t), c in cells.items():
        if p != profile:
            continue
        b = cells.get((baseline, t))
        vs = f" vs {baseline} {b.loops}/{b.n}" if b is not None and p != baseline else ""
        parts.append(f"T={t:g}: {p} {c.loops}/{c.n}{vs}")
    return "; ".join(parts) or "–"


def worst_samples(samples: list[Sample | dict]) -> list[dict]:
    """Per (profile, temperature): the sample with the largest loop fraction (then the longest output),
    with a one-line summary and the end of its text."""
    best: dict[tuple, tuple[tuple, Sample]] = {}
    for s in map(Sample.of, samples):
        m = s.metrics or SampleMetrics()
        score = (m.loop_fraction or 0.0, s.completion_tokens or 0)
        key = (s.profile, s.temperature)
        if key not in best or score > best[key][0]:
            best[key] = (score, s)
    out = []
    for (profile, t), (_, s) in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        m = s.metrics or SampleMetrics()
        if m.loop:
            summary = (f"Loops: a unit of {m.loop_unit_tokens} tokens repeated {m.loop_repeats} "
                       f"times from token {m.loop_start_token} ({pct(m.loop_fraction)} of the "
                       f"output); finish reason {s.finish_reason}, {s.completion_tokens} tokens.")
        else:
            summary = f"No loop; finish reason {s.finish_reason}, {s.completion_tokens} tokens."
        text = s.text or ""
        excerpt = text if len(text) <= EXCERPT_CHARS else "…" + text[-EXCERPT_CHARS:]
        out.append({"profile": profile, "temperature": t, "prompt_id": s.prompt_id,
                    "sample_index": s.sample_index, "summary": summary, "excerpt": excerpt})
    return out


#: What both templates may call.
def readable_time(iso: str | None) -> str:
    """``2026-12-02T10:15:03.123456+00:00`` -> ``2026-12-02 10:15:03 UTC`` (seconds, no microseconds; the
    zone named); text that is no ISO time is returned as it is."""
    from datetime import datetime, timezone

    if not iso:
        return "–"
    try:
        at = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if at.tzinfo is not None:
        at = at.astimezone(timezone.utc)
        return at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return at.strftime("%Y-%m-%d %H:%M:%S")


REPORT_GLOBALS = {"when": readable_time, "pct": pct, "num": num, "sig": sig, "arm_counts": arm_counts, "calibration_rows": calibration_rows,
                  "calibration_arms": calibration_arms, "kl_probes": kl_probes, "AA_EXPLAINED": AA_EXPLAINED,
                  "time_split_line": time_split_line, "fence": fence}


def render_markdown(doc: Summary | dict, samples: list[Sample | dict] | None = None) -> str:
    env = Environment(loader=PackageLoader("mtp_remote.report", "templates"), undefined=StrictUndefined,
                      keep_trailing_newline=True)
    env.globals.update(REPORT_GLOBALS)
    return env.get_template("report.md.j2").render(doc=doc, worst=worst_samples(samples or []))


def write_markdown(doc: Summary | dict, samples: list[Sample | dict], run_dir: Path) -> Path:
    path = run_dir / "report.md"
    path.write_text(render_markdown(doc, samples))
    return path
