"""Where the files are: default inventory, playbook and history names, the runs directory, and finding the
inventory (``-i``, ``$MTP_REMOTE_INVENTORY``, else ``inventory.yaml`` here or in a parent).

Both entry points read these at start-up (``--help`` shows them), so this module imports nothing heavy: the
commands that only read files (``hosts``, ``history``) never pay for the experiment layer.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_INVENTORY = "inventory.yaml"
DEFAULT_PLAYBOOK = "playbooks/diagnose-mtp.yaml"
#: The playbook ``nightly`` runs unless told otherwise.
DEFAULT_NIGHTLY_PLAYBOOK = "playbooks/nightly.yaml"
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


def find_inventory(given: str | Path | None = None, *, cwd: Path | None = None) -> Path:
    """The inventory to read: ``given`` (``-i``) when set, else ``$MTP_REMOTE_INVENTORY``, else the first
    ``inventory.yaml`` in the current directory or any parent (as git finds ``.git``), else
    ``inventory.yaml`` (loading it then fails naming the file). ``given == DEFAULT_INVENTORY`` that does not
    exist here is searched for like an absent one."""
    if given is not None and not (str(given) == DEFAULT_INVENTORY and not Path(given).exists()):
        return Path(given)
    env = os.environ.get(INVENTORY_ENV)
    if env:
        return Path(env).expanduser()
    return _beside_project_inventory(DEFAULT_INVENTORY, cwd)
