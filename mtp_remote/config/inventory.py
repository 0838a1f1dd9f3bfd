"""Inventory models: the hosts an operator lists in ``inventory.yaml`` (:class:`HostConfig`: address, transport,
engine, python, workdir, model, port, GPUs, env), their groups and default (:class:`Inventory`), and
:func:`load_inventory`."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field, field_validator, model_validator

from ..errors import ConfigError
from .slurm import SlurmServing
from .validation import check_path, load_model, StrictModel, WithEnv, check_name, masked_env


class ProcessServing(StrictModel):
    """``server: {kind: process}`` (the default): the server is a process group on the host, started with
    ``setsid nohup``, recorded in the workdir and stopped by its PID (:mod:`mtp_remote.serving.process`)."""

    kind: Literal["process"] = Field("process", description="process: a process group on the host")


_CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class ExecServing(StrictModel):
    """``server: {kind: exec, runtime: podman, container: NAME}``: the server runs inside a long-lived container on
    the host (``docker run -d ... sleep infinity``, a Proxmox LXC): every host step runs through ``podman|docker
    exec -i NAME sh -c ...`` or ``pct exec VMID -- sh -c ...`` (:mod:`mtp_remote.serving.exec`). The container
    must see the server's port on its 127.0.0.1 the way the host does (host network) or publish it there."""

    kind: Literal["exec"] = Field("exec", description="exec: a process group inside a long-lived container")
    runtime: Literal["podman", "docker", "pct"] = Field(
        "docker", description="podman, docker (exec -i NAME), or pct (Proxmox: pct exec VMID --)")
    container: str = Field(..., description="The container's name or id (for pct: the VMID)")

    @field_validator("container")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _CONTAINER_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a container name (letters, digits, '_', '.', '-'; first a letter or "
                             f"digit)")
        return v


class ContainerServing(StrictModel):
    """``server: {kind: container, runtime: podman, image: IMAGE}``: each profile's server is its own container from
    an image (a profile may name its own ``image``: one run compares two images), with the host network, our
    name and labels, the host's GPUs when it has any; stopped with ``stop -t DRAIN`` then removed
    (:mod:`mtp_remote.serving.container`)."""

    kind: Literal["container"] = Field("container", description="container: a container per profile from an image")
    runtime: Literal["podman", "docker"] = Field("docker", description="podman or docker")
    image: str = Field(..., description="Image of every profile that names none (e.g. lmsysorg/sglang:v0.5.9-cu126)")
    python: str = Field("python3", description="python inside the image (sim engine on a local host: this python, "
                                               "mounted read-only)")
    run_args: list[str] = Field(default_factory=list,
                                description="More `run` arguments, e.g. [-v, /models:/models:ro, --shm-size, 16g]")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./:@-]{0,255}", v):
            raise ValueError(f"{v!r} is not an image reference (registry/name:tag or name@sha256:...)")
        return v


#: Where a host's servers run: one variant per kind, told apart by ``kind`` (the valid choices are named in the
#: error for any other). A new kind adds its model here (``kind: Literal["..."]`` + its own fields) and its
#: implementation in ``mtp_remote/serving/`` (see ``docs/architecture.md``).
ServerSpec = Annotated[Union[ProcessServing, ExecServing, ContainerServing, SlurmServing],  # noqa: UP007 - a variant per kind
                       Field(discriminator="kind")]


def server_kinds() -> list[str]:
    """The valid ``server.kind`` values, from :data:`ServerSpec`'s variants."""
    variants = get_args(get_args(ServerSpec)[0]) or (get_args(ServerSpec)[0],)
    return [get_args(m.model_fields["kind"].annotation)[0] for m in variants]


