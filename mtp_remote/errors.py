"""One exception tree for mtp-remote; every error carries the evidence needed to act on it.

::

    MtpRemoteError                 base; ``exit_code`` is what the CLI exits with
    ├── ConfigError                a file failed validation: file, field, allowed values
    ├── RemoteError                a command on a host failed or could not run: host, command, output tail
    │   ├── ConnectError           SSH could not connect (auth, network: refused, timed out, no route, DNS)
    │   │   ├── HostKeyError       the host key is unknown, changed or revoked (fingerprint, file, line, fix)
    │   │   └── TransportLost      an open SSH connection dropped and did not come back within its bound
    │   └── LockError              another run holds the host lock (owner, run id, heartbeat age)
    ├── LaunchError                the server did not become ready: outcome, cause, hint, log tail
    ├── StopError                  a server we started would not stop, or GPU memory was not released
    ├── AnalysisInputError         a file given to ``analyze`` could not be read as text/JSON
    ├── RunsDirError               the runs directory stopped taking writes (full disk, quota, read-only)
    └── Interrupted                Ctrl-C / SIGTERM: servers stopped, samples kept, how to resume

Per-sample and per-host failures are data (``error`` fields), not exceptions. Only the entry points
(``cli/main.py``, ``cli/tasks.py``) catch ``MtpRemoteError`` and turn it into one red line and an exit code.
"""

from __future__ import annotations

import copy
import errno
from pathlib import Path

#: Exit codes shared by the CLI and the Fabric tasks.
EXIT_HEALTHY = 0
EXIT_CORRUPT = 1  # a speculative profile corrupts output, or failed to launch
EXIT_RUN_FAILED = 2  # the run could not be done (config, SSH, baseline launch, ...)
EXIT_INCONCLUSIVE = 3  # no profile corrupts output, but one is inconclusive: no evidence either way (CI fails)

#: Exit codes from least to most severe, for combining several outcomes (fleet, nightly) into one.
EXIT_SEVERITY = (EXIT_HEALTHY, EXIT_INCONCLUSIVE, EXIT_CORRUPT, EXIT_RUN_FAILED)


def worst_exit(codes) -> int:
    """The most severe of ``codes`` (:data:`EXIT_SEVERITY`; an unknown code, e.g. 130, is worse than all)."""
    rank = {c: i for i, c in enumerate(EXIT_SEVERITY)}
    return max(codes, key=lambda c: rank.get(c, len(rank)), default=EXIT_HEALTHY)


class MtpRemoteError(Exception):
    """Base of every expected error. ``evidence`` is printed under the message by the CLI; ``run_id`` and
    ``run_dir`` name the run the error ended, when it got as far as one (its summary.json, junit.xml and
    metrics.prom are there: :meth:`in_run`)."""

    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, *, evidence: str | None = None, run_id: str | None = None,
                 run_dir: Path | None = None):
        super().__init__(message)
        self.message = message
        self.evidence = evidence
        self.run_id = run_id
        self.run_dir = run_dir

    def __str__(self) -> str:
        return self.message

    def in_run(self, note: str = "", *, run_id: str | None = None, run_dir: Path | None = None):
        """This error as it ends a run, built whole to be raised: a copy of it (same class, evidence and fields)
        with ``note`` appended to the message (e.g. the resume command) and the run it ended (``run_id``,
        ``run_dir``; kept from this error when not given)."""
        err = copy.copy(self)
        err.message = self.message + note
        err.args = (err.message,)
        err.run_id = run_id if run_id is not None else self.run_id
        err.run_dir = run_dir if run_dir is not None else self.run_dir
        return err


class ConfigError(MtpRemoteError):
    """A config file is missing or invalid. Names the file, the field and the allowed values."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 evidence: str | None = None):
        prefix = f"{file}: " if file else ""
        where = f"{field}: " if field else ""
        super().__init__(f"{prefix}{where}{message}", evidence=evidence)
        self.file = file
        self.field = field


class RemoteError(MtpRemoteError):
    """A command on a host failed. Carries host, the (masked) command, exit code and output tail."""

    def __init__(self, message: str, *, host: str | None = None, command: str | None = None,
                 exit_code: int | None = None, output: str | None = None):
        evidence_parts = []
        if command:
            evidence_parts.append(f"command: {command}")
        if exit_code is not None:
            evidence_parts.append(f"exit code: {exit_code}")
        if output:
            evidence_parts.append(output.rstrip()[-3000:])
        super().__init__(f"[{host}] {message}" if host else message,
                         evidence="\n".join(evidence_parts) or None)
        self.host = host
        self.command = command
        self.returncode = exit_code
        self.output = output


class ConnectError(RemoteError):
    """SSH connection failed: unknown host key (see ``accept_new_host_key``), auth, or network."""


class HostKeyError(ConnectError):
    """The host's SSH key is unknown (and ``accept_new_host_key`` is off), changed, or revoked."""


class TransportLost(ConnectError):
    """An open SSH connection dropped (sshd gone, network lost) and could not be re-opened within its bound;
    ``cause``: why, as the transport saw it."""

    def __init__(self, message: str, *, host: str | None = None, cause: str | None = None):
        super().__init__(message, host=host)
        self.cause = cause


class LockError(RemoteError):
    """Another run holds the host lock."""


class LaunchError(MtpRemoteError):
    """The server did not become ready. ``outcome`` is the WaitOutcome (Crashed or TimedOut)."""

    def __init__(self, message: str, *, outcome=None, evidence: str | None = None, cause: str | None = None):
        super().__init__(message, evidence=evidence)
        self.outcome = outcome
        self.cause = cause or (getattr(outcome, "cause", None) if outcome is not None else None)


class StopError(MtpRemoteError):
    """A server we started did not exit, or its GPU memory was not released in time."""


class AnalysisInputError(MtpRemoteError):
    """An input to ``analyze`` is unreadable or of an unknown shape."""


class RunsDirError(MtpRemoteError):
    """A file of the run directory could not be written (no space left, quota, read-only) while the run went on:
    the servers are stopped, the samples stored so far kept, and the run is resumable once there is room."""

    #: errno values that mean the file system will not take the write (not a bug, not the network)
    DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})

    @classmethod
    def of(cls, e: OSError, path) -> RunsDirError:
        """The error for ``e`` raised writing ``path`` (its cause first: "no space left in RUNS_DIR" for ENOSPC
        and EDQUOT)."""
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
        return cls(f"{'no space left in RUNS_DIR' if full else 'cannot write to RUNS_DIR'}: writing {path} "
                   f"failed ({e.strerror or e})")


class Interrupted(MtpRemoteError):
    """The run was interrupted (Ctrl-C or SIGTERM); what we started was stopped and samples kept."""

    exit_code = 130
