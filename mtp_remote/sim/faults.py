"""Faults of the simulated engine, switched on by ``SGLANG_SIM_FAULTS`` (comma-separated ``name`` or ``name=value``).

Each fault reproduces one failure seen on real SGLang hosts; ``docs/sim.md`` has the table with what each
reproduces. Unknown names are an error at startup (the sim refuses to run with a typo in its faults).
"""

from __future__ import annotations

from dataclasses import dataclass

#: name -> (takes a value, default value, one-line meaning)
FAULTS: dict[str, tuple[bool, float | None, str]] = {
    "state_leak": (False, None, "recurrent state not restored after rejected drafts: loops under speculation"),
    "accept_all_drafts": (False, None, ("verification accepts every draft token as if the target produced it: "
                                        "acceptance near the maximum, greedy output wrong, no loops")),
    "base_loops": (False, None, "the base model itself loops at T > 0, with or without speculation"),
    "low_accept": (False, None, "draft head is useless: acceptance ~1, output fine, speculation slower"),
    "kv_pool_too_small": (True, 0.9, "KV pool too small unless --mem-fraction-static >= value"),
    "cuda_graph_oom": (True, 0.85, "CUDA graph capture OOM unless --mem-fraction-static <= value"),
    "port_in_use": (False, None, "the HTTP port is taken; found only after weights load"),
    "nccl_error": (False, None, "NCCL init fails on a TP rank (tp > 1)"),
    "radix_incompatible": (False, None, "0.5.10-era ValueError: hybrid model + speculation + radix cache"),
    "crash_after": (True, 10, "the scheduler crashes after N finished requests"),
    "hang_after": (True, 10, "requests stop after N finished requests; /health stays 200 until the watchdog"),
    "slow_release": (True, 5.0, "GPU memory lingers for SECONDS after the process exits"),
    "pid_namespace": (False, None, ("nvidia-smi lists the server's processes under another PID namespace's "
                                    "numbers, as a real driver does inside a container")),
    "stale_orphan": (True, 60.0, "a scheduler child outlives its parent for SECONDS, keeping its GPU memory"),
    "numeric_noise": (True, 0.02, ("logit jitter of SIGMA nats, different on the plain decode, speculative "
                                   "verify and prefill paths (bf16-like): healthy but not bitwise")),
}


@dataclass(frozen=True)
class Faults:
    """The active faults: name -> value (``None`` for faults without a value)."""

    active: dict

    def __contains__(self, name: str) -> bool:
        return name in self.active

    def value(self, name: str) -> float:
        """The value of a fault with a parameter (its default when given without ``=value``)."""
        v = self.active.get(name)
        return FAULTS[name][1] if v is None else v


def parse_faults(spec: str | None) -> Faults:
    """Parse ``SGLANG_SIM_FAULTS``; raises ``ValueError`` naming the valid faults on an unknown name."""
    active: dict = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, raw = item.partition("=")
        name = name.strip()
        if name not in FAULTS:
            raise ValueError(f"unknown fault {name!r} in SGLANG_SIM_FAULTS; valid: {', '.join(FAULTS)}")
        takes_value = FAULTS[name][0]
        if raw and not takes_value:
            raise ValueError(f"fault {name!r} takes no value")
        active[name] = float(raw) if raw else None
    return Faults(active)
