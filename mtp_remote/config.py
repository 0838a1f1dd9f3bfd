"""Configuration: the inventory of hosts and the experiment playbooks, validated once at the edge.

``load_inventory`` and ``load_playbook`` turn YAML files into pydantic models that forbid unknown fields;
any problem becomes a :class:`~mtp_remote.errors.ConfigError` naming the file, the field and what is
allowed. Inside the package only these typed objects travel.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError

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


class ProfileConfig(_WithEnv, _WithFlags):
    """One server configuration: the playbook's base flags plus these."""

    flags: list[str] = Field(default_factory=list, description="Extra SGLang flags (string or list)")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for this profile")
    description: str = ""

    @property
    def speculative(self) -> bool:
        return any(f.startswith("--speculative-algo") for f in self.flags)


class MitigationConfig(_WithFlags):
    """One candidate change for ``mitigate``: flags set on the corrupting profile (replacing the same flag's
    value) and flags removed from it."""

    name: str = Field(..., description="Candidate name (a profile name in the mitigation run)")
    flags: list[str] = Field(default_factory=list, description="SGLang flags to set (string or list)")
    remove: list[str] = Field(default_factory=list, description="SGLang flags to remove from the profile")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "mitigation name")


class Prompt(_Strict):
    id: str = Field(..., description="Short stable id, used for pairing and in reports")
    text: str = Field(..., description="The user message")


class CompareConfig(_Strict):
    alpha: float = Field(0.05, gt=0, lt=1, description="Family-wise error rate for the loop-rate tests")
    margin: float = Field(
        0.05, gt=0, lt=1, description="Loop-rate excess (absolute, spec - baseline) that matters: `healthy` needs "
                                      "the upper confidence bound of the excess below it at every temperature > 0")
    spending: Literal["obrien-fleming", "pocock"] = Field(
        "obrien-fleming", description="Alpha spending over the looks of early stopping (analysis.stopping)")
    calibration: bool = Field(
        False, description="Relaunch the baseline as an A/A arm (profile `<baseline>-aa`, another concurrency) to "
                           "measure this host's greedy divergence, KL floor and run-to-run speed spread; the "
                           "near-tie margin, KL flag and speed verdict then use them")
    calibration_concurrency: int | None = Field(
        None, ge=1, description="Requests in flight for the A/A arm; default half the baseline's (2 if that is 1)")


class TimeoutsConfig(_Strict):
    ready_s: float = Field(1200.0, gt=0, description="Seconds to wait for the ready line and /health 200")
    request_s: float = Field(600.0, gt=0, description="Seconds per request")
    stall_s: float = Field(
        300.0, gt=0, description="Seconds without any server log output, while requests are in flight, after "
                                 "which the server counts as hung (SGLang's default --watchdog-timeout is 300)")
    term_s: float = Field(60.0, gt=0, description="Seconds after SIGTERM before SIGKILL, whatever the cause")
    drain_s: float = Field(
        30.0, gt=0, description="Seconds a SIGTERM gets to drain in-flight requests before SIGKILL (the smaller of "
                                "this and term_s applies). SGLang's drain has no timeout: a SIGTERM to the process "
                                "group kills the scheduler, so with a request in flight the server logs "
                                "'Gracefully exiting... Remaining number of requests N' every 5 s and never exits")
    gpu_release_s: float = Field(120.0, gt=0, description="Seconds to wait for GPU memory release after exit")


