"""The commands over the runs on disk: ``report``, ``compare``, ``bug-report`` (their click adapters are in
``cli/runs.py`` and ``cli/main.py``), over :mod:`mtp_remote.runs.compare` and :mod:`mtp_remote.runs.bugreport`.

No network. Each function takes the command's options, prints its tables (rich) or ``--json`` and returns the
exit code; errors are MtpRemoteError, turned into one red line and exit 2 by the CLI's ``handle_errors``.
Imported through :mod:`mtp_remote.cli.lazy`.
"""

from __future__ import annotations

import json
import sys
import webbrowser
from dataclasses import fields
from pathlib import Path

from rich.table import Table

from ..analysis.runstats import LoopDiff, SpeedDiff
from ..outside_text import for_terminal
from ..records.base import Number, Record
from ..records.compare import CellChange, RunComparison
from ..report.console import make_console, print_run_end, verdict_table
from ..report.document import load_summary
from ..runs.bugreport import write_bug_report
from ..runs.compare import compare_runs, readable_run, rerender, resolve_run


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.2g}"


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def report(run: str, runs_dir: str, *, open_it: bool) -> int:
    """``report``: re-render a run's report.md and report.html, print its verdicts and what next."""
    run_dir = readable_run(resolve_run(run, runs_dir), ("run",), "report")
    paths = rerender(run_dir)
    doc = load_summary(run_dir)
    console = make_console()
    console.print(verdict_table(doc))
    print_run_end(console, doc, run_dir, doc.exit_code or 0, afterwards=True)
    html = paths["html"]
    if open_it and not webbrowser.open(html.resolve().as_uri()):
        print(f"no browser found; open {html} by hand", file=sys.stderr)
    return 0


class _SpecOverBase(Record):
    """A cell's mean speed over its own run's baseline's, in run A and in run B."""

    a: Number | None = None
    b: Number | None = None


def _diffs(r: CellChange) -> tuple[LoopDiff, SpeedDiff]:
    """A compared cell's loop and speed tests, as the analysis made them (``compare_runs`` stores their dicts)."""
    lo, sp = r.loops or {}, r.speed or {}
    return (LoopDiff(**{f.name: lo[f.name] for f in fields(LoopDiff)}),
            SpeedDiff(**{f.name: sp[f.name] for f in fields(SpeedDiff)}))


def compare_table(res: RunComparison | dict) -> Table:
    """The comparison of :func:`mtp_remote.runs.compare.compare_runs` as a rich Table, one row per cell."""
    res = RunComparison.of(res)
    a, b = res.a, res.b
    t = Table(title=f"Compare — A {a.run_id} ({a.host}, {a.playbook}) vs B {b.run_id} "
                    f"({b.host}, {b.playbook})", title_justify="left",
              caption="loops: Fisher exact (p B loops more, one-sided; two-sided); speed: per-sample tokens/s, "
                      "Welch t and Mann-Whitney U (two-sided), one launch per run; spec÷base: the arm's speed "
                      "over its own run's baseline (host drift cancels)")
    for col in ("profile", "T", "loops A → B", "p more / p ≠", "accept len A → B", "tok/s A → B", "B/A",
                "p Welch / MW", "spec÷base A → B"):
        t.add_column(col, justify="left" if col == "profile" else "right")
    for r in res.cells:
        if r.only_in:
            t.add_row(r.profile, f"{r.temperature:g}", f"only in {r.only_in.upper()}", "", "", "", "", "", "")
            continue
        lo, sp = _diffs(r)
        counts = f"{lo.loops_a}/{lo.n_a} → {lo.loops_b}/{lo.n_b}"
        over = _SpecOverBase.of(r.spec_over_base) if r.spec_over_base else None
        t.add_row(r.profile, f"{r.temperature:g}", f"[bold red]{counts}[/]" if lo.p_worse < 0.05 else counts,
                  f"{_p(lo.p_worse)} / {_p(lo.p_two_sided)}", f"{_num(r.accept_a)} → {_num(r.accept_b)}",
                  f"{_num(sp.mean_a, 1)} → {_num(sp.mean_b, 1)}", _num(sp.ratio),
                  f"{_p(sp.p_welch)} / {_p(sp.p_mannwhitney)}",
                  f"{_num(over.a)} → {_num(over.b)}" if over else "–")
    return t


def launch_drift_note(res: RunComparison | dict) -> str | None:
    """The caveat printed under the table when a speed test is small: with one launch per run, the per-sample
    tests compare two launches, so launch-to-launch drift is not excluded (issue 30: two nightlies of one
    healthy host, baseline 293 -> 210 tok/s, Welch p = 0.00056). None when no speed p is below 0.05."""
    small = [f"{r.profile} T={r.temperature:g}" for r in RunComparison.of(res).cells
             if not r.only_in and (_diffs(r)[1].p_welch or 1.0) < 0.05]
    if not small:
        return None
    return (f"speed: {', '.join(small)} differ(s) by the per-sample tests, but each run is one launch per profile: "
            f"the tests compare two launches, and launch-to-launch drift (host load, clocks, other tenants) is not "
            f"excluded. A configuration's speed changed only if it holds over several launches (`mtp-remote "
            f"history`), or in spec÷base, which drift of the whole host cancels")


def compare(run_a: str, run_b: str, runs_dir: str, *, as_json: bool) -> int:
    """``compare``: two runs cell by cell; exit 1 when a cell of B loops significantly more than in A."""
    raw = compare_runs(*(readable_run(resolve_run(r, runs_dir), ("run",), "compare") for r in (run_a, run_b)))
    res = RunComparison.of(raw)
    if as_json:
        print(json.dumps(raw, indent=2))
    else:
        console = make_console()
        console.print(compare_table(res))
        for side, head in (("a", res.a), ("b", res.b)):
            if head.status != "completed":  # a run that could not be done has no cells to compare
                console.print(f"run {side.upper()} ({head.run_id}) {head.status}: it has no cells, "
                              f"so its rows show as only in {'B' if side == 'a' else 'A'}; "
                              f"`mtp-remote report {head.run_id}` says why", highlight=False, markup=False)
        if (note := launch_drift_note(res)) is not None:
            console.print(note, highlight=False, markup=False)
        for v in (v for v in res.verdicts if v.a != v.b):
            console.print(f"verdict {v.profile}: {v.a or '–'} → {v.b or '–'}", highlight=False)
    worse = any(not r.only_in and _diffs(r)[0].p_worse < 0.05 for r in res.cells)
    return 1 if worse else 0


def bug_report(run_id: str, runs_dir: str, output: str | None) -> int:
    """``bug-report``: write the upstream issue body and print it (where it went on stderr)."""
    path, text = write_bug_report(run_id, runs_dir=Path(runs_dir), output=Path(output) if output else None)
    print(for_terminal(text) if sys.stdout.isatty() else text)  # a pipe: the body as is
    print(f"(written to {path})", file=sys.stderr)
    return 0
