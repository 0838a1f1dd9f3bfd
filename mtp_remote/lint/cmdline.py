"""Split a shell launch line into its environment, the SGLang entry point and SGLang's argv.

Accepts what operators paste: ``CUDA_VISIBLE_DEVICES=0,1 nohup python3 -m sglang.launch_server ... > log
2>&1 &``, multi-line commands with backslash continuations (LF or CRLF), ``export X=1 && python -m ...``,
``setsid env X=1 /opt/venv/bin/python -u -m sglang.launch_server ...``, ``sglang serve [MODEL] ...``, and
launches inside wrappers: ``docker run ... IMAGE python3 -m sglang.launch_server ...`` (``-e``/``--env``
values are the environment), ``bash -c '...'``, ``srun``/``uv run``/``conda run``/``sudo``/``nohup`` and
the like. The entry point is found wherever it is in the line, so an unknown wrapper needs no table.

How the shell reads the line, as far as the lint needs it: a ``#`` that starts a word comments out the rest
of its line; a backslash-newline joins lines; an unquoted newline, ``;``, ``&&``, ``||``, ``|`` or ``&``
ends a command; SGLang's argv ends at the first redirection. ``sglang serve`` then does what
``sglang/cli/serve.py`` does before the server's parser runs: it takes ``--model-type X`` out and turns a
first positional argument into ``--model-path``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from mtp_remote.errors import ConfigError

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_OPERATOR = re.compile(r"^(?:\d*>>?.*|\d*<.*|&>.*|&&?|\|\|?|;)$")
#: An unquoted newline, as a word of its own (a record separator: never in a typed command).
_NEWLINE = "\x1e"
_COMMAND_END = {";", "&&", "||", "|", "&", "|&", _NEWLINE}
_PYTHON = re.compile(r"(?:^|/)python[0-9.]*$")
#: Python options that take the next word as their argument (``-X importtime``, ``-W ignore``).
_PYTHON_OPTIONS_WITH_ARG = {"-X", "-W", "-Q"}
_LAUNCH_MODULES = ("sglang.launch_server", "sglang.srt.entrypoints.http_server")
#: A container image whose tag names an SGLang release: ``lmsysorg/sglang:v0.5.9``, ``...:v0.5.9-cu129``,
#: ``registry/x/sglang:0.5.10.post1``; ``latest``/``dev`` name none.
_IMAGE_TAG = re.compile(r"^(?:[\w.-]+(?::\d+)?/)*[\w.-]*sglang[\w.-]*:v?(?P<version>\d+\.\d+\.\d+(?:\.?post\d+)?)"
                        r"(?:[-_.][\w.-]*)?$")
_ENV_OPTIONS = ("-e", "--env")  # docker/podman run: -e KEY=VALUE, --env KEY=VALUE, --env=KEY=VALUE


def image_release(image: str) -> str | None:
    """The SGLang release a container image's tag names (``lmsysorg/sglang:v0.5.9-cu126`` -> ``0.5.9``), or None
    (``latest``, a digest, no tag, an image not named sglang)."""
    m = _IMAGE_TAG.match(image)
    return m.group("version") if m else None


@dataclass(frozen=True)
class LaunchLine:
    """A parsed launch line: ``env`` (prefix assignments, ``export``\\ s before it, a container's ``-e``
    values), the ``python`` (None for ``sglang serve``), the ``entry`` (``sglang.launch_server`` or
    ``sglang serve``) and SGLang's own ``argv``."""

    env: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    entry: str = "sglang.launch_server"
    argv: list[str] = field(default_factory=list)
    image_version: str | None = None  # the SGLang release a container image's tag names (lmsysorg/sglang:v0.5.9)


def split_launch_command(cmd: str) -> LaunchLine:
    """Parse ``cmd`` (a shell line, or several joined by continuations) into a :class:`LaunchLine`.

    Raises :class:`~mtp_remote.errors.ConfigError` when the quoting is unbalanced or no command of the line
    launches SGLang (neither ``python -m sglang.launch_server`` nor ``sglang serve``).
    """
    try:
        words = shlex.split(_shell_text(cmd), comments=False, posix=True)
    except ValueError as exc:
        raise ConfigError(f"cannot split the command line: {exc}", field="command") from None
    if not words:
        raise ConfigError("empty command line", field="command")
    env: dict[str, str] = {}
    image_version = next((m.group("version") for w in words if (m := _IMAGE_TAG.match(w))), None)
    for command in _commands(words):
        found = _launch_in(command, env)
        if found is not None:
            return LaunchLine(env=found.env, python=found.python, entry=found.entry, argv=found.argv,
                              image_version=image_version)
        if command[0] == "export":  # export X=1 && python -m ...
            env.update(_assignments(command[1:]))
    first = next((w for w in words if not _ASSIGNMENT.match(w)), words[0])
    raise ConfigError(f"not an SGLang launch line: starts with {first!r} and no command in it runs "
                      "`python -m sglang.launch_server` or `sglang serve`", field="command")


