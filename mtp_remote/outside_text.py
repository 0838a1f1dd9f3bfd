"""Text from outside the tool — model output, host logs, a server's answers — made safe where the tool shows it.

On a terminal a control character is acted on, not shown: an OSC sequence sets the window title or makes a link,
``ESC [2J`` clears the screen, ``\\r`` overwrites the line. In markdown (report.md, the bug-report body) a run of
backticks in the text ends the code block around it, and what follows renders: a heading, a remote image, an
@-mention. :func:`for_terminal` shows every control character as an escape; :func:`fence` and :func:`inline_code`
quote text with a backtick run longer than any in it. Pure functions, no imports of the tool.
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1 (ESC starts every terminal sequence; U+009B is a one-byte CSI), and the Unicode
# bidirectional overrides and isolates (text shown in an order other than the bytes' order)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BACKTICKS = re.compile("`+")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def for_terminal(text: str) -> str:
    """``text`` with each control character (C0 but newline and tab, DEL, C1, bidi overrides) written as an
    escape (``\\x1b``, ``\\u202e``): shown, never acted on by a terminal. Printable text is unchanged."""
    return _CONTROL.sub(_escape, text)


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def fence(text: str, info: str = "") -> str:
    """A markdown code block holding ``text`` (control characters escaped, :func:`for_terminal`): fenced with a
    backtick run longer than any in the text (at least three), so nothing in it ends the block."""
    bar = "`" * max(3, _longest_backticks(text) + 1)
    return f"{bar}{info}\n{for_terminal(text)}\n{bar}"


def inline_code(text: str) -> str:
    """A markdown code span holding ``text`` on one line (line breaks as spaces, control characters escaped):
    delimited by a backtick run longer than any in it, padded with a space when it starts or ends with one."""
    text = for_terminal(" ".join(text.splitlines()))
    bar = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{bar}{pad}{text}{pad}{bar}"
