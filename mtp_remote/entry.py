"""What both entry points (``cli.py``, ``tasks.py``) share at start-up: default file locations and the
heavy layers, imported on first use.

Start-up time is the reason this module exists: ``mtp-remote --version``/``--help`` and ``fab -l`` must not
pay for the api layer (scipy, numpy, httpx, pydantic, jinja2: ~1 s on a 2-core VM) or the rich renderers;
each command imports them through :func:`api` / :func:`make_console` when it runs. ``bench/`` times this.
Finding the inventory is here too, so the commands that only read files (``hosts``, ``history``) never pay
for the api layer.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_INVENTORY = "inventory.yaml"
DEFAULT_PLAYBOOK = "playbooks/diagnose-mtp.yaml"
#: Environment variable naming the inventory when ``-i`` is not given.
INVENTORY_ENV = "MTP_REMOTE_INVENTORY"
#: History of every run, inside the runs directory unless ``--history`` says otherwise.
HISTORY_FILE = "history.sqlite"
#: Environment variable naming the runs directory when ``--runs-dir`` is not given.
RUNS_ENV = "MTP_REMOTE_RUNS_DIR"
#: ``--runs-dir``'s default, as ``--help`` shows it.
RUNS_DEFAULT_HELP = "$MTP_REMOTE_RUNS_DIR, else runs/ beside the inventory.yaml found here or in a parent"


def default_runs_dir(*, cwd: Path | None = None) -> Path:
    """Where run directories go when ``--runs-dir`` is not given: ``$MTP_REMOTE_RUNS_DIR``, else ``runs/``
    beside the first ``inventory.yaml`` in the current directory or a parent (the project's root: every
    subdirectory then shares one ``runs/`` and one history, as it shares the inventory), else ``./runs``."""
    import os

    env = os.environ.get(RUNS_ENV)
    if env:
        return Path(env).expanduser()
    return _beside_project_inventory("runs", cwd)


def _beside_project_inventory(name: str, cwd: Path | None) -> Path:
    """``name`` in the first directory, from ``cwd`` up, that holds an ``inventory.yaml`` (as git finds
    ``.git``): relative when that is ``cwd`` itself; ``name`` relative to ``cwd`` when none does."""
    here = (cwd or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / DEFAULT_INVENTORY).is_file():
            return Path(name) if d == here else d / name
    return Path(name)


def _runs_dir_value(ctx, param, value):
    """click callback of ``--runs-dir``: the value given, else :func:`default_runs_dir`."""
    return value if value is not None else str(default_runs_dir())


def runs_dir_option(help_text: str = "Where run directories are."):
    """The ``--runs-dir`` option of every click command (default: :func:`default_runs_dir`)."""
    import click

    return click.option("--runs-dir", default=None, callback=_runs_dir_value, show_default=RUNS_DEFAULT_HELP,
                        help=help_text)


def api():
    """The :mod:`mtp_remote.api` module (deferred: it pulls numpy/httpx/pydantic and the runner, ~1 s)."""
    from . import api as module

    return module


def hosts():
    """The :mod:`mtp_remote.hosts` module (deferred, and light: opening a host needs no runner nor report)."""
    from . import hosts as module

    return module


def make_console(*args, **kwargs):
    """:func:`mtp_remote.report.console.make_console` (deferred: rich tables/progress and jinja2)."""
    from .report.console import make_console as make

    return make(*args, **kwargs)


def find_inventory(given: str | Path | None = None, *, cwd: Path | None = None) -> Path:
    """The inventory to read: ``given`` (``-i``) when set, else ``$MTP_REMOTE_INVENTORY``, else the first
    ``inventory.yaml`` in the current directory or any parent (as git finds ``.git``), else
    ``inventory.yaml`` (loading it then fails naming the file). ``given == DEFAULT_INVENTORY`` that does not
    exist here is searched for like an absent one."""
    import os

    if given is not None and not (str(given) == DEFAULT_INVENTORY and not Path(given).exists()):
        return Path(given)
    env = os.environ.get(INVENTORY_ENV)
    if env:
        return Path(env).expanduser()
    return _beside_project_inventory(DEFAULT_INVENTORY, cwd)