class HostConfig(WithEnv):
    """One GPU machine (or container) and how to reach it."""

    name: str = Field("", description="Host name; filled from the inventory key")
    transport: Literal["ssh", "local"] = Field("ssh", description="ssh: Fabric Connection; local: Invoke Context")
    engine: Literal["sglang", "sim"] = Field(
        "sglang", description="sglang: python -m sglang.launch_server; sim: the built-in simulated engine")
    entrypoint: Literal["launch_server", "serve"] = Field(
        "launch_server", description="How the server is started: launch_server (python -m sglang.launch_server) or "
                                     "serve (sglang serve: the `sglang` console script beside `python`; on a sim "
                                     "host python -m mtp_remote.sim serve)")
    address: str | None = Field(None, description="SSH address (hostname or IP); required for transport ssh")
    user: str | None = Field(None, description="SSH user; default: the SSH config's or the local user")
    ssh_port: int = Field(22, ge=1, le=65535, description="SSH port")
    key_file: str | None = Field(None, description="Private key file for SSH (path, ~ expanded)")
    gateway: str | None = Field(
        None, description="Jump host as [user@]host[:port] (like ssh -J / ProxyJump)")
    known_hosts: str | None = Field(
        None, description="known_hosts file to trust; default ~/.ssh/known_hosts")
    accept_new_host_key: bool = Field(
        False, description="Accept and remember an unknown SSH host key (default: reject it)")
    connect_timeout: float = Field(15.0, gt=0, description="SSH connect timeout, seconds")
    python: str | None = Field(
        None, description="Remote python executable; default python3 (sim on local transport: this python)")
    workdir: str = Field("~/.mtp-remote", description="Remote work directory (created mode 0700; an existing one "
                                                      "keeps its mode): server record, logs, lock")
    model_path: str = Field("/models/Qwen3.6-27B", description="--model-path passed to the server")
    gpus: list[int] | None = Field(None, description="GPU indices (CUDA_VISIBLE_DEVICES); default: all")
    port: int = Field(30000, ge=1, le=65535, description="Server HTTP port on the host (bound to 127.0.0.1)")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the server")
    server: ServerSpec = Field(
        default_factory=ProcessServing,
        description="Where the servers run, by `kind`: process (default: a process group on the host), exec (inside "
                    "a long-lived container), container (a container per profile from an image), slurm (a SLURM "
                    "job per server, submitted on the login node this host reaches: docs/slurm.md)")
    playbook: str | None = Field(
        None, description="Playbook `diagnose`, `mitigate`, `bisect`, `preflight`, `launch` and `smoke` use on this "
                          "host when none is given (e.g. a CPU-only host whose engine needs other flags than the "
                          "field case's)")

    @field_validator("address", "user", "key_file", "gateway", "known_hosts", "python", "workdir", "model_path")
    @classmethod
    def _paths(cls, v: str | None) -> str | None:
        return check_path(v)

    @field_validator("server", mode="before")
    @classmethod
    def _server_kind(cls, v: Any) -> Any:
        """``server: {}`` (or without ``kind``) is the default kind, ``process``; an unknown kind names the
        choices."""
        if isinstance(v, dict) and "kind" not in v:
            return {"kind": "process", **v}
        kinds = server_kinds()
        if isinstance(v, dict) and v["kind"] not in kinds:
            raise ValueError(f"unknown server kind {v['kind']!r}; choose one of: {', '.join(kinds)}")
        return v

    @field_validator("model_path", "python", "workdir")
    @classmethod
    def _not_an_option(cls, v: str | None) -> str | None:
        if v is not None and (v.startswith("-") or not v.strip()):
            raise ValueError(f"{v!r} must be a non-empty path that does not start with '-' (write ./{v})")
        return v

    @model_validator(mode="after")
    def _ssh_needs_address(self) -> HostConfig:
        if self.transport == "ssh" and not self.address:
            raise ValueError("transport 'ssh' needs an 'address'")
        return self

    @model_validator(mode="after")
    def _local_home(self) -> HostConfig:
        """On a local host ``~`` in ``python`` and ``model_path`` is this user's home (the launch line quotes
        them, so no shell would expand it); on an SSH host they are used as written."""
        if self.transport == "local":
            if self.python and self.python.startswith("~"):
                self.python = os.path.expanduser(self.python)
            if self.model_path.startswith("~"):
                self.model_path = os.path.expanduser(self.model_path)
        return self

    @property
    def is_sim(self) -> bool:
        return self.engine == "sim"

    @property
    def engine_module(self) -> str:
        """The Python module launched with ``python -m``."""
        return "mtp_remote.sim.launch_server" if self.is_sim else "sglang.launch_server"

    def entry_words(self, python: str) -> list[str]:
        """The words after ``python`` on the server's command line, as ``/proc/PID/cmdline`` shows them: ``-m
        sglang.launch_server``, or for ``entrypoint: serve`` the ``sglang`` console script beside ``python``
        and ``serve`` (what ``sglang serve`` becomes once its shebang ran), or on a sim host ``-m
        mtp_remote.sim serve``. Raises ConfigError for ``serve`` with a ``python`` that is not a path (the
        script is found beside it)."""
        if self.entrypoint == "launch_server":
            return ["-m", self.engine_module]
        if self.is_sim:
            return ["-m", "mtp_remote.sim", "serve"]
        if "/" not in python:
            raise ConfigError(f"host {self.name}: entrypoint serve runs the `sglang` script beside `python`; set "
                              f"`python` to a path (e.g. /opt/sglang/.venv/bin/python), not {python!r}",
                              field="python")
        return [python.rsplit("/", 1)[0] + "/sglang", "serve"]

    def launch_words(self) -> str:
        """The launch line's head as an operator writes it (``python -m sglang.launch_server`` or ``sglang
        serve``): what the lint reads before the flags."""
        return "sglang serve" if self.entrypoint == "serve" else "python -m sglang.launch_server"

    def masked_env(self) -> dict[str, str]:
        """``env`` with every value replaced by ``***`` except the harmless ones (:data:`SHOWN_ENV`)."""
        return masked_env(self.env)


