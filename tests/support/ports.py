"""Ports for the servers the tests start, chosen where nothing else on the machine picks ports.

``bind(("127.0.0.1", 0))`` hands out a port from the kernel's ephemeral range (``ip_local_port_range``,
32768-60999 by default) and releases it at once; until the test's server binds it, any other process may take
the same port: an outgoing connection's source port, or a real SGLang choosing its NCCL/gloo port with
``get_free_port()`` (0.5.9 does). CI saw exactly that: a real-engine test found its port LISTENed by another
worker's process. So test ports come from below the ephemeral range, from a slice of its own per pytest-xdist
worker, never twice in one process, and only after a bind shows the port is free now.
"""

from __future__ import annotations

import os
import re
import socket
import threading

#: Below the default ephemeral range; each xdist worker owns SLICE ports of it.
BASE, SLICE, WORKER_SLOTS = 20000, 1500, 8
_lock = threading.Lock()
_given: set[int] = set()
_next: dict[int, int] = {}


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    m = re.search(r"\d+", os.environ.get("PYTEST_XDIST_WORKER", ""))
    # a process outside xdist (a bench run, a plain pytest) takes the last slot, so it cannot meet worker gw0
    return int(m.group()) % (WORKER_SLOTS - 1) if m else WORKER_SLOTS - 1


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that binds now, outside the kernel's ephemeral range, not handed out before by
    this process, from this xdist worker's own slice. Falls back to a kernel-chosen port only when the
    ephemeral range leaves no room below it."""
    low = min(_ephemeral_low(), 65536)
    start = BASE + _worker_index() * SLICE
    if start + SLICE > low:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    with _lock:
        # a different starting point per process, so two sessions on one machine rarely walk the same ports
        offset = _next.setdefault(start, os.getpid() % SLICE)
        for i in range(SLICE):
            port = start + (offset + i) % SLICE
            if port not in _given and _bindable(port):
                _given.add(port)
                _next[start] = (offset + i + 1) % SLICE
                return port
    raise RuntimeError(f"no free port in {start}-{start + SLICE - 1}")
