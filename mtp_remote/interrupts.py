"""Ctrl-C and SIGTERM for the entry points: unwind the run like a KeyboardInterrupt, reliably.

Invoke forwards a KeyboardInterrupt raised while a command runs to that command and keeps waiting (so the
interrupt can be swallowed), or the command then fails (so it surfaces as ``UnexpectedExit``). An
:class:`Interrupts` object remembers that an interrupt was asked for; the runner's progress hooks call
:meth:`check`, which raises KeyboardInterrupt at the next safe point, and the run treats any error that
follows a requested interrupt as that interrupt. One object per process, created by ``cli.py``/``tasks.py``.
"""

from __future__ import annotations

import signal


class Interrupts:
    """Install with :meth:`install`; ``requested`` is True once SIGINT or SIGTERM arrived."""

    def __init__(self) -> None:
        self.requested = False

    def install(self) -> Interrupts:
        signal.signal(signal.SIGINT, self._handler)
        signal.signal(signal.SIGTERM, self._handler)
        return self

    def _handler(self, signum, frame) -> None:
        self.requested = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise KeyboardInterrupt if an interrupt was requested and swallowed on the way."""
        if self.requested:
            raise KeyboardInterrupt
