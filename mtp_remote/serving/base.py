"""Where a server runs: the one seam between the experiment and the place its servers live.

A *kind* of server is one class implementing :class:`ServerKind`; the runner (:mod:`mtp_remote.experiment.runner`)
drives any kind through it and knows no shell. A server's life on the seam::

    kind.prepare(lock_owner)                    the place is usable (workdir, lock when the kind has one)
    kind.find_leftover()  -> record | None      a server an earlier attempt of this run left running (adopt it)
    kind.stop(...)        -> StopReport         stop what we left there (drain, then the GPU-release wait)
    kind.launch(profile, argv, env) -> record   started, with an identity record (raises LaunchError)
    kind.follow(record)   -> LogFollower|None   its log as it is written (None: the kind can only poll)
    kind.reach()          -> Tunnel             where the driver sends requests (a context manager, opened
                                                while the server starts)
    kind.wait_ready(record, ...) -> Ready | Crashed | TimedOut   followed to ready, with the cause
    kind.poll(record, offset) -> Polled         the crash/hang watch's look: alive + new log text
    kind.stop(...)        -> StopReport         SIGTERM or its like, the drain, the kill, the GPU-release wait
    kind.read_log(path)   -> str                the whole log (kept with the run)
    kind.release_lock()                         when the last stop did not release it (``unlock=True``)
    kind.status()         -> (record | None, state)   read-only, outside a run: what ``status``/``logs`` show

(in the order the runner calls them; per profile from ``launch`` to ``stop``) and
:attr:`ServerKind.capabilities` says what the kind can and cannot guarantee (:class:`Capabilities`).

Kinds (``server: {kind: ...}`` of a host in the inventory, :mod:`mtp_remote.config.inventory`):

- ``process`` (:mod:`.process`): a process group on a host reached by SSH or locally, ``setsid nohup``,
  recorded in the workdir (PID, start time, command-line hash), stopped by :mod:`mtp_remote.remote.process`.
- room for ``exec`` (a long-lived container on that host): the same host scripts run through
  ``docker|podman exec -i NAME sh`` or ``pct exec ID -- sh`` (a transport wrapper around ``c``), so the record,
  stop and log stream are the process kind's; GPU release by per-GPU memory level (inside a container the
  driver reports host PIDs).
- room for ``container`` (a container per profile from an image): ``docker run -d`` per launch, the record is
  the container id (+ image digest), logs through ``docker logs -f`` (a :class:`LogFollower`), stop through
  ``docker stop -t DRAIN`` then ``docker rm``, GPU release by memory level.
- room for ``slurm`` (a job submitted from a login node): the record is the job id, logs are the job's output
  file, stop is ``scancel`` (``--signal=TERM`` first for the drain), the URL a tunnel to the compute node.
- room for ``attach`` (an endpoint someone else serves): ``launch`` returns a record of what is there and never
  starts anything, ``stop`` never signals, no lock, no A/A relaunch (``capabilities.relaunch`` False).

A new kind: one module here implementing :class:`ServerKind`, one variant of ``ServerSpec`` in
``config/inventory.py``, its branch in :func:`mtp_remote.serving.kinds.open_server`, and tests that pass
``tests/support/seam.py``'s ``run_through_the_seam`` (what the runner asks of any kind; ``tests/unit/serving/``
runs it on a plain fake kind and on the process kind).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..errors import LaunchError
from ..remote.connect import Tunnel
from ..remote.logfile import Polled

#: Log lines an outcome keeps (its ``log_tail``).
TAIL_LINES = 30


@dataclass
class WaitOutcome:
    """Common fields of Ready / Crashed / TimedOut. Times in seconds since launch."""

    profile: str
    elapsed_s: float
    milestones: list[dict] = field(default_factory=list)  # [{"name", "at_s"}] seconds since launch
    log_tail: list[str] = field(default_factory=list)
    cause: str = ""
    hint: str = ""
    fatal_line: str | None = None

    kind = "outcome"

    @property
    def ok(self) -> bool:
        return self.kind == "ready"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "profile": self.profile, "elapsed_s": round(self.elapsed_s, 3),
                "milestones": self.milestones, "cause": self.cause, "hint": self.hint,
                "fatal_line": self.fatal_line, "log_tail": self.log_tail}

    def describe(self) -> str:
        if self.ok:
            return f"{self.profile}: ready after {self.elapsed_s:.1f} s"
        what = "crashed" if self.kind == "crashed" else "timed out"
        return f"{self.profile}: server {what} after {self.elapsed_s:.1f} s: {self.cause} — {self.hint}"


class Ready(WaitOutcome):
    kind = "ready"


class Crashed(WaitOutcome):
    kind = "crashed"


class TimedOut(WaitOutcome):
    kind = "timed_out"


def raise_for_outcome(outcome: WaitOutcome) -> None:
    """Turn a Crashed/TimedOut outcome into a LaunchError with the log tail as evidence."""
    if not outcome.ok:
        raise LaunchError(outcome.describe(), outcome=outcome, evidence="\n".join(outcome.log_tail))


@dataclass(frozen=True)
class Capabilities:
    """What a kind of server can and cannot guarantee; the runner and the reports read it, never the kind's
    name.

    - ``identity``: how what we stop is known to be what we started — ``"pid"`` (PID + start time + command-line
      hash + boot id, :func:`mtp_remote.remote.process.is_ours`), ``"container"`` (container id), ``"job"``
      (job id), ``"none"`` (attached: nothing of ours to stop).
    - ``drain``: a stop first asks the server to finish its requests (SIGTERM; ``docker stop -t``;
      ``scancel --signal=TERM``) and waits up to ``timeouts.drain_s`` before the kill.
    - ``gpu_release``: how a stop waits until the GPU memory is free — ``"pid"`` (nvidia-smi lists none of its
      PIDs), ``"memory"`` (each GPU back to its level before the launch: where PIDs are not visible, as inside a
      container), ``"none"`` (the kind cannot tell: the next launch may meet memory still held).
    - ``logs``: ``"stream"`` (followed as written: ready within ms, the crash watch with no round trip),
      ``"poll"`` (read from a byte offset, one round trip a look), ``"none"`` (no log: readiness by ``/health``
      alone, no fatal-line cause).
    - ``relaunch``: the same argv can be launched again (the A/A calibration arm measures launch-to-launch
      noise; an attached server has none).
    - ``launch``: we choose the launch line (argv and environment per profile); False for an attached server,
      which serves one configuration that is only described.
    - ``lock``: a host lock keeps two runs from fighting over one place.
    - ``host_view``: the host we reach is where the server runs — its port, GPUs and processes are the server's
      (``status`` lists them, ``stop --force`` may signal them); False for a SLURM job, which runs on a compute
      node the login node does not see into.
    """

    kind: str
    identity: Literal["pid", "container", "job", "none"]
    drain: bool
    gpu_release: Literal["pid", "memory", "none"]
    logs: Literal["stream", "poll", "none"]
    relaunch: bool
    launch: bool
    lock: bool
    host_view: bool


class ServerIdentity(Protocol):
    """The record :meth:`ServerKind.launch` returns: who the server is and what it runs (``argv_masked``: the
    launch line with secrets as ``***``); ``label`` names it in messages ("PID 1234", "container 3f2a9c",
    "job 5678"), ``ident`` in file names ("1234"). The kind keeps whatever else its stop and poll need (the
    process kind: PID, start time, command-line hash)."""

    profile: str
    run_id: str
    port: int
    log_path: str
    argv_masked: list[str]

    @property
    def ident(self) -> str: ...

    @property
    def label(self) -> str: ...


class StopReport(Protocol):
    """What a stop did: ``found`` is "running" | "group-only" | "gone" | "not-ours" | "refused" | "none"
    (nothing recorded); ``log_path`` the stopped server's log, ``gpu_release_s`` seconds until its GPU
    memory was seen free, ``unlocked`` whether the host lock went in the same step; ``describe()`` one line;
    ``ident`` and ``label`` name the server stopped as :class:`ServerIdentity` does."""

    found: str
    log_path: str | None
    gpu_release_s: float
    unlocked: bool

    @property
    def ident(self) -> str: ...

    @property
    def label(self) -> str: ...

    def describe(self) -> str: ...


class LogFollower(Protocol):
    """A server's log as it is written (:class:`mtp_remote.remote.follow.LogStream` is the process kind's).

    ``read(timeout_s)`` new text (waiting up to that long for some); ``text`` all of it so far; ``ended`` once
    the follower stopped by itself (the server is gone, or the connection dropped: one poll tells which);
    ``drain()`` the last text after it ended; ``offset + nbytes`` the byte offset a poll continues from;
    ``complete`` False once ``text`` lost its head or the follow could not run; ``children`` what the host side
    recorded at the ready line (or None); ``wait_end(timeout_s)`` after a stop; leaving the context stops it."""

    offset: int
    nbytes: int
    complete: bool
    children: list[list[int]] | None

    @property
    def ended(self) -> bool: ...

    @property
    def text(self) -> str: ...

    def read(self, timeout_s: float) -> str: ...

    def drain(self) -> str: ...

    def wait_end(self, timeout_s: float) -> bool: ...

    def close(self) -> None: ...

    def __enter__(self) -> LogFollower: ...

    def __exit__(self, *exc) -> None: ...


@runtime_checkable
class ServerKind(Protocol):
    """Where the servers of one run on one host live, and how each is launched, followed, watched and stopped.

    ``c`` is the transport the kind's commands use (a Fabric Connection or an Invoke Context; the runner rides
    out a dropped connection through it); ``workdir`` where the kind keeps its files on the host (resolved by
    :meth:`prepare`); ``on_progress(message)`` takes one-line progress. Errors: ``launch`` raises LaunchError
    (with ``cause``), ``prepare`` RemoteError/LockError, ``stop`` StopError when what it stopped keeps the GPU;
    any command may raise TransportLost. ``isinstance(x, ServerKind)`` checks that ``x`` has every member (not their
    signatures)."""

    capabilities: Capabilities
    c: object
    workdir: str
    run_id: str
    on_progress: Callable[[str], None]

    def prepare(self, lock_owner: str | None = None) -> None:
        """Make the place usable (workdir, logs dir) and, with ``lock_owner``, take the host lock."""

    def release_lock(self) -> None:
        """Release this run's host lock (nothing when the kind has none)."""

    def find_leftover(self) -> ServerIdentity | None:
        """The server this run (``run_id``) recorded here on its port, if it is still the one we started and
        alive (a resume may adopt it); else None."""

    def launch(self, profile: str, argv: list[str], env: dict[str, str]) -> ServerIdentity:
        """Start the server of ``profile`` with SGLang's ``argv`` and ``env``; its identity record."""

    def follow(self, rec: ServerIdentity) -> LogFollower | None:
        """Start following ``rec``'s log for its whole life, or None when the kind can only poll."""

    def wait_ready(self, rec: ServerIdentity, *, timeout_s: float, health: Callable[[], bool] | None = None,
                   stream: LogFollower | None = None) -> WaitOutcome:
        """Follow ``rec`` until Ready (ready line, then ``health()``), Crashed (cause, hint, log tail) or
        TimedOut after ``timeout_s`` seconds."""

    def poll(self, rec: ServerIdentity, offset: int) -> Polled:
        """One look: is ``rec`` alive, and its log text from byte ``offset``."""

    def reach(self) -> AbstractContextManager[Tunnel]:
        """Where the driver reaches the server (``Tunnel.url``) for the length of the block."""

    def stop(self, *, term_s: float = 60.0, gpu_release_s: float = 120.0, drain_s: float | None = None,
             unlock: bool = False, drain_name: str = "timeouts.drain_s") -> StopReport:
        """Stop the server of ours recorded here (if any): drain up to ``min(term_s, drain_s)`` seconds, kill,
        wait up to ``gpu_release_s`` for its GPU memory; ``unlock``: release the lock in the same step."""

    def read_log(self, log_path: str) -> str:
        """The log's text ('' when missing)."""

    def status(self) -> tuple[ServerIdentity | None, str]:
        """Read-only (``status``, ``logs``): the server recorded here and its state — "none" (nothing recorded),
        "running" (alive and ours), "not running", "not ours" (the record names something else now), or the
        kind's own live state (a SLURM job's queue state in lower case: "pending", ...)."""
