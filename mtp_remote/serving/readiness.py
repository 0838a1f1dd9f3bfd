"""Following a server to ready, for any kind that has a log: three outcomes with their cause.

:class:`Watch` judges the log text and the process state: :class:`~.base.Ready` (the ready line, then the
caller's ``/health`` check), :class:`~.base.Crashed` (process gone, or a fatal signature: cause, hint, last 30
lines) or :class:`~.base.TimedOut`, with the milestones seen on the way. :func:`follow_to_ready` feeds it from a
log follower and falls back to polling (:meth:`~.base.ServerKind.poll`) when the follower ends while the server
lives. The log is classified with the same signature classifier as ``classify-log``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..remote.logs import READY_LINE, LogClassification, classify_log
from .base import TAIL_LINES, Crashed, LogFollower, Ready, ServerIdentity, ServerKind, TimedOut, WaitOutcome

log = logging.getLogger(__name__)

#: Seconds between two polls when the log cannot be followed.
POLL_S = 0.1

#: The hint of a server that printed its ready line and then exited (no fatal line): the readiness wait's, when it
#: reads both in one step, and the ``/health`` check's (``experiment.watch.confirm_health``).
EXITED_AFTER_READY = "the server process exited after its ready line, before /health answered 200; read the log tail"


class Watch:
    """The judgement part of the readiness wait: accumulate log text, report milestones (through
    ``lc.on_progress``), decide the outcome for ``rec.profile``."""

    def __init__(self, lc, rec, timeout_s: float, health: Callable[[], bool] | None):
        self.lc, self.rec, self.timeout_s, self.health = lc, rec, timeout_s, health
        self.t0 = time.monotonic()
        self.text = ""
        self.seen: dict[str, float] = {}  # milestone -> seconds after the wait started when first seen
        self.cls: LogClassification | None = None

    def step(self, new: str, *, alive: bool) -> WaitOutcome | None:
        """Take new log text and the process state; return an outcome, or None to keep waiting."""
        if new:
            self.text += new
            # judge complete lines only: a fatal line read half-written can match a generic signature
            # before its end shows the specific cause
            self.cls = classify_log(self.text if not alive else self.text[: self.text.rfind("\n") + 1])
            for m in self.cls.milestones:
                if m.name not in self.seen:
                    self.seen[m.name] = round(time.monotonic() - self.t0, 3)
                    self.lc.on_progress(f"{self.rec.profile}: {m.name} ({self.seen[m.name]:.1f} s)")
        elapsed = time.monotonic() - self.t0
        cls = classify_log(self.text) if not alive else (self.cls or classify_log(""))
        kw = dict(profile=self.rec.profile, elapsed_s=elapsed,
                  milestones=[{"name": k, "seen_s": v} for k, v in self.seen.items()],
                  log_tail=self.text.splitlines()[-TAIL_LINES:])
        # before the ready line: a failed bind (signatures.HTTP_BIND_FAILED) is fatal even when a ready line
        # follows (the warmup reached whoever holds the port)
        if cls.is_fatal:
            return Crashed(cause=cls.cls, hint=cls.hint, fatal_line=cls.fatal_line, **kw)
        if not alive:  # the ready line and the exit can arrive in one read (a server that dies right after it)
            hint = EXITED_AFTER_READY if READY_LINE in self.text else "the server process exited; read the log tail"
            return Crashed(cause="process_exited", hint=hint, fatal_line=None, **kw)
        if READY_LINE in self.text and (self.health is None or self.health()):
            return Ready(cause="ready", **kw)
        if elapsed >= self.timeout_s:
            return TimedOut(cause="timed_out", hint=f"not ready after {self.timeout_s:.0f} s (last state: "
                                                    f"{cls.cls}); raise timeouts.ready_s or read the log", **kw)
        return None


def follow_to_ready(kind: ServerKind, rec: ServerIdentity, stream: LogFollower | None, timeout_s: float,
                    health: Callable[[], bool] | None) -> tuple[WaitOutcome, bool]:
    """Feed ``stream`` to a :class:`Watch` until it decides; ``(outcome, streamed)`` — ``streamed`` False when
    the outcome came by polling (the stream ended: the server died, the connection dropped under it, or the
    host's tail cannot follow a file; one poll tells which, and a live server is then polled every
    :data:`POLL_S` seconds from the last byte offset). Without a stream (a kind that can only poll) the log is
    polled from its start."""
    watch = Watch(kind, rec, timeout_s, health)
    offset = stream.offset if stream is not None else 0
    while stream is not None:
        new = stream.read(0.05)
        if stream.ended:
            new += stream.drain()
            offset = stream.offset + stream.nbytes
            alive, more, n = kind.poll(rec, offset)  # dead server, dropped connection, or a tail that cannot -f
            offset += n
            outcome = watch.step(new + more, alive=alive)
            if outcome is not None:
                return outcome, False
            break
        outcome = watch.step(new, alive=True)
        if outcome is not None:
            return outcome, True
    if stream is not None:
        log.info("following the log by polling (the log stream ended while the server lives: no tail -f there, "
                 "or the connection dropped)")
    while True:
        time.sleep(POLL_S)
        alive, new, n = kind.poll(rec, offset)
        offset += n
        if not alive:
            new += kind.poll(rec, offset).text
        outcome = watch.step(new, alive=alive)
        if outcome is not None:
            return outcome, False
