"""The host lock's owner and heartbeat.

A run holds ``WORKDIR/lock`` (one line: ``owner run_id epoch pid instance``). ``instance`` (:func:`instance`)
names the driver process across machines: this machine's id and boot (``/etc/machine-id``,
``/proc/sys/kernel/random/boot_id``, hashed) and a random part — two machines that share a ``user@host`` name
(containers, cloned VMs) never read each other's PID as their own. While a run holds the lock a
:class:`LockHeartbeat` touches it every :data:`BEAT_S` seconds; a lock is stale only when its file has not been
touched for :data:`STALE_S` seconds (measured on the host, so no clock is compared with another), so a run that
lives — a GPU ``mitigate`` or a nightly of many hours — is never taken over, and a killed one frees the host in
minutes.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import shlex
import threading
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

#: Seconds between two touches of a held lock.
BEAT_S = 30.0
#: Seconds without a touch after which a lock (with an instance field) is stale.
STALE_S = 300.0


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine() -> str:
    """This machine and boot, hashed (12 hex digits): the part of :func:`instance` that says whether a PID in a
    lock is one of this machine's."""
    ident = _read("/etc/machine-id") + "/" + _read("/proc/sys/kernel/random/boot_id")
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


@cache
def instance() -> str:
    """This driver process's lock instance: ``MACHINE.RANDOM`` (:func:`machine`, 8 random hex digits)."""
    return f"{machine()}.{secrets.token_hex(4)}"


def same_machine(inst: str) -> bool:
    """Whether a lock's instance field was written on this machine since its last boot (its PID is then ours
    to check)."""
    return inst.split(".", 1)[0] == machine()


class LockHeartbeat:
    """Touch the lock at ``path`` every :data:`BEAT_S` seconds through ``c`` while it holds ``run_id``; a failed
    touch (a dropped connection) is tried again at the next beat. :meth:`stop` ends it."""

    def __init__(self, c, path: str, run_id: str):
        self._stop = threading.Event()
        cmd = f"grep -qF -- {shlex.quote(' ' + run_id + ' ')} {shlex.quote(path)} 2>/dev/null && touch -c {shlex.quote(path)}"

        def beat() -> None:
            while not self._stop.wait(BEAT_S):
                try:
                    c.run(cmd, hide=True, warn=True, in_stream=False)
                except Exception as e:  # noqa: BLE001 - a dropped connection: the next beat tries again
                    log.debug("lock heartbeat of %s: %s", path, e)

        self._thread = threading.Thread(target=beat, name="lock-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
