"""Issue 33 major 6 and the minors on responses: what a broken or hostile server answers is that request's error
(``Completion.error``), never an exception, a traceback or a NaN stored — against a real HTTP server
(``tests/support/hostile_server.py``) that answers ``meta_info`` as a list, ``NaN`` tokens, a 100,000-deep body, a
50 MB body, HTML, output ids of strings, and trickles a body a byte every 0.2 s (a slow-loris: each read is quick,
the request never ends)."""

from __future__ import annotations

import asyncio
import json
import math
import resource
import time

import pytest

from mtp_remote.client import ServerClient
from mtp_remote.responses import MAX_RESPONSE_BYTES
from tests.support.hostile_server import serving

EXPECTED = {
    "meta_list": "meta_info is a list, not an object",
    "nan_tokens": "NaN in the response",
    "deep": "nested too deeply",
    "not_json": "is not JSON",
    "huge": f"over the {MAX_RESPONSE_BYTES >> 20} MiB bound",
    "slow_loris": "no complete response within 2 s",
    "ids_strings": "output_ids is not a list of token ids",
}


@pytest.mark.parametrize("mode", list(EXPECTED))
@pytest.mark.parametrize("api", ["generate", "generate_stream"])
def test_a_malformed_answer_is_that_requests_error(mode, api):
    with serving([mode]) as (url, state):
        async def go():
            async with ServerClient(url, timeout_s=2.0 if mode == "slow_loris" else 30.0) as sc:
                if api == "generate":
                    return await sc.generate("q", temperature=0.0, max_new_tokens=8, return_logprob=True)
                return await sc.generate_stream("q", temperature=0.0, max_new_tokens=8, watch=lambda t, i: None)

        t0 = time.monotonic()
        comp = asyncio.run(go())
        took = time.monotonic() - t0
    assert comp.error is not None and EXPECTED[mode] in comp.error, comp.error
    assert took < 10, f"{mode}: {took:.1f} s"
    json.dumps(comp.__dict__, allow_nan=False)  # nothing that cannot be stored: no NaN, no infinity


def test_a_50_mb_answer_is_refused_without_holding_it():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with serving(["huge"]) as (url, _):
        async def go():
            async with ServerClient(url, timeout_s=30.0) as sc:
                return await sc.generate("q", temperature=0.0, max_new_tokens=8)
        comp = asyncio.run(go())
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "over the 32 MiB bound" in comp.error
    assert grew_mib < 400, f"peak RSS grew by {grew_mib:.0f} MiB for one 50 MB answer"


@pytest.mark.parametrize("kind", ["deep", "list", "nan"])
def test_a_bad_server_info_is_an_empty_one(kind):
    with serving(["ok"], server_info=kind) as (url, _):
        async def go():
            async with ServerClient(url, timeout_s=5.0) as sc:
                return await sc.server_info(), await sc.generate("q", temperature=0.0, max_new_tokens=8)
        info, comp = asyncio.run(go())
    assert info == {} and comp.error is None and comp.completion_tokens == 4


def test_streamed_events_that_are_malformed_are_the_requests_error():
    """Server-sent events whose JSON is a list, NaN or too deep."""
    from mtp_remote.responses import BadResponse, parse_json

    for payload, msg in (("[1]", None), ('{"meta_info": {"completion_tokens": NaN}}', "NaN"),
                         ("[" * 5000 + "]" * 5000, "nested")):
        if msg is None:
            assert parse_json(payload) == [1]
            continue
        with pytest.raises(BadResponse, match=msg):
            parse_json(payload)
    assert math.isfinite(parse_json("1e308")) and parse_json('{"a": 1}') == {"a": 1}
    with pytest.raises(BadResponse, match="Infinity"):
        parse_json("Infinity")
