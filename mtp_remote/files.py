"""Bounded reads of the files a user hands us: every input (a text or log to analyse, a summary.json, a run's
records, samples.jsonl) is read with a size bound, and JSON is parsed with a depth bound, so ``/dev/zero`` or a
document of ten thousand nested brackets is one clear error, never the whole machine's memory or a
``RecursionError`` traceback. Callers turn :class:`InputTooLarge` / :class:`JsonTooDeep` (both ValueError) and
OSError into their own error types (``AnalysisInputError``, ``ConfigError``), naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The largest input file read (bytes): 256 MiB, far above any log or run record this tool writes or reads.
MAX_INPUT_BYTES = 256 << 20
_CHUNK = 1 << 20
_HEAD = 8192


class InputTooLarge(ValueError):
    """A file holds more than the bound given to :func:`read_bounded`."""


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than Python's parser can follow (it recurses per level)."""


def read_bounded(path: str | Path, limit: int = MAX_INPUT_BYTES, *, skip_leading_nul: bool = False,
                 check_head: Callable[[bytes], None] | None = None) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them (a device, a FIFO or a file that grows is read in chunks
    and never past the bound). ``skip_leading_nul``: NUL bytes that open the file are dropped as they are read
    (a log cut by logrotate's copytruncate starts with its writer's old offset of NULs), and count toward the
    bound. ``check_head(first bytes kept)``, called once with 8 KiB (or all there is) as soon as they are read (in
    the first 1 MiB), may raise to refuse the file early: a binary file is known from its head. Raises
    InputTooLarge past ``limit``, OSError when it cannot be read."""
    out = bytearray()
    seen = 0
    leading = skip_leading_nul
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            seen += len(chunk)
            if seen > limit:
                raise InputTooLarge(f"larger than {_size(limit)}; read at most that much")
            if leading:
                chunk = chunk.lstrip(b"\0")
                leading = not chunk
            out += chunk
            if check_head is not None and len(out) >= _HEAD:
                check_head(bytes(out[:_HEAD]))
                check_head = None
    if check_head is not None:
        check_head(bytes(out))
    return bytes(out)


def loads_json(text: str | bytes) -> Any:
    """``json.loads``; raises ValueError for text that is not JSON and JsonTooDeep (a ValueError) for JSON nested
    past the parser's recursion limit (about 1,000 levels here)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonTooDeep("JSON nested too deeply (over ~1,000 levels of [ or {): not a document this tool "
                          "writes or reads") from None


def load_json_file(path: str | Path, limit: int = MAX_INPUT_BYTES) -> Any:
    """:func:`loads_json` of :func:`read_bounded`: a JSON file read within both bounds. Raises OSError,
    InputTooLarge, JsonTooDeep or ValueError (not JSON)."""
    return loads_json(read_bounded(path, limit))


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"
