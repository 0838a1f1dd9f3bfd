"""The ``fab`` entry point mtp-remote installs: Fabric's own program, which finds its tasks wherever it runs.

Fabric looks for ``fabfile.py`` in the current directory and its parents, so ``fab`` worked only inside the clone
("Can't find any collection named 'fabfile'!" with an inventory elsewhere, issue 30). This program does the
same search first -- a ``fabfile.py`` here or above (the clone's, or an operator's own) is used as Fabric would
-- and when there is none, and neither ``-c``/``--collection`` nor ``-r``/``--search-root`` asked for one,
takes mtp-remote's tasks (:mod:`mtp_remote.cli.tasks`, the ones the clone's ``fabfile.py`` lists). Installed
as ``fab`` by ``pyproject.toml`` (over Fabric's script of the same name, which lacks only this fallback).
"""

from __future__ import annotations

from fabric import Config, Executor
from fabric import __version__ as fabric_version
from fabric.main import Fab
from invoke import Collection
from invoke.exceptions import CollectionNotFound

from . import tasks

#: mtp-remote's tasks, as the clone's fabfile.py lists them.
TASKS = (tasks.diagnose, tasks.launch, tasks.logs, tasks.preflight, tasks.smoke, tasks.status, tasks.stop,
         tasks.bisect_task, tasks.fleet, tasks.mitigate, tasks.nightly, tasks.watch)


def packaged_tasks() -> Collection:
    """mtp-remote's tasks as one collection (the names ``fab -l`` lists in the clone)."""
    return Collection(*TASKS)


class MtpFab(Fab):
    """Fabric's ``Fab``: a fabfile found from here up, else :func:`packaged_tasks`."""

    def load_collection(self) -> None:
        name, root = self.args.collection.value, self.args["search-root"].value
        if name is None and root is None:
            try:
                self.loader_class(config=self.config, start=root).find(self.config.tasks.collection_name)
            except CollectionNotFound:
                self.collection = packaged_tasks()
                return
        super().load_collection()


program = MtpFab(name="Fabric", version=fabric_version, executor_class=Executor, config_class=Config)
