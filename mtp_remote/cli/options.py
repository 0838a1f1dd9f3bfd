"""What the click commands (``cli/main.py``, ``cli/host.py``, ``cli/runs.py``) share: the ``-i``/``-H``/``-p`` and
``--runs-dir`` options, :func:`handle_errors` (one red line and the exit code), the Ctrl-C handling and the fleet
fan-out of ``-H a,b,c``."""

from __future__ import annotations

import functools
import json
import sys

import click
from rich.markup import escape

from ..config.paths import DEFAULT_PLAYBOOK, RUNS_DEFAULT_HELP, default_runs_dir
from ..errors import Interrupted, MtpRemoteError
from ..interrupts import Interrupts
from .lazy import make_console


def _runs_dir_value(ctx, param, value):
    """click callback of ``--runs-dir``: the value given, else :func:`default_runs_dir`."""
    return value if value is not None else str(default_runs_dir())


def runs_dir_option(help_text: str = "Where run directories are."):
    """The ``--runs-dir`` option of every click command (default: :func:`default_runs_dir`)."""
    return click.option("--runs-dir", default=None, callback=_runs_dir_value, show_default=RUNS_DEFAULT_HELP,
                        help=help_text)


#: SIGINT/SIGTERM handling for this process (entry point state: one per process).
INTERRUPTS = Interrupts()


def handle_errors(fn):
    """Turn MtpRemoteError into a red line + evidence + exit code; KeyboardInterrupt into exit 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        INTERRUPTS.install()
        try:
            return fn(*args, **kwargs)
        except MtpRemoteError as e:
            if isinstance(e, Interrupted):  # unwound by the run: leaving
                INTERRUPTS.exiting()
            err_console = make_console(stderr=True)  # outside a terminal: no wrapping mid-flag
            err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
            if e.evidence:
                err_console.print(e.evidence, style="dim", highlight=False, markup=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            from rich.console import Console  # deferred: only an interrupt needs it

            INTERRUPTS.exiting()
            Console(stderr=True, log_path=False).print("[red]interrupted[/]")
            sys.exit(130)
        except Exception as e:  # an SSH failure is a cause (one line, exit 2); anything else is a bug
            from ..remote.connect import as_connect_error  # deferred: keeps --version/--help fast

            ssh = as_connect_error(e)
            if ssh is None:
                raise
            err_console = make_console(stderr=True)
            err_console.print(f"[bold red]error:[/] {escape(str(ssh))}", highlight=False)
            sys.exit(ssh.exit_code)

    return wrapper


def _console_hooks(console):
    """Runner hooks that print progress on ``console`` and honour Ctrl-C (mitigate, bisect)."""
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..report.console import RichHooks  # deferred: keeps --version/--help fast

    rh = RichHooks(console)
    return Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                 interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)


def _fleet(command: str, inventory, host, **kw) -> bool:
    """When ``-H`` names several hosts (``a,b,c`` or a group), run ``command`` on all of them at once, print
    the fleet report and exit with its code; False for a single host (the caller goes on)."""
    from ..experiment.hosts import fleet_hosts  # deferred: keeps --version/--help fast

    hosts = fleet_hosts(inventory, host)
    if len(hosts) < 2:
        return False
    from ..fleet.fleet import print_fleet, run_fleet  # deferred: the workflows, for several hosts only
    as_json = kw.pop("as_json", False)
    console = make_console(stderr=as_json)  # --json: the report on stdout, progress on stderr
    report = run_fleet(command, hosts, inventory=inventory, max_workers=kw.pop("max_workers", 8),
                       write=command in ("diagnose", "mitigate"),  # the others leave no run directory
                       on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}", highlight=False), **kw)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        sys.exit(report.exit_code)
    sys.exit(print_fleet(console, report, runs_dir=kw.get("runs_dir", "runs"), inventory=inventory))


_inventory_opt = click.option("-i", "--inventory", default=None,
                              help="Inventory of hosts (YAML). Default: $MTP_REMOTE_INVENTORY, else inventory.yaml "
                                   "here or in a parent directory.")
_host_opt = click.option("-H", "--host", default=None, help="Host name from the inventory (default: its default_host); "
                                                            "a,b,c or a group name: every one of them at once.")


_playbook_opt = click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True,
                             help="Playbook (YAML): flags and profiles. Default: the host's own `playbook:` when the "
                                  "inventory sets one, else this.")
