"""The configuration one command reads: its inventory found and validated once, its playbooks each read once.

Every command starts here (:func:`as_loaded`); the workflows below it (diagnose, nightly, a fleet's hosts, the
host commands) take the :class:`LoadedConfig` wherever they took an inventory path, so a command reads
``inventory.yaml`` once however many hosts or steps it has, and resolves its playbook path once. An inventory
path (or None: found as :func:`mtp_remote.config.paths.find_inventory` says) is still accepted everywhere and
loaded on the spot.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from .inventory import HostConfig, Inventory, load_inventory
from .paths import DEFAULT_PLAYBOOK, find_inventory
from .playbook import Playbook, load_playbook


@dataclass
class LoadedConfig:
    """One command's inventory (``inventory_file``, as found; ``inventory``, validated, ports offset) and the
    playbooks it has read, by file. Safe to share between a fleet's host threads: the inventory is only
    read, and each caller of :meth:`playbook` gets its own copy of the validated playbook."""

    inventory_file: Path
    inventory: Inventory
    playbooks: dict[Path, Playbook] = field(default_factory=dict, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def host(self, name: str | None) -> HostConfig:
        """The named host, or the default one. Raises ConfigError naming the valid choices."""
        return self.inventory.get(name)

    def hosts(self, spec: str | None) -> list[str]:
        """The host names ``-H`` stands for (one host, ``a,b,c`` or a group). Raises ConfigError."""
        return self.inventory.expand(spec)

    def find_playbook(self, given: str | Path | None) -> Path:
        """The playbook file ``given`` names (:func:`find_playbook` beside this inventory)."""
        return find_playbook(given, self.inventory_file)

    def playbook_file(self, given: str | Path | None, host: HostConfig) -> Path:
        """The playbook file a command on ``host`` reads: ``given``, except that the default (None or
        ``playbooks/diagnose-mtp.yaml`` as typed) means the host's own ``playbook:`` when it sets one; found as
        :meth:`find_playbook` says. Decided before the default is resolved to a path, so a command run from a
        subdirectory of the project still reads the host's own playbook."""
        if (given is None or str(given) == DEFAULT_PLAYBOOK) and host.playbook:
            given = host.playbook
        return self.find_playbook(given)

    def playbook(self, path: Path) -> Playbook:
        """The playbook in ``path``, read and validated on first use (a copy each call: callers may derive
        their own). Raises ConfigError with file and field."""
        with self.lock:
            if path not in self.playbooks:
                self.playbooks[path] = load_playbook(path)
            return self.playbooks[path].model_copy(deep=True)


def find_playbook(given: str | Path | None, inventory_file: Path) -> Path:
    """The playbook file: ``given`` (default ``playbooks/diagnose-mtp.yaml``) as it stands when it exists, else
    the same relative path beside ``inventory_file`` (so a command run from a subdirectory of the project finds
    ``playbooks/``)."""
    p = Path(given or DEFAULT_PLAYBOOK)
    if p.is_absolute() or p.exists():
        return p
    beside = inventory_file.parent / p
    return beside if beside.exists() else p


def inventory_file(inventory: str | Path | LoadedConfig | None) -> Path:
    """The inventory file ``inventory`` names, found as :func:`~mtp_remote.config.paths.find_inventory` says
    (not read)."""
    return inventory.inventory_file if isinstance(inventory, LoadedConfig) else find_inventory(inventory)


def as_loaded(inventory: str | Path | LoadedConfig | None) -> LoadedConfig:
    """``inventory`` when it is loaded already, else the inventory file it names (None: ``-i`` not given; found
    as :func:`~mtp_remote.config.paths.find_inventory` says) read and validated. Raises ConfigError naming
    the file and the field."""
    if isinstance(inventory, LoadedConfig):
        return inventory
    path = find_inventory(inventory)
    return LoadedConfig(path, load_inventory(path))
