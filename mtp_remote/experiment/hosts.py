"""An inventory host and its playbook as a command opens them: find and load the files, connect, the remote python.

Light on purpose (the configuration and the transport only): the read-only host commands (``status``,
``preflight``, ``logs``, ``stop``, ``smoke``) import this, not the diagnose workflow (its verdict imports scipy,
its runner httpx and the reports).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..config.inventory import HostConfig, Inventory
from ..config.loaded import LoadedConfig, as_loaded, inventory_file
from ..config.loaded import find_playbook as find_playbook_beside
from ..config.playbook import Playbook
from ..remote import connect as transport


def find_playbook(given: str | Path | None, inventory: str | Path | LoadedConfig | None = None) -> Path:
    """The playbook file: ``given`` (default ``playbooks/diagnose-mtp.yaml``) as it stands when it exists,
    else the same relative path beside the inventory (found, not read: :func:`mtp_remote.config.loaded.find_playbook`)."""
    return find_playbook_beside(given, inventory_file(inventory))


def remote_python(host: HostConfig) -> str:
    """The python that runs the server: the host's, else this python for a local sim, else python3."""
    if host.python:
        return host.python
    if host.transport == "local" and host.is_sim:
        return sys.executable
    return "python3"


def load_config(inventory: str | Path | LoadedConfig | None, playbook: str | Path | None,
                host: str | None) -> tuple[Inventory, HostConfig, Playbook]:
    """Inventory, host and playbook (``inventory``: a :class:`LoadedConfig`, or a file found and read as
    :func:`~mtp_remote.config.loaded.as_loaded` says); the host's own ``playbook`` replaces the default one."""
    config = as_loaded(inventory)
    cfg = config.host(host)
    return config.inventory, cfg, config.playbook(config.playbook_file(playbook, cfg))


def host_playbook_file(playbook: str | Path | None, inventory: str | Path | LoadedConfig | None,
                       cfg: HostConfig) -> Path:
    """The playbook file a command on host ``cfg`` reads (:meth:`LoadedConfig.playbook_file`)."""
    return as_loaded(inventory).playbook_file(playbook, cfg)


@contextlib.contextmanager
def open_host(inventory: str | Path | LoadedConfig | None = None, host: str | None = None, c=None):
    """Yield (HostConfig, transport, remote python) for an inventory host (``inventory`` as :func:`load_config`
    takes it); closes the connection after."""
    cfg = as_loaded(inventory).host(host)
    own = c is None
    conn = c or transport.connect(cfg)
    try:
        yield cfg, conn, remote_python(cfg)
    finally:
        if own:
            transport.close(conn)


def fleet_hosts(inventory: str | Path | LoadedConfig | None, spec: str | None) -> list[str]:
    """The host names ``-H`` stands for (one host, ``a,b,c`` or a group). Raises ConfigError."""
    return as_loaded(inventory).hosts(spec)
