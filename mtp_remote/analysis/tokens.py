"""The token rule of ``corpus/README.md`` (the loop definition's "Tokens": words, CJK characters, newlines,
punctuation and symbols, combining marks and joiners kept with the character before them), as regexes, and the
splitting every text analysis shares (:func:`tokenize`, :func:`split_tokens`). Pure; the rule itself is
documented in :mod:`mtp_remote.analysis.degeneracy`'s docstring.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

#: CJK characters (one token each): kana and its extensions, Bopomofo, Hangul (syllables and jamo, half-width
#: forms included), the ideograph blocks and their extensions, the iteration marks and ideographic numbers.
_CJK = ("\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3031-\u3035\u303b\u303c\u3040-\u30ff\u3100-\u318f\u31a0-\u31bf"
        "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc"
        "\U0001b000-\U0001b16f\U00020000-\U0002fa1f\U00030000-\U000323af")
#: Joiners and tag characters (format characters inside emoji sequences and Indic/Persian words).
_JOINERS_BMP, _JOINERS_ASTRAL = "\u200c\u200d", "\U000e0020-\U000e007f"
_ASCII_TOKEN_WITH_GAP = re.compile(r"[^\S\n]*(?:[A-Za-z0-9]+|\n|[^\sA-Za-z0-9])")  # ASCII text: a faster rule


def _class_body(points: list[int]) -> str:
    """Sorted code points as the body of a regex character class (consecutive points as ranges)."""
    ranges: list[str] = []
    start = prev = points[0]
    for i in [*points[1:], -1]:
        if i != prev + 1:
            ranges.append(re.escape(chr(start)) + ("" if prev == start else "-" + re.escape(chr(prev))))
            start = i
        prev = i
    return "".join(ranges)


@lru_cache(maxsize=1)
def mark() -> str:
    """A regex for one combining mark (Unicode categories Mn, Mc, Me) or joiner (ZWNJ, ZWJ, tag characters).

    Marks are neither letters nor punctuation: they belong to the character before them (a vowel sign of
    a Devanagari word, the variation selector of an emoji). Scanned from ``unicodedata`` once per process
    (planes 0-1 and the variation selectors supplement: ~15 ms). Split in two classes: ``re`` tests a
    class of BMP characters with a bitmap, a class with astral ones range by range (so that one is tried
    only on astral characters).
    """
    points = [i for i in (*range(0x20000), *range(0xE0100, 0xE01F0))
              if unicodedata.category(chr(i)) in ("Mn", "Mc", "Me")]
    bmp = _class_body([i for i in points if i < 0x10000]) + _JOINERS_BMP
    astral = _class_body([i for i in points if i >= 0x10000]) + _JOINERS_ASTRAL
    return rf"(?:[{bmp}]|(?=[\U00010000-\U0010ffff])[{astral}])"


@lru_cache(maxsize=1)
def _unicode_token_pattern() -> re.Pattern:
    """The token rule for any text: a word (letters/digits, with the marks inside it), one CJK character,
    a newline, or one punctuation/symbol character with the marks that follow it; each with the other
    whitespace before it (stripped afterwards: faster than ``finditer``)."""
    m, w = mark(), rf"[^\W_{_CJK}]"
    return re.compile(rf"[^\S\n]*(?:{w}+(?:{m}+{w}*)*|[{_CJK}]{m}*|\n|(?:[^\w\s]|_){m}*)")


@lru_cache(maxsize=2)
def rule_line_pattern(ascii_only: bool) -> re.Pattern:
    """A rule line: one punctuation/symbol character (its marks included) repeated at least 3 times, alone
    on its line with only whitespace around (``\\r`` of a CRLF line ending included)."""
    marks = "" if ascii_only else f"{mark()}*"
    return re.compile(rf"^[^\S\n]*((?:[^\w\s]|_){marks})(?:[^\S\n]*\1){{2,}}[^\S\n]*$", re.MULTILINE)


def token_pattern(text: str) -> re.Pattern:
    return _ASCII_TOKEN_WITH_GAP if text.isascii() else _unicode_token_pattern()


def split_tokens(text: str) -> tuple[list[str], list[str]]:
    """(raw matches with their leading whitespace, tokens)."""
    raw = token_pattern(text).findall(text)
    return raw, [t.lstrip() or "\n" for t in raw]


def tokenize(text: str) -> list[tuple[str, int]]:
    """Split ``text`` into ``(token, char_offset)`` pairs by the corpus README rule (module docstring).

    Offsets are indexes into ``text`` (Python characters, not bytes). Example:
    ``tokenize("Hi, 世界!\\n")`` -> ``[("Hi", 0), (",", 2), ("世", 4), ("界", 5), ("!", 6), ("\\n", 7)]``.
    """
    raw, toks = split_tokens(text)
    out: list[tuple[str, int]] = []
    pos = 0
    for r, t in zip(raw, toks):
        out.append((t, pos + len(r) - len(t)))
        pos += len(r)
    return out


def char_offset(raw: list[str], toks: list[str], index: int) -> int:
    """Character offset of token ``index`` from the raw matches (sum of the preceding match lengths)."""
    if index >= len(raw):
        return sum(map(len, raw))
    return sum(map(len, raw[:index])) + len(raw[index]) - len(toks[index])
