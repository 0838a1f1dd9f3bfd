"""Riding out a dropped SSH connection: a host step, a poll or a request cut by the drop runs again once the
connection is re-opened (within its bound); when it cannot be re-opened the cause is kept (``TransportLost``), never
turned into a failed sample or a lost stop."""

from __future__ import annotations

import asyncio
import time

from ..responses import Completion
from ..errors import TransportLost
from ..remote import connect as transport
from ..remote.logfile import Polled
from ..serving.base import ServerKind


def riding_out(server: ServerKind, step, default):
    """``step()``, riding out a dropped SSH connection of ``server.c``: a step cut by the drop runs again on the
    re-opened connection (the steps used here re-read the host's state, so repeating them is safe); ``default``
    when the host cannot be reached within the reconnect bound (one more try after the connection was marked
    lost)."""
    for _ in range(2):
        try:
            return step()
        except TransportLost:
            if transport.is_lost(server.c) and not transport.revive(server.c):
                return default
    return default


def poll_riding_out(server: ServerKind, rec, offset: int) -> Polled:
    """``server.poll`` (any kind of server); a poll cut by a dropped connection is sent again (the next command
    re-opens the connection within its bound). Raises TransportLost when it cannot be re-opened."""
    try:
        return server.poll(rec, offset)
    except TransportLost:
        if transport.is_lost(server.c):
            raise
        return server.poll(rec, offset)


async def send_riding_out(tun: transport.Tunnel | None, request, pr=None) -> Completion:
    """``await request()``; a request cut by a dropped SSH connection is sent again (at most twice) once the
    connection is re-opened — requests are seeded, so the answer is the same. Raises TransportLost when the
    connection cannot be re-opened: a lost connection ends the profile, it is never a failed sample."""
    mark = tun.mark() if tun else None
    comp = await request()
    for _ in range(2):
        if not await cut_by_drop(tun, mark, comp.error):
            break  # no error, an answer from the server, or not cut by a drop: a per-sample failure (data)
        if tun.lost is None:
            await asyncio.to_thread(reopen, tun)
        if tun.lost is not None:
            raise tun.lost
        mark = tun.mark()
        comp = await request()
        if pr is not None:  # the ProfileRun being sampled
            pr.n_resent += 1
    if comp.error and tun is not None and tun.lost is not None:
        raise tun.lost
    return comp


async def cut_by_drop(tun, mark, error: str | None, grace_s: float = 1.0) -> bool:
    """Whether a failed request was cut by a dropped SSH connection. The channels of a dying connection
    close a few ms before paramiko marks it inactive, so a connection-level error (not an HTTP status) waits
    up to ``grace_s`` seconds for the drop to show."""
    if error is None or error.startswith("HTTP ") or tun is None or mark is None:
        return False
    deadline = time.monotonic() + grace_s
    while not tun.dropped_since(mark):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def reopen(tun: transport.Tunnel) -> None:
    """Re-open the tunnel's connection (bounded); a failure is left in ``tun.lost``."""
    try:
        tun.conn.open()
    except TransportLost:
        pass
