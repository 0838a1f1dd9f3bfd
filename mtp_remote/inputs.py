"""Read texts to analyse from files: plain text, a JSON response body (chat or /generate), samples.jsonl.

``read_texts(path)`` yields ``(label, text, token_ids)``; ``-`` reads standard input. Files are read by
their kind, from the name: ``.json`` is one JSON document (a response body, or a list of them), ``.jsonl``/
``.ndjson`` one JSON record per line (samples.jsonl), anything else (``.txt``, ``.md``, no suffix) is a
model's output as text -- even when that text is itself JSON (structured output). Only standard input,
which has no name, is sniffed: JSON of a known shape is parsed, anything else is text. Raises
AnalysisInputError naming the file, what is wrong and the shapes accepted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from .client import _join_reasoning
from .errors import AnalysisInputError

SHAPES = "plain text, a /v1/chat/completions or /generate JSON response body, or samples.jsonl"


def _from_json(label: str, data) -> list[tuple[str, str, list[int] | None]]:
    try:
        return _from_json_shapes(label, data)
    except (TypeError, AttributeError, KeyError):
        raise AnalysisInputError(f"{label}: JSON of unknown shape; expected {SHAPES}") from None


def _from_json_shapes(label: str, data) -> list[tuple[str, str, list[int] | None]]:
    if isinstance(data, dict) and "choices" in data:
        out = []
        for i, ch in enumerate(data["choices"]):
            msg = ch.get("message") or {}
            text = _join_reasoning(msg.get("reasoning_content"), msg.get("content")) if msg else ch.get("text", "")
            out.append((label if len(data["choices"]) == 1 else f"{label}#{i}", text, None))
        return out
    if isinstance(data, dict) and "text" in data:
        meta = data.get("meta_info") or {}
        text = data["text"] or ""
        if "profile" in data:  # one samples.jsonl record: analyse it as diagnose did
            from .samples import analysed_text  # (not .runner: its imports cost ~0.3 s)

            label = f"{label}:{data['profile']}/T={data.get('temperature')}/{data.get('prompt_id')}/{data.get('sample_index')}"
            text = analysed_text(text, bool(data.get("think_opened_by_prompt")))
        return [(label, text, data.get("output_ids") or meta.get("output_ids"))]
    if isinstance(data, list):
        out = []
        for i, item in enumerate(data):
            out.extend(_from_json_shapes(f"{label}#{i}", item))
        return out
    raise AnalysisInputError(f"{label}: JSON of unknown shape; expected {SHAPES}")


JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def read_texts(path: str) -> Iterator[tuple[str, str, list[int] | None]]:
    """(label, text, token ids or None) for every text in ``path`` (module docstring for the kinds).

    Raises AnalysisInputError for a file that is missing, a directory, binary, or a ``.json``/``.jsonl``
    whose content is not JSON of a known shape (with the line number for JSON lines)."""
    if path == "-":
        yield from _sniffed("<stdin>", sys.stdin.read())
        return
    raw = read_text_file(path)
    suffix = Path(path).suffix.lower()
    if suffix in JSON_SUFFIXES:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise AnalysisInputError(f"{path}: not valid JSON ({exc}); expected {SHAPES}") from None
        yield from _from_json(path, data)
    elif suffix in JSONL_SUFFIXES:
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise AnalysisInputError(f"{path}: line {n} is not valid JSON ({exc})") from None
            yield from _from_json(f"{path}:{n}" if not isinstance(record, dict) or "profile" not in record
                                  else path, record)
    else:
        yield path, raw, None


def read_text_file(path: str, *, expected: str = SHAPES, nul_padding: bool = False) -> str:
    """The text of a file (UTF-8, undecodable bytes replaced). Raises AnalysisInputError naming ``path`` when
    it is missing, a directory, unreadable or binary; ``expected`` says what should have been given.
    ``nul_padding``: NUL bytes that open the file are allowed (a log cut by logrotate's copytruncate starts
    with NUL padding while its writer keeps its offset); NULs after other bytes still mean binary."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise AnalysisInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnalysisInputError(f"{path}: is a directory; give files ({expected})") from None
    except OSError as exc:
        raise AnalysisInputError(f"{path}: cannot read ({exc.strerror})") from None
    head = data[:8192]
    if b"\0" in head and not (nul_padding and len(head.replace(b"\0", b"")) == len(head.lstrip(b"\0"))):
        raise AnalysisInputError(f"{path}: binary file; expected {expected}")
    return data.decode("utf-8", errors="replace")


def _sniffed(label: str, raw: str) -> Iterator[tuple[str, str, list[int] | None]]:
    """Standard input: JSON (one document or JSON lines) of a known shape is parsed, anything else is text."""
    stripped = raw.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            docs = [json.loads(raw)]
        except ValueError:
            try:
                docs = [json.loads(ln) for ln in raw.splitlines() if ln.strip()]
            except ValueError:
                docs = []
        try:
            out = [item for doc in docs for item in _from_json(label, doc)]
        except AnalysisInputError:
            out = []
        if out:
            yield from out
            return
    yield label, raw, None
