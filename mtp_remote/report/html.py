"""Render ``report.html``: one self-contained page (inline CSS, plots as base64 PNG) from a summary document.

Plots (matplotlib, Agg backend): loop rate per profile and temperature with 95 % Wilson intervals, each
bar labelled with its count (k/n) and, for a speculative profile, the p-value of its comparison with the
baseline at that temperature; acceptance length and tokens/s per cell, over all and over non-looping
samples; a histogram of loop onsets (token index where the loop starts), one series per profile and
temperature. Tables beside them: loops per prompt (:func:`per_prompt_loops`). Times read as
``2026-12-02 10:15:03 UTC`` (:func:`mtp_remote.report.markdown.readable_time`). Pure apart from rendering:
reads the document and samples, never the network.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from ..records.sample import Sample
from ..records.summary import CellRecord, Summary
from .next_step import next_step
from .markdown import REPORT_GLOBALS, worst_samples


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def plots(doc: Summary | dict, samples: list[Sample | dict]) -> dict[str, str]:
    """{name: data URI} for the report's figures (empty when there are no cells)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = Summary.of(doc).cells
    if not cells:
        return {}
    out = {}
    out["loop_rate"] = _png(loop_rate_figure(cells, bar_p_values(doc)))
    out["speed"] = _png(speed_figure(cells))
    series = onset_series(samples)
    if series:
        out["onset"] = _png(onset_figure(series, plt))
    return out


def bar_p_values(doc: Summary | dict) -> dict[tuple[str, float], float]:
    """``{(profile, temperature): p}``: the adjusted p-value of each speculative profile's loop comparison with
    the baseline at that temperature (the verdict's comparisons), for the loop-rate bars."""
    out = {}
    for v in Summary.of(doc).verdicts:
        for r in v.comparisons:
            p = r.p_adjusted if "p_adjusted" in r else r.p
            if p is not None:
                out[(v.profile, float(r.temperature))] = float(p)
    return out


def onset_series(samples: list[Sample | dict]) -> dict[str, list[int]]:
    """Loop onsets (token index where the loop starts) per ``"profile T=t"``, in sample order."""
    out: dict[str, list[int]] = {}
    for s in map(Sample.of, samples):
        onset = s.metrics.loop_start_token if s.metrics else None
        if onset is not None:
            out.setdefault(f"{s.profile} T={float(s.temperature):g}", []).append(int(onset))
    return out


