"""SGLang-format log lines for the simulated engine, written to stdout and flushed line by line.

SGLang prefixes its lines with ``[YYYY-mm-dd HH:MM:SS]``, and lines from a scheduler process with ``
TP<rank>`` inside the brackets when tp_size > 1 (``[2026-11-02 09:14:47 TP0] Load weight end. ...``).
Uvicorn's lines keep their ``INFO:     `` level column inside SGLang's prefix.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class SimLog:
    """Writes SGLang-shaped lines. ``rank`` None = the main process (no TP prefix)."""

    def __init__(self, tp_size: int, stream: TextIO | None = None):
        self.tp_size = tp_size
        self.stream = stream or sys.stdout

    def prefix(self, rank: int | None = None) -> str:
        """``[time]`` or ``[time TP<rank>]``."""
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        if rank is not None and self.tp_size > 1:
            return f"[{ts} TP{rank}]"
        return f"[{ts}]"

    def line(self, msg: str, rank: int | None = None) -> None:
        """One prefixed line."""
        self.raw(f"{self.prefix(rank)} {msg}")

    def all_ranks(self, msg: str) -> None:
        """The same line from every TP rank (rank 0 only when tp_size is 1)."""
        for r in range(self.tp_size):
            self.line(msg, r)

    def uvicorn(self, msg: str, level: str = "INFO") -> None:
        """A uvicorn line: ``[time] INFO:     msg``."""
        self.line(f"{level + ':':<9} {msg}")

    def raw(self, text: str) -> None:
        """Text as is (tracebacks, progress bars), newline added, flushed."""
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass
