"""Run :mod:`mtp_remote.lint.sglang_probe` under another interpreter and read its answer.

The probe's source is piped to ``<python> - MODE [ARGV_JSON]`` so the interpreter needs SGLang, not
mtp_remote. :func:`probe_command` gives the shell line and :func:`parse_probe_output` the parser, so the
remote code can run the same probe on a host through ``c.run``; :func:`run_probe` runs it locally.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from mtp_remote.errors import MtpRemoteError

MARKER = "MTP_PROBE_JSON: "
PROBE_SOURCE = Path(__file__).with_name("sglang_probe.py")


def probe_source() -> str:
    """The probe script's source text (stdlib + SGLang only)."""
    return PROBE_SOURCE.read_text()


def probe_command(python: str, mode: str, argv: list[str] | None = None) -> str:
    """Shell line that runs the probe from stdin: ``<python> - MODE ['<argv json>']`` (quoted)."""
    parts = [python, "-", mode] + ([json.dumps(argv)] if argv is not None else [])
    return " ".join(shlex.quote(p) for p in parts)


def parse_probe_output(stdout: str) -> dict:
    """The JSON object of the probe's ``MTP_PROBE_JSON:`` line. Raises MtpRemoteError if there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise MtpRemoteError("SGLang probe printed no result line", evidence=stdout[-2000:])


def run_probe(python: str, mode: str, argv: list[str] | None = None, *, timeout_s: float = 120.0) -> dict:
    """Run the probe locally with ``python``; return its JSON answer.

    Exit status 3 (SGLang not importable) still returns the answer (``{"error": ...}``); a missing
    interpreter or a probe that prints nothing raises :class:`~mtp_remote.errors.MtpRemoteError`.
    """
    cmd = [python, "-", mode] + ([json.dumps(argv)] if argv is not None else [])
    try:
        proc = subprocess.run(cmd, input=probe_source(), capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MtpRemoteError(f"cannot run {python}: {exc}") from exc
    try:
        return parse_probe_output(proc.stdout)
    except MtpRemoteError as exc:
        raise MtpRemoteError(f"SGLang probe under {python} failed (exit {proc.returncode})",
                             evidence=proc.stderr[-2000:]) from exc