def onset_figure(series: dict[str, list[int]], plt):
    """A histogram of loop onsets with one series (colour) per profile and temperature, on shared bins."""
    allv = [o for v in series.values() for o in v]
    bins = min(30, max(5, len(allv) // 2))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.hist(list(series.values()), bins=bins, label=[f"{k} (n={len(v)})" for k, v in series.items()],
            histtype="barstacked" if len(series) > 1 else "bar")
    ax.set_xlabel("loop onset (token index)")
    ax.set_ylabel("looping samples")
    ax.legend(fontsize=8)
    return fig


def per_prompt_loops(doc: Summary | dict, samples: list[Sample | dict]) -> dict:
    """Loops per prompt: ``{"columns": ["mtp T=0.7", ...], "rows": [{"prompt_id", "cells": ["3/4", ...],
    "hot": [bool, ...]}]}`` over the latest sample of each request (degenerate as the verdict counts it: a
    loop, or a near loop cut at ``max_tokens``); ``hot`` marks a cell where at least half the samples loop."""
    from ..analysis.stopping import is_degenerate_record

    doc = Summary.of(doc)
    latest: dict[tuple, Sample] = {}
    for s in map(Sample.of, samples):
        latest[(s.profile, float(s.temperature), s.prompt_id, s.sample_index)] = s
    cols = list(dict.fromkeys((c.profile, float(c.temperature)) for c in doc.cells))
    prompts = [p.id for p in doc.playbook.prompts] or list(dict.fromkeys(k[2] for k in latest))
    rows = []
    for pid in prompts:
        cells, hot = [], []
        for prof, t in cols:
            got = [s for k, s in latest.items() if k[:3] == (prof, t, pid) and not s.error]
            k = sum(is_degenerate_record(s.metrics, s.finish_reason) for s in got)
            cells.append(f"{k}/{len(got)}" if got else "–")
            hot.append(bool(got) and 2 * k >= len(got) and k > 0)
        rows.append({"prompt_id": pid, "cells": cells, "hot": hot})
    return {"columns": [f"{p} T={t:g}" for p, t in cols], "rows": rows}


#: Inches per bar group / per cell, and the figure width limits (inches), so labels keep their room.
_IN_PER_GROUP, _MIN_W, _MAX_W = 0.55, 4.0, 16.0


def _fit_labels(ax, n: int, *, rotate_over: int = 4) -> None:
    """Readable x tick labels however many there are: rotated 30° and right-aligned past ``rotate_over``."""
    if n > rotate_over:
        for label in ax.get_xticklabels():
            label.set_rotation(30)
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")


def loop_rate_figure(cells: list[CellRecord | dict], p_values: dict[tuple[str, float], float] | None = None):
    """Bars of loop rate per profile (colour) and temperature (group) with 95 % Wilson intervals, each bar
    labelled with ``k/n`` and, where ``p_values`` has its (profile, temperature), ``p=…``; the figure widens
    with the number of bars and the legend moves outside past 4 profiles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [CellRecord.of(c) for c in cells]
    profiles = list(dict.fromkeys(c.profile for c in cells))
    temps = sorted({c.temperature for c in cells})
    width = 0.8 / max(1, len(profiles))
    p_values = p_values or {}
    w = min(_MAX_W, max(8.0, 0.6 * len(profiles) * len(temps) + 2))
    fig, ax = plt.subplots(figsize=(w, 4.2))
    for i, p in enumerate(profiles):
        xs, ys, lo, hi, labels = [], [], [], [], []
        for j, t in enumerate(temps):
            c = next((c for c in cells if c.profile == p and c.temperature == t), None)
            if c is None:
                continue
            xs.append(j + i * width)
            ys.append(c.loop_rate)
            lo.append(c.loop_rate - c.loop_ci[0])
            hi.append(c.loop_ci[1] - c.loop_rate)
            pv = p_values.get((p, float(t)))
            count = f"{c.loops}/{c.n}" if "loops" in c and "n" in c else ""
            labels.append((c.loop_ci[1], count + (f"\np={pv:.2g}" if pv is not None else "")))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=p)
        for x, (top, text) in zip(xs, labels):
            ax.annotate(text, (x, top), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                        fontsize=8)
    ax.set_xticks([j + width * (len(profiles) - 1) / 2 for j in range(len(temps))], [f"T={t:g}" for t in temps])
    ax.set_ylim(0, 1.25)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("loop rate (95 % Wilson CI)")
    if len(profiles) > 4:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend()
    return fig


def speed_figure(cells: list[CellRecord | dict]):
    """Acceptance length (speculative cells only) and tokens/s per cell, over all and over non-looping
    samples; one x label per cell ("profile T=t"), rotated when there are many, the figure widened."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [CellRecord.of(c) for c in cells]
    speculative = [c for c in cells if c.accept_length is not None]
    panels = [("accept_length", "acceptance length"), ("tokens_per_s", "tokens/s")][0 if speculative else 1:]
    panel_w = min(_MAX_W / len(panels), max(_MIN_W, _IN_PER_GROUP * len(cells) + 1))
    fig, axes = plt.subplots(1, len(panels), figsize=(panel_w * len(panels), 3.0), squeeze=False)
    axes = axes[0]
    many = len(cells) > 4
    labels = [f"{c.profile} T={c.temperature:g}" if many else f"{c.profile}\nT={c.temperature:g}" for c in cells]
    for ax, (key, title) in zip(axes, panels):
        allv = [getattr(c, key) or 0 for c in cells]
        nonloop = [getattr(c, key + "_nonloop") or 0 for c in cells]
        xs = range(len(cells))
        ax.bar([x - 0.2 for x in xs], allv, 0.4, label="all samples")
        ax.bar([x + 0.2 for x in xs], nonloop, 0.4, label="non-looping")
        ax.set_xticks(list(xs), labels, fontsize=7)
        _fit_labels(ax, len(cells))
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def worst_first(worst: list[dict], samples: list[Sample | dict]) -> list[dict]:
    """``worst`` (one sample per cell) ordered for reading: speculative arms first, then the largest loop
    fraction, so the section opens with the worst output rather than a clean baseline one."""
    samples = [Sample.of(s) for s in samples]
    spec = {s.profile for s in samples if s.speculative}
    frac: dict[tuple, float] = {}
    for s in samples:
        key = (s.profile, s.temperature, s.prompt_id, s.sample_index)
        frac[key] = max(frac.get(key, 0.0), (s.metrics.loop_fraction if s.metrics else None) or 0.0)

    def order(w: dict) -> tuple:
        profile, t, prompt, index = (w[k] for k in ("profile", "temperature", "prompt_id", "sample_index"))
        return (profile not in spec, -frac.get((profile, t, prompt, index), 0.0))

    return sorted(worst, key=order)


def render_html(doc: Summary | dict, samples: list[Sample | dict] | None = None, run_dir: Path | None = None) -> str:
    """The report page of a run's summary ``doc`` and ``samples``; ``run_dir`` (the run's folder) names the
    next step as the terminal's ``next:`` line does."""
    doc, samples = Summary.of(doc), [Sample.of(s) for s in samples or []]
    env = Environment(loader=PackageLoader("mtp_remote.report", "templates"), autoescape=select_autoescape(["html", "j2"]))
    env.globals.update(REPORT_GLOBALS)
    return env.get_template("report.html.j2").render(doc=doc, plots=plots(doc, samples), worst=worst_first(worst_samples(samples), samples),
                                                     per_prompt=per_prompt_loops(doc, samples),
                                                     next_step=next_step(doc, run_dir or Path("runs") / str(doc.run_id)))


def write_html(doc: Summary | dict, samples: list[Sample | dict], run_dir: Path) -> Path:
    path = run_dir / "report.html"
    path.write_text(render_html(doc, samples, run_dir))
    return path
