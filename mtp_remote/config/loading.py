"""Loading and validation: YAML files in (duplicate keys refused, size bounded), the models of ``inventory.py``
and ``playbook.py`` out; any problem becomes a :class:`~mtp_remote.errors.ConfigError` naming the file, the field
and what is allowed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from .inventory import MAX_CONFIG_BYTES, Inventory
from .playbook import Playbook


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
