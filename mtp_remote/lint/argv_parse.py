"""Parse SGLang's argv against a flag table the way Python's argparse (3.10-3.11) parses it.

What argparse does and this reproduces: an exact option string wins; ``--x=y`` splits at the first ``=``;
otherwise a *unique* prefix of a long option resolves to it (``--tp`` -> ``--tp-size``) and a prefix shared
by several options is an error (``ambiguous option``); switches take no value; ``nargs`` ``?``/``*``/``+``/N
take what they may; a value that looks like an option is not consumed; ``type`` int/float and ``choices``
are checked. Unlike argparse it does not stop at the first error: every problem becomes a finding.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from mtp_remote.lint.findings import Finding
from mtp_remote.lint.flag_table import FlagSpec, FlagTable
from mtp_remote.lint.rules import VARIABLE

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _human_readable_int(raw: str) -> int:
    """SGLang's ``human_readable_int`` (``32k``, ``1Mi``, ``4096``), as in ``sglang/srt/utils/common.py``."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", raw.strip())
    if m:
        number, suffix = m.groups()
        if suffix in _IEC:
            if "." in number:
                raise ValueError(raw)
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    return int(raw)


def _json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(raw) from exc


#: argparse ``type`` callables of SGLang's parser, by name, that can reject a value.
_CONVERTERS = {"int": int, "float": float, "human_readable_int": _human_readable_int, "loads": _json,
               "json_list_type": _json}
#: Custom actions that take no value and store nothing (they only print a deprecation warning).
_NO_STORE_ACTIONS = {"DeprecatedAction"}
#: SGLang's custom action that stores its ``const_value`` whatever the (validated) value was.
_STORE_CONST_VALUE = "DeprecatedStoreConstAction"