def _shell_text(cmd: str) -> str:
    """``cmd`` with comments removed, backslash-newlines joined, and every unquoted command separator (a
    newline, ``;``, ``&&``, ``||``, ``|``, ``&``) made a word of its own so that ``shlex`` keeps it."""
    out: list[str] = []
    quote = None
    i, n = 0, len(cmd)
    while i < n:
        ch = cmd[i]
        if quote != "'" and (cmd.startswith("$(", i) or ch == "`"):
            end = _substitution_end(cmd, i)
            text = cmd[i:end]  # kept whole, as one word's text: a playbook never runs it
            out.append(text.replace('"', '\\"') if quote else "".join(
                c if c.isalnum() else "\\" + c for c in text))
            i = end
            continue
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"' and i + 1 < n:
                out.append(ch)
                i += 1
                ch = cmd[i]
            out.append(ch)
        elif ch == "\\" and cmd.startswith(("\n", "\r\n"), i + 1):
            out.append(" ")
            i += 2 if cmd[i + 1] == "\n" else 3
            continue
        elif ch == "\\" and i + 1 < n:
            out.append(cmd[i:i + 2])
            i += 2
            continue
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "#" and (i == 0 or cmd[i - 1].isspace()):
            end = cmd.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch in "\r\n":
            out.append(f" {_NEWLINE} " if ch == "\n" else " ")
        elif ch in ";|" or (ch == "&" and not (i and cmd[i - 1] in "<>") and not cmd.startswith(">", i + 1)):
            op = ch
            while i + 1 < n and cmd[i + 1] in "&|" and len(op) < 2:
                op += cmd[i + 1]
                i += 1
            out.append(f" {op} ")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _substitution_end(cmd: str, i: int) -> int:
    """Index after the command substitution ``$(...)`` (nested parentheses counted) or ```...``` at ``i``;
    the end of ``cmd`` when it never closes."""
    if cmd[i] == "`":
        end = cmd.find("`", i + 1)
        return len(cmd) if end < 0 else end + 1
    depth = 0
    for j in range(i + 1, len(cmd)):
        if cmd[j] == "(":
            depth += 1
        elif cmd[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(cmd)


def _commands(words: list[str]) -> list[list[str]]:
    """The simple commands of a word list, split at the command separators. A line that starts with a flag
    (``--tp 2``) continues the command before it: a launch line pasted from a chat or an issue often lost its
    backslashes, and a shell would fail on such a line anyway."""
    out: list[list[str]] = [[]]
    after_newline = False
    for w in words:
        if w in _COMMAND_END:
            if out[-1]:
                out.append([])
            after_newline = after_newline or w == _NEWLINE
            continue
        if after_newline and not out[-1] and w.startswith("-") and len(out) > 1:
            out.pop()  # the flag line joins the command it follows
        after_newline = False
        out[-1].append(w)
    return [c for c in out if c]


def _assignments(words: list[str]) -> dict[str, str]:
    return dict(w.partition("=")[::2] for w in words if _ASSIGNMENT.match(w))


def _launch_in(words: list[str], env: dict[str, str]) -> LaunchLine | None:
    """The launch in one simple command, after any wrapper, or None when it runs something else. A wrapper
    that takes the command as one string (``bash -c '...'``, ``ssh host '...'``, ``tmux send-keys '...'``)
    is looked into when no word of its own starts SGLang."""
    for i, w in enumerate(words):
        if _PYTHON.search(w):
            j = i + 1
            while j < len(words) and words[j] != "-m" and words[j].startswith("-"):
                j += 2 if words[j] in _PYTHON_OPTIONS_WITH_ARG else 1
            if j + 1 < len(words) and words[j] == "-m" and words[j + 1] in _LAUNCH_MODULES:
                return LaunchLine(env={**env, **_prefix_env(words[:i])}, python=w, entry=words[j + 1],
                                  argv=_until_redirection(words[j + 2:]))
        if w.rsplit("/", 1)[-1] == "sglang" and i + 1 < len(words) and words[i + 1] == "serve":
            return LaunchLine(env={**env, **_prefix_env(words[:i])}, python=None, entry="sglang serve",
                              argv=_serve_argv(_until_redirection(words[i + 2:])))
    for i, w in enumerate(words):
        if "sglang" in w and any(c.isspace() for c in w):
            try:
                inner = split_launch_command(w)
            except ConfigError:
                continue
            return LaunchLine(env={**env, **_prefix_env(words[:i]), **inner.env}, python=inner.python,
                              entry=inner.entry, argv=inner.argv)
    return None


def _prefix_env(words: list[str]) -> dict[str, str]:
    """Environment set by the words before the entry point: ``KEY=VALUE`` assignments (a prefix, ``env``,
    ``sudo``) and a container's ``-e KEY=VALUE`` / ``--env KEY=VALUE`` / ``--env=KEY=VALUE``."""
    env: dict[str, str] = {}
    for w in words:
        for opt in _ENV_OPTIONS:
            if w.startswith(opt + "=") or (opt == "-e" and w.startswith("-e") and _ASSIGNMENT.match(w[2:])):
                w = w[len(opt) + 1:] if w.startswith(opt + "=") else w[2:]
                break
        if _ASSIGNMENT.match(w):
            key, _, value = w.partition("=")
            env[key] = value
    return env


def _serve_argv(argv: list[str]) -> list[str]:
    """What ``sglang serve`` hands the server's parser: ``--model-type`` taken out, a first positional
    argument turned into ``--model-path`` (``sglang/cli/serve.py``)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--model-type":
            i += 2
            continue
        if not argv[i].startswith("--model-type="):
            out.append(argv[i])
        i += 1
    if out and not out[0].startswith("-"):
        out = ["--model-path", *out]
    return out


def _until_redirection(words: list[str]) -> list[str]:
    for n, w in enumerate(words):
        if _SHELL_OPERATOR.match(w):
            return words[:n]
    return words
