"""The SGLang log signature table: which log line means which failure, and what to do about it.

This module is data, not logic. Each :class:`Signature` is one regular expression over a single log line,
the class it stands for (the names of ``../shared/corpus/README.md``), a severity and a one-line hint that
says what to do. :func:`mtp_remote.remote.logs.classify_log` scans a log with every pattern and lets the
table order decide between several matches: a specific signature listed earlier beats a generic one listed
later (``Not enough memory ... --mem-fraction-static`` beats the ``Received sigquit`` that follows it).
Hints may name any named group of the pattern (``{port}``, ``{flag}``, ``{pid}``, ``{value}``, ``{cause}``):
the groups of the match fill them.

The table is a set of signature *families* with fallbacks, not a closed list of messages:

- ``phase="launch"`` marks errors that only mean "bad arguments / bad setup" while the server starts
  (``config_error``, ``argparse_error``, ...). The same exception after the server served (after the ready
  line or after ``Decode batch`` lines) is a crash of the running scheduler: ``scheduler_died``.
- ``transient=True`` marks matches that are only decisive when the server shows no progress after them (no
  later milestone, ``Prefill``/``Decode batch`` line or answered request): a traceback followed by more
  serving was a failed request, not the server's death.
- ``anywhere=True`` marks a line that is decisive wherever it stands and whatever follows it: uvicorn's
  ``[Errno 98] ... address already in use`` (:data:`HTTP_BIND_FAILED`). SGLang 0.5.9 does not exit after it;
  its warmup request goes to whatever holds the port, and when that is a healthy server the log goes on to
  print the ready line. That ready line is the other server's answer, not this server's readiness.
- ``wraps=True`` marks a message that wraps another error (``Capture cuda graph failed: <cause>``): the
  ``cause`` group is classified again with this table and names the class when it matches.
- ``before_ready=True`` marks a launch failure that a ready line printed after it does not undo: a failed
  warmup. Releases that warm up in a thread (and with several warmup requests) log the ready line after a
  warmup request failed; the server is not usable then, whatever that line says.
- ``generic=True`` marks a line that only says *that* a process died (``Received sigquit from a child
  process``): when a complete traceback with nothing after it precedes it, that traceback's exception names
  the death in the hint (the class stays ``scheduler_died``).
- ``by_phase=True`` marks a generic exception (``ValueError``, ``AssertionError``...) whose meaning depends on
  where the launch was when it was raised: during CUDA-graph capture it is a capture failure whatever its type
  (SGLang wraps only ``RuntimeError`` in ``Capture cuda graph failed``), during warmup a failed warmup, during
  weight loading a checkpoint the model code cannot load -- not a flag combination. The phase comes from the
  traceback's frames first, then from the last ``... begin`` line without its ``end`` (:data:`PHASES_IN_LOG`).
  The unknown-traceback fallback is read the same way.
- :data:`UNKNOWN_TRACEBACK` is the fallback: a Python traceback whose exception no signature knows is at
  least a fatal ``unknown`` (``scheduler_died`` when it is the scheduler's), never "starting".

Messages are taken from SGLang's own sources (``scheduler.py``, ``model_runner.py``,
``pool_configurator.py``, ``cuda_graph_runner.py``, ``http_server.py``, ``server_args.py``) and from the
tracebacks of public SGLang bug reports; uvicorn, argparse, NCCL, torch and transformers contribute theirs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Severities, from least to most serious.
SEVERITIES = ("ok", "warning", "fatal")
#: When a signature means what its class says: ``launch`` (only while starting) or ``any``.
PHASES = ("launch", "any")


@dataclass(frozen=True)
class Signature:
    """One log signature: ``pattern`` (searched in one line) -> ``cls``, ``severity`` and ``hint``.

    ``needs``: literals of which one must occur for the pattern to match at all (a cheap pre-check that
    keeps patterns without a literal prefix off multi-MB logs). ``phase``/``transient``/``anywhere``/``wraps``/
    ``generic``/``by_phase``: module docstring. ``hint`` is one line that says what to do; ``{port}``/``{flag}`` are filled from the pattern's named
    groups when it has them. ``regex`` is the compiled pattern (multiline, so ``^``/``$`` are line ends).
    """

    cls: str
    severity: str
    pattern: str
    hint: str
    phase: str = "any"
    transient: bool = False
    anywhere: bool = False
    wraps: bool = False
    generic: bool = False
    before_ready: bool = False
    by_phase: bool = False
    needs: tuple[str, ...] = ()
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, not {self.phase!r}")
        object.__setattr__(self, "regex", re.compile(self.pattern, re.MULTILINE))


_S = Signature

_MEM_HINT = ("set --mem-fraction-static to a smaller value (e.g. -0.05) or lower the largest captured batch "
             "size (--cuda-graph-max-bs; --cuda-graph-max-bs-decode on 0.5.2x)")
_PORT_HINT = ("port {port} is already taken on the host: stop whatever listens there (`mtp-remote status`) or "
              "choose another --port")
_INTERNAL_PORT_HINT = ("SGLang's internal {name} (port {port}) is held by PID {pid} ({proc}), usually a leftover "
                       "sglang::scheduler of an earlier server: `mtp-remote status` lists it, `mtp-remote stop "
                       "--force` stops it by PID; or move the port range (--port / --nccl-port)")

#: uvicorn's failed bind of the HTTP port, as asyncio words it: ``[Errno 98] error while attempting to bind on
#: address ('127.0.0.1', 30000): address already in use`` (an IPv6 address is a 4-tuple). Fatal wherever it
#: stands, a later ready line included (``anywhere``): the one readiness (``server.wait_ready``) and
#: ``classify-log`` both judge by.
HTTP_BIND_FAILED = _S(
    "port_in_use", "fatal",
    r"\[Errno \d+\] error while attempting to bind on address \('[^']*', (?P<port>\d+)[,)].*address already in use",
    "the HTTP port {port} was taken when the server tried to bind it: SGLang then neither serves nor exits, and "
    "a ready line after it is the warmup reaching whatever holds the port. Stop what listens on {port} "
    "(`mtp-remote status`) or choose another --port; this server ignores SIGTERM then (`mtp-remote stop` kills it)",
    anywhere=True, needs=("error while attempting to bind",))

#: Ordered most specific first: when several fatal signatures match after the ready line, the first one
#: in this table names the cause.
SIGNATURES: tuple[Signature, ...] = (
    # --- launch-time usage and configuration errors -------------------------------------------------------
    _S("argparse_error", "fatal",
       r"error: unrecognized arguments: (?P<flag>\S+)",
       "unknown flag {flag}: fix the launch line (`mtp-remote lint-command` names the nearest valid flag)",
       phase="launch"),
    _S("argparse_error", "fatal",
       r"error: ambiguous option: (?P<flag>--[\w-]+)",
       "{flag} is a prefix of several flags in this SGLang release: spell the flag out in full", phase="launch"),
    _S("argparse_error", "fatal",
       r"error: argument (?P<flag>--[\w-]+)[^:\n]*: \S",  # invalid value/choice, expected ..., not allowed with ...
       "argparse refused {flag} (bad value, missing value or a flag it excludes): check its type and allowed "
       "choices (`mtp-remote lint-command`)", phase="launch"),
    _S("argparse_error", "fatal",
       r"error: the following arguments are required: (?P<flag>--[\w-]+)",
       "add the required flag {flag} to the launch line", phase="launch"),
    _S("config_error", "fatal",
       r"not compatible with radix cache",
       "hybrid model + speculative decoding + radix cache: add --disable-radix-cache (or use "
       "--mamba-scheduler-strategy extra_buffer with SGLANG_ENABLE_SPEC_V2=1 on a release that supports it)",
       phase="launch"),
    # --chat-template / --completion-template naming neither a built-in template nor a file on the host
    # (template_manager.py: "Chat template X is not a built-in template name or a valid chat template file path.");
    # a .jinja path that vanished between the check and the open is a FileNotFoundError naming the file. Listed
    # before model_not_found: a template under /models/ is still a template.
    _S("config_error", "fatal",
       r"(?P<kind>Chat|Completion) template (?P<value>.{0,300}?) is not a built-in template name"
       r"|(?:FileNotFoundError|OSError|TemplateNotFound)\b.{0,200}?(?P<value2>'[^'\n]*(?:\.jinja|template)[^'\n]*'"
       r"|\S*\.jinja\b)"
       r"|(?i:(?:chat|completion)[ _-]template)\S*:? (?:file )?(?:not found|does not exist)(?::? (?P<value3>\S+))?",
       "--chat-template (or --completion-template) {value} is neither a built-in template name nor a file on the "
       "host: fix the path (the server reads it on the host, relative to its working directory) or give a "
       "built-in name", phase="launch", needs=("template name", ".jinja", "template", "Template")),
    _S("unsupported_architecture", "fatal",
       r"Model architectures? .{0,200}?(?:are|is) not supported"
       r"|does not recognize this architecture"
       # model_loader/utils.py: no native model class and the Transformers fallback cannot serve it (spelled
       # "SGlang" in some releases); the warning "has no SGLang implementation, falling back to Transformers"
       # alone is not fatal (:data:`SIGNATURES` warnings)
       r"|has no (?i:sglang) implementation and|Transformers implementation of \S+ is not compatible with (?i:sglang)"
       r"|Unrecognized configuration class",
       "this SGLang/transformers release does not know the model's architecture: upgrade SGLang "
       "(and transformers) on the host, or check config.json `architectures`", phase="launch"),
    _S("model_not_found", "fatal",
       r"is not a local folder and is not a valid model identifier"
       r"|Repository Not Found"
       r"|does not appear to have a file named config\.json"
       r"|Can't load (?:the )?(?:configuration|tokenizer) for"
       r"|(?:FileNotFoundError|OSError): .{0,80}(?:No such file or directory|not found).{0,200}"
       r"(?:/models?/|config\.json|\.safetensors)"
       # huggingface_hub: a local path that does not exist is tried as a repo id; offline and not cached
       r"|HFValidationError: Repo id must|LocalEntryNotFoundError"
       r"|couldn't find them in the cached files|Cannot find any model weights|Incorrect path_or_model_id"
       r"|access a gated repo|Cannot access gated repo|GatedRepoError",
       "the model path does not exist on the host (or has no config.json / weights, is not in the offline HF "
       "cache, or is a gated repo without an HF_TOKEN that has access): check --model-path and the inventory's "
       "models", phase="launch",
       needs=("valid model identifier", "Not Found", "config.json", "Can't load", "Error: ", "Repo id must",
              "cached files", "model weights", "path_or_model_id", "gated repo", "GatedRepo")),
    # --- memory ---------------------------------------------------------------------------------------------
    _S("gpu_memory_unbalanced", "fatal",
       r"memory capacity is unbalanced",
       "another process holds GPU memory: stop stale servers (`mtp-remote stop --force` lists them) and "
       "check nvidia-smi compute apps before relaunching", phase="launch"),
    # the KV-budget guard of newer releases names the minimum: "Raise --mem-fraction-static above 0.812"
    _S("kv_pool_too_small", "fatal",
       r"(?:[Rr]aise|[Ii]ncrease|[Ss]et) --mem-fraction-static (?:above|to at least|to more than|>=?) ?"
       r"(?P<value>[01]?\.\d+)",
       "the KV cache pool does not fit: increase --mem-fraction-static above {value} (SGLang's minimum), or "
       "lower --context-length / --max-running-requests", phase="launch", needs=("--mem-fraction-static",)),
    _S("kv_pool_too_small", "fatal",
       r"Not enough memory\. Please try to increase --mem-fraction-static"
       r"|max_total_num_tokens=\S+ is too small|KV cache pool is too small|no memory left for KV cache"
       r"|leaves? no (?:GPU )?memory for the KV cache",
       "the KV cache pool does not fit: increase --mem-fraction-static (e.g. +0.05), or lower "
       "--context-length / --max-running-requests", phase="launch"),
    # wordings seen: "Not enough space for mamba cache", "mamba cache is full", "Can not alloc mamba cache"
    # (mamba_radix_cache/memory_pool: no free slot for a request's recurrent state), "Failed to allocate mamba
    # state", "No free mamba slot"
    _S("mamba_cache_exhausted", "fatal",
       r"Not enough space for mamba|(?i:mamba (?:cache|pool|state|slots?) (?:is )?(?:full|exhausted))"
       r"|(?i:(?:can ?not|could not|couldn't|failed to|unable to) alloc\w* (?:a |the |new )?(?:\w+ ){0,2}mamba)"
       r"|(?i:no (?:free|available|more) mamba)"
       r"|increase --mamba-full-memory-ratio",
       "the mamba (linear-attention state) cache ran out: increase --mamba-full-memory-ratio or lower "
       "--max-running-requests"),
    # wraps its cause: memory -> capture failed (lower the fraction), CUDA fault -> cuda_error, ...
    _S("cuda_graph_capture_failed", "fatal",
       r"(?i:Capture (?:[\w-]+ ){0,4}graph failed):? ?(?P<cause>.*)",
       "CUDA graph capture failed ({cause}): rerun with --disable-cuda-graph to confirm the graph is at fault, "
       "then report the kernel; the memory remedies (--mem-fraction-static) apply only to out-of-memory",
       wraps=True),
    _S("cuda_oom", "fatal",
       r"(?:CUDA|HIP|XPU|NPU) out of memory|OutOfMemoryError|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED",
       "GPU out of memory: set --mem-fraction-static to a smaller value, or lower --max-running-requests "
       "or the CUDA graph batch size (--cuda-graph-max-bs; --cuda-graph-max-bs-decode on 0.5.2x)"),
    # --- network, devices -----------------------------------------------------------------------------------
    HTTP_BIND_FAILED,
    _S("port_in_use", "fatal",
       r"error while attempting to bind on address \('[^']*', (?P<port>\d+)\)", _PORT_HINT),
    # SGLang's wait_port_available: "nccl_port at 30234 is not available in 30 seconds. nccl_port is used by
    # a process already. process.name()='sglang::scheduler' ... pid=4242" (and its waiting line before)
    _S("port_in_use", "fatal",
       r"(?P<name>\w+) at (?P<port>\d+) is not available in \d+ seconds"
       r"(?:.*?process\.name\(\)='(?P<proc>[^']*)')?(?:.*?\bpid=(?P<pid>\d+))?",
       _INTERNAL_PORT_HINT, needs=("is not available in",)),
    _S("port_in_use", "fatal",
       r"port (?P<port>\d+) is in use\. Waiting for \d+ seconds for (?P<name>\w+) to be available"
       r"(?:.*?process\.name\(\)='(?P<proc>[^']*)')?(?:.*?\bpid=(?P<pid>\d+))?",
       _INTERNAL_PORT_HINT, transient=True, needs=("to be available",)),
    # torch.distributed's TCPStore for --dist-init-addr / the NCCL rendezvous: "The server socket has failed to
    # bind to [::]:29500 (errno: 98 - Address already in use)" (torch >= 2.2) or "port: 29500, useIpv6: false,
    # code: -98, name: EADDRINUSE" (older)
    _S("port_in_use", "fatal",
       r"failed to bind to \S*?:(?P<port>\d+) \(errno: 98|port: (?P<port2>\d+), useIpv6: \w+, code: -98",
       "torch.distributed's rendezvous port {port} (--dist-init-addr, or SGLang's --nccl-port) is taken, usually "
       "by a leftover sglang::scheduler of an earlier server: `mtp-remote status` lists it, `mtp-remote stop "
       "--force` stops it by PID; or choose another port", needs=("errno: 98", "code: -98")),
    _S("port_in_use", "fatal",
       r"[Aa]ddress already in use \(addr='[^']*:(?P<port>\d+)'\)",  # ZMQError of an internal socket
       "SGLang's internal ZMQ port {port} is taken, usually by a leftover sglang::scheduler of an earlier "
       "server: `mtp-remote status` lists it, `mtp-remote stop --force` stops it by PID",
       needs=("already in use (addr=",)),
    _S("port_in_use", "fatal",
       r"[Aa]ddress already in use|Port (?P<port>\d+) is (?:already )?in use", _PORT_HINT),
    _S("nccl_error", "fatal",
       r"(?i:NCCL error)|\bnccl[A-Z]\w*Error\b|DistBackendError|DistStoreError|ProcessGroupNCCL.*(?:timed? ?out|error)"
       r"|Watchdog caught collective operation timeout",
       "NCCL failed between the GPUs: rerun with NCCL_DEBUG=INFO, check that all --tp-size GPUs are "
       "visible and free, try NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1"),
    _S("cuda_error", "fatal",
       r"CUDA error: |HIP error: |cudaError\w+|hipError\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+"
       r"|device-side assert triggered|illegal memory access|illegal instruction was encountered",
       "a CUDA kernel failed (illegal memory access / device assert): rerun with CUDA_LAUNCH_BLOCKING=1; "
       "with speculation on, try without it or with --disable-cuda-graph to isolate the kernel"),
    # --- runtime health -------------------------------------------------------------------------------------
    _S("watchdog_timeout", "fatal",
       r"(?i:watchdog timeout)(?! \([^)\n]*self\.soft=True)",
       "a scheduler step hung past the watchdog: look for a stuck GPU (nvidia-smi) or NCCL hang; "
       "--watchdog-timeout raises the limit"),
    _S("health_check_failed", "fatal",
       r"Health check failed",
       "the server stopped answering (detokenizer/scheduler heartbeat lost): restart it and read the "
       "lines above for the scheduler's error"),
    _S("warmup_failed", "fatal",
       r"Initialization failed\. warmup error|[Ww]arm[ -]?up (?:request )?(?:failed|error)|[Ff]ailed to warm[ -]?up",
       "the warmup request failed: read the traceback above it; try --skip-server-warmup only to debug",
       before_ready=True, needs=("armup", "arm up", "arm-up")),
    # a bare exception of these types at launch is SGLang's own argument validation -- unless the log was in a
    # later phase of the launch (weights, CUDA-graph capture, warmup: :data:`PHASE_CLASSES`), which then names it
    _S("config_error", "fatal",
       r"^(?:ValueError|AssertionError|NotImplementedError|TypeError)(?:: .+|\s*$)",  # a bare `assert` has no text
       "SGLang rejected the server arguments: fix the flag combination named in the message", phase="launch",
       by_phase=True),
    # --- generic crash markers, last so a specific cause above wins. "Scheduler hit an exception" is not one:
    # it opens a traceback whose last line names the cause, and a reader that sees only the opening line
    # (wait-ready reading a growing log) must keep waiting for that line or for the parent's sigquit. ----
    _S("scheduler_died", "fatal",
       r"(?i:exit ?code|exitcode|exit status|returncode|terminated with)\W{0,3}(?:-9|137)\b|killed by signal 9\b"
       r"|\bSIGKILL\b.{0,40}(?:scheduler|child)"
       # a shell running the server writes "<pid> Killed  <command>" (bash) or a bare "Killed" into the log
       r"|^(?:\S+: line \d+: +)?\d+ Killed +\S|^Killed\s*$",
       "a server process was killed with SIGKILL (exit code -9): usually the kernel's OOM killer (host RAM; "
       "see `dmesg -T | grep -i oom`) or someone's kill -9; lower host memory use or stop other jobs",
       needs=("xit code", "xitcode", "xit_code", "xit status", "returncode", "terminated with", "signal 9",
              "SIGKILL", "Killed")),
    _S("scheduler_died", "fatal",
       r"Received sigquit from a child process|Subprocess \S+ crashed"
       r"|Child process unexpectedly failed|Rank \d+ scheduler (?:is dead|died)"
       r"|(?i:\b(?:scheduler|detokenizer|tokenizer[ _]manager|DataParallelController)\w* (?:process )?"
       r"(?:died|is dead|exited unexpectedly))"
       r"|Initialization failed\. Please see the error messages above|Failed to initialize scheduler rank",
       "the scheduler process died: read its traceback above; rerun in the foreground to see it whole",
       generic=True, needs=("sigquit", "crashed", "unexpectedly", "dead", "died", "Died", "Initialization failed",
              "Failed to initialize")),
    # --- warnings: do not change the state, only the severity and hint -------------------------------------
    _S("kv_cache_retract", "warning",
       r"KV cache pool is full\. Retract requests",
       "requests were retracted for lack of KV cache: lower --max-running-requests or raise "
       "--mem-fraction-static"),
    _S("soft_watchdog", "warning",
       r"(?i:watchdog timeout) \([^)\n]*self\.soft=True",
       "a scheduler step took longer than --soft-watchdog-timeout; the soft watchdog only dumped stacks (no kill): "
       "look for a slow GPU or a stuck NCCL collective if it repeats"),
    _S("transformers_fallback", "warning",
       r"has no (?i:sglang) implementation, falling back to Transformers",
       "the model's architecture has no native SGLang implementation: it runs on the slower Transformers backend, "
       "where speculative decoding and CUDA graphs may be unsupported"),
    _S("prefill_oom", "warning",
       r"Prefill out of memory",
       "prefill ran out of memory: lower --chunked-prefill-size or --max-running-requests"),
)

#: Launch phases a log can be in, each: (name, frames of a traceback raised in it, the line that opens it, the
#: line that closes it). Frames are SGLang's source files and functions (``model_executor/cuda_graph_runner.py``
#: ``capture``/``capture_one_batch_size``, the EAGLE/NEXTN draft and verify runners, ``model_loader``
#: ``load_weights``, ``http_server._execute_server_warmup``); the lines are SGLang's logger messages.
PHASES_IN_LOG: tuple[tuple[str, re.Pattern, re.Pattern, re.Pattern], ...] = (
    ("capture",
     re.compile(r"cuda_graph_runner\.py|graph_runner\.py\S*, line \d+, in (?:capture|_capture|__init__)"
                r"|in capture_one_batch_size\b|in _capture_graph\b|in capture\b"),
     re.compile(r"(?i:Capture (?:[\w-]+ ){0,4}graph begin)"), re.compile(r"(?i:Capture (?:[\w-]+ ){0,4}graph end)")),
    ("warmup",
     re.compile(r"in _execute_server_warmup\b|in _wait_and_warmup\b|in warmup\b|warmup\.py"),
     # SGLang warms up once uvicorn listens, and prints the ready line when the warmup request answered
     re.compile(r"Uvicorn running on "), re.compile(re.escape("The server is fired up and ready to roll!"))),
    ("weight_load",
     re.compile(r"model_loader[/\\]\S+\.py|in load_weights\b|in load_model\b|weight_utils\.py"),
     re.compile(r"Load weight begin"), re.compile(r"Load weight end")),
)
#: The class and hint a ``by_phase`` exception takes in each phase (``{exc}``: the exception line).
PHASE_CLASSES: dict[str, tuple[str, str]] = {
    "capture": ("cuda_graph_capture_failed",
                "CUDA graph capture failed ({exc}) although SGLang did not wrap it (not a RuntimeError): rerun with "
                "--disable-cuda-graph to confirm the graph is at fault (with speculation on, the draft/verify "
                "graphs: also try without speculation), then report the kernel with this log (the launch arguments were accepted)"),
    "warmup": ("warmup_failed",
               "the warmup request failed ({exc}): read the traceback above it; try --skip-server-warmup only to "
               "debug"),
    "weight_load": ("model_load_failed",
                    "loading the weights failed ({exc}): the checkpoint does not match what the model code expects "
                    "(architecture, quantization, a truncated or partial download, --load-format): check the model "
                    "directory against config.json; not a flag combination"),
}

#: The cause named inside a wrapping message that means "out of memory" (then the wrapper's class stands,
#: with the memory hint).
MEMORY_CAUSE = re.compile(r"out of memory|OutOfMemory|Not enough memory|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE)
MEMORY_CAUSE_HINT = ("CUDA graph capture ran out of memory: " + _MEM_HINT)

#: A request that failed inside the HTTP server (answered 500); the traceback that follows is the request's.
REQUEST_ERROR = re.compile(r"Exception in ASGI application|Exception in callback|Error in request\b"
                           r"|Unhandled exception in request")

#: The fallback for an exception no signature knows. ``exc`` is the exception line (``Name: message``); a
#: ``KeyboardInterrupt`` is an operator's Ctrl-C (a shutdown, :data:`SHUTDOWN_START`), not a failure.
UNKNOWN_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):[^\n]*\n(?:(?:[ \t][^\n]*|)\n)*?"
    r"(?P<exc>(?!KeyboardInterrupt)(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b[^\n]*)")
UNKNOWN_HINT = ("the server failed with an error this classifier does not know ({exc}): read the traceback "
                "above it; rerun in the foreground to see it whole")
SCHEDULER_UNKNOWN_HINT = ("the scheduler process died ({exc}): read its traceback above; rerun in the foreground "
                          "to see it whole")
SCHEDULER_CRASH_HINT = ("the scheduler crashed while serving ({exc}); this is not a flag problem: read the "
                        "traceback, try without speculation or with --disable-cuda-graph to isolate it, and "
                        "report it to SGLang with the log")

#: Shutdown: "SIGTERM received. ... Draining requests and shutting down..." then, every 5 s,
#: "Gracefully exiting... Remaining number of requests N" (real SGLang waits on N > 0 with no timeout).
#: Releases without the drain (0.4.x) only show uvicorn's own shutdown: "INFO:     Shutting down", then
#: "Application shutdown complete." and "Finished server process [pid]" (:data:`SHUTDOWN_DONE`).
#: Ctrl-C on a foreground server: every process prints a traceback ending in a bare ``KeyboardInterrupt``.
SHUTDOWN_START = re.compile(r"SIGTERM received|Received SIGTERM|Draining requests and shutting down"
                            r"|Shutting down gracefully|Received signal SIG(?:TERM|INT)|INFO: +Shutting down\s*$"
                            r"|^KeyboardInterrupt\s*$",
                            re.MULTILINE)
DRAIN_REMAINING = re.compile(r"Gracefully exiting\.{0,3} ?(?i:Remaining number of requests):? (?P<n>\d+)")
SHUTDOWN_DONE = re.compile(r"Finished server process|Application shutdown complete")

#: Hints for the non-fatal states and for the shutdown states.
STATE_HINTS: dict[str, str] = {
    "ready": "server is ready",
    "starting": "server is still starting: keep waiting, or read the last milestone",
    "no_sglang_lines": ("found no SGLang lines in this text (no [date time] log prefix, no server_args=, no "
                        "launch_server usage or traceback): is it an SGLang server log?"),
    "stopping": "server received SIGTERM and is draining its requests",
    "stopped": "server was stopped cleanly (SIGTERM, drain finished with 0 requests left)",
    "drain_stuck": ("server received SIGTERM but {n} request(s) never finish draining; SGLang waits on them with "
                    "no timeout and keeps the port: SIGKILL its process group (`mtp-remote stop` does)"),
}
