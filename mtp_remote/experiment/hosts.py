"""An inventory host and its playbook as a command opens them: find and load the files, connect, the remote python.

Light on purpose (the configuration and the transport only): the read-only host commands (``status``,
``preflight``, ``logs``, ``stop``, ``smoke``) import this, not the diagnose workflow (its verdict imports scipy,
its runner httpx and the reports).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..config.inventory import HostConfig, Inventory, load_inventory
from ..config.paths import DEFAULT_PLAYBOOK, find_inventory
from ..config.playbook import Playbook, load_playbook
from ..remote import connect as transport


def find_playbook(given: str | Path | None, inventory: str | Path | None = None) -> Path:
    """The playbook file: ``given`` (default ``playbooks/diagnose-mtp.yaml``) as it stands when it exists,
    else the same relative path beside the inventory found by :func:`find_inventory` (so a command run from
    a subdirectory of the project finds ``playbooks/``)."""
    p = Path(given or DEFAULT_PLAYBOOK)
    if p.is_absolute() or p.exists():
        return p
    beside = find_inventory(inventory).parent / p
    return beside if beside.exists() else p


def remote_python(host: HostConfig) -> str:
    """The python that runs the server: the host's, else this python for a local sim, else python3."""
    if host.python:
        return host.python
    if host.transport == "local" and host.is_sim:
        return sys.executable
    return "python3"


def load_config(inventory: str | Path | None, playbook: str | Path | None,
                host: str | None) -> tuple[Inventory, HostConfig, Playbook]:
    """Inventory, host and playbook (found as :func:`find_inventory`/:func:`find_playbook` say); the host's
    own ``playbook`` replaces the default one."""
    inv = load_inventory(find_inventory(inventory))
    cfg = inv.get(host)
    return inv, cfg, load_playbook(host_playbook_file(playbook, inventory, cfg))


def host_playbook_file(playbook: str | Path | None, inventory: str | Path | None, cfg: HostConfig) -> Path:
    """The playbook file a command on host ``cfg`` reads: ``playbook`` as given, except that the default (None
    or ``playbooks/diagnose-mtp.yaml`` as typed) means the host's own ``playbook:`` when it sets one; found as
    :func:`find_playbook` says. Decided before the default is resolved to a path, so a command run from a
    subdirectory of the project still reads the host's own playbook."""
    if (playbook is None or str(playbook) == DEFAULT_PLAYBOOK) and cfg.playbook:
        playbook = cfg.playbook
    return find_playbook(playbook, inventory)


@contextlib.contextmanager
def open_host(inventory: str | Path | None = None, host: str | None = None, c=None):
    """Yield (HostConfig, transport, remote python) for an inventory host (found by :func:`find_inventory`);
    closes the connection after."""
    inv = load_inventory(find_inventory(inventory))
    cfg = inv.get(host)
    own = c is None
    conn = c or transport.connect(cfg)
    try:
        yield cfg, conn, remote_python(cfg)
    finally:
        if own:
            transport.close(conn)


def fleet_hosts(inventory, spec: str | None) -> list[str]:
    """The host names ``-H`` stands for (one host, ``a,b,c`` or a group). Raises ConfigError."""
    return load_inventory(find_inventory(inventory)).expand(spec)
