"""Split a shell launch line into its environment prefix, the SGLang entry point and SGLang's argv.

Accepts what operators paste: ``CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m sglang.launch_server ... > log
2>&1 &``, ``setsid env X=1 /opt/venv/bin/python -u -m sglang.launch_server ...``, ``sglang serve ...``.
Wrappers (``nohup``, ``setsid``, ``env``, ``exec``, ``time``, ``nice``, ``stdbuf``, ``taskset``, ``sudo``)
are skipped; the argv ends at the first redirection or shell control operator.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from mtp_remote.errors import ConfigError

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_OPERATOR = re.compile(r"^(?:\d*>>?.*|\d*<.*|&>.*|&&?|\|\|?|;)$")
_PYTHON = re.compile(r"(?:^|/)python[0-9.]*$")
#: wrapper -> how many of the following words are its own arguments (options are skipped as well).
_WRAPPERS = {"nohup": 0, "setsid": 0, "env": 0, "exec": 0, "time": 0, "nice": 0, "stdbuf": 0,
             "taskset": 1, "sudo": 0, "numactl": 0, "chrt": 1}
_LAUNCH_MODULES = ("sglang.launch_server", "sglang.srt.entrypoints.http_server")


@dataclass(frozen=True)
class LaunchLine:
    """A parsed launch line: ``env`` prefix assignments, the ``python`` (None for ``sglang serve``), the
    ``entry`` (``sglang.launch_server`` or ``sglang serve``) and SGLang's own ``argv``."""

    env: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    entry: str = "sglang.launch_server"
    argv: list[str] = field(default_factory=list)


def split_launch_command(cmd: str) -> LaunchLine:
    """Parse ``cmd`` (one shell line) into a :class:`LaunchLine`.

    Raises :class:`~mtp_remote.errors.ConfigError` when the quoting is unbalanced or the line does not
    launch SGLang (neither ``python -m sglang.launch_server`` nor ``sglang serve``).
    """
    try:
        words = shlex.split(cmd.replace("\\\n", " "), comments=False, posix=True)
    except ValueError as exc:
        raise ConfigError(f"cannot split the command line: {exc}", field="command") from None
    env: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT.match(w):
            key, _, value = w.partition("=")
            env[key] = value
            i += 1
        elif w in _WRAPPERS:
            i += 1
            skip = _WRAPPERS[w]
            while i < len(words) and words[i].startswith("-") and not _ASSIGNMENT.match(words[i]):
                i += 1 + (1 if words[i] in ("-n", "-u", "-c") else 0)
            i += skip
        else:
            break
    if i >= len(words):
        raise ConfigError("no command after the environment prefix", field="command")
    head = words[i]
    if _PYTHON.search(head):
        j = i + 1
        while j < len(words) and words[j] != "-m" and words[j].startswith("-"):
            j += 1
        if j + 1 >= len(words) or words[j] != "-m" or words[j + 1] not in _LAUNCH_MODULES:
            raise ConfigError(f"not an SGLang launch line (expected `{head} -m sglang.launch_server`)",
                              field="command")
        return LaunchLine(env=env, python=head, entry=words[j + 1], argv=_until_operator(words[j + 2:]))
    if head.endswith("sglang") and i + 1 < len(words) and words[i + 1] == "serve":
        return LaunchLine(env=env, python=None, entry="sglang serve", argv=_until_operator(words[i + 2:]))
    raise ConfigError(f"not an SGLang launch line: starts with {head!r}", field="command")


def _until_operator(words: list[str]) -> list[str]:
    for n, w in enumerate(words):
        if _SHELL_OPERATOR.match(w):
            return words[:n]
    return words
