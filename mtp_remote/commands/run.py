"""The commands that run experiments: ``diagnose``, ``nightly``, ``mitigate``, ``bisect``.

Each takes its arguments (:mod:`mtp_remote.commands.args`) and a :class:`~mtp_remote.commands.feedback.Feedback`,
reads the inventory once, decides whether ``-H`` names one host or several (then the whole fleet runs at once)
and returns the workflow's result; it prints nothing (``cli/render.py`` does, for both entry points). Errors are
:class:`~mtp_remote.errors.MtpRemoteError` as the workflows raise them (``nightly`` never raises for its run:
the error is in its result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.loaded import as_loaded
from ..errors import MtpRemoteError
from ..experiment.diagnose import DiagnoseResult
from ..experiment.diagnose import diagnose as run_diagnose
from ..experiment.runner import Hooks
from .args import BisectArgs, DiagnoseArgs, MitigateArgs, NightlyArgs
from .feedback import Feedback

if TYPE_CHECKING:  # the searches and the fleet are imported by the commands that use them (diagnose starts faster)
    from ..fleet.nightly import NightlyResult
    from ..fleet.nightly_fleet import FleetNightlyResult
    from ..fleet.outcomes import FleetReport
    from ..search.bisect import BisectResult
    from ..search.mitigate import MitigateResult
    from ..search.records import MitigationDoc


def runner_hooks(feedback: Feedback, *, progress: bool = True) -> Hooks:
    """The runner's hooks for ``feedback``; ``progress=False``: the interrupt hooks alone (a fleet's hosts report
    through ``on_host``, not through progress bars)."""
    if not progress:
        return Hooks(interrupted=feedback.interrupted, checkpoint=feedback.checkpoint)
    return Hooks(on_progress=feedback.on_progress, on_profile=feedback.on_profile, on_sample=feedback.on_sample,
                 on_loop=feedback.on_loop, interrupted=feedback.interrupted, checkpoint=feedback.checkpoint)


@dataclass(frozen=True)
class SpreadMitigation:
    """``mitigate --spread`` over several hosts: the merged document (:func:`mtp_remote.fleet.fleet.spread_mitigate`:
    ``rows`` with their ``host``, ``left_out`` host → why, ``exit_code``)."""

    document: MitigationDoc

    @property
    def exit_code(self) -> int:
        return self.document.exit_code


def diagnose(args: DiagnoseArgs, feedback: Feedback) -> DiagnoseResult | FleetReport:
    """One host's diagnose run (its run directory written), or, when ``args.host`` names several hosts, every
    one of them at once (a :class:`FleetReport`; ``RUNS_DIR/fleet-<id>/`` written)."""
    if args.attach and args.host is None:  # endpoints already serving: no inventory needed
        return run_diagnose(inventory=args.inventory, playbook=args.playbook, host=None, runs_dir=args.runs_dir,
                            profiles=list(args.profiles) or None, resume=args.resume,
                            hooks=runner_hooks(feedback), overrides=args.overrides() or None,
                            attach=list(args.attach))
    config = as_loaded(args.inventory)
    hosts = config.hosts(args.host)
    if len(hosts) > 1 and not args.attach:
        from ..fleet.fleet import run_fleet

        return run_fleet("diagnose", hosts, inventory=config, playbook=args.playbook, runs_dir=args.runs_dir,
                         samples=args.samples, stop_on_loop=args.stop_on_loop, on_progress=feedback.on_host)
    return run_diagnose(inventory=config, playbook=args.playbook, host=args.host, runs_dir=args.runs_dir,
                        profiles=list(args.profiles) or None, resume=args.resume, hooks=runner_hooks(feedback),
                        overrides=args.overrides() or None, attach=list(args.attach) or None)


def nightly(args: NightlyArgs, feedback: Feedback) -> NightlyResult | FleetNightlyResult:
    """The nightly on one host, or on a group / ``a,b,c`` (every host at once, ``args.workers`` at a time).
    An inventory that cannot be read is the night's failure (recorded by the single-host nightly), not an
    error raised here. Raises ConfigError only for an unusable ``--history`` or ``--metrics-file``."""
    from ..fleet.nightly import fleet_spec, run_nightly
    from ..fleet.nightly_fleet import run_nightly_fleet

    try:
        inventory = as_loaded(args.inventory)
    except MtpRemoteError:
        inventory = args.inventory  # run_nightly records why, so the night does not go missing
    fleet = fleet_spec(inventory, args.host)
    if fleet is not None:
        hosts, group = fleet
        return run_nightly_fleet(hosts, group=group, inventory=inventory, playbook=args.playbook,
                                 runs_dir=args.runs_dir, history_db=args.history_db, hooks=runner_hooks(feedback, progress=False),
                                 metrics_file=args.metrics_file, max_workers=args.workers, on_progress=feedback.on_host)
    return run_nightly(inventory=inventory, host=args.host, playbook=args.playbook, runs_dir=args.runs_dir,
                       history_db=args.history_db, hooks=runner_hooks(feedback), metrics_file=args.metrics_file)


def mitigate(args: MitigateArgs, feedback: Feedback) -> MitigateResult | FleetReport | SpreadMitigation:
    """Candidates for the corrupting profile on one host; on several hosts, each host's own mitigation at once
    (a :class:`FleetReport`), or with ``args.spread`` the candidates shared out (:class:`SpreadMitigation`)."""
    from ..fleet.fleet import run_fleet, spread_mitigate
    from ..search.mitigate import mitigate as run_mitigate

    config = as_loaded(args.inventory)
    hosts = config.hosts(args.host)
    only = list(args.only) or None
    if len(hosts) > 1 and args.spread:
        return SpreadMitigation(spread_mitigate(hosts, inventory=config, playbook=args.playbook,
                                                runs_dir=args.runs_dir, samples=args.samples, only=only,
                                                on_progress=feedback.on_host))
    if len(hosts) > 1:
        return run_fleet("mitigate", hosts, inventory=config, playbook=args.playbook, runs_dir=args.runs_dir,
                         from_run=args.from_run, samples=args.samples, only=only, on_progress=feedback.on_host)
    return run_mitigate(inventory=config, playbook=args.playbook, host=args.host, runs_dir=args.runs_dir,
                        profile=args.profile, from_run=args.from_run, resume=args.resume, only=only,
                        samples=args.samples, hooks=runner_hooks(feedback))


def bisect(args: BisectArgs, feedback: Feedback) -> BisectResult:
    """The minimal flag change from a good to a bad launch line that still corrupts output (one host)."""
    from ..search.bisect import bisect as run_bisect

    return run_bisect(inventory=as_loaded(args.inventory), playbook=args.playbook, host=args.host,
                      runs_dir=args.runs_dir, good=args.good, bad=args.bad, repeats=args.repeats,
                      from_run=args.from_run, hooks=runner_hooks(feedback), resume=args.resume)