class Playbook(_Strict):
    """A YAML experiment: base flags, named profiles, prompts, sampling grid, comparison settings."""

    name: str = Field(..., description="Playbook name")
    description: str = ""
    base_flags: list[str] = Field(default_factory=list, description="SGLang flags shared by every profile")
    profiles: dict[str, ProfileConfig] = Field(..., description="Profiles by name")
    baseline: str = Field("baseline", description="The profile without speculation that others are compared to")
    prompts: list[Prompt] = Field(..., min_length=1)
    temperatures: list[float] = Field([0.0, 0.7], min_length=1, description="Sampling temperatures")
    samples: int = Field(4, ge=1, le=MAX_SAMPLES, description="Samples per prompt per temperature and profile (T > 0)")
    greedy_samples: int = Field(
        1, ge=1, le=MAX_SAMPLES, description="Samples per prompt at temperature 0: greedy decoding is deterministic, so repeats "
                             "are not independent evidence (raise it only to measure nondeterminism)")
    max_tokens: int = Field(2048, ge=1, le=1 << 24, description="max_tokens / max_new_tokens per request")
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int = Field(1234, description="Base seed; sample i of a prompt uses seed + i in every arm")
    api: Literal["chat", "generate"] = Field("chat", description="/v1/chat/completions or /generate")
    prompt_template: str = Field(
        "{prompt}", description="/generate only: the text sent, with {prompt} replaced by the prompt "
                                "(put the model's chat template here; /generate does not apply one)")
    concurrency: int | None = Field(None, ge=1, description="Requests in flight; default --max-running-requests")
    kl_probe: bool = Field(
        False, description="/generate only: ask for decode logprobs, re-score each output by prefill and report "
                           "the mean k3 KL estimator per sample (a healthy server gives ~0)")
    early_stop: bool = Field(
        False, description="Sample in rounds (one sample per prompt per round) and stop a cell once its "
                           "decision is settled (analysis.stopping); `samples` is then the budget")
    stop_on_loop: bool = Field(
        True, description="Stream each request at T > 0 and stop it once its loop is settled (the escaped-loop "
                          "rule, analysis.settled): the sample's loop label is the same, the rest of its tokens "
                          "are not generated; false (or --no-stop-on-loop) runs every request to its end")
    compare: CompareConfig = Field(default_factory=CompareConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    mitigations: list[MitigationConfig] = Field(
        default_factory=list, description="Candidate changes `mitigate` tries first, before its built-in list")

    @field_validator("base_flags", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_flags(v)

    @field_validator("base_flags")
    @classmethod
    def _owned(cls, v: list[str]) -> list[str]:
        return _check_flags(v)

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
        return v

    @model_validator(mode="after")
    def _check(self) -> Playbook:
        if self.baseline not in self.profiles:
            raise ValueError(f"baseline {self.baseline!r} is not a profile; choose one of {sorted(self.profiles)}")
        if self.profiles[self.baseline].speculative:
            raise ValueError(f"baseline profile {self.baseline!r} must not have --speculative-* flags")
        for name in self.profiles:
            check_name(name, "profile name")
        if self.kl_probe and self.api != "generate":
            raise ValueError("kl_probe needs api: generate (chat responses carry no token logprobs here)")
        if "{prompt}" not in self.prompt_template:
            raise ValueError("prompt_template must contain {prompt}")
        ids = [p.id for p in self.prompts]
        if len(set(ids)) != len(ids):
            raise ValueError("prompt ids must be unique")
        return self

    @property
    def think_opened_by_prompt(self) -> bool:
        """True when /generate's prompt template opens the think block itself (Qwen3 templates end in
        ``<think>``): outputs then hold only the reasoning's inside and, if it closed, ``</think>``."""
        tail = self.prompt_template.split("{prompt}", 1)[1]
        return self.api == "generate" and "<think>" in tail and "</think>" not in tail

    def samples_at(self, temperature: float) -> int:
        """Samples per prompt at ``temperature``: ``greedy_samples`` at 0, ``samples`` above."""
        return self.greedy_samples if temperature == 0 else self.samples

    def profile_order(self) -> list[str]:
        """Baseline first, then the others in file order."""
        return [self.baseline] + [p for p in self.profiles if p != self.baseline]

    def max_running_requests(self) -> int:
        """--max-running-requests from the base flags, or 16."""
        flags = self.base_flags
        for i, f in enumerate(flags):
            if f == "--max-running-requests" and i + 1 < len(flags):
                return int(flags[i + 1])
            if f.startswith("--max-running-requests="):
                return int(f.split("=", 1)[1])
        return 16


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # the base class reports unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> Any:
    try:
        with path.open("rb") as f:  # bounded: `-i /dev/zero` must not be read whole
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"larger than {MAX_CONFIG_BYTES >> 20} MiB; not a config file", file=str(path))
        if b"\0" in raw:
            raise UnicodeDecodeError("utf-8", raw, raw.index(b"\0"), raw.index(b"\0") + 1, "NUL byte")
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not a text (YAML) file", file=str(path)) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a YAML file", file=str(path)) from None
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror}", file=str(path)) from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML: {e}", file=str(path)) from None


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names allowed where ``loc`` points (for "did you mean")."""
    cur: type[BaseModel] | None = model
    for part in loc[:-1]:
        if cur is None:
            return []
        field = cur.model_fields.get(str(part))
        if field is None:  # a dict key (host or profile name): descend into the dict's value model
            continue
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        cur = next((a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return list(cur.model_fields) if cur is not None else []


def _field_named_by(msg: str, model: type[BaseModel]) -> str:
    """The field a whole-file check's message is about (its loc is empty): ``default_host 'x' is not a host`` ->
    ``default_host``; ``group 'g' names unknown hosts`` -> ``groups.g``; ``profile name 'a b' ...`` ->
    ``profiles.a b``; else ``(file)``."""
    first = msg.split(" ", 1)[0]
    if first in model.model_fields:
        return first
    if first + "s" in model.model_fields:
        named = re.match(r"\w+(?: name)? '([^']*)'", msg)
        return f"{first}s.{named.group(1)}" if named else f"{first}s"
    return "(file)"


def _validation_error(path: Path, err: ValidationError, model: type[BaseModel]) -> ConfigError:
    import difflib

    lines = []
    first_field = None
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        loc = ".".join(str(x) for x in e["loc"]) or _field_named_by(msg, model)
        first_field = first_field or loc
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(e["loc"][-1]), _allowed_fields(model, e["loc"]), n=1)
            msg = "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")
        elif e["type"] == "literal_error":
            msg = f"invalid value {e.get('input')!r}; {msg.lower()}"
        elif e["type"] not in ("missing", "value_error"):
            msg = f"{msg} (got {e.get('input')!r})"
        lines.append(f"{loc}: {msg}")
    if len(lines) > 1:
        return ConfigError("; ".join(lines), file=str(path))
    return ConfigError(lines[0].split(": ", 1)[1], file=str(path), field=first_field)


def _load(path: str | Path, model: type[BaseModel], shape: str):
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping ({shape})", file=str(path))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise _validation_error(path, e, model) from None


def load_inventory(path: str | Path) -> Inventory:
    """Read ``inventory.yaml``. Raises ConfigError with file and field on any problem."""
    return _load(path, Inventory, "default_host, hosts")


def load_playbook(path: str | Path) -> Playbook:
    """Read a playbook YAML. Raises ConfigError with file and field on any problem."""
    return _load(path, Playbook, "name, profiles, prompts, ...")
