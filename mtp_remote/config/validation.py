"""Configuration checks and loading, shared by the inventory (``inventory.py``) and playbook (``playbook.py``)
models: name and flag checks, the strict base models (unknown fields forbidden), env masking, and YAML in (duplicate
keys refused, size bounded) with errors that name the file, the field and what is allowed.

``inventory.load_inventory`` and ``playbook.load_playbook`` turn YAML files into these pydantic models, validated
once at the edge; any problem becomes a :class:`~mtp_remote.errors.ConfigError`. Inside the package only these
typed objects travel.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

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
                       r"NCCL_DEBUG|PYTHONUNBUFFERED|SGLANG_SIM_STATE_DIR|TORCH_CUDA_ARCH_LIST|SGLANG_MAMBA_CONV_DTYPE)$")
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


def check_path(v: str | None) -> str | None:
    """A path-like field's value, refused (ValueError) when it holds NUL or a line break (it reaches a shell)."""
    if v is not None and ("\0" in v or "\n" in v or "\r" in v):
        raise ValueError("must not contain NUL or line breaks")
    return v


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for k, v in env.items():
        check_name(k, "environment variable name", ENV_NAME)
        if "\0" in v:
            raise ValueError(f"the value of {k} contains a NUL byte")
    return env


def check_flags(flags: list[str]) -> list[str]:
    """Launch flags, refused (ValueError) when one holds NUL or sets what the tool sets itself."""
    for f in flags:
        if "\0" in f:
            raise ValueError(f"flag {f!r} contains a NUL byte")
        owned = owned_flag(f)
        if owned is not None:
            raise ValueError(f"{f.split('=', 1)[0]} (as {owned}) is set by mtp-remote from the inventory "
                             f"(--model-path: host model_path; --host/--port: loopback and host port; --config "
                             f"would override them); remove it from the playbook")
    return flags


class StrictModel(BaseModel):
    """The base of every config model: unknown fields and non-finite numbers are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class WithEnv(StrictModel):
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


def split_flags(v: Any) -> Any:
    """A ``flags`` value as a list: a string is split as a shell would, None is []."""
    if v is None:
        return []
    if isinstance(v, str):
        return shlex.split(v)
    if isinstance(v, list):
        return [str(x) for x in v]
    return v


class WithFlags(StrictModel):
    """A model with a ``flags`` field: a string or a list, split as a shell would; flags the tool sets itself
    (``--host``/``--port``/``--model-path``, any spelling) refused."""

    @field_validator("flags", mode="before", check_fields=False)
    @classmethod
    def _split(cls, v: Any) -> Any:
        return split_flags(v)

    @field_validator("flags", check_fields=False)
    @classmethod
    def _owned(cls, v: list[str]) -> list[str]:
        return check_flags(v)


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice (PyYAML keeps the last one silently). A merge
    key (``<<: *anchor``, YAML 1.1) is supported as SafeLoader does: the anchor's keys first, then the mapping's
    own, which may override them; only a key written twice in the mapping itself is a duplicate."""

    def construct_mapping(self, node, deep=False):
        envs = self.__dict__.setdefault("_env_nodes", set())  # the ``env`` mappings met so far (node ids)
        seen: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:  # SafeConstructor.flatten_mapping merges these in
                continue
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
            if key == "env" and isinstance(value_node, yaml.MappingNode):
                envs.add(id(value_node))
        mapping = super().construct_mapping(node, deep=deep)
        if id(node) in envs:  # an environment's values are text, as written: YAML 1.1 would read ``no`` as
            for key_node, value_node in node.value:  # false, ``010`` as 8, ``12:30`` as 750, an empty value as null
                if (isinstance(value_node, yaml.ScalarNode) and value_node.style is None
                        and value_node.tag != "tag:yaml.org,2002:str"):
                    mapping[self.construct_object(key_node, deep=deep)] = value_node.value
        return mapping


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
        raise ConfigError(yaml_problem(e), file=str(path)) from None
    except RecursionError:  # PyYAML composes and constructs nodes recursively
        raise ConfigError("nested too deeply (over ~1,000 levels); not a config file", file=str(path)) from None


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML parser error as one line that points into the file: ``line 3, column 4: not valid YAML: expected
    ',' or ']', but got ':' (while parsing a flow sequence at line 2, column 11)``. PyYAML's own text names the
    stream ``"<unicode string>"`` and spreads over several lines, which hides the file the caller names."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, cmark = getattr(err, "context", None), getattr(err, "context_mark", None)
    ctx = ""
    if context:
        ctx = f" ({context}" + (f" at line {cmark.line + 1}, column {cmark.column + 1}" if cmark is not None else "") + ")"
    return f"{where}not valid YAML: {problem}{ctx}"


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names allowed where ``loc`` points (for "did you mean"). A union of models told apart by ``kind``
    (a host's ``server``) has the tag in ``loc``: the variant it names is the one descended into."""
    cur: type[BaseModel] | None = model
    variants: list[type[BaseModel]] = []
    for part in loc[:-1]:
        tagged = next((v for v in variants if "kind" in v.model_fields and v.model_fields["kind"].default == part),
                      None)
        variants = []
        if tagged is not None:
            cur = tagged
            continue
        if cur is None:
            return []
        field = cur.model_fields.get(str(part))
        if field is None:  # a dict key (host or profile name): descend into the dict's value model
            continue
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        models = [a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)]
        cur, variants = (models[0] if models else None), models
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


def load_model(path: str | Path, model: type[BaseModel], shape: str, context: dict | None = None):
    """The YAML file ``path`` validated as ``model`` (with the validation ``context``, if any); raises
    ConfigError naming the file, the field and (``shape``) what the file should hold."""
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping ({shape})", file=str(path))
    try:
        return model.model_validate(data, context=context)
    except ValidationError as e:
        raise _validation_error(path, e, model) from None
