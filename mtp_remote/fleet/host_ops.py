"""``preflight``, ``status`` and ``stop`` on many hosts at once (``-H a,b,c`` or a group): each host's outcome from
the operation of :mod:`mtp_remote.host.ops`, fanned out by :func:`mtp_remote.fleet.outcomes.fan_out`. Light: no
experiment is imported."""

from __future__ import annotations

from collections.abc import Callable

from ..config.loaded import as_loaded
from ..errors import EXIT_RUN_FAILED
from ..experiment.hosts import load_config, open_host
from ..host import ops
from ..host.preflight import preflight as preflight_checks
from .outcomes import DEFAULT_WORKERS, FleetReport, HostOutcome, fan_out

#: The host commands that run on many hosts at once.
HOST_COMMANDS = ("preflight", "status", "stop")


def host_outcome(command: str, host: str, *, inventory, playbook=None, force: bool = False,
                 term_s: float | None = None,
                 on_progress: Callable[[str, str], None] = lambda host, msg: None) -> HostOutcome:
    """One host's ``preflight`` (checks → verdicts, exit 2 on a failed check), ``status`` or ``stop``
    (``force``, ``term_s``: as ``stop`` takes them). Raises MtpRemoteError when the host cannot be used."""
    with open_host(inventory, host) as (cfg, c, py):
        if command == "preflight":
            checks = preflight_checks(c, cfg, load_config(inventory, playbook, host)[2], py)
            bad = [ch for ch in checks if ch.status != "ok"]
            return HostOutcome(host, EXIT_RUN_FAILED if any(ch.status == "fail" for ch in checks) else 0,
                               {ch.name: ch.status for ch in checks},
                               "; ".join(f"{ch.name}: {ch.detail}" for ch in bad) or "all checks ok")
        if command == "status":
            st = ops.status(c, cfg, py)
            return HostOutcome(host, 0, {"server": st.server_state},
                               f"port {cfg.port} {'in use' if st.port_in_use else 'free'}; "
                               f"{len(st.foreign)} foreign SGLang processes")
        res = ops.stop(c, cfg, py, force=force, term_s=term_s or ops.STOP_TERM_S,
                       on_progress=lambda m: on_progress(host, m))
        return HostOutcome(host, 0, {"stop": res.ours.found}, res.ours_text
                           + (f"; --force signalled PIDs {res.forced}" if res.forced else "")
                           + (f"; {res.left_alone} foreign process(es) on its GPUs or port left alone"
                              if res.left_alone > 0 else ""))


def run_host_fleet(command: str, hosts: list[str], *, inventory, playbook=None, force: bool = False,
                   term_s: float | None = None, max_workers: int = DEFAULT_WORKERS,
                   on_progress: Callable[[str, str], None] = lambda host, msg: None) -> FleetReport:
    """``command`` (one of :data:`HOST_COMMANDS`) on every host at once; the fleet report (nothing written)."""
    inventory = as_loaded(inventory)  # read once, shared by the hosts' threads
    return fan_out(command, hosts, lambda h: host_outcome(command, h, inventory=inventory, playbook=playbook,
                                                         force=force, term_s=term_s, on_progress=on_progress),
                   inventory=inventory, max_workers=max_workers, on_progress=on_progress, write=False)
