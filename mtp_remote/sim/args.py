"""Command-line arguments of the simulated engine, with SGLang's flag names and post-processing.

:func:`parse_server_args` parses the argv given to ``python -m mtp_remote.sim.launch_server`` exactly as
``python -m sglang.launch_server`` would for the flags this tool uses: same names and aliases (``--model`` for
``--model-path``, ``--tp`` as a unique prefix of ``--tp-size``), unique prefixes accepted (argparse
``allow_abbrev``), unknown flags an argparse error (``usage: ...`` then ``launch_server.py: error:
unrecognized arguments: ...``, exit code 2). Then SGLang's ``ServerArgs.__post_init__`` rules that change
what the server runs with (source: sglang ``python/sglang/srt/server_args.py``): NEXTN is run and reported as
EAGLE; an unset speculative shape becomes steps 3 / topk 1 / draft tokens 4; with topk 1 the draft tokens are
forced to steps + 1 with SGLang's warning; an unset ``--max-running-requests`` becomes 48 under speculation.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


@dataclass
class ServerArgs:
    """The parsed and post-processed arguments; ``repr()`` is the ``server_args=ServerArgs(...)`` line."""

    model_path: str
    tokenizer_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    tp_size: int = 1
    context_length: int | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None
    mamba_full_memory_ratio: float = 0.9
    mamba_scheduler_strategy: str = "auto"
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    served_model_name: str | None = None
    chunked_prefill_size: int | None = None
    max_total_tokens: int | None = None
    disable_radix_cache: bool = False
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int | None = None
    api_key: str | None = None
    enable_metrics: bool = False
    decode_log_interval: int = 40
    skip_server_warmup: bool = False
    watchdog_timeout: float = 300.0
    trust_remote_code: bool = False
    dtype: str = "auto"
    random_seed: int | None = None
    log_level: str = "info"
    attention_backend: str | None = None
    page_size: int = 1
    disable_overlap_schedule: bool = False
    mamba_ssm_dtype: str | None = None

    @property
    def speculative(self) -> bool:
        """Whether the server speculates (any ``--speculative-algorithm``)."""
        return self.speculative_algorithm is not None


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with SGLang's names, defaults and aliases for the supported flags."""
    p = argparse.ArgumentParser(allow_abbrev=True)
    a = p.add_argument
    a("--model-path", "--model", type=str, required=True, help="The path of the model weights.")
    a("--tokenizer-path", type=str, default=None)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp_size")
    a("--mem-fraction-static", type=float, default=None)
    a("--context-length", type=int, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--mamba-full-memory-ratio", type=float, default=0.9)
    a("--mamba-scheduler-strategy", type=str, default="auto", choices=["auto", "no_buffer", "extra_buffer"])
    a("--disable-radix-cache", action="store_true")
    a("--disable-cuda-graph", action="store_true")
    a("--cuda-graph-max-bs", type=int, default=None)
    a("--reasoning-parser", type=str, default=None)
    a("--tool-call-parser", type=str, default=None)
    a("--served-model-name", type=str, default=None)
    a("--api-key", type=str, default=None)
    a("--enable-metrics", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--skip-server-warmup", action="store_true")
    a("--watchdog-timeout", type=float, default=300.0)
    a("--trust-remote-code", action="store_true")
    a("--dtype", type=str, default="auto")
    a("--random-seed", type=int, default=None)
    a("--log-level", type=str, default="info")
    a("--attention-backend", type=str, default=None)
    a("--page-size", type=int, default=1)
    a("--disable-overlap-schedule", action="store_true")
    a("--mamba-ssm-dtype", type=str, default=None, choices=["bfloat16", "float16", "float32"])
    a("--speculative-algorithm", type=str, default=None, choices=list(SPEC_ALGORITHMS))
    a("--speculative-draft-model-path", "--speculative-draft-model", type=str, default=None,
      dest="speculative_draft_model_path")
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    return p


def parse_server_args(argv: list[str]) -> tuple[ServerArgs, list[str]]:
    """Parse argv like SGLang and apply its post-processing.

    Returns the args and the warnings SGLang would log (plain lines, printed before ``server_args=``).
    Raises ``SystemExit(2)`` after printing usage and the error to stderr on a bad argv (argparse),
    ``ValueError`` with SGLang's message for inconsistent speculative settings.
    """
    ns = build_parser().parse_args(argv)
    fields = {f.name for f in dataclasses.fields(ServerArgs)}
    args = ServerArgs(**{k: v for k, v in vars(ns).items() if k in fields})
    warnings: list[str] = []
    if args.tokenizer_path is None:
        args.tokenizer_path = args.model_path
    if args.speculative:
        if args.speculative_algorithm == "NEXTN":
            args.speculative_algorithm = "EAGLE"
            if args.speculative_draft_model_path is None:
                args.speculative_draft_model_path = args.model_path
        if args.speculative_algorithm in ("EAGLE3", "STANDALONE") and not args.speculative_draft_model_path:
            raise ValueError(f"--speculative-draft-model-path is required for {args.speculative_algorithm}.")
        if args.max_running_requests is None:
            args.max_running_requests = 48
            warnings.append("Max running requests is reset to 48 for speculative decoding. You can override "
                            "this by explicitly setting --max-running-requests.")
        if args.speculative_num_steps is None:
            args.speculative_num_steps = 3
        if args.speculative_eagle_topk is None:
            args.speculative_eagle_topk = 1
        if args.speculative_num_draft_tokens is None:
            args.speculative_num_draft_tokens = args.speculative_num_steps + 1
        if (args.speculative_eagle_topk == 1
                and args.speculative_num_draft_tokens != args.speculative_num_steps + 1):
            warnings.append("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                            "speculative_eagle_topk == 1")
            args.speculative_num_draft_tokens = args.speculative_num_steps + 1
    if args.mem_fraction_static is None:
        args.mem_fraction_static = 0.88 if args.tp_size > 1 else 0.85
    if args.context_length is None:
        args.context_length = 32768
    if args.max_running_requests is None:
        args.max_running_requests = 256
    if args.chunked_prefill_size is None:
        args.chunked_prefill_size = 8192
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    if args.cuda_graph_max_bs is None:
        args.cuda_graph_max_bs = min(args.max_running_requests, 160)
    return args, warnings


def server_args_line(args: ServerArgs) -> str:
    """``server_args=ServerArgs(...)`` as SGLang logs it (dataclass repr)."""
    return f"server_args={args!r}"
