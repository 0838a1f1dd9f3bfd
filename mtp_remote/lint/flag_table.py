"""SGLang's launch flags per release, loaded from the JSON tables that ``gen_flags.py`` dumps.

A table is the list of argparse actions of ``ServerArgs.add_cli_args`` for one pinned SGLang release.
:func:`select_flag_table` picks the table for a host: the newest table not newer than the host's SGLang, the
oldest one for an older host, the newest one when the version is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mtp_remote.errors import ConfigError

TABLE_DIR = Path(__file__).parent
SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS as the tables store it
_TABLE_NAME = re.compile(r"^flags_(.+)\.json$")


@dataclass(frozen=True)
class FlagSpec:
    """One argparse action: its option strings, ``dest``, kind (``store``, ``store_true``, ...), ``nargs``
    (None = one value, 0 = none, ``?``/``*``/``+`` or a count), ``const``, ``default``, type name and
    ``choices`` as SGLang declared them."""

    option_strings: tuple[str, ...]
    dest: str
    action: str
    nargs: int | str | None
    const: Any
    default: Any
    type: str | None
    choices: tuple | None
    required: bool
    const_value: Any = None

    @property
    def name(self) -> str:
        """The first long option string (``--tp-size``), the flag's name in findings."""
        return next((o for o in self.option_strings if o.startswith("--")), self.option_strings[0])

    @property
    def takes_value(self) -> bool:
        """False for switches (store_true, store_const, boolean_optional, count...)."""
        return self.nargs != 0


@dataclass(frozen=True)
class FlagTable:
    """All flags of one SGLang release; ``by_option`` maps every option string to its spec."""

    sglang_version: str
    actions: tuple[FlagSpec, ...]
    by_option: dict[str, FlagSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_option", {o: a for a in self.actions for o in a.option_strings})

    def defaults(self) -> dict[str, Any]:
        """``{dest: default}`` as argparse fills the namespace: the first action of a dest sets it, and a
        ``SUPPRESS`` default sets nothing."""
        out: dict[str, Any] = {}
        for a in self.actions:
            if a.action != "help" and a.default != SUPPRESS and a.dest not in out:
                out[a.dest] = a.default
        return out

    def options(self) -> list[str]:
        """Every option string, sorted (argparse's prefix matching runs over these)."""
        return sorted(self.by_option)


def version_key(version: str) -> tuple[int, ...]:
    """``"0.5.10.post1"`` -> ``(0, 5, 10, 1)``; raises ConfigError for a string with no ``X.Y.Z``."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", version.strip())
    if not m:
        raise ConfigError(f"not an SGLang version: {version!r} (expected e.g. 0.5.9)", field="sglang_version")
    return tuple(int(g or 0) for g in m.groups())


def available_versions() -> list[str]:
    """Versions with a committed table, oldest first."""
    found = [m.group(1) for p in TABLE_DIR.glob("flags_*.json") if (m := _TABLE_NAME.match(p.name))]
    return sorted(found, key=version_key)


class _TableFile(BaseModel):
    """A committed ``flags_<version>.json`` (``lint.gen_flags``): the release and its parser's actions (each a
    :class:`FlagSpec`; the generating Python's version is kept in the file, not read)."""

    sglang_version: str
    actions: list[FlagSpec]


@lru_cache(maxsize=8)
def load_flag_table(version: str) -> FlagTable:
    """Load ``flags_<version>.json``. Raises ConfigError naming the available versions if there is none."""
    path = TABLE_DIR / f"flags_{version}.json"
    if not path.exists():
        raise ConfigError(f"no flag table for SGLang {version}; available: {', '.join(available_versions())}",
                          field="sglang_version")
    table = _TableFile.model_validate_json(path.read_text())
    return FlagTable(sglang_version=table.sglang_version, actions=tuple(a for a in table.actions if a.option_strings))


def select_flag_table(sglang_version: str | None = None) -> FlagTable:
    """The table for a host running ``sglang_version`` (newest table when None; see module docstring)."""
    return choose_flag_table(sglang_version)[0]


def choose_flag_table(sglang_version: str | None = None) -> tuple[FlagTable, str | None]:
    """:func:`select_flag_table` plus a warning when the table is not that release's own: ``(table,
    warning or None)``. The warning names the table used and why (nearest older release, oldest table for
    an older host, newest table for a newer one). Raises ConfigError for a string that is not a version."""
    table = _select(sglang_version)
    if sglang_version is None or version_key(sglang_version)[:3] == version_key(table.sglang_version)[:3]:
        return table, None
    wanted, used = version_key(sglang_version), version_key(table.sglang_version)
    if wanted < used:
        why = f"it is older than every release with a table ({', '.join(available_versions())})"
    elif used == version_key(available_versions()[-1]):
        why = "it is newer than the newest table"
    else:
        why = "the nearest older release with a table"
    return table, (f"no flag table for SGLang {sglang_version}: used SGLang {table.sglang_version}'s ({why}); "
                   f"flags added, renamed or removed since may be misjudged")


def _select(sglang_version: str | None) -> FlagTable:
    versions = available_versions()
    if not versions:
        raise ConfigError("no SGLang flag tables found; run python -m mtp_remote.lint.gen_flags")
    if sglang_version is None:
        return load_flag_table(versions[-1])
    wanted = version_key(sglang_version)
    older = [v for v in versions if version_key(v) <= wanted]
    return load_flag_table(older[-1] if older else versions[0])
