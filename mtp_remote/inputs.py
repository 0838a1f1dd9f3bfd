"""Read texts to analyse from files: plain text, a JSON response body (chat or /generate), samples.jsonl.

``read_texts(path)`` yields ``(label, text, token_ids)``; ``-`` reads standard input. Raises
AnalysisInputError naming the file and the shapes accepted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator

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


def read_texts(path: str) -> Iterator[tuple[str, str, list[int] | None]]:
    """(label, text, token ids or None) for every text in ``path``."""
    if path == "-":
        raw = sys.stdin.read()
        label = "<stdin>"
    else:
        p = Path(path)
        try:
            data = p.read_bytes()
            if b"\0" in data[:8192]:
                raise AnalysisInputError(f"{path}: binary file; expected {SHAPES}")
            raw = data.decode("utf-8", errors="replace")
        except FileNotFoundError:
            raise AnalysisInputError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise AnalysisInputError(f"{path}: is a directory; give files ({SHAPES})") from None
        label = path
    stripped = raw.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            yield from _from_json(label, json.loads(raw))
            return
        except ValueError:
            lines = [ln for ln in raw.splitlines() if ln.strip()]
            try:
                records = [json.loads(ln) for ln in lines]
            except ValueError:
                records = None
            if records is not None:  # JSON lines
                for rec in records:
                    yield from _from_json(label, rec)
                return
    yield label, raw, None
