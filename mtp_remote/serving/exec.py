"""The ``exec`` kind: a server as a process group inside a long-lived container on the host.

The transport (:func:`mtp_remote.remote.connect.connect`) already runs every command inside the container
(:class:`~mtp_remote.remote.containers.ExecInto`: ``podman|docker exec -i NAME sh -c ...``, ``pct exec VMID --
sh -c ...`` into a Proxmox LXC), so the process kind's steps — record, follow, stop — run there unchanged. What
differs is what the kind can promise: inside a container ``nvidia-smi`` lists the driver's PIDs (the host's) or
none, so the GPU release is judged by each GPU's memory level before the launch (``server.gpu``, lib.sh
``gpu_wait``), beside the PID match.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config.inventory import HostConfig
from ..remote.containers import ExecInto
from .base import Capabilities
from .process import ProcessServer

#: A process group inside a container: identity by PID (the container's namespace), SIGTERM's drain, GPU release
#: by memory level (the driver's PIDs are not the container's), the log followed as written.
EXEC = Capabilities(kind="exec", identity="pid", drain=True, gpu_release="memory", logs="stream", relaunch=True,
                    launch=True, lock=True, host_view=True)


class ExecServer(ProcessServer):
    """The servers of one run inside host ``host``'s container (:class:`~.base.ServerKind`); ``c`` must be the
    host's transport wrapped by :class:`~mtp_remote.remote.containers.ExecInto` (``connect`` does it; a bare one
    is wrapped here)."""

    capabilities = EXEC

    def __init__(self, c, host: HostConfig, *, python: str, workdir: str, run_id: str,
                 on_progress: Callable[[str], None] | None = None):
        if not isinstance(c, ExecInto):
            c = ExecInto(c, host.server.runtime, host.server.container)
        super().__init__(c, host, python=python, workdir=workdir, run_id=run_id, on_progress=on_progress)
