"""The kind of server a host's ``server: {kind: ...}`` names, opened for one run: :func:`open_server`."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..config.inventory import HostConfig
from .base import ServerKind
from .container import ContainerServer
from .exec import ExecServer
from .process import ProcessServer
from .slurm import ALLOCATION_ENV, SlurmServer, allocation_of


def open_server(c, host: HostConfig, *, python: str, run_id: str,
                on_progress: Callable[[str], None] | None = None,
                images: dict[str, str] | None = None) -> ServerKind:
    """The :class:`~.base.ServerKind` of ``host`` (``host.server.kind``) over transport ``c``, for run
    ``run_id``; ``python`` is the host's python; ``images``: profile -> image for the profiles that name their
    own (the container kind). Nothing runs on the host until its ``prepare``."""
    kw = dict(python=python, workdir=host.workdir, run_id=run_id, on_progress=on_progress)
    if host.server.kind == "process":
        return ProcessServer(c, host, **kw)
    if host.server.kind == "exec":
        return ExecServer(c, host, **kw)
    if host.server.kind == "container":
        return ContainerServer(c, host, images=images, **kw)
    if host.server.kind == "slurm":  # in a task of the nightly's job array: servers are steps of its allocation
        return SlurmServer(c, host, allocation=allocation_of(os.environ.get(ALLOCATION_ENV, "")), **kw)
    raise AssertionError(f"unknown server kind {host.server.kind!r}")  # the inventory's model names the choices
