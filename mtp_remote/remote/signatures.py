"""The SGLang log signature table: which log line means which failure, and what to do about it.

This module is data, not logic. Each :class:`Signature` is one regular expression over a single log line,
the class it stands for (the names of ``../shared/corpus/README.md``), a severity and a one-line hint that
says what to do. :func:`mtp_remote.remote.logs.classify_log` scans a log with every pattern and lets the
table order decide between several matches: a specific signature listed earlier beats a generic one listed
later (``Not enough memory ... --mem-fraction-static`` beats the ``Received sigquit`` that follows it).
Hints may name ``{port}`` or ``{flag}``: the named groups of the pattern that matched fill them.

Messages are taken from SGLang's own sources (``scheduler.py``, ``model_runner.py``,
``pool_configurator.py``, ``cuda_graph_runner.py``, ``http_server.py``, ``server_args.py``) and from the
tracebacks of public SGLang bug reports; uvicorn, argparse, NCCL, torch and transformers contribute theirs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Severities, from least to most serious.
SEVERITIES = ("ok", "warning", "fatal")


@dataclass(frozen=True)
class Signature:
    """One log signature: ``pattern`` (searched in one line) -> ``cls``, ``severity`` and ``hint``.

    ``hint`` is one line that says what to do; ``{port}``/``{flag}`` are filled from the pattern's named
    groups when it has them. ``regex`` is the compiled pattern (multiline, so ``^``/``$`` are line ends).
    """

    cls: str
    severity: str
    pattern: str
    hint: str
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        object.__setattr__(self, "regex", re.compile(self.pattern, re.MULTILINE))


_S = Signature

#: Ordered most specific first: when several fatal signatures match after the ready line, the first one
#: in this table names the cause.
SIGNATURES: tuple[Signature, ...] = (
    # --- launch-time usage and configuration errors -------------------------------------------------------
    _S("argparse_error", "fatal",
       r"error: unrecognized arguments: (?P<flag>\S+)",
       "unknown flag {flag}: fix the launch line (`mtp-remote lint-command` names the nearest valid flag)"),
    _S("argparse_error", "fatal",
       r"error: ambiguous option: (?P<flag>--[\w-]+)",
       "{flag} is a prefix of several flags in this SGLang release: spell the flag out in full"),
    _S("argparse_error", "fatal",
       r"error: argument (?P<flag>--[\w-]+)[^:]*: (?:invalid|expected|ignored)",
       "bad value for {flag}: check its type and allowed choices (`mtp-remote lint-command`)"),
    _S("argparse_error", "fatal",
       r"error: the following arguments are required: (?P<flag>--[\w-]+)",
       "add the required flag {flag} to the launch line"),
    _S("config_error", "fatal",
       r"not compatible with radix cache",
       "hybrid model + speculative decoding + radix cache: add --disable-radix-cache (or use "
       "--mamba-scheduler-strategy extra_buffer with SGLANG_ENABLE_SPEC_V2=1 on a release that supports it)"),
    _S("unsupported_architecture", "fatal",
       r"Model architectures? .{0,200}?(?:are|is) not supported"
       r"|does not recognize this architecture",
       "this SGLang/transformers release does not know the model's architecture: upgrade SGLang "
       "(and transformers) on the host, or check config.json `architectures`"),
    _S("model_not_found", "fatal",
       r"is not a local folder and is not a valid model identifier"
       r"|Repository Not Found"
       r"|does not appear to have a file named config\.json"
       r"|Can't load (?:the )?(?:configuration|tokenizer) for"
       r"|(?:FileNotFoundError|OSError): .{0,80}(?:No such file or directory|not found).{0,200}"
       r"(?:/models?/|config\.json|\.safetensors)",
       "the model path does not exist on the host (or has no config.json): check --model-path and the "
       "inventory's models"),
    # --- memory ---------------------------------------------------------------------------------------------
    _S("gpu_memory_unbalanced", "fatal",
       r"memory capacity is unbalanced",
       "another process holds GPU memory: stop stale servers (`mtp-remote stop --force` lists them) and "
       "check nvidia-smi compute apps before relaunching"),
    _S("kv_pool_too_small", "fatal",
       r"Not enough memory\. Please try to increase --mem-fraction-static"
       r"|max_total_num_tokens=\S+ is too small|KV cache pool is too small|no memory left for KV cache",
       "the KV cache pool does not fit: increase --mem-fraction-static (e.g. +0.05), or lower "
       "--context-length / --max-running-requests"),
    _S("mamba_cache_exhausted", "fatal",
       r"Not enough space for mamba|mamba (?:cache|pool) (?:is )?(?:full|exhausted)"
       r"|increase --mamba-full-memory-ratio",
       "the mamba (linear-attention state) cache ran out: increase --mamba-full-memory-ratio or lower "
       "--max-running-requests"),
    _S("cuda_graph_capture_failed", "fatal",
       r"Capture (?:cuda|draft cuda|npu) graph failed",
       "CUDA graph capture ran out of memory: set --mem-fraction-static to a smaller value (e.g. -0.05) "
       "or lower the largest captured batch size (--cuda-graph-max-bs; --cuda-graph-max-bs-decode on 0.5.2x)"),
    _S("cuda_oom", "fatal",
       r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory",
       "GPU out of memory: set --mem-fraction-static to a smaller value, or lower --max-running-requests "
       "or the CUDA graph batch size (--cuda-graph-max-bs; --cuda-graph-max-bs-decode on 0.5.2x)"),
    # --- network, devices -----------------------------------------------------------------------------------
    _S("port_in_use", "fatal",
       r"error while attempting to bind on address \('[^']*', (?P<port>\d+)\)",
       "port {port} is already taken on the host: stop whatever listens there (`mtp-remote status`) or "
       "choose another --port"),
    _S("port_in_use", "fatal",
       r"[Aa]ddress already in use|Port (?P<port>\d+) is (?:already )?in use",
       "port {port} is already taken on the host: stop whatever listens there (`mtp-remote status`) or "
       "choose another --port"),
    _S("nccl_error", "fatal",
       r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ProcessGroupNCCL.*(?:timed? ?out|error)",
       "NCCL failed between the GPUs: rerun with NCCL_DEBUG=INFO, check that all --tp-size GPUs are "
       "visible and free, try NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1"),
    _S("cuda_error", "fatal",
       r"CUDA error: |cudaError\w+|CUBLAS_STATUS_\w+|device-side assert triggered",
       "a CUDA kernel failed (illegal memory access / device assert): rerun with CUDA_LAUNCH_BLOCKING=1; "
       "with speculation on, try without it or with --disable-cuda-graph to isolate the kernel"),
    # --- runtime health -------------------------------------------------------------------------------------
    _S("watchdog_timeout", "fatal",
       r"watchdog timeout",
       "a scheduler step hung past the watchdog: look for a stuck GPU (nvidia-smi) or NCCL hang; "
       "--watchdog-timeout raises the limit"),
    _S("health_check_failed", "fatal",
       r"Health check failed",
       "the server stopped answering (detokenizer/scheduler heartbeat lost): restart it and read the "
       "lines above for the scheduler's error"),
    _S("warmup_failed", "fatal",
       r"(?:Initialization|Warmup) failed|warmup error",
       "the warmup request failed: read the traceback above it; try --skip-server-warmup only to debug"),
    _S("config_error", "fatal",
       r"^(?:ValueError|AssertionError|NotImplementedError|TypeError): .+",
       "SGLang rejected the server arguments: fix the flag combination named in the message"),
    # --- generic crash markers, last so a specific cause above wins. "Scheduler hit an exception" is not one:
    # it opens a traceback whose last line names the cause, and a reader that sees only the opening line
    # (wait-ready reading a growing log) must keep waiting for that line or for the parent's sigquit. ----
    _S("scheduler_died", "fatal",
       r"Received sigquit from a child process|Subprocess \S+ crashed"
       r"|Child process unexpectedly failed|Rank \d+ scheduler is dead",
       "the scheduler process died: read its traceback above; rerun in the foreground to see it whole"),
    # --- warnings: do not change the state, only the severity and hint -------------------------------------
    _S("kv_cache_retract", "warning",
       r"KV cache pool is full\. Retract requests",
       "requests were retracted for lack of KV cache: lower --max-running-requests or raise "
       "--mem-fraction-static"),
    _S("prefill_oom", "warning",
       r"Prefill out of memory",
       "prefill ran out of memory: lower --chunked-prefill-size or --max-running-requests"),
)

#: Hints for the non-fatal states.
STATE_HINTS: dict[str, str] = {
    "ready": "server is ready",
    "starting": "server is still starting: keep waiting, or read the last milestone",
}
