"""What the click commands (``cli/main.py``, ``cli/host.py``, ``cli/runs.py``) share: the ``-i``/``-H``/``-p`` and
``--runs-dir`` options and :func:`handle_errors` (one red line and the exit code, Ctrl-C as exit 130)."""

from __future__ import annotations

import functools
import sys

import click

from ..config.paths import DEFAULT_PLAYBOOK, RUNS_DEFAULT_HELP, default_runs_dir
from . import lazy
from .completion import complete_hosts
from .signals import INTERRUPTS


def _runs_dir_value(ctx, param, value):
    """click callback of ``--runs-dir``: the value given, else :func:`default_runs_dir`."""
    return value if value is not None else str(default_runs_dir())


def runs_dir_option(help_text: str = "Where run directories are."):
    """The ``--runs-dir`` option of every click command (default: :func:`default_runs_dir`)."""
    return click.option("--runs-dir", default=None, callback=_runs_dir_value, show_default=RUNS_DEFAULT_HELP,
                        help=help_text)


def handle_errors(fn):
    """Turn an expected error (MtpRemoteError, an SSH failure) into a red line + evidence + its exit code
    (:func:`mtp_remote.cli.output.report_error`), KeyboardInterrupt into exit 130; anything else is a bug and
    keeps its traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        INTERRUPTS.install()
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            INTERRUPTS.exiting()
            click.secho("interrupted", fg="red", err=True)
            sys.exit(130)
        except Exception as e:
            code = lazy.output().report_error(e)
            if code is None:
                raise
            sys.exit(code)

    return wrapper


#: ``-i``: the inventory file.
inventory_opt = click.option("-i", "--inventory", default=None,
                             help="Inventory of hosts (YAML). Default: $MTP_REMOTE_INVENTORY, else inventory.yaml "
                                  "here or in a parent directory.")
#: ``-H``: one host, ``a,b,c`` or a group.
host_opt = click.option("-H", "--host", default=None, shell_complete=complete_hosts, help="Host name from the inventory (default: its default_host); "
                                                           "a,b,c or a group name: every one of them at once.")
#: -H of the commands that act on one server (launch, logs, smoke, bisect): a group or a,b,c is refused there.
one_host_opt = click.option("-H", "--host", default=None, shell_complete=complete_hosts,
                            help="Host name from the inventory (default: its default_host); one host only.")
#: ``-p``: the playbook, the host's own by default.
playbook_opt = click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True,
                            help="Playbook (YAML): flags and profiles. Default: the host's own `playbook:` when the "
                                 "inventory sets one, else this.")
