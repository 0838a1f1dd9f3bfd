"""``python -m mtp_remote.sim.launch_server <sglang argv>``: the simulated ``python -m sglang.launch_server``.

Environment: ``SGLANG_SIM_TIME_SCALE`` (float, default 1.0: realistic durations; 0.02-0.05 for demos and
tests), ``SGLANG_SIM_STARTUP_SCALE`` (float, default the time scale: the startup milestones alone, so a test
can start in a fraction of a second and still decode at a measurable speed), ``SGLANG_SIM_FAULTS`` (see
:mod:`mtp_remote.sim.faults`), ``SGLANG_SIM_GPUS`` and ``SGLANG_SIM_STATE_DIR`` (see :mod:`mtp_remote.sim.gpu`),
``SGLANG_SIM_DRAIN_TIMEOUT`` (seconds).
Exit codes: 0 after a SIGTERM drain, 1 on a startup or runtime failure (the log says why, in SGLang's words),
2 on a bad argv (argparse).
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback

from mtp_remote.sim import gpu
from mtp_remote.sim.args import parse_server_args, server_args_line
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.logfmt import SimLog
from mtp_remote.sim.memory import is_hybrid, plan_memory
from mtp_remote.sim.server import SimServer
from mtp_remote.sim.startup_text import radix_incompatible_text


def main(argv: list[str] | None = None) -> int:
    """Run the simulated server; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.argv[0] = "launch_server.py"
    try:
        faults = parse_faults(os.environ.get("SGLANG_SIM_FAULTS"))
        scale = float(os.environ.get("SGLANG_SIM_TIME_SCALE") or 1.0)
        startup_scale = float(os.environ.get("SGLANG_SIM_STARTUP_SCALE") or scale)
        gpus = gpu.load_gpus()
    except ValueError as e:
        print(f"mtp-remote sim: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        args, warnings = parse_server_args(argv)
    except ValueError:
        traceback.print_exc()
        return 1
    log = SimLog(args.tp_size)
    if ("radix_incompatible" in faults and args.speculative and not args.disable_radix_cache
            and args.mamba_scheduler_strategy != "extra_buffer" and is_hybrid(args.model_path)):
        log.raw(radix_incompatible_text("Qwen3_5ForConditionalGeneration"))
        return 1
    for w in warnings:
        log.raw(w)
    log.line(server_args_line(args))
    mem = plan_memory(args, gpus[0].total_mib, faults)
    srv = SimServer(args, faults, scale, log, mem, gpus, startup_scale)
    srv.start_children()
    srv.load()
    sock = srv.bind()
    code = asyncio.run(srv.serve(sock))
    srv.stop_children()
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
