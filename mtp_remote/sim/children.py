"""Child processes of the simulated server, titled like SGLang's (``sglang::scheduler_TP0``, ...).

SGLang runs one scheduler process per TP rank (they hold the GPU memory) and a detokenizer process, all in the
server's process group. The sim's children do no work; they exist so that process listings, ``nvidia-smi``
compute apps and process-group signalling look like a real host. A child dies with its parent
(``PR_SET_PDEATHSIG``, plus a parent poll) and dies at once on SIGTERM, as SGLang's scheduler and detokenizer
do (they install no handler): a SIGTERM sent to the whole process group leaves the parent's drain waiting
for requests no scheduler will finish. With ``--orphan SECONDS`` (the ``stale_orphan`` fault) a child leaves the process group, survives
its parent and lingers that long, still holding its GPU memory.

Run as ``python -m mtp_remote.sim.children --title TITLE --parent PID [--orphan SECONDS]``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

from mtp_remote.sim import gpu


def spawn(title: str, orphan_seconds: float | None = None) -> subprocess.Popen:
    """Start one child titled ``title`` (stdout/stderr inherited, so it shares the server log)."""
    argv = [sys.executable, "-m", "mtp_remote.sim.children", "--title", title, "--parent", str(os.getpid())]
    if orphan_seconds:
        argv += ["--orphan", str(orphan_seconds)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)


def _set_title(title: str) -> None:
    try:
        import setproctitle

        setproctitle.setproctitle(title)
    except ImportError:  # still recognisable in ps -o comm
        try:
            ctypes.CDLL("libc.so.6").prctl(15, title.encode()[:15], 0, 0, 0)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    """Child entry point: set the title, then wait for the parent to go (or linger as an orphan)."""
    p = argparse.ArgumentParser()
    p.add_argument("--title", required=True)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--orphan", type=float, default=None)
    ns = p.parse_args(argv)
    _set_title(ns.title)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if ns.orphan:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.setsid()
        deadline = None
        while True:
            if deadline is None and os.getppid() != ns.parent:
                deadline = time.monotonic() + ns.orphan
            if deadline is not None and time.monotonic() > deadline:
                gpu.mark_exited(os.getpid())
                return 0
            time.sleep(0.1)
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    while os.getppid() == ns.parent:
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
