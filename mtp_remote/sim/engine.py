"""The simulated scheduler: batches running requests, steps them together, and keeps SGLang's statistics.

One asyncio task (:meth:`Engine.run`) admits waiting requests up to ``--max-running-requests`` (logging a
``Prefill batch`` line), then steps every running sequence once per iteration: one token each without
speculation, one draft-then-verify step each with it. An iteration costs simulated GPU time (seconds, times
``SGLANG_SIM_TIME_SCALE``): ``30 ms + 0.5 ms * batch`` per decode step, ``36 ms + 0.8 ms * batch`` per verify
step plus ``4 ms`` per draft step, so tokens/s reflect acceptance (healthy steps 3 / topk 1 is about 1.9x
the baseline; a useless draft head is slower than none). Every ``--decode-log-interval`` iterations it logs a
``Decode batch`` line in SGLang's format (``accept len`` / ``accept rate`` on speculative servers) and
publishes the average acceptance length that ``/server_info`` reports.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

from mtp_remote.sim.args import ServerArgs
from mtp_remote.sim.decode import SamplingParams, Sequence
from mtp_remote.sim.faults import Faults
from mtp_remote.sim.logfmt import SimLog
from mtp_remote.sim.memory import MemoryPlan
from mtp_remote.sim.mitigation import fault_active, iteration_cost
from mtp_remote.sim.model import ModelKnobs, ToyModel
from mtp_remote.sim.tokens import THINK_OPEN, Vocab


def knobs_for(faults: Faults) -> ModelKnobs:
    """Model parameters under the active faults (``base_loops``, ``low_accept``)."""
    kw: dict = {}
    if "base_loops" in faults:
        kw["repeat_base"] = 0.5
    if "low_accept" in faults:
        kw.update(draft_error=1.0, draft_decay=1.0, draft_miss_mass=0.98)
    return ModelKnobs(**kw)


def leak_active(args: ServerArgs, faults: Faults) -> bool:
    """state_leak applies under speculation with overlap scheduling, unless cured (``sim.mitigation``)."""
    return fault_active("state_leak", args, faults)


@dataclass
class Request:
    """One generation request in the scheduler."""

    rid: str
    prompt_ids: list[int]
    seq: Sequence
    created: float
    done: asyncio.Event = field(default_factory=asyncio.Event)
    updates: asyncio.Queue | None = None
    finished_at: float | None = None
    warmup: bool = False


class Engine:
    """The scheduler and its statistics; one per server process."""

    def __init__(self, args: ServerArgs, faults: Faults, vocab: Vocab, log: SimLog, scale: float,
                 mem: MemoryPlan):
        self.args, self.faults, self.vocab, self.log, self.scale, self.mem = args, faults, vocab, log, scale, mem
        self.knobs = knobs_for(faults)
        self.leak = leak_active(args, faults)
        self.accept_all = fault_active("accept_all_drafts", args, faults)
        self.noise = float(faults.value("numeric_noise")) if "numeric_noise" in faults else 0.0
        #: this launch's numeric salt: kernels' rounding differs run to run (numeric_noise; 1..2^31)
        self.launch = 1 + random.Random(os.getpid() ^ time.time_ns()).getrandbits(31)
        self.spec_steps = args.speculative_num_steps if args.speculative else 0
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self._wake = asyncio.Event()
        self.finished_requests = 0
        self.aborted_requests = 0
        self.hung = False
        self.warming_up = False  #: requests made while True are the server's own warmup (not counted)
        self.on_crash = None  # callable(kind) set by the server
        self.forward_ct = 0
        self.last_output_at: float | None = None  #: wall time of the last committed token
        # cumulative since start / since flush
        self.prompt_tokens_total = 0
        self.gen_tokens_total = 0
        self.requests_total = 0
        self._total_accepted = 0  # committed tokens / verify steps at decode-log time since the last flush
        self._total_verify = 0
        self.last_gen_throughput = 0.0
        self._iv_tokens = 0
        self._iv_verify = 0
        self._iv_start = time.monotonic()
        self._seed_counter = random.Random(os.getpid() ^ int(time.time()))

    # ---- requests ------------------------------------------------------------------------------
    def new_request(self, prompt_text: str, prompt_ids: list[int], sp: SamplingParams, *, stream: bool = False,
                    warmup: bool = False, rid: str | None = None) -> Request:
        """Build a request (prompt text for the model, ids for counting) ready for :meth:`submit`."""
        model = ToyModel.for_prompt(prompt_text, self.vocab, self.knobs)
        seed = sp.seed if sp.seed is not None else self._seed_counter.getrandbits(63)
        seq = Sequence(model, sp, random.Random(seed), self.spec_steps, self.leak, noise=self.noise,
                       launch=self.launch, accept_all=self.accept_all)
        return Request(rid or uuid.uuid4().hex, prompt_ids, seq, time.monotonic(),
                       updates=asyncio.Queue() if stream else None, warmup=warmup or self.warming_up)

    def submit(self, req: Request) -> None:
        """Queue a request; await ``req.done`` for the result."""
        self.waiting.append(req)
        self._wake.set()

    def abort(self, rid: str, message: str = "Abort in waiting queue") -> bool:
        """Abort a waiting or running request as SGLang's ``AbortReq`` does: it leaves the batch at once (its
        slot is free for the next step), finishes with ``{"type": "abort"}`` and wakes its waiters. False when
        no such request is pending (already finished, or never seen)."""
        req = next((r for r in self.waiting if r.rid == rid), None)
        if req is not None:
            self.waiting.remove(req)
        else:
            req = next((r for r in self.running if r.rid == rid), None)
            if req is None:
                return False
            self.running.remove(req)
            message = "Abort in running batch"
        req.seq.finish_reason = {"type": "abort", "message": message}
        req.finished_at = time.monotonic()
        req.done.set()
        if req.updates is not None:
            req.updates.put_nowait(None)
        self.aborted_requests += 1
        return True

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def flush_cache(self) -> bool:
        """Reset the acceptance statistics (SGLang: only when idle). Returns whether it flushed."""
        if not self.idle:
            return False
        self._total_accepted = self._total_verify = 0
        return True

    @property
    def avg_spec_accept_length(self) -> float | None:
        """SGLang's ``avg_spec_accept_length``: accumulated at each decode log, None before the first."""
        return self._total_accepted / self._total_verify if self._total_verify else None

    # ---- the loop ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Schedule forever: admit, step, finish, log; sleeps while idle."""
        while True:
            if self.idle or self.hung:
                self._wake.clear()
                await self._wake.wait()
                if self.hung:
                    continue
                self._iv_start = time.monotonic()  # throughput counts busy time, as SGLang's does
            t0 = time.monotonic()
            if ("crash_after" in self.faults and self.finished_requests >= self.faults.value("crash_after")
                    and self.on_crash):
                self.on_crash("crash")  # the next step after N finished requests dies mid-run
            admitted = self._admit()
            cost = sum(len(r.prompt_ids) for r in admitted) * 0.00005
            tokens = 0
            stepped = list(self.running)
            for req in stepped:
                req.seq.batch = len(stepped)  # numeric_noise: the rounding depends on the batch composition
                tokens += req.seq.step()
                if req.updates is not None:
                    req.updates.put_nowait(None)
                if req.seq.finished:
                    self._finish(req)
            bs = len(stepped)
            self.forward_ct += 1
            if self.spec_steps:
                cost += iteration_cost(0.036 + 0.0008 * bs + 0.004 * self.spec_steps, self.args)
                self._iv_verify += bs
            else:
                cost += iteration_cost(0.030 + 0.0005 * bs, self.args)
            self._iv_tokens += tokens
            if tokens:
                self.last_output_at = time.time()
            self.gen_tokens_total += tokens
            if self.forward_ct % max(self.args.decode_log_interval, 1) == 0:
                self._log_decode()
            delay = cost * self.scale - (time.monotonic() - t0)
            await asyncio.sleep(max(delay, 0.0))

    def _admit(self) -> list[Request]:
        admitted = []
        while self.waiting and len(self.running) < self.args.max_running_requests:
            req = self.waiting.popleft()
            self.running.append(req)
            admitted.append(req)
        if admitted:
            n_tok = sum(len(r.prompt_ids) for r in admitted)
            self.prompt_tokens_total += n_tok
            self.log.line(f"Prefill batch, #new-seq: {len(admitted)}, #new-token: {n_tok}, #cached-token: 0, "
                          f"{self._usage_fields(prefill=True)}, #running-req: {len(self.running) - len(admitted)}, "
                          f"#queue-req: {len(self.waiting)}, #pending-token: 0, cuda graph: False, "
                          f"input throughput (token/s): 0.00", 0)
        return admitted

    def _finish(self, req: Request) -> None:
        self.running.remove(req)
        req.finished_at = time.monotonic()
        req.done.set()
        if req.warmup:
            return
        self.finished_requests += 1
        self.requests_total += 1
        n = self.finished_requests
        if "hang_after" in self.faults and n >= self.faults.value("hang_after") and not self.hung:
            self.hung = True
            if self.on_crash:
                self.on_crash("hang")

    def _usage_fields(self, prefill: bool = False) -> str:
        toks = sum(len(r.prompt_ids) + len(r.seq.output_ids) for r in self.running)
        usage = toks / max(self.mem.kv_tokens, 1)
        if not self.mem.hybrid:
            return f"token usage: {usage:.2f}" if prefill else f"#token: {toks}, token usage: {usage:.2f}"
        per_req = 2 if self.spec_steps else 1
        mnum = per_req * len(self.running)
        musage = mnum / max(self.mem.mamba_slots, 1)
        if prefill:
            return f"full token usage: {usage:.2f}, mamba usage: {musage:.2f}"
        return f"#full token: {toks}, full token usage: {usage:.2f}, mamba num: {mnum}, mamba usage: {musage:.2f}"

    def _log_decode(self) -> None:
        now = time.monotonic()
        dt = max(now - self._iv_start, 1e-6)
        thr = self._iv_tokens / dt
        self.last_gen_throughput = thr
        msg = f"Decode batch, #running-req: {len(self.running)}, {self._usage_fields()}, "
        if self.spec_steps:
            acc = self._iv_tokens / max(self._iv_verify, 1)
            msg += f"accept len: {acc:.2f}, accept rate: {acc / (self.spec_steps + 1):.2f}, "
            self._total_accepted += self._iv_tokens
            self._total_verify += self._iv_verify
        msg += (f"cuda graph: {not self.args.disable_cuda_graph}, gen throughput (token/s): {thr:.2f}, "
                f"#queue-req: {len(self.waiting)}")
        self.log.line(msg, 0)
        self._iv_tokens = self._iv_verify = 0
        self._iv_start = now


def split_prompt_ids(ids: list[int]) -> tuple[list[int], list[int]]:
    """Split input ids at the first ``<think>``: (prompt, an earlier completion to replay), for scoring."""
    if THINK_OPEN in ids:
        k = ids.index(THINK_OPEN)
        return ids[:k], ids[k:]
    return ids, []
