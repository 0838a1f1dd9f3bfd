"""Containers on a host: exec into a long-lived one, and the commands of a container per server.

:class:`ExecInto` wraps a transport ``c`` (Fabric Connection or Invoke Context) so that every ``c.run`` runs
inside a long-lived container on that host: ``podman|docker exec -i NAME sh -c CMD``, or ``pct exec VMID -- sh
-c CMD`` into a Proxmox LXC container from its hypervisor host. The host scripts, facts and log stream run
there unchanged (the process kind's record, stop and GPU accounting); everything else (tunnels, the SSH
connection's state) is the wrapped transport's. One ``exec`` costs about 0.2 s on podman (measured: 0.19 s).

The other functions serve the container-per-profile kind (one container per server from an image: ``podman|docker
run -d``): its names, the GPU arguments, the mounts a simulated engine needs.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

#: Runtimes ``exec`` and ``container`` know: docker and podman share the commands used here; pct is Proxmox's.
RUNTIMES = ("podman", "docker", "pct")
#: The label every container we start carries (its value: the run id); more labels name host, profile and port.
LABEL = "mtp-remote"


#: Runs the command ($0) with its whole input read first into a private temporary file (removed after).
_BUFFERED = 'umask 077; t=$(mktemp) || exit 125; cat > "$t"; sh -c "$0" < "$t"; rc=$?; rm -f "$t"; exit $rc'


class ExecInto:
    """A transport whose ``run`` executes inside container ``name`` (a Proxmox VMID for ``pct``) through the
    wrapped ``c``; every other attribute is ``c``'s (the tunnel, the connection's state, ``close``)."""

    def __init__(self, c, runtime: str, name: str):
        if runtime not in RUNTIMES:
            raise ValueError(f"container runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")
        self._c = c
        self.runtime = runtime
        self.container = name

    def wrap(self, command: str, *, stdin: bool = False) -> str:
        """``command`` (a shell command line) as the host runs it to run it in the container. ``stdin``: the
        command is given input; it is read whole into a 0600 file first (podman drops the output of a command
        that exits before its input was read: measured 14 in 20 times), and the file removed after."""
        sh = f"sh -c {shlex.quote(_BUFFERED)} {shlex.quote(command)}" if stdin else f"sh -c {shlex.quote(command)}"
        if self.runtime == "pct":
            return f"pct exec {shlex.quote(self.container)} -- {sh}"
        return f"{self.runtime} exec -i {shlex.quote(self.container)} {sh}"

    def run(self, command: str, **kwargs):
        """``c.run`` of ``command`` inside the container (same keyword arguments and result)."""
        return self._c.run(self.wrap(command, stdin=kwargs.get("in_stream") not in (None, False)), **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._c, name)


def unwrap(c):
    """The host transport under an :class:`ExecInto` (``c`` itself otherwise)."""
    return c._c if isinstance(c, ExecInto) else c


# -- a container per server ----------------------------------------------------------------------------------

def container_name(host: str, run_id: str, profile: str) -> str:
    """Our container's name: ``mtp-<host>-<run id>-<profile>`` (names are checked: letters, digits, ``._-``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"mtp-{host}-{run_id}-{profile}")[:120]


def sim_mounts() -> list[str]:
    """``-v`` arguments a container needs to run the simulated engine from this machine's install: ``/usr``,
    ``/etc/alternatives`` (Debian's ``awk`` goes through it), this python's installation and environment and the
    directory ``mtp_remote`` is imported from, each read-only at its own path (a local image holds none of it)."""
    here = Path(__file__).resolve().parents[2]
    paths: list[str] = []
    for p in (Path("/usr"), Path("/etc/alternatives"), Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
              here):
        s = str(p)
        if p.exists() and s not in paths and not any(s.startswith(q + "/") for q in paths):
            paths.append(s)
    out: list[str] = []
    for s in paths:
        out += ["-v", f"{s}:{s}:ro"]
    return out


def gpu_args(runtime: str, gpus: list[int] | None) -> list[str]:
    """Arguments that pass the host's GPUs (``gpus``: these indices; None: all): docker ``--gpus``, podman CDI
    ``--device nvidia.com/gpu=...``. Used only when the host has NVIDIA devices."""
    if runtime == "docker":
        return ["--gpus", "all" if gpus is None else '"device=' + ",".join(map(str, gpus)) + '"']
    return [a for i in (["all"] if gpus is None else [str(g) for g in gpus]) for a in ("--device", f"nvidia.com/gpu={i}")]