@dataclass
class ParsedArgv:
    """``values`` = defaults overlaid with what argv set; ``explicit`` = dests argv set; ``owners`` maps an
    argv index to the flag name that consumed it (for findings about values); ``findings`` in argv order."""

    values: dict[str, Any]
    explicit: set[str] = field(default_factory=set)
    owners: dict[int, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def looks_like_option(word: str) -> bool:
    """argparse's test: starts with ``-``, is not a negative number, has no space."""
    return len(word) > 1 and word.startswith("-") and not _NEGATIVE_NUMBER.match(word) and " " not in word


def suggest_from(flag: str, options: list[str]) -> str | None:
    """The closest long option in ``options`` to a misspelled ``flag`` (difflib ratio >= 0.6), or None."""
    close = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(flag: str, table: FlagTable) -> str | None:
    """The closest long option of ``table`` to a misspelled ``flag``, or None."""
    return suggest_from(flag, table.options())


def parse_argv(argv: list[str], table: FlagTable) -> ParsedArgv:
    """Parse ``argv`` (SGLang's arguments only) with ``table``; never raises, problems are findings."""
    out = ParsedArgv(values=table.defaults())
    options = table.options()
    i = 0
    while i < len(argv):
        word = argv[i]
        if not looks_like_option(word) or word == "--":
            out.findings.append(Finding("unknown-flag", word, None,
                                        f"unexpected argument {word!r}: SGLang takes no positional arguments"))
            i += 1
            continue
        spec, used, explicit_value, matches = _resolve(word, table, options)
        if spec is None and matches:
            out.findings.append(Finding(
                "ambiguous-flag", used, None,
                f"{used} is a prefix of {', '.join(matches)} in SGLang {table.sglang_version}: spell one out"))
            i += 1
            while explicit_value is None and i < len(argv) and not looks_like_option(argv[i]):
                i += 1  # argparse stops here; the words after belong to the ambiguous flag
            continue
        if spec is None:
            hint = suggest(used, table)
            out.findings.append(Finding(
                "unknown-flag", used, hint,
                f"SGLang {table.sglang_version} has no flag {used}" + (f": did you mean {hint}?" if hint else "")))
            i += 1
            # its values: argparse leaves them among the unrecognized arguments too, and an unknown flag's
            # nargs is unknown (``--cuda-graph-bs 1 2 4 8``): every word up to the next option is its own
            while explicit_value is None and i < len(argv) and not looks_like_option(argv[i]):
                i += 1
            continue
        i = _consume(spec, used, explicit_value, argv, i + 1, out)
    for spec in table.actions:
        if spec.required and spec.dest not in out.explicit:
            out.findings.append(Finding("missing-required", spec.name, None, f"{spec.name} is required"))
    return out


def _resolve(word: str, table: FlagTable, options: list[str]):
    """-> (spec | None, option as written, explicit value | None, ambiguous matches)."""
    if word in table.by_option:
        return table.by_option[word], word, None, []
    head, eq, tail = word.partition("=")
    explicit = tail if eq else None
    if eq and head in table.by_option:
        return table.by_option[head], head, explicit, []
    matches = [o for o in options if o.startswith(head)] if head.startswith("--") or len(head) > 2 else []
    if len(matches) == 1:
        return table.by_option[matches[0]], head, explicit, []
    return None, head, explicit, matches


def _consume(spec: FlagSpec, used: str, explicit: str | None, argv: list[str], i: int, out: ParsedArgv) -> int:
    """Store ``spec``'s value(s) from ``argv[i:]``; return the index after what it consumed."""
    if not spec.takes_value:
        if explicit is not None:
            out.findings.append(Finding("invalid-value", spec.name, None,
                                        f"{spec.name} is a switch and takes no value (got {explicit!r})"))
        if spec.action not in _NO_STORE_ACTIONS:
            out.values[spec.dest] = _switch_value(spec, used)
            out.explicit.add(spec.dest)
        return i
    raw: list[str] = []
    if explicit is not None:
        raw = [explicit]
    else:
        want = spec.nargs
        limit = 1 if want in (None, "?") else (want if isinstance(want, int) else len(argv))
        while i < len(argv) and len(raw) < limit and not looks_like_option(argv[i]):
            out.owners[i] = spec.name
            raw.append(argv[i])
            i += 1
    need = 1 if spec.nargs in (None, "+") else (spec.nargs if isinstance(spec.nargs, int) else 0)
    if len(raw) < need:
        out.findings.append(Finding("invalid-value", spec.name, None, f"{spec.name} expects a value"))
        return i
    values = [_convert(spec, r, out) for r in raw]
    if spec.action == _STORE_CONST_VALUE:
        values = [spec.const_value for _ in values]
    if spec.nargs in (None, "?") or (spec.nargs == 1 and spec.action != "append"):
        value: Any = values[0] if values else spec.const
    else:
        value = values
    if spec.action in ("append", "extend"):
        current = out.values.get(spec.dest) if spec.dest in out.explicit else None
        value = list(current or []) + (value if isinstance(value, list) else [value])
    out.values[spec.dest] = value
    out.explicit.add(spec.dest)
    return i


def _switch_value(spec: FlagSpec, used: str) -> Any:
    if spec.action == "store_false":
        return False
    if spec.action == "boolean_optional":
        return not used.startswith("--no-")
    if spec.action == "count":
        return 1
    if spec.action == _STORE_CONST_VALUE:
        return spec.const_value
    return True if spec.const is None else spec.const


def _convert(spec: FlagSpec, raw: str, out: ParsedArgv) -> Any:
    if VARIABLE.search(raw):
        return raw  # "$PORT": the unexpanded variable is the finding; its value, type and choice are unknown
    value: Any = raw
    converter = _CONVERTERS.get(spec.type or "")
    if converter is not None:
        try:
            value = converter(raw)
        except (ValueError, ArithmeticError):
            out.findings.append(Finding("invalid-value", spec.name, None,
                                        f"{spec.name} wants {spec.type}, got {raw!r}"))
            return raw
    if spec.choices is not None and str(value) not in {str(c) for c in spec.choices}:
        shown = ", ".join(str(c) for c in spec.choices[:12]) + (", ..." if len(spec.choices) > 12 else "")
        out.findings.append(Finding("invalid-value", spec.name, None,
                                    f"{spec.name} {raw!r} is not one of: {shown}"))
    return value
