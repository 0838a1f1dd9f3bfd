"""The simulated SGLang server process: startup milestones, HTTP serving, warmup, faults, shutdown.

:class:`SimServer` plays ``python -m sglang.launch_server``: it logs the startup milestones in SGLang's order
and format (TP-prefixed when tp > 1), timed by ``SGLANG_SIM_TIME_SCALE`` (1.0 ~ a 27B model on two 48 GiB
GPUs, about a minute), starts its ``sglang::scheduler_TP<n>`` children and records their GPU memory
(:mod:`mtp_remote.sim.gpu`), binds the HTTP port only after the model is loaded (as SGLang does, so a busy
port is found late), warms up with a real ``/generate`` request, and prints ``The server is fired up and ready
to roll!``. Startup faults print SGLang's own error text.

Shutdown and failures follow SGLang 0.5.9 as measured on a real server (docs/sim.md): SIGTERM stops admission
(503) and logs ``SIGTERM received... Draining requests and shutting down...``; then, every 5 s (scaled), the
main process logs ``Gracefully exiting... Remaining number of requests N`` until no request is left, and kills
itself (SIGKILL, as SGLang's ``kill_process_tree`` does; as PID 1 of a container, where that SIGKILL is ignored,
it exits 0 like SGLang, so ``docker stop`` ends with exit 0, not 137). The children die on the SIGTERM itself when it was sent
to the process group; with a request in flight and no scheduler left the drain then never ends, and the port
stays bound until SIGKILL (``SGLANG_SIM_DRAIN_TIMEOUT``, unset by default, bounds it for the sim only;
``SGL_FORCE_SHUTDOWN=1`` exits at once, as in SGLang). A busy HTTP port logs uvicorn's ``[Errno 98]`` error
and then hangs without exiting, as SGLang does.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import sys
import time

import uvicorn

from mtp_remote.sim import children, gpu
from mtp_remote.sim.api import build_app
from mtp_remote.sim.args import ServerArgs
from mtp_remote.sim.engine import Engine
from mtp_remote.sim.faults import Faults
from mtp_remote.sim.logfmt import SimLog
from mtp_remote.sim.memory import MemoryPlan, params_billion
from mtp_remote.sim.startup_text import (
    SIGQUIT_LINE,
    crash_traceback,
    cuda_graph_oom_traceback,
    kv_pool_traceback,
    nccl_traceback,
    weights_oom_traceback,
)
from mtp_remote.sim.tokens import Vocab
from mtp_remote.sim.version import sglang_version

VERSION = sglang_version()


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling (the sim drains on SIGTERM itself)."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


class SimServer:
    """One simulated server process. ``run()`` returns the exit code."""

    def __init__(self, args: ServerArgs, faults: Faults, scale: float, log: SimLog, mem: MemoryPlan,
                 gpus: list[gpu.GpuSpec], startup_scale: float | None = None):
        self.args, self.faults, self.scale, self.log, self.mem, self.gpus = args, faults, scale, log, mem, gpus
        #: the scale of the startup milestones alone (``SGLANG_SIM_STARTUP_SCALE``; default ``scale``)
        self.startup_scale = scale if startup_scale is None else startup_scale
        self.vocab = Vocab()
        self.version = VERSION
        self.ready = False
        self.draining = False
        self.started_at = time.time()
        self.engine: Engine | None = None
        self.children: list = []
        self._uv: _Uvicorn | None = None
        release = float(faults.value("slow_release")) if "slow_release" in faults else max(0.5 * scale, 0.05)
        self.release_delay = release

    # ---- helpers -------------------------------------------------------------------------------
    def pause(self, seconds: float, *, startup: bool = False) -> None:
        """Sleep ``seconds`` of simulated time (``startup``: of the milestones up to ``max_total_num_tokens``,
        at the startup scale)."""
        time.sleep(seconds * (self.startup_scale if startup else self.scale))

    def _hold(self, used_gb: float) -> None:
        for rank, child in enumerate(self.children[: self.args.tp_size]):
            gpu.register_holder(child.pid, f"sglang::scheduler_TP{rank}",
                                {self.gpus[rank % len(self.gpus)].index: int(used_gb * 1024)}, self.release_delay,
                                foreign_pid="pid_namespace" in self.faults)

    def _orphan_pid(self) -> int | None:
        if "stale_orphan" in self.faults and len(self.children) >= self.args.tp_size:
            return self.children[self.args.tp_size - 1].pid
        return None

    def stop_children(self) -> None:
        """Start the children's memory release and kill them, except a stale orphan."""
        orphan = self._orphan_pid()
        for c in self.children:
            if c.pid == orphan:
                continue
            gpu.mark_exited(c.pid)
            with contextlib.suppress(OSError):
                c.kill()

    def die(self, code: int = 1) -> None:
        """Exit now like SGLang after a child failed: children killed (except a stale orphan)."""
        self.stop_children()
        sys.stdout.flush()
        os._exit(code)

    def fail(self, traceback_text: str, rank: int = 0) -> None:
        """Log a scheduler exception from ``rank`` and the main process' SIGQUIT line, then die."""
        self.log.line(f"Scheduler hit an exception: {traceback_text}", rank)
        self.pause(0.5)
        self.log.line(SIGQUIT_LINE)
        self.die(1)

    # ---- startup -------------------------------------------------------------------------------
    def start_children(self) -> None:
        """Scheduler children (one per TP rank) and the detokenizer."""
        tp = self.args.tp_size
        for rank in range(tp):
            orphan = self.faults.value("stale_orphan") if ("stale_orphan" in self.faults and rank == tp - 1) \
                else None
            self.children.append(children.spawn(f"sglang::scheduler_TP{rank}", orphan))
        self.children.append(children.spawn("sglang::detokenizer"))
        time.sleep(0.05)

    def load(self) -> None:
        """The milestones up to ``max_total_num_tokens=...``; a flag-driven failure ends the process."""
        a, m, log = self.args, self.mem, self.log
        tp = a.tp_size
        log.all_ranks("Init torch distributed begin.")
        if tp > len(self.gpus):
            self.fail(crash_traceback("RuntimeError: CUDA error: invalid device ordinal"), len(self.gpus))
        self.pause(1.0, startup=True)
        if tp > 1 and "nccl_error" in self.faults:
            self.fail(nccl_traceback(), 1)
        if tp > 1:
            log.line("sglang is using nccl==2.27.3", 0)
        self.pause(0.92, startup=True)
        log.line(f"Init torch distributed ends. elapsed=1.92 s, mem usage={m.init_gb:.2f} GB", 0)
        self._hold(m.init_gb)
        avail = m.avail_start_gb
        for r in range(tp):
            log.line(f"Load weight begin. avail mem={avail:.2f} GB", r)
        if m.failure == "weights_oom":
            self.pause(5.0, startup=True)
            self.fail(weights_oom_traceback(m.total_gb, avail))
        t_load = 41.6 * params_billion(a.model_path) / 27 * 2 / tp
        self.pause(t_load, startup=True)
        mins, secs = divmod(int(t_load), 60)
        log.raw(f"Loading safetensors checkpoint shards: 100% Completed | 11/11 [{mins:02d}:{secs:02d}<00:00, "
                f"{t_load / 11:5.2f}s/it]")
        arch = "Qwen3_5ForConditionalGeneration" if m.hybrid else "Qwen3ForCausalLM"
        avail -= m.weights_gb
        log.line(f"Load weight end. elapsed={t_load:.2f} s, type={arch}, avail mem={avail:.2f} GB, "
                 f"mem usage={m.weights_gb:.2f} GB.", 0)
        self._hold(m.init_gb + m.weights_gb)
        if m.failure == "kv_pool_too_small":
            self.fail(kv_pool_traceback(a.mem_fraction_static))
        if m.hybrid:
            log.line(f"Mamba Cache is allocated. max_mamba_cache_size: {m.mamba_slots}, conv_state size: "
                     f"{m.mamba_conv_gb:.2f}GB, ssm_state size: {m.mamba_ssm_gb:.2f}GB", 0)
        log.line(f"KV Cache is allocated. #tokens: {m.kv_tokens}, K size: {m.kv_gb / 2:.2f} GB, "
                 f"V size: {m.kv_gb / 2:.2f} GB", 0)
        avail = m.avail_after_pool_gb
        log.line(f"Memory pool end. avail mem={avail:.2f} GB", 0)
        used = m.init_gb + m.weights_gb + m.mamba_conv_gb + m.mamba_ssm_gb + m.kv_gb
        self._hold(used)
        self.pause(0.3, startup=True)
        if not a.disable_cuda_graph:
            avail -= 0.03
            log.line(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", 0)
            log.line(f"Capture cuda graph bs {list(m.cuda_graph_bs)}", 0)
            if m.failure == "cuda_graph_oom":
                self.pause(1.0, startup=True)
                self.fail(cuda_graph_oom_traceback(m.total_gb, avail))
            t_graph = 8.31 * len(m.cuda_graph_bs) / 6
            self.pause(t_graph, startup=True)
            avail -= m.graph_gb
            log.line(f"Capture cuda graph end. Time elapsed: {t_graph:.2f} s. mem usage={m.graph_gb:.2f} GB. "
                     f"avail mem={avail:.2f} GB.", 0)
            used += m.graph_gb
            self._hold(used)
        if a.speculative:
            draft_arch = {"EAGLE3": "LlamaForCausalLMEagle3", "NGRAM": None}.get(
                a.speculative_algorithm, "Qwen3_5ForCausalLMMTP" if m.hybrid else "Qwen3ForCausalLMEagle")
            if draft_arch:
                log.line(f"Load weight begin. avail mem={avail:.2f} GB", 0)
                self.pause(1.12, startup=True)
                avail -= m.draft_weights_gb
                log.line(f"Load weight end. elapsed=1.12 s, type={draft_arch}, avail mem={avail:.2f} GB, "
                         f"mem usage={m.draft_weights_gb:.2f} GB.", 0)
                used += m.draft_weights_gb
                if not a.disable_cuda_graph:
                    log.line("Capture draft cuda graph begin. This can take up to several minutes. "
                             f"avail mem={avail:.2f} GB", 0)
                    self.pause(2.4, startup=True)
                    avail -= m.draft_graph_gb
                    log.line(f"Capture draft cuda graph end. Time elapsed: 2.40 s. mem usage={m.draft_graph_gb:.2f}"
                             f" GB. avail mem={avail:.2f} GB.", 0)
                    used += m.draft_graph_gb
                self._hold(used)
        log.line(f"max_total_num_tokens={m.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
                 f"max_prefill_tokens=16384, max_running_requests={a.max_running_requests}, "
                 f"context_len={a.context_length}, available_gpu_mem={avail:.2f} GB", 0)
        log.raw("")

    # ---- serving -------------------------------------------------------------------------------
    def bind(self) -> socket.socket:
        """Bind the HTTP port (after loading, as SGLang); a busy port logs uvicorn's error and exits."""
        log = self.log
        log.uvicorn(f"Started server process [{os.getpid()}]")
        log.uvicorn("Waiting for application startup.")
        log.uvicorn("Application startup complete.")
        host, port = self.args.host, self.args.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            if "port_in_use" in self.faults:
                raise OSError(98, "address already in use")
            sock.bind((host, port))
        except OSError as e:
            log.uvicorn(f"[Errno {e.errno}] error while attempting to bind on address ('{host}', {port}): "
                        f"{(e.strerror or str(e)).lower()}", level="ERROR")
            log.uvicorn("Waiting for application shutdown.")
            log.uvicorn("Application shutdown complete.")
            self.hang_after_bind_failure()
        sock.listen(2048)
        sock.setblocking(False)
        return sock

    async def serve(self, sock: socket.socket) -> int:
        """Serve until SIGTERM/SIGINT has drained the server; returns the exit code."""
        loop = asyncio.get_running_loop()
        self.engine = Engine(self.args, self.faults, self.vocab, self.log, self.scale, self.mem)
        self.engine.on_crash = self._on_engine_fault
        engine_task = asyncio.create_task(self.engine.run())
        config = uvicorn.Config(build_app(self), log_level="critical", access_log=False, lifespan="off",
                                timeout_keep_alive=5)
        self._uv = _Uvicorn(config)
        serve_task = asyncio.create_task(self._uv.serve(sockets=[sock]))
        while not self._uv.started:
            if serve_task.done():
                return 1
            await asyncio.sleep(0.005)
        host, port = self.args.host, self.args.port
        self.log.uvicorn(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_term)
        await self._warmup()
        self.ready = True
        self.log.line("The server is fired up and ready to roll!")
        await serve_task
        self.log.uvicorn("Shutting down")
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{os.getpid()}]")
        engine_task.cancel()
        return 0

    async def _warmup(self) -> None:
        host = "127.0.0.1" if self.args.host in ("0.0.0.0", "") else self.args.host
        headers = {"Content-Type": "application/json"}
        if self.args.api_key:
            headers["Authorization"] = f"Bearer {self.args.api_key}"
        if self.args.skip_server_warmup:
            requests = [("GET", "/model_info", None)]
        elif self.mem.hybrid:  # Qwen3.5/3.6 are VLMs: SGLang warms them up through chat (as in l01)
            requests = [("GET", "/model_info", None), ("POST", "/v1/chat/completions", {
                "model": self.args.served_model_name, "max_tokens": 8, "temperature": 0,
                "messages": [{"role": "user", "content": "Describe the image."}]})]
        else:
            requests = [("GET", "/model_info", None), ("POST", "/generate", {
                "text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}})]
        self.engine.warming_up = True
        # The stdlib's client in a thread while this loop serves (SGLang warms up with `requests` the same way);
        # httpx here cost every sim start ~0.2 s of imports.
        await asyncio.to_thread(_http_requests, host, self.args.port, headers, requests)
        self.engine.warming_up = False

    def _on_term(self) -> None:
        if self.draining:
            return
        self.draining = True
        self.log.line("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        asyncio.get_running_loop().create_task(self._drain())

    def _schedulers_gone(self) -> bool:
        """True when a scheduler child has exited (it dies on a SIGTERM sent to the process group)."""
        return any(c.poll() is not None for c in self.children[: self.args.tp_size] if c.pid != self._orphan_pid())

    def remaining_rids(self) -> list[str]:
        """Request ids not finished yet (waiting or running; the server's own warmup not counted)."""
        reqs = list(self.engine.waiting) + list(self.engine.running)
        return [r.rid for r in reqs if not r.warmup]

    async def _drain(self) -> None:
        """SGLang's ``sigterm_watchdog``: report the remaining requests every 5 s (scaled) until none is left.
        Requests whose scheduler died never finish, so that drain never ends (unless bounded for the sim)."""
        interval = max(5.0 * self.scale, 0.05)
        limit = os.environ.get("SGLANG_SIM_DRAIN_TIMEOUT")
        deadline = time.monotonic() + float(limit) if limit else None
        await asyncio.sleep(min(interval, max(self.scale, 0.02)))
        while True:
            if self._schedulers_gone():
                self.engine.hung = True  # no scheduler: in-flight requests are never finished
            if os.environ.get("SGL_FORCE_SHUTDOWN", "").lower() in ("1", "true", "yes"):
                self.log.line("Signal SIGTERM received while force shutdown flag set. Force exiting.", None)
                break
            rids = self.remaining_rids()
            self.log.line(f"Gracefully exiting... Remaining number of requests {len(rids)}. "
                          f"Remaining requests remaining_rids={rids!r}.")
            if not rids or (deadline is not None and time.monotonic() >= deadline):
                break
            await asyncio.sleep(interval)
        await asyncio.sleep(0.05)  # let the last responses go out
        self.stop_children()
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # SGLang: kill_process_tree(os.getpid(), include_parent=True)
        # still here: PID 1 of a container (PID namespace), where the kernel drops a SIGKILL sent from inside;
        # SGLang's kill_process_tree then sys.exit(0)s: `docker stop` sees exit 0 (0.5.9: 7.6 s), not a kill (137)
        os._exit(0)

    def hang_after_bind_failure(self) -> None:
        """After uvicorn failed to bind, SGLang's main process neither serves nor exits (its warmup request
        waits on whatever holds the port — typically our own earlier server, stuck draining); SIGTERM kills
        its children but not it; only SIGKILL ends it. Measured on SGLang 0.5.9 (docs/sim.md)."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.stdout.flush()
        while True:
            time.sleep(3600)

    def _on_engine_fault(self, kind: str) -> None:
        if kind == "crash":
            self.fail(crash_traceback("torch.AcceleratorError: CUDA error: an illegal memory access was "
                                      "encountered"), self.args.tp_size - 1)
        else:
            asyncio.get_running_loop().create_task(self._watchdog())

    async def _watchdog(self) -> None:
        stuck_since = None
        timeout = self.args.watchdog_timeout * self.scale
        while True:
            await asyncio.sleep(0.05)
            busy = not self.engine.idle
            stuck_since = (stuck_since or time.monotonic()) if busy else None
            if stuck_since and time.monotonic() - stuck_since > timeout:
                for r in range(self.args.tp_size):
                    self.log.line(f"Scheduler watchdog timeout (self.watchdog_timeout="
                                  f"{self.args.watchdog_timeout}, self.soft=False)", r)
                self.log.line("Subprocess scheduler_0 crashed with exit code -3. Triggering SIGQUIT for cleanup...")
                self.die(1)


def _http_requests(host: str, port: int, headers: dict[str, str], requests: list[tuple[str, str, dict | None]]) -> None:
    """Send ``requests`` (method, path, JSON body or None) in turn on one connection, reading each answer whole."""
    conn = http.client.HTTPConnection(host.strip("[]"), port, timeout=None)
    try:
        for method, path, body in requests:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            conn.getresponse().read()
    finally:
        conn.close()
