"""Lint a server that is already running, from what it reports: ``/server_info`` (SGLang's ``ServerArgs`` as a
dict: ``{dest: value}``, plus ``version``) and ``/get_model_info`` (``architectures``). An attached endpoint has no
launch line of ours, so its flags are read back from it: the dests whose value differs from the release's default
are what its launch line set (``explicit``), the same rules as ``lint-command`` apply to them
(:func:`mtp_remote.lint.rules.apply_rules`), and :func:`served_argv` writes them back as a launch line that labels
the profile. Secrets (``api_key``...) are masked before anything is returned. Pure: dicts in, results out.
"""

from __future__ import annotations

import json
from typing import Any

from mtp_remote.lint.findings import LintResult
from mtp_remote.lint.flag_table import FlagTable, choose_flag_table
from mtp_remote.lint.rules import LintContext, apply_rules, release_notes
from mtp_remote.lint.secrets import MASK, is_secret_dest, mask_result
from mtp_remote.responses import ModelInfo, ServerInfo

#: argparse dests that ``ServerArgs`` stores under another name (SGLang's ``ServerArgs.from_cli_args``).
SERVER_ARGS_NAME = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
                    "data_parallel_size": "dp_size", "expert_parallel_size": "ep_size"}
#: Dests that say where the server listens rather than what it serves: left out of the label's argv.
_PLACE = ("host", "port")


def served_flags(info: dict[str, Any], table: FlagTable) -> tuple[dict[str, Any], set[str]]:
    """(``{dest: value}`` with the table's defaults filled in, the dests whose served value differs from the
    default) from ``/server_info``'s ``info``."""
    defaults = table.defaults()
    served = {d: info[SERVER_ARGS_NAME.get(d, d)] for d in defaults if SERVER_ARGS_NAME.get(d, d) in info}
    flags = {**defaults, **served}
    explicit = {d for d in served if served[d] != defaults[d]}
    return flags, explicit


def _words(spec, value: Any) -> list[str]:
    """The argv words that set ``spec``'s dest to ``value`` (a switch: its name when on)."""
    if not spec.takes_value:
        return [spec.name] if value else []
    if isinstance(value, (list, tuple)):
        return [spec.name, *(str(v) for v in value)]
    if isinstance(value, dict):
        return [spec.name, json.dumps(value, sort_keys=True)]
    return [spec.name, str(value)]


def served_argv(flags: dict[str, Any], explicit: set[str], table: FlagTable) -> list[str]:
    """The launch line's SGLang arguments that give ``explicit`` (in the release's flag order, ``--host`` and
    ``--port`` left out, secrets as ``***``): the label of an attached profile."""
    out: list[str] = []
    seen: set[str] = set()
    for spec in table.actions:
        d = spec.dest
        if d not in explicit or d in seen or d in _PLACE or spec.action in ("help", "DeprecatedAction"):
            continue
        seen.add(d)
        value = flags[d]
        if is_secret_dest(d) and value not in (None, ""):
            value = MASK
        out += _words(spec, value)
    return out


def lint_served(info: dict[str, Any], model_info: dict[str, Any] | None = None) -> tuple[LintResult, list[str]]:
    """(the lint of the running server, its launch line's arguments as :func:`served_argv` gives them). The flag
    table is the one of the server's own ``version`` (the nearest release's when it has none; ``warnings`` says
    so); ``architectures`` come from ``/get_model_info``."""
    version = ServerInfo.model_validate(info).version
    version = version if isinstance(version, str) else None
    table, warning = choose_flag_table(version)
    if version is None:
        warning = (f"the server reports no SGLang version: its flags are read with SGLang {table.sglang_version}'s "
                   f"flag table, the newest we have")
    flags, explicit = served_flags(info, table)
    archs = tuple(ModelInfo.model_validate(model_info or {}).architectures or ())
    ctx = LintContext(flags=flags, version=version or table.sglang_version, explicit=explicit, env={},
                      architectures=archs)
    secrets = [str(v) for d, v in flags.items() if is_secret_dest(d) and isinstance(v, (str, int)) and v != ""]
    result = LintResult(flags=flags, findings=apply_rules(ctx), sglang_version=table.sglang_version,
                        source="server_info", explicit=frozenset(explicit), requested_version=version,
                        warnings=[warning] if warning else [], notes=release_notes(ctx))
    return mask_result(result, secrets), served_argv(flags, explicit, table)