class Inventory(StrictModel):
    """All hosts, by name, and the default one."""

    default_host: str = Field(..., description="Host used when none is given")
    hosts: dict[str, HostConfig] = Field(..., description="Hosts by name")
    groups: dict[str, list[str]] = Field(
        default_factory=dict, description="Named groups of hosts: `-H GROUP` runs a command on all of them")

    @model_validator(mode="after")
    def _names(self) -> Inventory:
        for name, host in self.hosts.items():
            check_name(name, "host name")
            host.name = name
        for group, members in self.groups.items():
            check_name(group, "group name")
            if group in self.hosts:
                raise ValueError(f"group name {group!r} must differ from every host name")
            unknown = [m for m in members if m not in self.hosts]
            if unknown or not members:
                raise ValueError(f"group {group!r} names unknown hosts {unknown}; choose from {sorted(self.hosts)}"
                                 if unknown else f"group {group!r} is empty")
        if self.default_host not in self.hosts:
            raise ValueError(
                f"default_host {self.default_host!r} is not a host; choose one of {sorted(self.hosts)}")
        return self

    def expand(self, spec: str | None) -> list[str]:
        """Host names for ``-H``: one host, ``a,b,c``, or a group name (groups expand in place; duplicates
        dropped, order kept). Raises ConfigError naming the valid hosts and groups."""
        names: list[str] = []
        for part in (spec or self.default_host).split(","):
            part = part.strip()
            if not part:
                continue
            members = self.groups.get(part, [part])
            for m in members:
                if m not in self.hosts:
                    raise ConfigError(f"unknown host or group {m!r}; hosts: {', '.join(sorted(self.hosts))}; "
                                      f"groups: {', '.join(sorted(self.groups)) or 'none'}", field="hosts")
                if m not in names:
                    names.append(m)
        return names

    def get(self, name: str | None) -> HostConfig:
        """The named host (or the default). Raises ConfigError naming the valid choices."""
        key = name or self.default_host
        if key in self.groups:  # a one-host command (or fab's -H, which names one host a task runs on)
            raise ConfigError(f"{key!r} is a group ({', '.join(self.groups[key])}), and this runs on one host: name "
                              f"one of them, or run the command on the whole group with `mtp-remote CMD -H {key}` "
                              f"(diagnose, mitigate, preflight, status, stop, nightly) or `fab fleet --command CMD "
                              f"--hosts {key}`", field="hosts")
        if key not in self.hosts:
            raise ConfigError(f"unknown host {key!r}; choose one of: {', '.join(sorted(self.hosts))}",
                              field="hosts")
        return self.hosts[key]


#: Shifts the port of every host on this machine (``transport: local``, as the shipped sim hosts 30011/30012 and
#: real-cpu 30021): a second user or clone on the same machine runs them without colliding. Such a host then
#: keeps its server record, logs and lock in its own workdir (``<workdir>-<port>``), so neither instance can
#: take the other's server for its own.
PORT_OFFSET_ENV = "MTP_REMOTE_PORT_OFFSET"


def port_offset(env: dict[str, str] | None = None) -> int:
    """``$MTP_REMOTE_PORT_OFFSET`` as an int (0 when unset). Raises ConfigError for anything but an integer."""
    raw = (os.environ if env is None else env).get(PORT_OFFSET_ENV, "").strip()
    if not raw:
        return 0
    if not re.fullmatch(r"-?[0-9]{1,5}", raw):
        raise ConfigError(f"must be a whole number of ports (e.g. 100), not {raw!r}", field=PORT_OFFSET_ENV)
    return int(raw)


def apply_port_offset(inv: Inventory, offset: int) -> Inventory:
    """``inv`` with ``offset`` added to the port of every local host and ``-<port>`` to its workdir. Raises
    ConfigError when a port leaves 1-65535."""
    if not offset:
        return inv
    for name, host in inv.hosts.items():
        if host.transport != "local":
            continue
        port = host.port + offset
        if not 1 <= port <= 65535:
            raise ConfigError(f"moves host {name}'s port {host.port} to {port}, outside 1-65535", field=PORT_OFFSET_ENV)
        host.port = port
        host.workdir = f"{host.workdir.rstrip('/')}-{port}"
    return inv


def load_inventory(path: str | Path) -> Inventory:
    """Read ``inventory.yaml``, with :data:`PORT_OFFSET_ENV` applied to its local hosts. Raises ConfigError
    with file and field on any problem."""
    return apply_port_offset(load_model(path, Inventory, "default_host, hosts"), port_offset())
