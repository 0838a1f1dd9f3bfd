"""Evidence, from our side of the connection, that a server is working on our requests while it samples.

Log silence alone is not a hang: SGLang writes one ``Decode batch`` line every ``--decode-log-interval`` (40)
decode steps, so a request of 16 tokens finishes without one, and on a loaded host one speculative batch can
take minutes (issue 30: a healthy hybrid host at load average 9-11 ended ``hung:stalled``). The sampling
workers report here what they see -- a response completed, streamed output grew -- and the hang watch
(:func:`mtp_remote.experiment.watch.watch`) calls a server hung only when neither its log nor this evidence has
moved for ``timeouts.stall_s``; it then says what was in flight (:meth:`ServingProgress.in_flight`).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ServingProgress:
    """What one profile's requests have shown of the server's progress. ``last`` is the monotonic time (s) of
    the last evidence (a completed response, or streamed output that grew; it starts at creation). Called by the
    sampling workers and read by the watch, all on the run's event loop.

    Per request in flight: when it was sent and how much output it has streamed (tokens when the stream carries
    output ids, else characters of text)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last = clock()
        self.completed = 0
        self.last_completed: float | None = None
        self.last_streamed: float | None = None
        self._flight: dict[int, list] = {}  # request token -> [sent at (s), output so far, its unit]
        self._tokens = 0

    def sent(self) -> int:
        """A request was sent; returns its token for :meth:`streamed` and :meth:`ended`."""
        self._tokens += 1
        self._flight[self._tokens] = [self.clock(), 0, "tokens"]
        return self._tokens

    def streamed(self, token: int, size: int, unit: str = "tokens") -> None:
        """Request ``token`` has streamed ``size`` units of output so far (cumulative); growth is progress."""
        f = self._flight.get(token)
        if f is not None and size > f[1]:
            f[1], f[2] = size, unit
            self.last = self.last_streamed = self.clock()

    def ended(self, token: int, *, answered: bool) -> None:
        """Request ``token`` is no longer in flight; ``answered``: the server returned its response (progress),
        not an error of ours or of the connection."""
        self._flight.pop(token, None)
        if answered:
            self.completed += 1
            self.last = self.last_completed = self.clock()

    def idle_s(self) -> float:
        """Seconds since the last evidence of progress."""
        return self.clock() - self.last

    def in_flight(self) -> str:
        """What was in flight, for a hang's hint: how many requests, since when, how much they had streamed,
        and when the server last answered or streamed (e.g. ``4 requests in flight, sent 12-31 s ago, 0-812
        tokens streamed each; 9 responses completed, the last 40 s ago; streamed output last grew 38 s ago``)."""
        now = self.clock()
        flights = list(self._flight.values())
        if not flights:
            said = "no request in flight"
        else:
            ages = sorted(now - f[0] for f in flights)
            sizes = sorted(f[1] for f in flights)
            unit = flights[0][2]
            said = (f"{len(flights)} request(s) in flight, sent {_span(ages, ' s ago')}, "
                    f"{_span(sizes, f' {unit} streamed each')}")
        said += (f"; {self.completed} response(s) completed, the last {now - self.last_completed:.0f} s ago"
                 if self.last_completed is not None else "; no response completed yet")
        if self.last_streamed is not None:
            said += f"; streamed output last grew {now - self.last_streamed:.0f} s ago"
        return said


def _span(values: list[float], suffix: str) -> str:
    lo, hi = values[0], values[-1]
    return f"{lo:.0f}{suffix}" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}{suffix}"
