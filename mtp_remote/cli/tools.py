"""Operator commands that need no host: ``classify-log``, ``lint-command`` (click adapters; ``analyze``'s is in
``cli/main.py``). Their bodies are in :mod:`mtp_remote.cli.tool_views`, reached through :mod:`mtp_remote.cli.lazy`;
the main CLI registers them (``main.add_command(classify_log_cmd, "classify-log")``)."""

from __future__ import annotations

import sys

import click

from . import lazy


@click.command("classify-log")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per file.")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
def classify_log_cmd(as_json: bool, files: tuple[str, ...]) -> None:
    """Classify SGLang server logs: final state, hint, startup milestones, decode stats.

    FILE may be - for standard input. Exits 0 when every log is ready or still starting, 1 when any shows a
    fatal class, 2 for a file that cannot be read or that holds no SGLang line (state no_sglang_lines)."""
    sys.exit(lazy.tool_views().classify_logs(files, as_json=as_json))


@click.command("lint-command")
@click.option("--json", "as_json", is_flag=True, help='Print {"flags", "findings"} as one JSON object.')
@click.option("--sglang-version", default=None, metavar="V",
              help="The host's SGLang release (picks the flag table and the release rules; newest when omitted).")
@click.option("--with-defaults", is_flag=True, help="With --json: list every flag's value, defaults included.")
@click.argument("command_line", metavar='"<command line>"')
def lint_command_cmd(as_json: bool, sglang_version: str | None, with_defaults: bool, command_line: str) -> None:
    """Lint an SGLang launch line: unknown/ambiguous flags, bad or out-of-range values, flag combinations
    the release refuses. Secrets (--api-key ...) are never printed.

    Quote the whole command line as one argument. --json prints {"flags" (what the line set), "findings",
    "sglang_version" (the table used), "requested_version", "warnings", "notes"}. A version without its own
    table is linted with the nearest one and a warning on stderr. Exits 0 when the line is clean, 1 when
    there is a finding, 2 when it is not an SGLang launch line at all.
    """
    sys.exit(lazy.tool_views().lint_line(command_line, sglang_version=sglang_version, with_defaults=with_defaults,
                                         as_json=as_json))
