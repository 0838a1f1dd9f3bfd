"""What both entry points print for any command: an expected error as one red line (:func:`report_error`) and
``--json`` output (:func:`print_json`). Light (rich and the console's settings; no workflow): a Ctrl-C that lands
while a command's modules are still being imported is reported without importing them again."""

from __future__ import annotations

import json
import sys

from rich.markup import escape

from ..errors import Interrupted, MtpRemoteError
from ..remote.connect import as_connect_error
from ..report.console import make_console
from .signals import INTERRUPTS


def report_error(e: BaseException) -> int | None:
    """Print an expected error as one red line on stderr (its evidence dimmed below) and return its exit code:
    an :class:`MtpRemoteError`, or an SSH failure that escaped the transport (exit 2). None for anything else
    (a bug: the caller lets its traceback through)."""
    if not isinstance(e, MtpRemoteError):
        e = as_connect_error(e)
        if e is None:
            return None
    if isinstance(e, Interrupted):  # unwound by the run: leaving
        INTERRUPTS.exiting()
    err = make_console(stderr=True)  # outside a terminal: never wrapped mid-flag
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
    if e.evidence:
        err.print(e.evidence, style="dim", highlight=False, markup=False)
    return e.exit_code


def _json_value(value):
    """A value JSON does not know: a record (``mtp_remote.records``) as its mapping, anything else as its string."""
    return value.to_dict() if hasattr(value, "to_dict") else str(value)


def print_json(data) -> None:
    """``--json``: the result as JSON on stdout (progress and errors go to stderr)."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_value) + "\n")
    sys.stdout.flush()
