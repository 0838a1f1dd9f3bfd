"""Secrets in a launch line, found the way SGLang's parser finds them, and masked in everything lint returns.

A secret is the value of a flag whose dest names one (``api_key``, ``admin_api_key``, ``ssl_keyfile_password``
...: :data:`SECRET_DEST`), however the line spelled the flag -- in full, as any unique prefix SGLang's
argparse expands (``--api-ke``, ``--api``), or in the ``--flag=value`` form -- and the value of an unknown flag
whose name looks like one (``--apikey X``, ``--hf-token X``). Environment values in the line's prefix count
as secrets unless :func:`mtp_remote.config.env_value_shown` says they are harmless. :func:`mask_result`
replaces each of them by ``***`` in the flags, the findings and the notes of a :class:`LintResult`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from mtp_remote.config.validation import secret_env_values
from mtp_remote.lint.findings import Finding, LintResult

MASK = "***"
#: Dests whose value is a secret.
SECRET_DEST = re.compile(r"(?:^|_)(?:api_key|key_password|password|passwd|secret|token|access_key)$")
#: Option names (unknown to the table) that look like they carry a secret.
SECRET_OPTION = re.compile(r"(?:api[-_]?key|password|passwd|secret|token)$", re.IGNORECASE)


def is_secret_dest(dest: str) -> bool:
    """True for dests that hold a secret (``api_key``, ``admin_api_key``, ``ssl_keyfile_password``)."""
    return bool(SECRET_DEST.search(dest))


def secret_values(argv: list[str], flags: dict[str, Any], owners: dict[int, str],
                  env: dict[str, str]) -> list[str]:
    """Every secret value of a launch line: values of secret dests as parsed, the argv words the parser
    gave to a secret flag (``owners``: argv index -> flag name), ``--x=value`` words of secret-looking
    options, the word after an unknown secret-looking option, and secret environment values."""
    found = [str(v) for d, v in flags.items() if is_secret_dest(d) and isinstance(v, (str, int)) and v != ""]
    for i, word in enumerate(argv):
        owner = owners.get(i)
        if owner and is_secret_dest(owner.lstrip("-").replace("-", "_")):
            found.append(word)
        name, eq, value = word.partition("=")
        if not word.startswith("--"):
            continue
        looks_secret = SECRET_OPTION.search(name.lstrip("-")) or is_secret_dest(name.lstrip("-").replace("-", "_"))
        if eq and looks_secret:
            found.append(value)
        elif looks_secret and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            found.append(argv[i + 1])
    found.extend(secret_env_values(dict(env)))
    return [v for v in dict.fromkeys(found) if v and v not in ("None", "null")]


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***`` (longest first, so a secret inside another goes too)."""
    for s in sorted(set(secrets), key=len, reverse=True):
        if s:
            text = text.replace(s, MASK)
    return text


def _mask_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, list):
        return [_mask_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _mask_value(v, secrets) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool) and str(value) in secrets:
        return MASK
    return value


def mask_result(result: LintResult, secrets: list[str]) -> LintResult:
    """A copy of ``result`` with no secret in it: secret dests' values are ``***`` whatever they are, and
    every secret string is replaced by ``***`` in the other flags, the env, the findings and the notes."""
    flags = {d: (MASK if is_secret_dest(d) and v not in (None, "") else _mask_value(v, secrets))
             for d, v in result.flags.items()}
    findings = [Finding(f.code, f.flag and mask(f.flag, secrets), f.suggestion and mask(f.suggestion, secrets),
                        mask(f.message, secrets)) for f in result.findings]
    env = {k: (MASK if v in secrets else v) for k, v in result.env.items()}
    return replace(result, flags=flags, findings=findings, env=env,
                   notes=[mask(n, secrets) for n in result.notes],
                   warnings=[mask(w, secrets) for w in result.warnings])
