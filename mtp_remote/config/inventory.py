"""Configuration: the inventory of hosts (:class:`HostConfig`, :class:`Inventory`), the name and flag checks and
the strict base models the playbook models (``playbook.py``) share, validated once at the edge.

``loading.load_inventory`` and ``loading.load_playbook`` turn YAML files into pydantic models that forbid unknown
fields; any problem becomes a :class:`~mtp_remote.errors.ConfigError` naming the file, the field and what is
allowed. Inside the package only these typed objects travel.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ConfigError

#: Host, group, profile and mitigation names and run ids: they become file names and shell words on the host.
#: Applied only through :func:`check_name` (``re.fullmatch``: ``$`` alone also matches before a final ``\n``).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Environment variable names, as POSIX shells accept them in ``NAME=value`` and ``export NAME``.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASS)$", re.IGNORECASE)
#: Environment values shown in logs, records and reports; every other value from the config is masked
#: (a secret may hide under any name: ``DB_PASSWD``, ``GH_TOKEN_RO``).
SHOWN_ENV = re.compile(r"^(SGLANG_SIM_[A-Z0-9_]*|CUDA_VISIBLE_DEVICES|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|"
                       r"NCCL_DEBUG|PYTHONUNBUFFERED|SGLANG_SIM_STATE_DIR|TORCH_CUDA_ARCH_LIST)$")
#: SGLang options mtp-remote sets itself (``--model-path`` from the host, ``--host``/``--port`` bound to
#: loopback) or that could set them behind its back (``--config`` reads a YAML of options). A playbook token
#: naming one of them, or a prefix of one (argparse accepts unique abbreviations: ``--po 1``,
#: ``--model-p=/x``), is refused.
OWNED_FLAGS = ("--host", "--port", "--model-path", "--model", "--config")
MAX_CONFIG_BYTES = 4 << 20
MAX_SAMPLES = 100_000


def owned_flag(token: str) -> str | None:
    """The SGLang option this argv token would set among :data:`OWNED_FLAGS` (exact, ``--opt=value``, or a
    prefix argparse may expand), or None."""
    if not token.startswith("--") or len(token) <= 2:
        return None
    name = token.split("=", 1)[0]
    return next((f for f in OWNED_FLAGS if f.startswith(name)), None)


def is_name(value: object, pattern: re.Pattern[str] = NAME) -> bool:
    """Whether ``value`` is a string that ``pattern`` matches whole (``re.fullmatch``: no trailing newline
    slips through, as it does past ``re.match(r"^...$")``), with no ``..`` in it.

    The one check for every name that reaches a file name or a shell: host, group, profile, mitigation and
    environment variable names and run ids (:data:`NAME`, :data:`ENV_NAME`)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None and ".." not in value


def check_name(value: object, kind: str, pattern: re.Pattern[str] = NAME) -> str:
    """``value`` if :func:`is_name` holds; raises ValueError naming ``kind`` and the allowed form otherwise."""
    if not is_name(value, pattern):
        form = ("letters, digits and '_', not starting with a digit" if pattern is ENV_NAME else
                "1-64 letters, digits and '._-', starting with a letter or digit, no '..'")
        raise ValueError(f"{kind} {value!r} must match {pattern.pattern} whole ({form})")
    return value  # type: ignore[return-value]


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a safe name (:func:`check_name`); raises ValueError otherwise."""
    return check_name(run_id, "run id")


def _check_path(v: str | None) -> str | None:
    if v is not None and ("\0" in v or "\n" in v or "\r" in v):
        raise ValueError("must not contain NUL or line breaks")
    return v


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for k, v in env.items():
        check_name(k, "environment variable name", ENV_NAME)
        if "\0" in v:
            raise ValueError(f"the value of {k} contains a NUL byte")
    return env


def _check_flags(flags: list[str]) -> list[str]:
    for f in flags:
        if "\0" in f:
            raise ValueError(f"flag {f!r} contains a NUL byte")
        owned = owned_flag(f)
        if owned is not None:
            raise ValueError(f"{f.split('=', 1)[0]} (as {owned}) is set by mtp-remote from the inventory "
                             f"(--model-path: host model_path; --host/--port: loopback and host port; --config "
                             f"would override them); remove it from the playbook")
    return flags


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class _WithEnv(_Strict):
    """A model with an ``env`` field: values as strings, names that a shell takes as names."""

    @field_validator("env", mode="before", check_fields=False)
    @classmethod
    def _env_to_str(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): _env_value(val) for k, val in v.items()}
        return v

    @field_validator("env", check_fields=False)
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_env(v)


class HostConfig(_WithEnv):
    """One GPU machine (or container) and how to reach it."""

    name: str = Field("", description="Host name; filled from the inventory key")
    transport: Literal["ssh", "local"] = Field("ssh", description="ssh: Fabric Connection; local: Invoke Context")
    engine: Literal["sglang", "sim"] = Field(
        "sglang", description="sglang: python -m sglang.launch_server; sim: the built-in simulated engine")
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
    playbook: str | None = Field(
        None, description="Playbook `diagnose`, `mitigate`, `bisect`, `preflight`, `launch` and `smoke` use on this "
                          "host when none is given (e.g. a CPU-only host whose engine needs other flags than the "
                          "field case's)")

    @field_validator("address", "user", "key_file", "gateway", "known_hosts", "python", "workdir", "model_path")
    @classmethod
    def _paths(cls, v: str | None) -> str | None:
        return _check_path(v)

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

    def masked_env(self) -> dict[str, str]:
        """``env`` with every value replaced by ``***`` except the harmless ones (:data:`SHOWN_ENV`)."""
        return masked_env(self.env)


_HARMLESS_VALUE = re.compile(r"^(-?[0-9]+(\.[0-9]+)?|true|false|yes|no|on|off)$", re.IGNORECASE)


def env_value_shown(name: str, value: str) -> bool:
    """True when an environment value may appear in logs, records and reports: its name is in
    :data:`SHOWN_ENV`, or the value is a number or a boolean word. Everything else counts as a secret."""
    return bool(SHOWN_ENV.fullmatch(name) or _HARMLESS_VALUE.fullmatch(value))


def masked_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with every value not :func:`env_value_shown` replaced by ``***``."""
    return {k: (v if env_value_shown(k, v) else "***") for k, v in env.items()}


def secret_env_values(env: dict[str, str]) -> list[str]:
    """The values of ``env`` that must never be shown (see :func:`env_value_shown`)."""
    return [v for k, v in env.items() if not env_value_shown(k, v)]


def _env_value(val: Any) -> str:
    if isinstance(val, bool):
        return "1" if val else "0"
    return str(val)


class Inventory(_Strict):
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


def _split_flags(v: Any) -> Any:
    if v is None:
        return []
    if isinstance(v, str):
        return shlex.split(v)
    if isinstance(v, list):
        return [str(x) for x in v]
    return v


class _WithFlags(_Strict):
    """A model with a ``flags`` field: a string or a list, split as a shell would; flags the tool sets itself
    (``--host``/``--port``/``--model-path``, any spelling) refused."""

    @field_validator("flags", mode="before", check_fields=False)
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_flags(v)

    @field_validator("flags", check_fields=False)
    @classmethod
    def _owned(cls, v: list[str]) -> list[str]:
        return _check_flags(v)
