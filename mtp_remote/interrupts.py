"""Ctrl-C and SIGTERM for the entry points: unwind the run like a KeyboardInterrupt, reliably.

Invoke forwards a KeyboardInterrupt raised while a command runs to that command and keeps waiting (so the
interrupt can be swallowed), or the command then fails (so it surfaces as ``UnexpectedExit``). An
:class:`Interrupts` object remembers that an interrupt was asked for; the runner's progress hooks call
:meth:`check`, which raises KeyboardInterrupt at the next safe point, and the run treats any error that
follows a requested interrupt as that interrupt. One object per process, created by ``cli/main.py``/``cli/tasks.py``.
"""

from __future__ import annotations

import os
import signal


#: Printed on the second interrupt, while the first one unwinds the run.
SECOND_NOTICE = (b"interrupt: already stopping, with what this command started (servers, tunnels); "
                 b"press Ctrl-C once more to leave at once and leave them running\n")
#: Printed on the third, just before the process leaves with exit code 130.
ABANDON_NOTICE = b"interrupt: left at once; servers this run started may still be running (`mtp-remote status`)\n"


class Interrupts:
    """Install with :meth:`install`; ``requested`` is True once SIGINT or SIGTERM arrived.

    Only the first signal raises KeyboardInterrupt: the run unwinds and stops what it started. A second one
    while that cleanup runs would cut it short (a server left up, or the process killed by SIGINT instead of
    exiting 130), so it only prints :data:`SECOND_NOTICE`; a third leaves at once (``os._exit(130)``), as
    Terraform's "Two interrupts received. Exiting immediately". :meth:`exiting` ignores any further signal once
    the entry point has printed its interrupt line and is leaving."""

    def __init__(self) -> None:
        self.requested = False
        self.count = 0

    def install(self) -> Interrupts:
        signal.signal(signal.SIGINT, self._handler)
        signal.signal(signal.SIGTERM, self._handler)
        return self

    def _handler(self, signum, frame) -> None:
        self.requested = True
        self.count += 1
        if self.count == 1:
            raise KeyboardInterrupt
        if self.count == 2:
            os.write(2, SECOND_NOTICE)
            return
        os.write(2, ABANDON_NOTICE)
        os._exit(130)

    @staticmethod
    def exiting() -> None:
        """The entry point is leaving with exit code 130: a Ctrl-C during interpreter shutdown (paramiko's
        threads joined, files flushed) must not turn that into a death by SIGINT."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def check(self) -> None:
        """Raise KeyboardInterrupt if an interrupt was requested and swallowed on the way."""
        if self.requested:
            raise KeyboardInterrupt


def run_async(coro):
    """:func:`asyncio.run` for the entry points' event loops (sampling, readiness, smoke). An interrupt that
    lands while one of the loop's tasks is running raises KeyboardInterrupt inside that task: the run unwinds
    as usual, and the task keeps the exception -- which asyncio would print, after the entry point's
    "interrupted; ... continue with" line, as "Task exception was never retrieved" with a traceback. This loop
    drops that report for KeyboardInterrupt only; every other unretrieved exception is reported as before."""
    import asyncio

    async def main():
        asyncio.get_running_loop().set_exception_handler(_report_unless_interrupt)
        return await coro

    return asyncio.run(main())


def _report_unless_interrupt(loop, context: dict) -> None:
    if isinstance(context.get("exception"), KeyboardInterrupt):
        return
    loop.default_exception_handler(context)
