"""The request-rate bound of attached endpoints: starts spaced 1/rate apart, whatever the number of workers."""

from __future__ import annotations

import asyncio
import time

from mtp_remote.experiment.sampling import Pacer


def test_starts_are_spaced_by_the_rate_across_workers():
    starts: list[float] = []

    async def main():
        pacer = Pacer(20.0)  # 50 ms apart

        async def worker():
            for _ in range(3):
                await pacer.wait()
                starts.append(time.monotonic())

        await asyncio.gather(*(worker() for _ in range(4)))

    asyncio.run(main())
    starts.sort()
    # the i-th start is scheduled 50 ms after the one before it and a sleep never ends early (5 ms for the
    # clock); on a loaded machine a start may come late, never early
    assert len(starts) == 12
    assert all(t >= starts[0] + i * 0.05 - 0.005 for i, t in enumerate(starts)), [t - starts[0] for t in starts]


def test_no_rate_means_no_wait():
    async def main():
        pacer = Pacer(None)
        t0 = time.monotonic()
        for _ in range(100):
            await pacer.wait()
        return time.monotonic() - t0

    assert asyncio.run(main()) < 0.05
