"""The performance model: tokens/s reflect acceptance, so healthy speculation is faster and loops look fastest.

Runs the scheduler in-process (no HTTP) at time scale 0.05 on the field playbook's prompts, 8 concurrent
requests per profile; the figure is the mean per-request tokens/s, as the diagnosis computes it.
"""

from __future__ import annotations

import asyncio
import io
import time

from mtp_remote.sim.args import parse_server_args
from mtp_remote.sim.decode import SamplingParams
from mtp_remote.sim.engine import Engine
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.logfmt import SimLog
from mtp_remote.sim.memory import plan_memory
from mtp_remote.sim.tokens import Vocab
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS
from tests.sim.test_sim_model import PROMPTS, TEMPLATE


def tokens_per_second(flags: list[str], faults: str = "", scale: float = 0.05, max_new_tokens: int = 1024) -> float:
    args, _ = parse_server_args(FIELD_FLAGS + flags)
    fl = parse_faults(faults)
    engine = Engine(args, fl, Vocab(), SimLog(2, io.StringIO()), scale, plan_memory(args, 49140, fl))

    async def run() -> float:
        task = asyncio.create_task(engine.run())
        reqs = []
        for i, p in enumerate(PROMPTS[:4] * 2):
            text = TEMPLATE.format(prompt=p)
            req = engine.new_request(text, engine.vocab.encode(text),
                                     SamplingParams(temperature=0.7, max_new_tokens=max_new_tokens, seed=i))
            engine.submit(req)
            reqs.append(req)
        await asyncio.gather(*(r.done.wait() for r in reqs))
        task.cancel()
        return sum(len(r.seq.output_ids) / (r.finished_at - r.created) for r in reqs) / len(reqs)

    return asyncio.run(run())


def test_speculation_speeds_up_when_healthy_slows_down_when_useless_and_loops_look_fastest():
    t0 = time.monotonic()
    base = tokens_per_second([])
    healthy = tokens_per_second(MTP_FLAGS)
    leaky = tokens_per_second(MTP_FLAGS, "state_leak")
    useless = tokens_per_second(MTP_FLAGS, "low_accept")
    assert 1.4 <= healthy / base <= 3.0
    assert leaky > healthy
    assert useless < base
    assert time.monotonic() - t0 < 30
