"""Watching a server of any kind while the runner uses it: ``/health`` after the ready line, the crash and hang
watch while sampling, and its whole log after the stop.

Everything here reads the server through the seam (:class:`~mtp_remote.serving.base.ServerKind`: its log
follower and ``poll``), riding out a dropped SSH connection (:mod:`.rideout`). A server *fails* while sampling
when its process dies, its log shows a fatal line (request tracebacks excepted: SGLang answers such a request
500 and keeps serving), or it writes nothing for ``timeouts.stall_s`` seconds while requests are in flight.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

from ..client import ServerClient
from ..interrupts import run_async
from ..remote.logs import classify_log
from ..serving.readiness import EXITED_AFTER_READY
from ..serving.base import TAIL_LINES, Crashed, LogFollower, ServerIdentity, ServerKind, TimedOut, WaitOutcome
from .progress import ServingProgress
from .rideout import poll_riding_out, riding_out

_ASGI_ERROR = "ERROR:    Exception in ASGI application"
_LOG_LINE_START = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)


def without_request_tracebacks(text: str) -> str:
    """Log text without the tracebacks of failed requests (``ERROR:    Exception in ASGI application`` up to
    the next timestamped line). SGLang answers such a request 500 and keeps serving, so what the traceback
    ends with (``TypeError: SamplingParams.__init__() got an unexpected keyword argument 'seed'``) is that
    request's error — recorded with the sample — not the server's."""
    out, pos = [], 0
    while (start := text.find(_ASGI_ERROR, pos)) >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        out.append(text[pos:line_start])
        nxt = _LOG_LINE_START.search(text, start + len(_ASGI_ERROR))
        if nxt is None:  # the traceback is still being written: judge it when it is complete
            return "".join(out)
        pos = nxt.start()
    out.append(text[pos:])
    return "".join(out)


def failure_of(alive: bool, cls) -> dict | None:
    """{"cause", "hint", "fatal_line"} when the server died or logged a fatal line (``cls``: its log's
    :class:`~mtp_remote.remote.logs.LogClassification`), else None."""
    if cls.is_fatal:
        return {"cause": cls.cls, "hint": cls.hint, "fatal_line": cls.fatal_line}
    if not alive:
        return {"cause": "process_exited", "fatal_line": None,
                "hint": "the server process exited while requests were running"}
    return None


def confirm_health(server: ServerKind, rec: ServerIdentity, url: str, outcome: WaitOutcome, t0: float,
                   ready_s: float, stream: LogFollower | None = None) -> WaitOutcome:
    """After the ready line: ``/health`` at ``url`` must answer 200 (it is 503 until warmup ends) within
    ``ready_s`` seconds of ``t0`` (``time.monotonic()`` at the launch). A server that dies meanwhile is Crashed
    at once (its log stream ends; one poll confirms it is gone), classified from its log — not a wait on
    /health until ``timeouts.ready_s``."""
    deadline = t0 + ready_s
    watched = [stream] if stream is not None else []

    async def poll() -> bool | None:  # True: 200; False: the deadline; None: the log stream ended
        async with ServerClient(url, timeout_s=10) as sc:  # /health needs no API key
            while time.monotonic() < deadline:
                if await sc.health() == 200:
                    return True
                if watched and watched[0].ended:
                    return None
                await asyncio.sleep(0.1)
        return False

    while True:
        answer = run_async(poll())
        if answer:
            return outcome
        if answer is None and stream is not None:
            watched.clear()  # a stream that ended while the server lives (dropped connection): /health alone
            text = stream.text + stream.drain()
            alive, more, _ = poll_riding_out(server, rec, stream.offset + stream.nbytes)
            if alive:
                continue
            text += more
            cls = classify_log(text)
            return Crashed(profile=rec.profile, elapsed_s=time.monotonic() - t0, milestones=outcome.milestones,
                           log_tail=text.splitlines()[-TAIL_LINES:],
                           cause=cls.cls if cls.is_fatal else "process_exited", fatal_line=cls.fatal_line,
                           hint=cls.hint if cls.is_fatal else EXITED_AFTER_READY)
        return TimedOut(profile=rec.profile, elapsed_s=time.monotonic() - t0, milestones=outcome.milestones,
                        log_tail=outcome.log_tail, cause="health_check_failed",
                        hint="the ready line was printed but /health never answered 200")


def log_text(server: ServerKind, rec: ServerIdentity, stream: LogFollower | None, *, dropped: bool) -> str:
    """The server's whole log after its stop: the log stream's text when the stream saw all of it (it ended by
    itself once the server was gone, no connection drop, nothing cut off), else read from the host in one
    round trip (the stream's text when the host cannot be reached either)."""
    if stream is not None:
        ended = stream.wait_end(3.0)
        if ended and stream.complete and not dropped:
            return stream.text
        if not ended:
            stream.__exit__(None, None, None)  # stop its tail, off this path
    text = riding_out(server, lambda: server.read_log(rec.log_path), "")
    return text or (stream.text if stream is not None else "")


async def sample_watched(server: ServerKind, rec: ServerIdentity, sampling: Awaitable[None], *, stall_s: float | None,
                         failed: Callable[[], bool], stream: LogFollower | None = None,
                         progress: ServingProgress | None = None) -> dict | None:
    """Run ``sampling`` while watching the server: if its process dies, its log shows a fatal line or it
    stalls, pending requests are cancelled (samples already stored are kept). Returns the failure
    ({"cause", "hint", "fatal_line"}) or None; ``failed()`` says whether any request of the profile failed (the
    server is then looked at once more: requests can all return, failed, before the watcher's next look).
    ``progress``: what the sampling sees of the server's progress (a hang needs it idle too)."""
    sampling = asyncio.ensure_future(sampling)
    watching = asyncio.ensure_future(watch(server, rec, stream, stall_s=stall_s, progress=progress))
    done, _ = await asyncio.wait({sampling, watching}, return_when=asyncio.FIRST_COMPLETED)
    if sampling in done:
        watching.cancel()
        sampling.result()
        return await asyncio.to_thread(server_failure, server, rec, stream, failed())
    crashed = watching.result()
    sampling.cancel()
    try:
        await sampling
    except asyncio.CancelledError:
        pass
    return crashed


def stalled(stall_s: float, progress: ServingProgress | None) -> dict:
    """The failure of a server that stalled: neither its log nor our requests moved for ``stall_s`` seconds; the
    hint says what was in flight, and that a loaded host is the other explanation (not an SGLang bug)."""
    flight = f" ({progress.in_flight()})" if progress is not None else ""
    return {"cause": "stalled", "fatal_line": None,
            "hint": f"the server wrote nothing and answered or streamed nothing for {stall_s:g} s while requests "
                    f"were in flight{flight}: its scheduler looks hung (SGLang's --watchdog-timeout would end it), "
                    f"or the host is too loaded to make progress (check its load average); raise "
                    f"timeouts.stall_s if generations are legitimately that slow"}


def server_failure(server: ServerKind, rec: ServerIdentity, stream: LogFollower | None = None,
                   failed: bool = True) -> dict | None:
    """None if the server is alive and its log shows no fatal line; else cause, hint, fatal line. From the
    log stream when it is live and no request failed; otherwise one poll (a server that just died may not
    have ended the stream yet: its watcher looks every 0.1 s)."""
    if stream is not None and not failed and not stream.ended and stream.complete:
        stream.read(0)
        return failure_of(True, classify_log(without_request_tracebacks(
            stream.text[: stream.text.rfind("\n") + 1])))
    alive, text, _ = poll_riding_out(server, rec, 0)
    return failure_of(alive, classify_log(without_request_tracebacks(text)))


async def watch(server: ServerKind, rec: ServerIdentity, stream: LogFollower | None = None, *, stall_s: float | None,
                interval_s: float = 1.0, progress: ServingProgress | None = None) -> dict:
    """Watch the server's process and log until it dies, logs a fatal line, or stalls: writes nothing for
    ``stall_s`` seconds while requests are in flight *and* ``progress`` (our requests: a response completed,
    streamed output grew) shows none for as long -- log silence alone is not a hang (SGLang logs a ``Decode
    batch`` line every 40 decode steps, none for a short request; a loaded host's batch can take minutes). A
    stall's hint says what was in flight (:meth:`~mtp_remote.experiment.progress.ServingProgress.in_flight`).
    From the log stream (looked at every 0.25 s, no round trip); when there is none,
    or it ends while the server lives (a dropped connection), by polling the process and the log from a byte
    offset every ``interval_s`` seconds (one round trip each). Returns the failure (as :func:`failure_of`).
    ``stall_s`` None: no stall rule (a server with no log, as an attached endpoint)."""
    polled = stream is None or stream.ended
    if polled:
        alive, _, offset = await asyncio.to_thread(poll_riding_out, server, rec, 0)
    else:
        stream.read(0)
        offset = stream.offset + stream.nbytes
    text = ""  # what the server wrote since sampling began
    last_growth = time.monotonic()
    while True:
        await asyncio.sleep(interval_s if polled else min(interval_s, 0.25))
        if polled:
            alive, new, n = await asyncio.to_thread(poll_riding_out, server, rec, offset)
            offset += n
        else:
            alive, new = True, stream.read(0)
            if stream.ended:  # the server is gone, or the connection dropped under the stream: one poll says
                new += stream.drain()
                offset = stream.offset + stream.nbytes
                alive, more, n = await asyncio.to_thread(poll_riding_out, server, rec, offset)
                offset += n
                new += more
                polled = True
        if new:
            text = text[-(256 << 10):] + new  # fatal lines come last: a bounded window is enough
            last_growth = time.monotonic()
        if not alive or "\n" in new:  # judged again only on new complete lines (a look costs ~10 ms)
            window = without_request_tracebacks(text if not alive else text[: text.rfind("\n") + 1])
            failure = failure_of(alive, classify_log(window, serving=True))  # sampling runs after ready
            if failure is not None:  # (complete lines only while it lives)
                return failure
        if stall_s is not None and time.monotonic() - last_growth > stall_s and (
                progress is None or progress.idle_s() > stall_s):
            reachable = getattr(server, "reachable", None)  # a kind on a connection: is it the connection that died?
            if reachable is not None and not await asyncio.to_thread(reachable):
                offset = offset if polled else stream.offset + stream.nbytes  # the next poll reconnects, or raises
                polled, last_growth = True, time.monotonic()  # TransportLost: transport_lost, never `stalled`
                continue
            return stalled(stall_s, progress)
