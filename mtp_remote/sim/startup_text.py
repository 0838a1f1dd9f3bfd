"""SGLang's own error texts for the failures the sim reproduces (tracebacks as the field's logs show them).

Sources: the field logs in ``corpus/logs`` (l03 KV pool, l04 CUDA graph OOM, l06 NCCL, l07 radix cache,
l14 illegal memory access) and sglang ``srt/server_args.py``, ``model_executor/cuda_graph_runner.py``.
"""

from __future__ import annotations

_SITE = "/opt/venv/lib/python3.12/site-packages/sglang"

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."


def kv_pool_traceback(mem_fraction_static: float) -> str:
    """l03: the KV pool does not fit in the static budget."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/managers/scheduler.py", line 3720, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
        f'  File "{_SITE}/srt/model_executor/pool_configurator.py", line 41, in __post_init__\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        f"Current value: mem_fraction_static={mem_fraction_static}"
    )


def cuda_graph_oom_traceback(total_gb: float, avail_gb: float) -> str:
    """l04: CUDA graph capture runs out of memory, with SGLang's list of possible solutions."""
    free_mib = max(avail_gb * 1024 - 420, 12.0)
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/model_executor/cuda_graph_runner.py", line 662, in __init__\n'
        "    raise Exception(\n"
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 0 has a "
        f"total capacity of {total_gb - 0.46:.2f} GiB of which {free_mib:.2f} MiB is free. Including non-PyTorch "
        f"memory, this process has {total_gb - 0.77:.2f} GiB memory in use.\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
    )


def weights_oom_traceback(total_gb: float, avail_gb: float) -> str:
    """The weights do not fit on one rank (e.g. a 27B model at TP 1 on a 48 GiB GPU)."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/model_loader/loader.py", line 612, in load_model\n'
        "    self.load_weights_and_postprocess(model, weights, target_device)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.26 GiB. GPU 0 has a total capacity of "
        f"{total_gb - 0.46:.2f} GiB of which 312.00 MiB is free. Including non-PyTorch memory, this process has "
        f"{total_gb - 0.77:.2f} GiB memory in use."
    )


def nccl_traceback() -> str:
    """l06: NCCL communicator init fails on a rank."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/distributed/device_communicators/pynccl.py", line 102, in __init__\n'
        "    self.comm: ncclComm_t = self.nccl.ncclCommInitRank(\n"
        f'  File "{_SITE}/srt/distributed/device_communicators/pynccl_wrapper.py", line 376, in NCCL_CHECK\n'
        '    raise RuntimeError(f"NCCL error: {error_str}")\n'
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    )


def crash_traceback(error_line: str) -> str:
    """l14-style: an exception in the speculative verify step."""
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/speculative/eagle_worker.py", line 311, in verify\n'
        f"{error_line}\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect."
    )


def radix_incompatible_text(arch: str) -> str:
    """l07: the 0.5.10-era ValueError from ServerArgs (hybrid model + speculation + radix cache)."""
    return (
        f"{_SITE}/launch_server.py:51: UserWarning: 'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "Traceback (most recent call last):\n"
        f'  File "{_SITE}/srt/server_args.py", line 2246, in _handle_mamba_radix_cache\n'
        "    raise ValueError(\n"
        f"ValueError: Speculative decoding for {arch} is not compatible with radix cache when using "
        "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
        "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
    )
