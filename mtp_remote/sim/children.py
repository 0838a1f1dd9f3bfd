"""Child processes of the simulated server, titled like SGLang's (``sglang::scheduler_TP0``, ...).

SGLang runs one scheduler process per TP rank (they hold the GPU memory) and a detokenizer process, all in the
server's process group. The sim's children do no work; they exist so that process listings, ``nvidia-smi``
compute apps and process-group signalling look like a real host. A child dies with its parent
(``PR_SET_PDEATHSIG``, plus a parent poll) and dies at once on SIGTERM, as SGLang's scheduler and detokenizer
do (they install no handler): a SIGTERM sent to the whole process group leaves the parent's drain waiting
for requests no scheduler will finish. With ``--orphan SECONDS`` (the ``stale_orphan`` fault) a child leaves the process group, survives
its parent and lingers that long, still holding its GPU memory.

:func:`spawn` forks the server: no new interpreter (a fresh one cost ~50 ms of CPU per child, three per launch,
hundreds of launches in the test suite).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from mtp_remote.sim import gpu


class Child:
    """A forked child, read as the :class:`subprocess.Popen` it replaces: ``pid``, ``poll()``, ``kill()``."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the child has exited (reaped here), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the child (:class:`OSError` when it is gone)."""
        os.kill(self.pid, signal.SIGKILL)


def spawn(title: str, orphan_seconds: float | None = None) -> Child:
    """Fork one child titled ``title`` (stdout/stderr inherited, so it shares the server log). Called before the
    server starts any thread (a fork copies only the calling one)."""
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return Child(pid)
    code = 1
    try:  # the child: never returns into the server's code, never runs its exit handlers
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = run(title, parent, orphan_seconds)
    finally:
        os._exit(code)


def _set_title(title: str) -> None:
    try:
        import setproctitle

        setproctitle.setproctitle(title)
    except ImportError:  # still recognisable in ps -o comm
        try:
            ctypes.CDLL("libc.so.6").prctl(15, title.encode()[:15], 0, 0, 0)
        except OSError:
            pass


def run(title: str, parent: int, orphan_seconds: float | None = None) -> int:
    """The child: set the title, then wait for ``parent`` to go (or linger ``orphan_seconds`` as an orphan)."""
    _set_title(title)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if orphan_seconds:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.setsid()
        deadline = None
        while True:
            if deadline is None and os.getppid() != parent:
                deadline = time.monotonic() + orphan_seconds
            if deadline is not None and time.monotonic() > deadline:
                gpu.mark_exited(os.getpid())
                return 0
            time.sleep(0.1)
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    while os.getppid() == parent:  # the death signal ends it first; this poll covers a libc without prctl
        time.sleep(0.5)
    return 0
