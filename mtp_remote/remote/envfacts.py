"""The software and hardware facts of a host that explain why it behaves as it does: one command, one parser.

``environment_command`` builds one shell script (sent once) that prints, between markers: the SGLang and torch
versions of the host's python (for sim hosts the release the sim imitates, ``mtp_remote.sim.version``), the
GPUs' names and driver version (``nvidia-smi --query-gpu=name,driver_version``, or the sim's stand-in) and
the model's ``config.json`` ``architectures``. ``parse_environment`` turns its output into an
:class:`EnvFacts`. ``mitigate`` uses them to choose release-aware candidates, a diagnose run records them in
``summary.json`` (``environment``), ``bug-report`` prints them, and the fleet report names the facts in which
disagreeing hosts differ.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import asdict, dataclass, field

from ..config.inventory import HostConfig
from ..errors import MtpRemoteError
from . import facts, hostscripts

_VERSIONS = ("import importlib.metadata as m\n"
             "for p in ('sglang', 'torch'):\n"
             "    try: print(p, m.version(p))\n"
             "    except Exception: print(p, '-')\n")
_MARK = "=== mtp-remote:"
log = logging.getLogger(__name__)


@dataclass
class EnvFacts:
    """SGLang and torch versions (None: not installed / unknown), GPU names, driver version, architectures."""

    sglang: str | None = None
    torch: str | None = None
    gpus: list[str] = field(default_factory=list)
    driver: str | None = None
    architectures: list[str] = field(default_factory=list)
    simulated: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def environment_command(host: HostConfig, python: str, workdir: str) -> str:
    """One script printing the facts between ``=== mtp-remote:NAME`` markers (``workdir`` resolved)."""
    py = shlex.quote(python)
    if host.is_sim:
        versions = f"echo sglang $({sim_version_command(host, python)}); echo torch -"
        model = "echo '{\"architectures\": []}'"
    else:
        versions = f"{py} -c {shlex.quote(_VERSIONS)}"
        model = f"cat {shlex.quote(host.model_path.rstrip('/') + '/config.json')}"
    smi = facts.nvidia_smi(host, python, workdir)
    parts = [("versions", versions), ("gpus", f"{smi} --query-gpu=name,driver_version --format=csv,noheader"),
             ("model", model)]
    return "; ".join(f"echo '{_MARK}{name}'; {cmd} 2>/dev/null" for name, cmd in parts)


def sim_version_command(host: HostConfig, python: str) -> str:
    """The command that prints the SGLang release a sim host imitates (its ``SGLANG_SIM_VERSION``, else the
    sim's default): every check that lints or chooses by release reads a sim host's release from it."""
    ver = "".join(f"{k}={shlex.quote(host.env[k])} " for k in ("SGLANG_SIM_VERSION",) if k in host.env)
    return f"env {ver}{shlex.quote(python)} -m mtp_remote.sim.version"


def parse_environment(output: str, *, simulated: bool = False) -> EnvFacts:
    """Parse :func:`environment_command`'s output (missing sections leave their fields unset)."""
    sections: dict[str, list[str]] = {}
    cur = None
    for line in output.splitlines():
        if line.startswith(_MARK):
            cur = line[len(_MARK):].strip()
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    ef = EnvFacts(simulated=simulated)
    for line in sections.get("versions", []):
        name, _, ver = line.strip().partition(" ")
        ver = ver.strip()
        if name in ("sglang", "torch") and ver and ver != "-":
            setattr(ef, name, ver)
    for line in sections.get("gpus", []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0]:
            ef.gpus.append(parts[0])
            ef.driver = ef.driver or parts[1]
    try:
        ef.architectures = list(json.loads("\n".join(sections.get("model", [])) or "{}").get("architectures") or [])
    except (ValueError, AttributeError):
        pass
    return ef


def environment_at(c, host: HostConfig, python: str, workdir: str) -> EnvFacts:
    """:func:`get_environment` when the workdir is resolved already (a run after its ``prepare``): one
    command."""
    r = c.run(environment_command(host, python, workdir), hide=True, warn=True, in_stream=False)
    return parse_environment(r.stdout, simulated=host.is_sim)


def server_environment(server, host: HostConfig, python: str) -> dict | None:
    """The facts a run records (``summary.json``'s ``environment``) through a server kind's connection and its
    resolved workdir (``server.c``, ``server.workdir``, ``server.capabilities.kind``): one round trip. None for a
    kind without a host connection (a test double) or when the read fails (logged): facts are never a run's
    error. A container kind's SGLang and torch are its image's, a SLURM kind's its compute node's (and the login
    node's GPUs are not the job's): those stay unknown here."""
    c = getattr(server, "c", None)
    if c is None or not hasattr(c, "run"):
        return None
    try:
        facts = environment_at(c, host, python, server.workdir).to_dict()
    except (MtpRemoteError, OSError) as e:
        log.warning("host facts not read: %s", e)
        return None
    if server.capabilities.kind in ("container", "slurm"):
        facts.update(sglang=None, torch=None)
    if server.capabilities.kind == "slurm":
        facts.update(gpus=[], driver=None)
    return facts


def get_environment(c, host: HostConfig, python: str) -> EnvFacts:
    """Run :func:`environment_command` on ``c`` (one command) and parse it."""
    workdir = hostscripts.read_workdir(c, host.workdir).path  # ~ resolved; our subdirectory of a shared one
    r = c.run(environment_command(host, python, workdir), hide=True, warn=True, in_stream=False)
    return parse_environment(r.stdout, simulated=host.is_sim)
