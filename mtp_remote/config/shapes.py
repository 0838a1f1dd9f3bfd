"""Request shapes a playbook prompt can take beyond one user message: multi-turn ``messages`` (system, user,
assistant and tool turns), ``extra_body`` fields, long prompts read from text files, and prompts replayed from a
JSONL file of recorded production chat requests (the OpenAI ``/v1/chat/completions`` body as logged).

Checked here, once, at the edge (:mod:`mtp_remote.config.playbook` calls these from its validators): a bad
message names its index and the roles allowed; a bad replay line names the file and the line. Files are read with
a size bound (:func:`mtp_remote.files.read_bounded`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..files import InputTooLarge, loads_json, read_bounded
from .validation import StrictModel

#: Roles of OpenAI chat messages (``developer`` is OpenAI's newer name for ``system``).
ROLES = ("system", "developer", "user", "assistant", "tool")
#: Body fields the playbook's sampling grid owns (or that change how the response is read): never taken from a
#: prompt's ``extra_body`` nor from a replayed request.
GRID_FIELDS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stream", "stream_options",
               "n", "model", "messages")
#: Largest prompt file and replay file read (bytes).
MAX_PROMPT_FILE_BYTES = 64 << 20


class ReplaySource(StrictModel):
    """A JSONL file of recorded chat requests: each line an OpenAI ``/v1/chat/completions`` body (or
    ``{"body": {...}}``, or a samples.jsonl record whose ``request.body`` holds it)."""

    path: str = Field(..., description="The JSONL file, relative to the playbook")
    id_prefix: str | None = Field(None, description="Prompt ids are <id_prefix>-<line>; default the file's stem")
    limit: int | None = Field(None, ge=1, description="Replay at most this many requests (the first lines)")


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatTurn(_Shape):
    """One chat message as a playbook or a replayed request gives it: ``role``, ``content`` (a string, a list
    of parts or null), an assistant's ``tool_calls``, a tool message's ``tool_call_id``. Checked by
    :func:`check_messages`, not here."""

    role: Any = None
    content: Any = None
    tool_calls: Any = None
    tool_call_id: Any = None


class ContentPart(_Shape):
    """One part of a message's content list; its ``text`` ('' for a part without one)."""

    text: Any = ""


class ReplayLine(_Shape):
    """A line of a replay file: a chat body (``messages``...), or one under ``body`` or ``request.body``."""

    messages: Any = None
    body: Any = None
    request: Any = None


def check_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` if they form a chat: non-empty, each with a known ``role``, string/list/None ``content``,
    ``tool_calls`` only on assistant turns, a ``tool_call_id`` on tool turns. Raises ValueError naming the
    message's index and what is allowed."""
    if not messages:
        raise ValueError("messages must not be empty")
    for i, m in enumerate(map(ChatTurn.model_validate, messages)):
        role, content = m.role, m.content
        if role not in ROLES:
            raise ValueError(f"messages[{i}].role {role!r} is not one of {', '.join(ROLES)}")
        if content is not None and not isinstance(content, (str, list)):
            raise ValueError(f"messages[{i}].content must be a string, a list of parts or null")
        if m.tool_calls is not None and (role != "assistant" or not isinstance(m.tool_calls, list)):
            raise ValueError(f"messages[{i}].tool_calls: a list, on assistant messages only")
        if role == "tool" and not m.tool_call_id:
            raise ValueError(f"messages[{i}]: a tool message needs tool_call_id (the assistant's call it answers)")
        if content is None and role != "assistant":
            raise ValueError(f"messages[{i}].content is missing ({role} messages need one)")
    return messages


def check_extra_body(extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` if it sets none of :data:`GRID_FIELDS`; raises ValueError naming them otherwise."""
    owned = sorted(k for k in extra if k in GRID_FIELDS)
    if owned:
        raise ValueError(f"extra_body must not set {owned}: the playbook's sampling grid (temperatures, top_p, "
                         f"max_tokens, seed) and prompt fields own them")
    return extra


def content_text(content: Any) -> str:
    """A message's content as text (the text parts of a list joined)."""
    if isinstance(content, list):
        return "".join(ContentPart.model_validate(p).text for p in content if isinstance(p, dict))
    return content or ""


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The last user message's text (what a report shows for a conversation), '' when there is none."""
    turns = [ChatTurn.model_validate(m) for m in messages]
    return next((content_text(m.content) for m in reversed(turns) if m.role == "user"), "")


def _read_text(path: Path, what: str) -> str:
    try:
        return read_bounded(path, MAX_PROMPT_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise ValueError(f"{what} {path}: file not found") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {path}: is a directory") from None
    except InputTooLarge as e:
        raise ValueError(f"{what} {path}: {e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path}: not UTF-8 text") from None
    except OSError as e:
        raise ValueError(f"{what} {path}: cannot read ({e.strerror})") from None


def read_prompt_file(base_dir: Path, name: str) -> str:
    """The text of prompt file ``name`` (relative to ``base_dir``, the playbook's directory). Raises ValueError
    naming the file."""
    return _read_text(base_dir / name, "prompt file")


def _body_of(record: Any) -> dict | None:
    """The chat body a replay line holds: the line itself, its ``body``, or its ``request.body``."""
    if not isinstance(record, dict):
        return None
    line = ReplayLine.model_validate(record)
    request = ReplayLine.model_validate(line.request) if isinstance(line.request, dict) else None
    for cand in (record, line.body, request.body if request is not None else None):
        if isinstance(cand, dict) and isinstance(ReplayLine.model_validate(cand).messages, list):
            return cand
    return None


def prompt_of_body(body: dict[str, Any], prompt_id: str, source: str) -> dict[str, Any]:
    """A playbook prompt (as a dict, validated by the caller) replaying ``body``: its messages, tools,
    ``chat_template_kwargs`` and ``separate_reasoning`` as prompt fields, the rest but :data:`GRID_FIELDS` as
    ``extra_body``. The recorded sampling (temperature, max_tokens) is named in ``source``."""
    known = ("tools", "chat_template_kwargs", "separate_reasoning")
    extra = {k: v for k, v in body.items() if k not in GRID_FIELDS and k not in known}
    recorded = ", ".join(f"{k}={body[k]}" for k in ("temperature", "max_tokens", "max_completion_tokens")
                         if body.get(k) is not None)
    out: dict[str, Any] = {"id": prompt_id, "messages": body["messages"], "extra_body": extra,
                           "source": source + (f" (recorded {recorded})" if recorded else "")}
    out.update({k: body[k] for k in known if body.get(k) is not None})
    return out


def replay_prompts(base_dir: Path, src: ReplaySource) -> list[dict[str, Any]]:
    """The prompts of replay file ``src`` (one per non-empty line, at most ``src.limit``), ids
    ``<id_prefix>-<line number>``, ``source`` ``<path>#<line>``. Raises ValueError naming the file and line of a
    line that is not JSON or holds no chat body."""
    path = base_dir / src.path
    prefix = src.id_prefix or Path(src.path).stem
    out = []
    for n, line in enumerate(_read_text(path, "replay file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            body = _body_of(loads_json(line))
        except ValueError as e:
            raise ValueError(f"replay file {path} line {n}: not JSON ({e})") from None
        if body is None:
            raise ValueError(f"replay file {path} line {n}: no chat request (an object with a messages list, or "
                             f"its body/request.body)")
        out.append(prompt_of_body(body, f"{prefix}-{n}", f"{src.path}#{n}"))
        if src.limit is not None and len(out) >= src.limit:
            break
    if not out:
        raise ValueError(f"replay file {path}: no request in it")
    return out
