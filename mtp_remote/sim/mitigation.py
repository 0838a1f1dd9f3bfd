"""Which server flags switch a simulated runtime fault on, which cure it, and what each flag costs in speed.

A runtime fault (one that corrupts output rather than stopping the server) is active only when every
*trigger* holds and no *cure* does; flags listed under *no effect* are the usual guesses that do nothing
(with the reason). Every flag that changes the per-iteration cost of the scheduler has an entry in
:data:`SPEED_COSTS`, so a mitigation's price in tokens/s is modelled, not assumed. ``docs/sim.md`` has the
same table in prose ("Mitigations"). Sources for the choices:

- ``state_leak`` needs the overlap scheduler: it runs the next batch's CPU work while the GPU verifies, and the
  bug is a recurrent-state restore that races with it; ``--disable-overlap-schedule`` serialises the two and
  costs the CPU time the overlap hid. ``--mamba-scheduler-strategy extra_buffer`` keeps a separate state
  buffer per speculative step (nothing to restore) at the cost of one state copy per verify step.
- ``--disable-radix-cache`` is no cure on SGLang 0.5.9: it turns the radix cache off by itself for speculative
  decoding on Qwen3.5/Qwen3-Next-family models (``_handle_mamba_radix_cache``), so the flag changes nothing.
- Fewer ``--speculative-num-steps`` leave fewer rejected draft tokens per verify step to leak: the loop rate
  drops without reaching zero (the leak is per rejected token in :mod:`mtp_remote.sim.decode`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mtp_remote.sim.args import ServerArgs
from mtp_remote.sim.faults import Faults


@dataclass(frozen=True)
class FlagCondition:
    """``flag`` (SGLang's spelling, as written on a launch line) sets ``dest`` to ``value``."""

    flag: str
    dest: str
    value: Any

    def holds(self, args: ServerArgs) -> bool:
        return getattr(args, self.dest) == self.value


@dataclass(frozen=True)
class FaultSwitch:
    """When a runtime fault acts: under speculation (if ``needs_speculation``), all ``triggers``, no ``cures``."""

    fault: str
    needs_speculation: bool
    triggers: tuple[FlagCondition, ...]
    cures: tuple[FlagCondition, ...]
    no_effect: tuple[tuple[str, str], ...] = ()  #: (flag, why it does not help)

    def active(self, args: ServerArgs, faults: Faults) -> bool:
        if self.fault not in faults:
            return False
        if self.needs_speculation and not args.speculative:
            return False
        return all(t.holds(args) for t in self.triggers) and not any(c.holds(args) for c in self.cures)


OVERLAP_ON = FlagCondition("(default: overlap scheduling on)", "disable_overlap_schedule", False)
NO_OVERLAP = FlagCondition("--disable-overlap-schedule", "disable_overlap_schedule", True)
EXTRA_BUFFER = FlagCondition("--mamba-scheduler-strategy extra_buffer", "mamba_scheduler_strategy", "extra_buffer")

#: Runtime faults and the flags that switch them (startup faults keep their own checks in the server).
SWITCHES: dict[str, FaultSwitch] = {
    "state_leak": FaultSwitch(
        "state_leak", needs_speculation=True, triggers=(OVERLAP_ON,), cures=(NO_OVERLAP, EXTRA_BUFFER),
        no_effect=(("--disable-radix-cache", ("SGLang 0.5.9 already turns the radix cache off for speculative "
                                             "decoding on Qwen3.5/Qwen3-Next models")),
                   ("--disable-cuda-graph", "the leak is in the state restore, not in graph replay"),
                   ("--mamba-ssm-dtype float32", "a wider state dtype keeps the leaked tokens just as well"))),
    # the real engine's lossless-only fault (``real-hybrid-overaccept``): no flag but the speculation cures it
    "accept_all_drafts": FaultSwitch("accept_all_drafts", needs_speculation=True, triggers=(), cures=()),
}


def fault_active(name: str, args: ServerArgs, faults: Faults) -> bool:
    """Whether the runtime fault ``name`` acts on a server started with ``args``."""
    return SWITCHES[name].active(args, faults)


@dataclass(frozen=True)
class SpeedCost:
    """What ``when`` costs per scheduler iteration: ``add_s`` seconds (unscaled) plus ``factor`` x the cost."""

    when: FlagCondition
    add_s: float = 0.0
    factor: float = 1.0
    speculative_only: bool = False
    why: str = ""


#: Per-iteration costs of flags (unscaled seconds at batch 16: decode 38 ms, verify with 3 steps 61 ms).
SPEED_COSTS: tuple[SpeedCost, ...] = (
    SpeedCost(NO_OVERLAP, add_s=0.008, why="the CPU scheduling the overlap scheduler hid is now serial"),
    SpeedCost(EXTRA_BUFFER, add_s=0.003, speculative_only=True,
              why="one extra recurrent-state copy per verify step"),
    SpeedCost(FlagCondition("--disable-cuda-graph", "disable_cuda_graph", True), factor=1.45,
              why="every kernel launched from Python"),
    SpeedCost(FlagCondition("--mamba-ssm-dtype float32", "mamba_ssm_dtype", "float32"), factor=1.10,
              why="the recurrent state read and written in float32"),
    SpeedCost(FlagCondition("--attention-backend triton", "attention_backend", "triton"), factor=1.06,
              why="triton kernels are a little slower than the default backend's"),
    SpeedCost(FlagCondition("--attention-backend torch_native", "attention_backend", "torch_native"), factor=1.8,
              why="unfused attention"),
)


def iteration_cost(base_s: float, args: ServerArgs) -> float:
    """One scheduler iteration's simulated cost (seconds, unscaled) with every applicable :data:`SPEED_COSTS`."""
    cost = base_s
    for sc in SPEED_COSTS:
        if sc.when.holds(args) and (args.speculative or not sc.speculative_only):
            cost = cost * sc.factor + sc.add_s
    return cost
