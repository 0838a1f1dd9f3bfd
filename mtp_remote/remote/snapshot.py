"""Read-only host facts in one round trip: several fact commands sent as one host-side script, output split back.

``status`` and ``preflight`` need a dozen facts (the record, the process, the port, GPUs twice, ``ps``, the port's
owner, versions, the workdir): one ``c.run`` each cost 0.2-0.4 s over SSH on a loaded machine. Here they are the
sections of one ``sh -c`` script: each section prints a header line, runs its command (the same command strings
as :mod:`~mtp_remote.remote.facts`, so the same pure parsers read their output) and prints its exit status. The
script starts in ``$HOME`` and paths under a ``~/`` workdir are given relative to it (:func:`home_relative`), so
no section waits on another round trip for ``$HOME``. Facts whose command needs an earlier fact's value read it
on the host (:func:`record_process_command`: the recorded PID).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from . import facts
from .process import PIDFILE

_HEAD = "@@mtp-section"
_EXIT = "@@mtp-exit"


@dataclass(frozen=True)
class Section:
    """One section's output (stdout and stderr as the command left them) and exit status."""

    stdout: str
    exited: int


def home_relative(workdir: str) -> str:
    """The workdir as the snapshot script sees it after ``cd "$HOME"``: ``~/x`` -> ``x``, ``~`` -> ``.``;
    absolute paths unchanged."""
    if workdir == "~":
        return "."
    if workdir.startswith("~/"):
        return workdir[2:] or "."
    return workdir


def snapshot_command(sections: dict[str, str]) -> str:
    """One ``sh -c`` script running each ``name: command`` in order (each in its own subshell: one failing
    does not stop the others), every section framed by a header and its exit status. Names are identifiers."""
    lines = ['cd "$HOME" 2>/dev/null || cd /']
    for name, cmd in sections.items():
        if not name.isidentifier():
            raise ValueError(f"section name {name!r} is not an identifier")
        lines.append(f"printf '%s %s\\n' {_HEAD} {name}; ( {cmd}\n); printf '\\n%s %s %s\\n' {_EXIT} {name} $?")
    return "sh -c " + shlex.quote("\n".join(lines))


def parse_snapshot(output: str) -> dict[str, Section]:
    """Split :func:`snapshot_command`'s output by section; a section cut off (the script died) is missing."""
    out: dict[str, Section] = {}
    name, buf = None, []
    for line in output.split("\n"):
        if line.startswith(_HEAD + " "):
            name, buf = line[len(_HEAD) + 1:].strip(), []
        elif line.startswith(_EXIT + " ") and name is not None:
            parts = line.split()
            code = int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else 1
            out[name] = Section("\n".join(buf), code)  # the newline printed before the exit line is the split's
            name = None
        elif name is not None:
            buf.append(line)
    return out


def run_snapshot(c, sections: dict[str, str]) -> dict[str, Section]:
    """Run the sections on the host in one round trip (``c`` as in :mod:`~mtp_remote.remote.facts`)."""
    r = c.run(snapshot_command(sections), hide=True, warn=True, in_stream=False)
    return parse_snapshot(r.stdout)


def record_process_command(workdir: str) -> str:
    """``/proc`` facts of the PID in the workdir's PID file (:func:`facts.parse_process_info` reads them);
    prints nothing without a PID file or with a malformed one."""
    pidfile = shlex.quote(f"{workdir}/{PIDFILE}")
    return (f'p=$(cat {pidfile} 2>/dev/null); case "$p" in ""|*[!0-9]*) exit 1;; esac; '
            + facts.proc_info_command_of('"$p"'))


def workdir_probe_command(workdir: str) -> str:
    """Where the workdir is (or the directory the first run will create it in), whether it is writable, and its
    file system's ``df -Pk``: read-only — the write test is a file made with noclobber and removed, also when the
    write fails."""
    wd = shlex.quote(workdir)
    return (f'd={wd}; while [ ! -e "$d" ] && [ "$d" != / ] && [ "$d" != . ]; do d=$(dirname "$d"); '
            f'done; echo "$d"; t="$d/.write-test.$$"; if (set -C; printf x > "$t") 2>/dev/null; '
            f'then rm -f "$t"; echo writable; else rm -f "$t"; echo read-only; fi; df -Pk "$d"')


def parse_df(output: str) -> int | None:
    """Free MiB from ``df -Pk PATH`` (second line, fourth column in KiB)."""
    lines = output.strip().splitlines()
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    return int(parts[3]) // 1024 if len(parts) >= 4 and parts[3].isdigit() else None
