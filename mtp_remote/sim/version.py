"""The SGLang release the simulated engine imitates: ``SGLANG_SIM_VERSION`` or 0.5.9 (the field's release).

0.5.9 is the release whose behaviour the sim follows where releases differ: it turns the radix cache off by
itself for speculative decoding on Qwen3.5/Qwen3-Next-family models (so ``--disable-radix-cache`` changes
nothing there); the 0.5.10-era refusal is the separate ``radix_incompatible`` fault. ``/server_info``
reports this version, and ``python -m mtp_remote.sim.version`` prints it (the sim host's "SGLang version"
fact).
"""

from __future__ import annotations

import os

DEFAULT_VERSION = "0.5.9"


def sglang_version() -> str:
    """The imitated SGLang version string."""
    return os.environ.get("SGLANG_SIM_VERSION") or DEFAULT_VERSION


if __name__ == "__main__":
    print(sglang_version())
