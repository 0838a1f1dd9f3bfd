"""``fleet``: one of diagnose, mitigate, preflight, status, stop on many hosts at once (``fab fleet``; ``mtp-remote``
runs them with ``-H a,b,c`` or a group through the commands themselves)."""

from __future__ import annotations

from ..config.loaded import as_loaded
from ..errors import ConfigError
from ..fleet.fleet import COMMANDS, run_fleet
from ..fleet.outcomes import FleetReport
from .args import FleetArgs
from .feedback import Feedback


def fleet(args: FleetArgs, feedback: Feedback) -> FleetReport:
    """Run ``args.command`` on every host of ``args.hosts``; the fleet report (``RUNS_DIR/fleet-<id>/`` written).
    Raises ConfigError without a command or hosts, or for a command that does not run on a fleet (naming
    those that do)."""
    if not args.command or not args.hosts:
        missing = " and ".join(x for x, v in (("--command CMD", args.command), ("--hosts a,b|GROUP", args.hosts))
                               if not v)
        raise ConfigError(f"fab fleet needs {missing} (commands: {', '.join(COMMANDS)}); e.g. `fab fleet "
                          f"--command status --hosts sims`", field="fleet")
    if args.command not in COMMANDS:
        raise ConfigError(f"fleet command {args.command!r}; choose one of {COMMANDS}", field="--command")
    config = as_loaded(args.inventory)
    return run_fleet(args.command, config.hosts(args.hosts), inventory=config, playbook=args.playbook,
                     runs_dir=args.runs_dir, samples=args.samples, max_workers=args.workers,
                     on_progress=feedback.on_host)
