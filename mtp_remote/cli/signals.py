"""The entry point's Ctrl-C/SIGTERM handling: one :class:`~mtp_remote.interrupts.Interrupts` per process, shared by
the click commands and the Fabric tasks (only one of them runs in a process). Light: imported at start-up."""

from __future__ import annotations

from ..interrupts import Interrupts

#: SIGINT/SIGTERM handling for this process (entry point state: one per process).
INTERRUPTS = Interrupts()
