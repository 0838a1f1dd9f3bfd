"""The sampling workers of one profile: ``limit`` workers fed by one queue, each response's metrics and JSON line
written by a separate task (metrics in a thread), the KL probe re-scoring a sample by prefill."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from pathlib import Path

from ..analysis.divergence import kl_probe
from ..analysis.stopping import is_degenerate_record
from ..client import ServerClient
from ..records.sample import Sample
from ..responses import Completion
from ..config.inventory import HostConfig
from ..config.playbook import Playbook
from ..errors import RunsDirError
from ..remote.commands import api_key_of, mask_secrets, playbook_secrets
from ..report.history import open_samples_for_append
from .fit import check_prompts_fit
from .plan import LaunchPlan, RequestSpec
from .progress import ServingProgress
from .sampling import Cells, Occupancy, Pacer, loop_watch, sample_record, send_order, streams


async def sample(url: str, lp: LaunchPlan, todo: list[RequestSpec], pr, *, playbook: Playbook, host: HostConfig,
                 hooks, samples_path: Path, limit: int, cells: Cells | None, send_riding_out,
                 rate: float | None = None, api_key: str | None = None,
                 progress: ServingProgress | None = None) -> None:
    """Send ``todo`` through ``limit`` workers fed by one queue, so a slot is refilled the moment its
    request returns (no round barrier); with ``early_stop`` a cell stops being fed once it is settled
    (:class:`~mtp_remote.experiment.sampling.Cells`). A response's metrics and JSON line are done by a separate task (metrics in a worker
    thread) while its worker already sends the next request, so no slot waits for bookkeeping. Every finishing
    task's error is retrieved: one that cannot store its sample (RUNS_DIR full) stops the workers and is raised
    as RunsDirError once the samples already received are stored. ``rate``: at most that many request starts per
    second (:class:`~mtp_remote.experiment.sampling.Pacer`; an attached endpoint's ``load.request_rate``);
    ``api_key``: sent as a Bearer token (default: the launch line's ``--api-key``); ``progress``: told of every
    request sent, answered and streamed (the hang watch reads it)."""
    try:
        await _Sampling(lp, todo, pr, playbook=playbook, host=host, hooks=hooks, samples_path=samples_path,
                        limit=limit, cells=cells, send_riding_out=send_riding_out, rate=rate,
                        progress=progress or ServingProgress()).run(url, api_key)
    except OSError as e:  # opening or closing samples.jsonl (a close flushes what is still buffered)
        if e.errno not in RunsDirError.DISK_ERRNOS:
            raise
        raise RunsDirError.of(e, samples_path) from None


class _Sampling:
    """One profile's sampling (:func:`sample`): the queue, its workers and the tasks storing what returned."""

    def __init__(self, lp: LaunchPlan, todo: list[RequestSpec], pr, *, playbook: Playbook, host: HostConfig, hooks,
                 samples_path: Path, limit: int, cells: Cells | None, send_riding_out, rate: float | None,
                 progress: ServingProgress):
        self.lp, self.pr, self.pb, self.host, self.hooks = lp, pr, playbook, host, hooks
        self.samples_path, self.limit, self.cells, self.send_riding_out = samples_path, limit, cells, send_riding_out
        self.queue = deque(sorted(todo, key=send_order))
        self.occupancy = Occupancy(limit)
        self.pacer = Pacer(rate)
        self.progress = progress
        self.done, self.total = 0, len(todo)
        self.secrets = playbook_secrets(playbook, host)
        self.failures: list[BaseException] = []  # a finishing task's error (a full RUNS_DIR): ends the sampling
        self.workers: list[asyncio.Future] = []
        self.finishing: set[asyncio.Future] = set()
        self.sc: ServerClient | None = None
        self.f = None  # samples.jsonl, open for appending while the workers run
        hooks.on_profile(lp.profile, len(todo))
        if cells is not None:
            self.total -= cells.settle_stored(self.queue, hooks.on_progress)

    def next_request(self) -> RequestSpec | None:
        while self.queue:
            req = self.queue.popleft()
            if self.cells is None or not self.cells.settled(req.temperature):
                return req
        self.occupancy.queue_empty()
        return None

    def finished(self, task: asyncio.Future) -> None:  # every finishing task's error is retrieved, here
        self.finishing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.failures.append(task.exception())
            for w in self.workers:  # nothing more can be stored: stop sending (stored samples are kept)
                w.cancel()

    async def send(self, req: RequestSpec) -> tuple[Completion, dict | None]:
        await self.pacer.wait()
        with self.occupancy.in_flight():
            progress = self.progress
            token, comp = progress.sent(), None
            try:
                comp = await send_request(self.sc, self.pb, req, self.send_riding_out,
                                          on_output=lambda n, unit: progress.streamed(token, n, unit))
            finally:
                progress.ended(token, answered=comp is not None and not comp.error)
            if comp.stop is not None:
                self.pr.loop_stops += 1
            kl = None
            if self.pb.kl_probe and comp.stop is None:
                probed = await probe_completion(self.sc, self.host, self.pb, self.lp, req, comp)
                kl = await kl_probe_of(self.sc, probed)
                if kl is not None:  # a probe request generated tokens of its own: counted (issue 31)
                    kl["probe_tokens"] = 0 if probed is comp else int(probed.completion_tokens or 0)
        return comp, kl

    async def finish(self, req: RequestSpec, comp: Completion, kl: dict | None) -> None:
        # metrics cost 2-8 ms a sample (a loop costs most): in a thread, after the slot is refilled
        pb = self.pb
        rec = await asyncio.to_thread(
            sample_record, req, comp, speculative=self.lp.speculative, api=pb.api, kl=kl,
            think_opened_by_prompt=pb.think_opened_by_prompt, max_tokens=pb.max_tokens)
        if self.secrets:  # a secret the model echoed back (or a server's error quoted) is never stored
            rec = Sample.of(mask_secrets(rec.to_dict(), self.secrets))
        try:
            self.f.write(rec.to_json_line() + "\n")
            self.f.flush()
        except OSError as e:  # the run cannot go on: finished() stops the workers
            raise RunsDirError.of(e, self.samples_path) from None
        self.done += 1
        if is_degenerate_record(rec.metrics, rec.finish_reason):
            self.hooks.on_loop(self.lp.profile)
        if self.cells is not None:
            self.total -= self.cells.completed(req, rec, self.queue, self.hooks.on_progress)
        self.hooks.on_sample(self.lp.profile, self.done, self.total)

    async def worker(self) -> None:
        while not self.failures and (req := self.next_request()) is not None:
            comp, kl = await self.send(req)
            task = asyncio.ensure_future(self.finish(req, comp, kl))
            self.finishing.add(task)
            task.add_done_callback(self.finished)
            self.hooks.checkpoint()

    async def run(self, url: str, api_key: str | None) -> None:
        pr = self.pr
        with open_samples_for_append(self.samples_path) as self.f:  # ends a truncated last line first
            async with ServerClient(url, timeout_s=self.pb.timeouts.request_s, max_connections=self.limit + 2,
                                    api_key=api_key or api_key_of(self.lp.argv)) as self.sc:
                if self.queue:  # long prompts (files, replays) must fit the server's context: one short request each
                    pr.context = await check_prompts_fit(self.sc, self.pb, self.lp.profile)
                await self._work()
                pr.server_info = await self.sc.server_info()
                if pr.loop_stops:  # the aborted requests are gone before the stop (its drain waits on any left)
                    pr.idle_after_stops_s = await self.sc.wait_idle(timeout_s=10.0)

    async def _work(self) -> None:
        """The workers until the queue is empty, then the storing tasks; raises the first storing failure."""
        workers, finishing = self.workers, self.finishing
        workers.extend(asyncio.ensure_future(self.worker()) for _ in range(min(self.limit, len(self.queue))))
        try:
            await asyncio.gather(*workers)
            while finishing:
                await asyncio.gather(*finishing, return_exceptions=True)
        except asyncio.CancelledError:
            if not self.failures:  # cancelled from outside (the crash watch, an interrupt)
                raise
        finally:
            for w in workers:  # one failed or we were cancelled: the others stop sending too
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            # responses already received are still stored (no network in there: quick)
            await asyncio.gather(*finishing, return_exceptions=True)
            self.pr.occupancy = self.occupancy.to_dict()
            if self.cells is not None:
                self.pr.stopping.update(self.cells.decisions())
        if self.failures:
            raise self.failures[0]


async def send_request(sc: ServerClient, pb: Playbook, req: RequestSpec, send_riding_out,
                       on_output: Callable[[int, str], None] | None = None) -> Completion:
    """One request as the playbook says: streamed and stopped once its loop is settled
    (:func:`~mtp_remote.experiment.sampling.streams`), else whole through the playbook's ``api`` (``/generate``
    with the prompt template, asking for decode logprobs with the KL probe and top-2 margins at T = 0).
    ``send_riding_out(request)`` sends it (the runner's rides out a dropped SSH connection); ``on_output(size,
    unit)`` hears a streamed request's output so far (tokens with output ids, else characters)."""
    if streams(req, stop_on_loop=pb.stop_on_loop, kl_probe=pb.kl_probe):
        return await send_streamed(sc, pb, req, send_riding_out, on_output)
    if pb.api == "chat":
        return await send_riding_out(lambda: sc.chat(
            req.prompt, temperature=req.temperature, max_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed,
            fields=req.chat))
    text = pb.prompt_template.replace("{prompt}", req.prompt)
    return await send_riding_out(lambda: sc.generate(
        text, temperature=req.temperature, max_new_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed,
        return_logprob=pb.kl_probe, top2=req.temperature == 0))


async def send_streamed(sc: ServerClient, pb: Playbook, req: RequestSpec, send_riding_out,
                        on_output: Callable[[int, str], None] | None = None) -> Completion:
    """``req`` streamed with a fresh loop watch (:func:`~mtp_remote.experiment.sampling.loop_watch`): stopped and
    aborted once its loop is settled; sent again like any request when a dropped connection cut it.
    ``on_output`` as in :func:`send_request`."""
    if pb.api == "chat":
        return await send_riding_out(lambda: sc.chat_stream(
            req.prompt, temperature=req.temperature, max_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed,
            watch=_telling(loop_watch(pb.think_opened_by_prompt), on_output), fields=req.chat))
    text = pb.prompt_template.replace("{prompt}", req.prompt)
    return await send_riding_out(lambda: sc.generate_stream(
        text, temperature=req.temperature, max_new_tokens=pb.max_tokens, top_p=pb.top_p, seed=req.seed,
        watch=_telling(loop_watch(pb.think_opened_by_prompt), on_output)))


def _telling(look, on_output: Callable[[int, str], None] | None):
    """A stream's ``watch`` that also tells ``on_output`` how much output has arrived (tokens with output ids,
    else characters of text)."""
    if on_output is None:
        return look

    def watch(text: str, ids: list[int] | None):
        on_output(*((len(ids), "tokens") if ids is not None else (len(text), "characters")))
        return look(text, ids)

    return watch


async def probe_completion(sc: ServerClient, host: HostConfig, playbook: Playbook, lp: LaunchPlan, req: RequestSpec,
                           comp: Completion) -> Completion:
    """The completion the KL probe re-scores: the sample itself when its decode logprobs are raw (T = 0 or
    1, or the server runs with ``SGLANG_RETURN_ORIGINAL_LOGPROB``), else a probe request at T = 1 with the
    sample's seed — SGLang returns temperature-scaled logprobs while prefill scoring is raw, which alone
    reads as ~0.1 nats/token at T = 0.7."""
    env = {**host.env, **lp.env}
    if req.temperature in (0.0, 1.0) or env.get("SGLANG_RETURN_ORIGINAL_LOGPROB", "").lower() in ("1", "true"):
        return comp
    text = playbook.prompt_template.replace("{prompt}", req.prompt)
    return await sc.generate(text, temperature=1.0, max_new_tokens=playbook.max_tokens,
                             top_p=playbook.top_p, seed=req.seed, return_logprob=True)


async def kl_probe_of(sc: ServerClient, comp: Completion) -> dict | None:
    """Re-score the generated tokens by prefill; mean/max k3 of prefill vs decode logprobs."""
    if comp.error or not comp.prompt_ids or not comp.output_ids or not comp.output_logprobs:
        return None
    prefill = await sc.score(comp.prompt_ids + comp.output_ids, len(comp.prompt_ids))
    if not prefill:
        return None
    n = min(len(prefill), len(comp.output_logprobs))
    pairs = [(p, d) for p, d in zip(prefill[:n], comp.output_logprobs[:n]) if p is not None and d is not None]
    if not pairs:
        return None
    probe = kl_probe([p for p, _ in pairs], [d for _, d in pairs])
    return {"mean_k3": probe.mean_k3, "max_k3": probe.max_k3, "n_tokens": probe.n_tokens}
