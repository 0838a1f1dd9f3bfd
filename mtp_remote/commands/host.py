"""The host commands: ``preflight``, ``status``, ``stop`` (one host, or every host of ``-H a,b,c`` / a group at
once), ``launch``, ``logs``, ``smoke`` (one host).

Each reads the inventory once, opens the host (:func:`mtp_remote.experiment.hosts.open_host`), runs the
operation of :mod:`mtp_remote.host.ops` and returns its data; the entry points render it (``cli/render.py``).
Errors are :class:`~mtp_remote.errors.MtpRemoteError` (a launch that did not become ready: LaunchError).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config.inventory import HostConfig
from ..config.loaded import LoadedConfig, as_loaded
from ..errors import ConfigError
from ..experiment.hosts import open_host
from ..experiment.run_id import new_run_id
from ..serving.base import WaitOutcome, raise_for_outcome
from ..fleet.host_ops import run_host_fleet
from ..fleet.outcomes import FleetReport
from ..host import ops
from ..host.preflight import Check
from ..host.preflight import preflight as preflight_checks
from ..remote import connect as transport
from .args import LaunchArgs, LogsArgs, PreflightArgs, SmokeArgs, StatusArgs, StopArgs
from .feedback import Feedback


@dataclass(frozen=True)
class PreflightResult:
    """The checks of one host (``host``: its inventory name); exit code 2 when any failed."""

    host: str
    checks: list[Check]

    @property
    def exit_code(self) -> int:
        return 2 if any(ch.status == "fail" for ch in self.checks) else 0


@dataclass(frozen=True)
class LaunchResult:
    """The ready server: the wait's outcome (Ready) and the host it runs on."""

    outcome: WaitOutcome
    host: HostConfig


@dataclass(frozen=True)
class LogView:
    """What ``logs`` shows: the log's ``path``, whether it is ``following`` a running server of ours, whether
    ``--follow`` was asked with no server of ours running (``not_following``), and the text as it comes
    (``chunks``: the tail first, then new text while following)."""

    path: str
    following: bool
    not_following: bool
    chunks: Iterator[str]


def _fleet(command: str, config: LoadedConfig, spec: str | None, feedback: Feedback, **kw) -> FleetReport | None:
    """``command`` on every host ``spec`` names when it names several (the report), else None."""
    hosts = config.hosts(spec)
    if len(hosts) < 2:
        return None
    return run_host_fleet(command, hosts, inventory=config, on_progress=feedback.on_host, **kw)


def preflight(args: PreflightArgs, feedback: Feedback) -> PreflightResult | FleetReport:
    """Read-only checks of a host (SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, the
    playbook's profiles linted against the host's SGLang)."""
    config = as_loaded(args.inventory)
    if (report := _fleet("preflight", config, args.host, feedback, playbook=args.playbook)) is not None:
        return report
    cfg = config.host(args.host)
    pb = config.playbook(config.playbook_file(args.playbook, cfg))  # the host's own `playbook:` unless given
    with open_host(config, args.host) as (cfg, c, py):
        return PreflightResult(cfg.name, preflight_checks(c, cfg, pb, py))


def status(args: StatusArgs, feedback: Feedback) -> ops.StatusReport | FleetReport:
    """Our server (if any), the port, GPU memory and the SGLang processes we did not start."""
    config = as_loaded(args.inventory)
    if (report := _fleet("status", config, args.host, feedback)) is not None:
        return report
    with open_host(config, args.host) as (cfg, c, py):
        return ops.status(c, cfg, py)


def stop(args: StopArgs, feedback: Feedback) -> ops.StopCommandResult | FleetReport:
    """Stop the server we started and wait for its GPU memory to be released (:func:`mtp_remote.host.ops.stop`'s
    :class:`~mtp_remote.host.ops.StopCommandResult`), or on a group of hosts the fleet report."""
    config = as_loaded(args.inventory)
    if (report := _fleet("stop", config, args.host, feedback, force=args.force, term_s=args.term_s)) is not None:
        return report
    with open_host(config, args.host) as (cfg, c, py):
        return ops.stop(c, cfg, py, force=args.force, term_s=args.term_s, on_progress=feedback.on_progress,
                        inventory=args.inventory)


def launch(args: LaunchArgs, feedback: Feedback) -> LaunchResult:
    """Launch one profile's server detached and wait until it is ready; it keeps running. Raises ConfigError
    without a profile (naming the playbook's), LaunchError when it crashed or timed out (stopped again)."""
    config = as_loaded(args.inventory)
    cfg = config.host(args.host)
    pb = config.playbook(config.playbook_file(args.playbook, cfg))  # the host's own `playbook:` unless given
    if not args.profile:
        raise ConfigError(f"required; choose one of: {', '.join(pb.profile_order())}", field="--profile")
    with open_host(config, args.host) as (cfg, c, py):
        outcome = ops.launch(c, cfg, pb, args.profile, py, run_id=new_run_id(), on_progress=feedback.on_progress,
                             inventory=args.inventory)
    raise_for_outcome(outcome)
    return LaunchResult(outcome, cfg)


@contextlib.contextmanager
def logs(args: LogsArgs, checkpoint: Callable[[], None]) -> Iterator[LogView]:
    """Open our server's log (or the newest one) for reading; ``checkpoint()`` is called between polls while
    following (it raises KeyboardInterrupt on a Ctrl-C that one of the short commands swallowed). The
    connection is closed when the block ends."""
    with open_host(as_loaded(args.inventory), args.host) as (cfg, c, _py):
        path, pid = ops.current_log(c, cfg)
        keep = args.follow and pid is not None

        def done() -> bool:
            checkpoint()
            return not keep or not ops.server_alive(c, pid)

        yield LogView(path, keep, args.follow and pid is None, ops.follow_log(c, path, lines=args.lines, until=done))


def smoke(args: SmokeArgs) -> dict:
    """One prompt to the running server, its degeneracy metrics and a quick verdict (:func:`mtp_remote.host.ops.smoke`:
    ``verdict`` "ok" or "loops", ``metrics``, ``text``, ...); held under the host's smoke lock, through a tunnel."""
    config = as_loaded(args.inventory)
    cfg = config.host(args.host)
    pb = config.playbook(config.playbook_file(args.playbook, cfg))  # the host's own `playbook:` unless given
    with open_host(config, args.host) as (cfg, c, py), ops.smoke_lock(c, cfg, py), transport.tunnel(c, cfg) as url:
        return ops.smoke(url, pb, prompt=args.prompt, temperature=args.temperature, max_tokens=args.max_tokens,
                         api_key=ops.running_api_key(c, cfg, pb),
                         launch_hint=args.launch_hint.replace("{host}", cfg.name))
