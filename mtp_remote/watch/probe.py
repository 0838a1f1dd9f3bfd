"""One probe of a live endpoint: a small, fixed set of requests (greedy and sampled), sent one after another, judged
like a run's samples (loops, acceptance over all and over non-looping samples, tokens/s) and the greedy outputs
compared with the endpoint's first probe.

The probe set is a playbook (:class:`~mtp_remote.config.playbook.Playbook`): its prompts (any request shape), api,
prompt template, ``max_tokens``, ``top_p``, temperatures and sample counts. :func:`default_probe_playbook` is the
gentle built-in one: two prompts, one greedy and two sampled requests each at ``max_tokens`` 1024, ``/generate``
with Qwen's chat template (``/generate`` reports each request's verify steps: the acceptance length). Sampled
requests are streamed and stopped once their loop is settled (as a run's are), so a looping endpoint is not kept
busy to ``max_tokens``; their seeds move on with each probe (new evidence), the greedy ones do not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..analysis.cells import SampleObs, summarize_cell
from ..analysis.diagnosis import to_obs
from ..analysis.divergence import first_divergence
from ..client import ServerClient
from ..records.sample import Sample
from ..responses import Completion, ServerInfo
from ..config.endpoints import Endpoint
from ..config.playbook import Playbook
from ..experiment.plan import RequestSpec, plan_requests
from ..experiment.sampling import sample_record
from ..experiment.workers import send_request

#: Qwen3's chat template for ``/generate``, the think block opened as the template does.
QWEN_TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"


def default_probe_playbook(**over) -> Playbook:
    """The built-in probe set (``over`` replaces any of its fields, e.g. ``api="chat"``): 2 prompts x (1 greedy +
    2 sampled at T = 0.7), ``max_tokens`` 1024, one request at a time, 120 s per request."""
    data = {"name": "watch", "profiles": {"baseline": {}},
            "prompts": [{"id": "two-plus-two", "text": "What is 2+2?"},
                        {"id": "primes", "text": "List the prime numbers below 20."}],
            "temperatures": [0.0, 0.7], "samples": 2, "greedy_samples": 1, "max_tokens": 1024, "api": "generate",
            "prompt_template": QWEN_TEMPLATE, "concurrency": 1, "timeouts": {"request_s": 120.0}}
    data.update(over)
    if data.get("api") == "chat":
        data.pop("prompt_template", None)
    return Playbook.model_validate(data)


def probe_requests(pb: Playbook, endpoint: str, probe: int) -> list[RequestSpec]:
    """The requests of probe number ``probe`` (0 first): the playbook's plan for ``endpoint``, sampled seeds
    moved on by ``probe * samples`` (greedy ones kept: they are compared with the first probe's)."""
    out = []
    for r in plan_requests(pb, endpoint):
        out.append(r if r.temperature == 0 else dataclasses.replace(r, seed=r.seed + probe * pb.samples))
    return out


@dataclass
class ProbeResult:
    """One probe of one endpoint.

    ``summary``: the probe's samples pooled (:class:`~mtp_remote.analysis.cells.CellSummary` as a dict: ``n``,
    ``n_errors``, ``loops``, ``loop_rate``, ``accept_length``/``accept_length_nonloop`` (None when the server
    reports no verify steps: not speculative, or ``api: chat``), ``tokens_per_s``/``tokens_per_s_nonloop``).
    ``greedy``: prompt id -> the greedy output (ids, else text). ``latency_s``: seconds per request (mean) and
    ``duration_s`` the whole probe's. ``server_accept_length``: ``/server_info``'s server-wide average (all
    traffic, not only ours). ``error``: why no sample came back (unreachable, every request failed)."""

    endpoint: str
    url: str
    probe: int
    started_at: str
    duration_s: float
    summary: dict
    records: list[dict]
    greedy: dict[str, list | str] = field(default_factory=dict)
    latency_s: float | None = None
    server_accept_length: float | None = None
    speculative: bool = False
    error: str | None = None
    looping: list[str] = field(default_factory=list)  # "<prompt id> T=<t>" of each degenerate sample


def _speculative(info: dict) -> bool:
    return bool(ServerInfo.model_validate(info).speculative_algorithm)


def _server_accept(info: dict) -> float | None:
    return ServerInfo.model_validate(info).accept_length()


async def _direct(request):
    return await request()


async def probe_endpoint(ep: Endpoint, pb: Playbook, probe: int, *, api_key: str | None = None) -> ProbeResult:
    """Send probe ``probe`` to ``ep`` (``pb.concurrency`` requests at a time, default 1) and judge it. Never
    raises for the endpoint's failures: an unreachable endpoint gives ``error`` and no samples."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    reqs = probe_requests(pb, ep.name, probe)
    limit = asyncio.Semaphore(pb.concurrency or 1)
    async with ServerClient(ep.url, timeout_s=pb.timeouts.request_s, api_key=api_key,
                            max_connections=(pb.concurrency or 1) + 2) as sc:
        info = await sc.server_info()

        async def one(req: RequestSpec) -> tuple[RequestSpec, Completion]:
            async with limit:
                return req, await send_request(sc, pb, req, _direct)

        done = await asyncio.gather(*(one(r) for r in reqs))
        after = await sc.server_info() or info
    spec = _speculative(info)
    records = [sample_record(r, c, speculative=spec, api=pb.api, think_opened_by_prompt=pb.think_opened_by_prompt,
                             max_tokens=pb.max_tokens) for r, c in done]
    return judge_probe(ep, probe, records, started=started, duration_s=time.monotonic() - t0, speculative=spec,
                       server_accept_length=_server_accept(after))


def judge_probe(ep: Endpoint, probe: int, records: list[dict], *, started: str, duration_s: float,
                speculative: bool, server_accept_length: float | None = None) -> ProbeResult:
    """A probe's records (samples.jsonl's shape) pooled into a :class:`ProbeResult`. Pure."""
    obs: list[SampleObs] = [to_obs(r) for r in records]
    cell = summarize_cell(ep.name, max((o.temperature for o in obs), default=0.0), speculative, obs)
    samples = [Sample.of(r) for r in records]
    ok = [r for r in samples if r.error is None]
    greedy = {r.prompt_id: (r.output_ids or r.text or "") for r in ok
              if float(r.temperature) == 0 and r.sample_index == 0}
    error = None
    if not ok:
        error = (samples[0].error or "no answer") if samples else "no request"
    latencies = [r.latency_s for r in ok]
    looping = sorted({f"{o.prompt_id} T={o.temperature:g}" for o in obs if o.ok and o.is_degenerate})
    return ProbeResult(endpoint=ep.name, url=ep.url, probe=probe, started_at=started, duration_s=round(duration_s, 3),
                       summary=cell.to_dict(), records=records, greedy=greedy, looping=looping,
                       latency_s=round(sum(latencies) / len(latencies), 4) if latencies else None,
                       server_accept_length=server_accept_length, speculative=speculative, error=error)


def greedy_changes(reference: dict[str, list | str], now: dict[str, list | str]) -> dict[str, int | None]:
    """Prompt id -> the first position (token, or character for text) where ``now``'s greedy output leaves the
    reference, for each prompt in both whose output changed ({} when none did). Pure."""
    out = {}
    for pid, ref in reference.items():
        if pid in now and now[pid] != ref:
            a, b = (list(ref), list(now[pid])) if isinstance(ref, str) or isinstance(now[pid], str) else (ref, now[pid])
            out[pid] = first_divergence(a, b)
    return out
