"""A streaming request stopped by its client is aborted, as real SGLang 0.5.9 aborts it: ``/abort_request`` frees
its slot at the engine's next step; a stream closed without it is aborted 2 s later (SGLang's abort task);
either way the stop's drain that follows holds no request. ``stream_interval`` spaces the events."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time

import httpx

from mtp_remote.analysis.settled import LOOP_STOP, LoopWatch
from mtp_remote.client import ServerClient
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS

PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"
BODY = {"text": PROMPT, "stream": True,
        "sampling_params": {"temperature": 0.7, "max_new_tokens": 100000, "ignore_eos": True, "stream_interval": 8}}


def running(c: httpx.Client) -> int:
    m = re.search(r"^sglang:num_running_reqs\{.*\} ([\d.]+)$", c.get("/metrics").text, re.MULTILINE)
    return int(float(m.group(1)))


def _open_stream(c: httpx.Client, events: int) -> tuple[str, list[int]]:
    """Read ``events`` events of a long streaming request, then close the stream; (rid, tokens per event)."""
    sizes, rid = [], ""
    with c.stream("POST", "/generate", json=BODY) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                ev = json.loads(line[6:])
                rid = ev["meta_info"]["id"]
                sizes.append(len(ev["output_ids"]))
                if len(sizes) == events:
                    break
    return rid, sizes


def _until(pred, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def test_a_closed_stream_is_aborted_two_seconds_later_and_the_drain_holds_nothing(sim):
    s = sim(FIELD_FLAGS + ["--enable-metrics"])
    with s.client() as c:
        _, sizes = _open_stream(c, 5)
        assert all(b - a >= 8 for a, b in zip(sizes, sizes[1:]))  # one event per 8 tokens at least
        assert running(c) == 1  # still decoding: SGLang aborts a gone client's request after 2 s
        freed = _until(lambda: running(c) == 0, 5.0)
        assert freed is not None and 1.5 < freed + 0.1 < 3.0
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) is not None
    assert "Remaining number of requests 0" in s.log


def test_abort_request_frees_the_slot_at_once(sim):
    s = sim(FIELD_FLAGS + ["--enable-metrics"])
    with s.client() as c:
        rid, _ = _open_stream(c, 3)
        assert c.post("/abort_request", json={"rid": rid}).status_code == 200
        assert _until(lambda: running(c) == 0, 0.5) is not None


def test_the_client_stops_a_settled_loop_aborts_it_and_says_where(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS + ["--enable-metrics"], faults="state_leak")

    async def go():
        async with ServerClient(s.url) as sc:
            out = []
            for seed in range(4):
                watch = LoopWatch()
                out.append(await sc.generate_stream(PROMPT, temperature=0.7, max_new_tokens=2048, seed=seed,
                                                    watch=lambda text, ids, w=watch: (
                                                        (hit := w.look(text, ids)) and hit.to_dict())))
            return out

    comps = asyncio.run(go())
    stopped = [c for c in comps if c.finish_reason == LOOP_STOP]
    assert stopped, [c.finish_reason for c in comps]
    for comp in stopped:
        assert comp.stop["aborted"] is True and comp.stop["repeats"] >= 10
        assert comp.completion_tokens == comp.stop["at_tokens"] == len(comp.output_ids) < 2048
        assert comp.spec_verify_ct and comp.spec_verify_ct < comp.completion_tokens
    with s.client() as c:
        assert _until(lambda: running(c) == 0, 0.5) is not None
