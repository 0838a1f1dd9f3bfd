"""The commands that need no host: ``analyze``, ``classify-log``, ``lint-command`` (their click adapters are in
``cli/tools.py`` and ``cli/main.py``), over :func:`mtp_remote.analysis.degeneracy.analyze_text`,
:func:`mtp_remote.remote.logs.classify_log` and :func:`mtp_remote.lint.lint.lint_command`.

Plain output is a short rich table for people; ``--json`` prints one JSON object per line for scripts. A file
that cannot be read is a :class:`UsageError` naming it (exit 2), except for ``analyze``, which reports it and
goes on. Each function returns the exit code. Imported through :mod:`mtp_remote.cli.lazy`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..analysis.degeneracy import analyze_text
from ..errors import AnalysisInputError, MtpRemoteError
from ..lint.lint import lint_command
from ..records.sample import SampleMetrics
from ..remote.commands import mask_text, secrets_of
from ..remote.logs import classify_log, milestone_durations
from ..report.console import make_console
from .inputs import SHAPES, read_stdin, read_text_file, read_texts

_STYLE = {"ok": "green", "warning": "yellow", "fatal": "red"}


class UsageError(click.ClickException):
    """A bad input: exit 2, as every mtp-remote command does for input it cannot use."""

    exit_code = 2


def _read_text(path: str) -> str:
    try:
        if path == "-":
            return read_stdin()
        return read_text_file(path, expected="server logs, or - for standard input", nul_padding=True)
    except AnalysisInputError as exc:
        raise UsageError(str(exc)) from None


def classify_logs(files: tuple[str, ...], *, as_json: bool) -> int:
    """``classify-log``: each log's final state, hint, milestones and decode stats; the exit code
    (:func:`exit_code_of_logs`). Raises UsageError for a file that cannot be read, before printing anything."""
    texts = [(f, _read_text(f)) for f in files]  # fail on a missing file before printing anything
    if as_json:
        results = [(f, classify_log(text)) for f, text in texts]
        for f, r in results:
            click.echo(json.dumps(r.to_dict(file=f)))
        return exit_code_of_logs([r for _, r in results])
    table = Table(show_lines=False)
    for col in ("file", "state", "reached", "decode", "hint"):
        table.add_column(col, overflow="fold", no_wrap=col == "state")
    results = []
    for f, text in texts:
        r = classify_log(text)
        results.append(r)
        reached = "-"
        if r.milestones:
            elapsed = sum(milestone_durations(r.milestones, start=r.started_at).values())
            reached = f"{r.milestones[-1].name} ({elapsed:.0f} s)"
        decode = "-"
        if r.decode:
            last = r.decode[-1]
            parts = [f"{len(r.decode)} lines"]
            if last.accept_len is not None:
                parts.append(f"accept {last.accept_len:.2f}")
            if last.gen_throughput is not None:
                parts.append(f"{last.gen_throughput:.1f} tok/s")
            decode = ", ".join(parts)
        state = f"[{_STYLE.get(r.severity, 'white')}]{r.cls}[/]"
        table.add_row(escape(Path(f).name), state, reached, decode, escape(r.hint))
    make_console().print(table)
    return exit_code_of_logs(results)


def exit_code_of_logs(results) -> int:
    """1 when any log shows a fatal class, else 2 when any file holds no SGLang line, else 0."""
    if any(r.is_fatal for r in results):
        return 1
    return 2 if any(r.cls == "no_sglang_lines" for r in results) else 0


def _line_secrets(command_line: str) -> list[str]:
    """The secret values (``--api-key`` and its prefixes) in a command line, to mask them in the output."""
    try:
        return secrets_of(shlex.split(command_line), {})
    except ValueError:
        return secrets_of(command_line.split(), {})


def lint_line(command_line: str, *, sglang_version: str | None, with_defaults: bool, as_json: bool) -> int:
    """``lint-command``: the findings on an SGLang launch line, secrets masked; exit 1 when there is one.
    Raises UsageError for a line that is not an SGLang launch line or an unknown ``--sglang-version``."""
    try:
        result = lint_command(command_line, sglang_version=sglang_version)
    except MtpRemoteError as exc:
        msg = str(exc)
        if getattr(exc, "field", None) == "sglang_version":  # here the field is this command's option
            msg = "--sglang-version" + msg.removeprefix("sglang_version")
        raise UsageError(msg) from None
    secrets = _line_secrets(command_line)
    err = Console(stderr=True)
    for w in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(mask_text(w, secrets))}", highlight=False, soft_wrap=True)
    if as_json:
        click.echo(mask_text(json.dumps(result.to_dict(with_defaults=with_defaults), default=repr), secrets))
    else:
        console = make_console()  # outside a terminal a finding stays on one line (a flag to copy is never split)
        which = "" if result.requested_version else " (the newest: no --sglang-version given)"
        console.print(f"SGLang {result.sglang_version} flag table{which}: "
                      + ("[green]no findings[/]" if result.ok else f"[red]{len(result.findings)} finding(s)[/]"))
        for f in result.findings:
            target = f" {f.flag}" if f.flag else ""
            better = f" -> {f.suggestion}" if f.suggestion else ""
            console.print(mask_text(f"  {f.code}{target}{better}: {f.message}", secrets), highlight=False,
                          markup=False, style="red")
        for n in result.notes:
            console.print(mask_text(f"  note: {n}", secrets), highlight=False, markup=False)
    return 1 if result.findings else 0


def run_analyze(files: tuple[str, ...], *, as_json: bool, per_row: bool | None = None) -> int:
    """Analyse every text of ``files`` (see :mod:`mtp_remote.cli.inputs` for the kinds) and print the metrics.

    A file that cannot be read or parsed is reported -- ``{"file", "error"}`` as one JSON line with
    ``as_json``, a red line on stderr otherwise -- and the other files are still analysed. Returns the exit
    code: 2 when any file failed, else 1 when any text loops, else 0.
    """
    rows: list[dict] = []
    failed = 0
    err = Console(stderr=True)
    for f in files:
        skipped: list[str] = []
        try:
            texts = list(read_texts(f, skipped))
            if not texts:  # an empty .jsonl/.json (e.g. a run that stored no sample): say so, never print nothing
                raise AnalysisInputError(f"{f}: no texts in it (empty); expected {SHAPES}")
        except AnalysisInputError as exc:
            failed += 1
            if as_json:
                click.echo(json.dumps({"file": f, "error": str(exc)}))
            else:
                err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            continue
        for w in skipped:  # a cut line (an interrupted write): the file's other lines are still analysed
            err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
        for row in _analyzed(texts):
            rows.append(row)
            if as_json:
                click.echo(json.dumps(row))
    if not as_json and rows:
        print_analysis(rows, per_row=per_row, console=make_console())
    if failed:
        return 2
    return 1 if any(AnalysisRow.of(r).loop for r in rows) else 0


#: From this many texts in one file, ``analyze`` spreads them over the machine's cores (forked workers, Linux).
PARALLEL_MIN_TEXTS = 200


def _analyze_one(item: tuple) -> dict:
    label, text, ids = item
    return {"file": label, **analyze_text(text, ids).to_dict()}


def _analyzed(texts: list[tuple]):
    """Rows of ``texts`` (``(label, text, token ids)``) in order: on Linux with several cores and at least
    :data:`PARALLEL_MIN_TEXTS` texts, computed by forked worker processes (one per core, at most 8) in chunks;
    otherwise here, one by one. The metrics are the same either way (pure functions of the text)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if len(texts) < PARALLEL_MIN_TEXTS or cores < 2 or not sys.platform.startswith("linux"):
        yield from map(_analyze_one, texts)
        return
    workers = min(cores, 8)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(_analyze_one, texts, chunksize=max(16, len(texts) // (workers * 8)))


#: ``analyze`` prints one row per text up to this many texts; above it, a summary (``--rows`` for all rows).
ROWS_SHOWN_BY_DEFAULT = 20


def print_analysis(rows: list[dict], *, per_row: bool | None = None, console: Console | None = None) -> None:
    """Print ``analyze`` results: a per-text table when ``per_row`` (default: when there are at most
    :data:`ROWS_SHOWN_BY_DEFAULT` texts), else a summary — counts, medians and the first looping texts.

    ``rows`` are :meth:`TextMetrics.to_dict` dicts plus ``file``. The table is built cheaply (no measured
    column ratios); a summary costs nothing to draw, where a 1,000-row table took ~1.8 s."""
    console = console or Console()
    rows = [AnalysisRow.of(r) for r in rows]
    if per_row is None:
        per_row = len(rows) <= ROWS_SHOWN_BY_DEFAULT
    if per_row:
        console.print(_rows_table(rows))
        return
    loops = [r for r in rows if r.loop]
    think = [r.think_closed for r in rows if r.think_closed is not None]
    console.print(
        f"[bold]{len(rows)} texts[/]: [{'red' if loops else 'green'}]{len(loops)} loop[/] "
        f"({len(loops) / max(len(rows), 1):.1%}); seq-rep-4 median {_median(r.seq_rep_4 for r in rows):.3f}, "
        f"compression median {_median(r.compression_ratio for r in rows):.2f}"
        + (f"; think block closed in {sum(think)} of {len(think)}" if think else ""), highlight=False)
    for r in loops[:10]:
        console.print(f"  loops: {r.file}  ({r.loop_unit_tokens} tokens × {r.loop_repeats} "
                      f"from char {r.loop_start_char})", highlight=False, markup=False)
    if len(loops) > 10:
        console.print(f"  … and {len(loops) - 10} more", highlight=False)
    console.print("(--rows prints one row per text; --json one JSON object per text)", style="dim", highlight=False)


class AnalysisRow(SampleMetrics):
    """One ``analyze`` row: the text's metrics (``analysis.degeneracy``, as a sample stores them) and its
    ``file`` label."""

    file: str = ""


def _median(values) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def _rows_table(rows: list[AnalysisRow]) -> Table:
    table = Table(title="Degeneracy (loop: corpus definition; seq-rep-4: Welleck et al. 2019)")
    table.add_column("file", overflow="fold", min_width=18)
    for col in ("loop", "unit × repeats", "loop start (char)", "near loop", "seq-rep-4", "compression",
                "think closed"):
        table.add_column(col, no_wrap=True, min_width=min(len(col), 11))
    for r in rows:
        unit = f"{r.loop_unit_tokens} × {r.loop_repeats}" if r.loop else "–"
        near = (f"{r.near_loop_unit_tokens} × {r.near_loop_repeats} @ {r.near_loop_start_char}"
                if r.near_loop else "no")
        table.add_row(r.file, "[red]yes[/]" if r.loop else "no", unit,
                      str(r.loop_start_char) if r.loop else "–", near, f"{r.seq_rep_4:.3f}",
                      f"{r.compression_ratio:.2f}", {True: "yes", False: "no", None: "–"}[r.think_closed])
    return table
