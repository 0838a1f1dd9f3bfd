"""Operator commands that need no host: ``classify-log`` and ``lint-command``.

Thin click commands over :func:`mtp_remote.remote.logs.classify_log` and :func:`mtp_remote.lint.lint_command`;
the main CLI registers them (``main.add_command(classify_log_cmd, "classify-log")``). Plain output is a
short rich table for people; ``--json`` prints one JSON object per line for scripts. A file that cannot be
read is a :class:`click.ClickException` naming it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint import lint_command
from mtp_remote.remote.logs import classify_log, milestone_durations

_STYLE = {"ok": "green", "warning": "yellow", "fatal": "red"}


class UsageError(click.ClickException):
    """A bad input: exit 2, as every mtp-remote command does for input it cannot use."""

    exit_code = 2


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; give log files (or - for standard input)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\0" in data[:8192]:
        raise UsageError(f"{path}: binary file, not a server log")
    return data.decode("utf-8", errors="replace")


@click.command("classify-log")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per file.")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
def classify_log_cmd(as_json: bool, files: tuple[str, ...]) -> None:
    """Classify SGLang server logs: final state, hint, startup milestones, decode stats.

    FILE may be - for standard input. Exits 0 when every log is ready or still starting, 1 when any shows a
    fatal class, 2 for a file that cannot be read."""
    texts = [(f, _read_text(f)) for f in files]  # fail on a missing file before printing anything
    if as_json:
        results = [(f, classify_log(text)) for f, text in texts]
        for f, r in results:
            click.echo(json.dumps(r.to_dict(file=f)))
        raise SystemExit(1 if any(r.is_fatal for _, r in results) else 0)
    table = Table(show_lines=False)
    for col in ("file", "state", "reached", "decode", "hint"):
        table.add_column(col, overflow="fold", no_wrap=col == "state")
    for f, text in texts:
        r = classify_log(text)
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
        table.add_row(Path(f).name, state, reached, decode, r.hint)
    Console().print(table)
    raise SystemExit(1 if any(classify_log(text).is_fatal for _, text in texts) else 0)


@click.command("lint-command")
@click.option("--json", "as_json", is_flag=True, help='Print {"flags", "findings"} as one JSON object.')
@click.option("--sglang-version", default=None, metavar="V",
              help="The host's SGLang release (picks the flag table; newest when omitted).")
@click.argument("command_line", metavar='"<command line>"')
def lint_command_cmd(as_json: bool, sglang_version: str | None, command_line: str) -> None:
    """Lint an SGLang launch line: unknown/ambiguous flags, bad values, risky flag combinations.

    Quote the whole command line as one argument. Exits 0 when the line is clean, 1 when there is a
    finding, 2 when it is not an SGLang launch line at all.
    """
    try:
        result = lint_command(command_line, sglang_version=sglang_version)
    except MtpRemoteError as exc:
        raise UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), default=repr))
    else:
        console = Console()
        console.print(f"SGLang {result.sglang_version} flag table: "
                      + ("[green]no findings[/]" if result.ok else f"[red]{len(result.findings)} finding(s)[/]"))
        for f in result.findings:
            target = f" [bold]{f.flag}[/]" if f.flag else ""
            better = f" -> [green]{f.suggestion}[/]" if f.suggestion else ""
            console.print(f"  [red]{f.code}[/]{target}{better}: {f.message}", highlight=False)
    if result.findings:
        raise SystemExit(1)
