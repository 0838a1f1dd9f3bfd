"""``python -m mtp_remote.sim serve <sglang argv>``: the simulated ``sglang serve`` (SGLang's console command, whose
``serve`` replaces ``python -m sglang.launch_server``); the same server as :mod:`mtp_remote.sim.launch_server`.
Exit code 2 with a usage line for anything but ``serve``."""

from __future__ import annotations

import sys

from mtp_remote.sim.launch_server import main as launch_server


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "serve":
        print("usage: sglang serve [--model-path PATH] [server flags...]", file=sys.stderr)
        return 2
    return launch_server(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
