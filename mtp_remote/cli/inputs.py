"""Read texts to analyse from files: plain text, a JSON response body (chat or /generate), samples.jsonl.

``read_texts(path)`` yields ``(label, text, token_ids)``; ``-`` reads standard input. Files are read by
their kind, from the name: ``.json`` is one JSON document (a response body, or a list of them), ``.jsonl``/
``.ndjson`` one JSON record per line (samples.jsonl, response bodies, or the chunks of a streamed chat
completion, joined into one text; ``data: `` prefixes of a saved event stream are skipped), anything else (``.txt``, ``.md``, no suffix) is a
model's output as text -- even when that text is itself JSON (structured output). Only standard input,
which has no name, is sniffed: JSON of a known shape is parsed, anything else is text. Raises
AnalysisInputError naming the file, what is wrong and the shapes accepted.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..analysis.samples import analysed_text
from ..responses import join_reasoning
from ..errors import AnalysisInputError
from ..files import MAX_INPUT_BYTES, InputTooLarge, loads_json, read_bounded

SHAPES = "plain text, a /v1/chat/completions or /generate JSON response body, or samples.jsonl"


class _Saved(BaseModel):
    """A saved JSON object of any of the shapes read here, as far as they are read (every field as found: the
    files come from many servers and clients; a field of an unexpected type is "JSON of unknown shape")."""

    model_config = ConfigDict(extra="allow")


class _Message(_Saved):
    """A chat message: ``reasoning_content`` (SGLang's and DeepSeek's name) or ``reasoning`` (vLLM's and
    OpenRouter's), and ``content`` (a string, or a list of text parts ``{"text"}``)."""

    reasoning_content: Any = None
    reasoning: Any = None
    content: Any = None
    text: Any = None


class _Choice(_Saved):
    """A choice of a chat completion (``message``), of a completion (``text``) or of a streamed chunk
    (``delta``, ``index``)."""

    message: Any = None
    text: Any = ""
    delta: Any = None
    index: Any = 0


class _Body(_Saved):
    """A response body, a streamed chunk or a samples.jsonl record: ``choices`` (chat), or ``text`` with
    ``meta_info`` and ``output_ids`` (/generate); a sample also names its profile, temperature, prompt and
    index."""

    id: Any = None
    choices: Any = None
    text: Any = None
    meta_info: Any = None
    output_ids: Any = None
    profile: Any = None
    temperature: Any = None
    prompt_id: Any = None
    sample_index: Any = None
    think_opened_by_prompt: Any = None


def _from_json(label: str, data) -> list[tuple[str, str, list[int] | None]]:
    try:
        return _from_json_shapes(label, data)
    except (TypeError, AttributeError, KeyError, ValidationError):
        raise AnalysisInputError(f"{label}: JSON of unknown shape; expected {SHAPES}") from None


def _message_text(msg: dict) -> str:
    """A chat message as the model emitted it: the reasoning (``reasoning_content``, SGLang's and DeepSeek's
    name, or ``reasoning``, vLLM's and OpenRouter's) and the content (a string or a list of text parts)."""
    m = _Message.model_validate(msg)
    reasoning = m.reasoning_content if m.reasoning_content is not None else m.reasoning
    content = m.content
    if isinstance(content, list):
        content = "".join(_Message.model_validate(p).text or "" if isinstance(p, dict) else str(p) for p in content)
    return join_reasoning(reasoning if isinstance(reasoning, str) else None, content)


def _from_json_shapes(label: str, data) -> list[tuple[str, str, list[int] | None]]:
    if isinstance(data, dict) and "choices" in data:
        choices = _Body.model_validate(data).choices
        out = []
        for i, ch in enumerate(choices):
            ch = _Choice.model_validate(ch)
            msg = ch.message or {}
            text = _message_text(msg) if msg else ch.text
            out.append((label if len(choices) == 1 else f"{label}#{i}", text, None))
        return out
    if isinstance(data, dict) and "text" in data:
        body = _Body.model_validate(data)
        meta = _Body.model_validate(body.meta_info or {})
        text = body.text or ""
        if "profile" in data:  # one samples.jsonl record: analyse it as diagnose did
            label = f"{label}:{body.profile}/T={body.temperature}/{body.prompt_id}/{body.sample_index}"
            text = analysed_text(text, bool(body.think_opened_by_prompt))
        return [(label, text, body.output_ids or meta.output_ids)]
    if isinstance(data, list):
        out = []
        for i, item in enumerate(data):
            out.extend(_from_json_shapes(f"{label}#{i}", item))
        return out
    raise AnalysisInputError(f"{label}: JSON of unknown shape; expected {SHAPES}")


_SSE_DATA = re.compile(r"^data:[ \t]?")  # a saved server-sent-events stream: "data: {...}" lines


class _Stream:
    """The chunks of a streamed chat completion (``"object": "chat.completion.chunk"``, ``choices[].delta``),
    one record a line, joined into one text per (response id, choice index) as the client would show it."""

    def __init__(self, path: str):
        self.path = path
        self.parts: dict[tuple, tuple[list[str], list[str], list[bool]]] = {}

    def add(self, record) -> bool:
        """Take ``record`` when it is a chunk (True); False for anything else."""
        body = _Body.model_validate(record) if isinstance(record, dict) else None
        choices = body.choices if body is not None else None
        if not (isinstance(choices, list) and choices and all(isinstance(c, dict) and "delta" in c for c in choices)):
            return False
        for ch in map(_Choice.model_validate, choices):
            delta = _Message.model_validate(ch.delta or {})
            reasoning, content, seen = self.parts.setdefault((body.id, ch.index), ([], [], [False]))
            r = delta.reasoning_content if delta.reasoning_content is not None else delta.reasoning
            if isinstance(r, str):
                reasoning.append(r)
            if isinstance(delta.content, str):
                content.append(delta.content)
                seen[0] = seen[0] or delta.content != ""  # an empty first delta does not close the think
        return True

    def texts(self) -> Iterator[tuple[str, str, list[int] | None]]:
        many = len(self.parts) > 1
        for i, (reasoning, content, seen) in enumerate(self.parts.values()):
            text = join_reasoning("".join(reasoning) if reasoning else None, "".join(content) if seen[0] else None)
            yield (f"{self.path}#{i}" if many else self.path), text, None


JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def read_texts(path: str, skipped: list[str] | None = None) -> Iterator[tuple[str, str, list[int] | None]]:
    """(label, text, token ids or None) for every text in ``path`` (module docstring for the kinds).

    Raises AnalysisInputError for a file that is missing, a directory, binary, or a ``.json``/``.jsonl``
    whose content is not JSON of a known shape (with the line number for JSON lines). With ``skipped`` (a
    list), a JSON line that does not parse is described there and skipped instead, as long as another line
    of the file parses and the bad one is a record cut short (it opens with ``{``): a run killed mid-write
    leaves one in samples.jsonl, and ``--resume`` keeps it in the middle of the file
    (:func:`mtp_remote.report.history.open_samples_for_append`). A line that is not JSON at all still fails the file."""
    if path == "-":
        yield from _sniffed("<stdin>", read_stdin())
        return
    raw = read_text_file(path)
    suffix = Path(path).suffix.lower()
    if suffix in JSON_SUFFIXES:
        try:
            data = loads_json(raw)
        except ValueError as exc:
            raise AnalysisInputError(f"{path}: not valid JSON ({exc}); expected {SHAPES}") from None
        yield from _from_json(path, data)
    elif suffix in JSONL_SUFFIXES:
        stream = _Stream(path)
        bad: list[str] = []
        parsed = False
        for n, line in enumerate(raw.splitlines(), 1):
            line = _SSE_DATA.sub("", line, count=1)
            if not line.strip() or line.strip() == "[DONE]":
                continue
            try:
                record = loads_json(line)
            except ValueError as exc:
                if skipped is None or not line.lstrip().startswith("{"):
                    raise AnalysisInputError(f"{path}: line {n} is not valid JSON ({exc})") from None
                bad.append(f"line {n} is a record cut short ({exc}; an interrupted write?)")
                continue
            parsed = True
            if not stream.add(record):
                yield from _from_json(f"{path}:{n}" if not isinstance(record, dict) or "profile" not in record
                                      else path, record)
        if bad and not parsed:
            raise AnalysisInputError(f"{path}: no complete JSON line in it: {bad[0]}; expected {SHAPES}")
        if skipped is not None:
            skipped.extend(f"{path}: {b}; skipped, the file's other lines analysed" for b in bad)
        yield from stream.texts()
    elif raw.strip():  # an empty text file has no text (the caller says so): an empty output is not "no loop"
        yield path, raw, None


def read_text_file(path: str, *, expected: str = SHAPES, nul_padding: bool = False) -> str:
    """The text of a file (UTF-8, undecodable bytes replaced). Raises AnalysisInputError naming ``path`` when
    it is missing, a directory, unreadable or binary; ``expected`` says what should have been given.
    ``nul_padding``: NUL bytes that open the file are allowed (a log cut by logrotate's copytruncate starts
    with NUL padding while its writer keeps its offset); NULs after other bytes still mean binary."""
    def refuse_binary(head: bytes) -> None:  # NULs that open a log (nul_padding) were dropped as they were read
        if b"\0" in head:
            raise AnalysisInputError(f"{path}: binary file; expected {expected}")

    try:
        data = read_bounded(path, skip_leading_nul=nul_padding, check_head=refuse_binary)
    except InputTooLarge as exc:
        raise AnalysisInputError(f"{path}: {exc}; expected {expected}") from None
    except FileNotFoundError:
        raise AnalysisInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnalysisInputError(f"{path}: is a directory; give files ({expected})") from None
    except OSError as exc:
        raise AnalysisInputError(f"{path}: cannot read ({exc.strerror})") from None
    return data.decode("utf-8", errors="replace")


def read_stdin(limit: int = MAX_INPUT_BYTES) -> str:
    """Standard input as text, at most ``limit`` bytes (``< /dev/zero`` is refused, not read whole). Raises
    AnalysisInputError past the bound."""
    data = sys.stdin.buffer.read(limit + 1) if hasattr(sys.stdin, "buffer") else sys.stdin.read(limit + 1)
    if len(data) > limit:
        raise AnalysisInputError(f"<stdin>: larger than {limit >> 20} MiB; read at most that much")
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def _sniffed(label: str, raw: str) -> Iterator[tuple[str, str, list[int] | None]]:
    """Standard input: JSON (one document or JSON lines) of a known shape is parsed, anything else is text."""
    stripped = raw.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            docs = [loads_json(raw)]
        except ValueError:
            try:
                docs = [loads_json(ln) for ln in raw.splitlines() if ln.strip()]
            except ValueError:
                docs = []
        try:
            out = [item for doc in docs for item in _from_json(label, doc)]
        except AnalysisInputError:
            out = []
        if out:
            yield from out
            return
    if raw.strip():  # empty input has no text, as an empty file
        yield label, raw, None
