"""HTTP client for an SGLang server (the only module that imports httpx).

Async requests to ``/v1/chat/completions`` and ``/generate`` return a :class:`Completion` — a per-request
result that is *data*: a failed request has ``error`` set instead of raising, so one bad request never loses
a run. The streaming forms (:meth:`ServerClient.generate_stream`, :meth:`ServerClient.chat_stream`) show the
growing output to a ``watch`` callback and, when it says so, close the stream and abort the request on the
server (``/abort_request``, SGLang's own route; SGLang also aborts a request whose client went away). ``/health``, ``/server_info`` and ``/flush_cache`` are small helpers. Times are wall seconds measured
on the driver (through the tunnel).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

#: The largest response body (or one streamed event) read, in bytes: a server that sends more is that request's
#: error (a 50 MB response held 5.9 GB of RSS before this bound).
MAX_RESPONSE_BYTES = 32 << 20
#: The deepest nesting of ``[`` / ``{`` accepted in a response (SGLang's are a few levels deep).
MAX_JSON_DEPTH = 64


class BadResponse(ValueError):
    """A response that is not what the API promises (not JSON, NaN, too deep or too big, a field of the wrong
    type): the error of that one request, never the run's."""


def _no_constant(name: str) -> Any:
    raise BadResponse(f"{name} in the response (not a JSON number)")


def _depth_ok(value: Any) -> bool:
    """True when ``value`` nests at most :data:`MAX_JSON_DEPTH` levels of lists and objects (iteratively)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > MAX_JSON_DEPTH:
                return False
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return True


def parse_json(raw: bytes | str, what: str = "the response") -> Any:
    """JSON of a server's answer; raises :class:`BadResponse` for text that is not JSON, ``NaN``/``Infinity``,
    a number too large for a float, or nesting past :data:`MAX_JSON_DEPTH` (never a RecursionError)."""
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except BadResponse:
        raise
    except RecursionError:
        raise BadResponse(f"{what} is nested too deeply") from None
    except ValueError as e:
        raise BadResponse(f"{what} is not JSON ({e})") from None
    if not _depth_ok(value):
        raise BadResponse(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(v), type(v).__name__)


def _obj(v: Any, name: str) -> dict:
    """An object field (absent: {})."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadResponse(f"{name} is {_kind(v)}, not an object")
    return v


def _opt_int(v: Any, name: str) -> int | None:
    """A count (absent: None): an int, not a bool, not negative."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise BadResponse(f"{name} is {v!r}, not a count")
    return v


def _count(v: Any, name: str) -> int:
    return _opt_int(v, name) or 0


def _opt_num(v: Any, name: str) -> float | None:
    """A finite number (absent: None)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise BadResponse(f"{name} is {v!r}, not a finite number")
    return v


def _opt_str(v: Any, name: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise BadResponse(f"{name} is {_kind(v)}, not a string")


def _ids(v: Any, name: str) -> list[int] | None:
    """Token ids (absent: None)."""
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise BadResponse(f"{name} is not a list of token ids")
    return v


def _logprob_entries(v: Any, name: str) -> list[list]:
    """SGLang's ``[[logprob, token id, ...], ...]`` (the logprob None for a prompt's first token)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadResponse(f"{name} is {_kind(v)}, not a list")
    for e in v:
        if not isinstance(e, list) or len(e) < 2 or not isinstance(e[1], int) or isinstance(e[1], bool):
            raise BadResponse(f"{name} holds {_kind(e)} {str(e)[:40]}, not [logprob, token id]")
        if e[0] is not None:
            _opt_num(e[0], name)
    return v


async def _read_capped(r: httpx.Response) -> bytes:
    """A response's body, at most :data:`MAX_RESPONSE_BYTES` (else :class:`BadResponse`, the rest unread)."""
    length = r.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
        raise BadResponse(f"the response is {int(length) >> 20} MiB, over the {MAX_RESPONSE_BYTES >> 20} MiB bound")
    out = bytearray()
    async for chunk in r.aiter_bytes():
        out += chunk
        if len(out) > MAX_RESPONSE_BYTES:
            raise BadResponse(f"the response is over the {MAX_RESPONSE_BYTES >> 20} MiB bound")
    return bytes(out)


async def _capped_lines(r: httpx.Response) -> AsyncIterator[str]:
    """A streamed response's lines, each at most :data:`MAX_RESPONSE_BYTES` (else :class:`BadResponse`)."""
    buf = bytearray()
    async for chunk in r.aiter_bytes():
        seen = len(buf)  # no newline before this: search the new bytes only
        buf += chunk
        while (i := buf.find(b"\n", seen)) >= 0:
            line, buf, seen = bytes(buf[:i]), buf[i + 1:], 0
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(buf) > MAX_RESPONSE_BYTES:
            raise BadResponse(f"a streamed event is over the {MAX_RESPONSE_BYTES >> 20} MiB bound")
    if buf:
        yield bytes(buf).rstrip(b"\r").decode("utf-8", "replace")


@dataclass
class Completion:
    """One request's result.

    ``text`` is the full generated text, reasoning included (``<think>``-free reasoning + ``</think>`` +
    answer when the server split it out with a reasoning parser, so the text analysis sees what the model
    produced). ``completion_tokens`` is in tokens; ``latency_s`` in seconds. ``spec_verify_ct`` is the number
    of verify steps (speculative servers, /generate only)."""

    text: str = ""
    reasoning: str | None = None
    content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = None
    latency_s: float = 0.0
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    output_ids: list[int] | None = None
    prompt_ids: list[int] | None = None
    output_logprobs: list[float] | None = None  # decode logprob of each output token (nats)
    top2_margins: list[float] | None = None  # logprob(top-1) - logprob(top-2) per output token
    error: str | None = None
    raw_meta: dict[str, Any] = field(default_factory=dict)
    stop: dict | None = None  # set when ``watch`` stopped the stream: what it returned, plus ``at_tokens``
    request: dict[str, Any] | None = None  # {"endpoint", "body"}: the exact request sent (replayable)
    tool_calls: list[dict] | None = None  # [{"name", "arguments"}] from a chat response's tool calls


#: ``watch(text so far, output ids so far or None) -> dict | None``: a dict stops the request (see ``stop``).
Watch = Callable[[str, "list[int] | None"], "dict | None"]


def chat_request(prompt: str, *, temperature: float, max_tokens: int, top_p: float = 1.0, seed: int | None = None,
                 model: str = "default", fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``/v1/chat/completions`` request for one user message, or for the request shape ``fields``
    (``messages``, ``tools``, ``chat_template_kwargs``... as :meth:`mtp_remote.config.playbook.Prompt.chat_fields`
    gives them; the sampling arguments here win over any of theirs): ``{"endpoint", "body"}`` (the server
    applies the model's chat template)."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    body.update(fields or {})
    body.update(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    if seed is not None:
        body["seed"] = seed
    return {"endpoint": "/v1/chat/completions", "body": body}


def generate_request(text: str, *, temperature: float, max_new_tokens: int, top_p: float = 1.0,
                     seed: int | None = None, return_logprob: bool = False, top2: bool = False) -> dict[str, Any]:
    """The ``/generate`` request (SGLang native; ``text`` is the prompt after the template, as sent; the seed
    is ``sampling_seed``): ``{"endpoint", "body"}``."""
    sp: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens}
    if seed is not None:
        sp["sampling_seed"] = seed
    body: dict[str, Any] = {"text": text, "sampling_params": sp}
    if return_logprob:
        body.update(return_logprob=True, logprob_start_len=0, top_logprobs_num=2)
    elif top2:
        body.update(return_logprob=True, top_logprobs_num=2)
    return {"endpoint": "/generate", "body": body}


def join_reasoning(reasoning: str | None, content: str | None) -> str:
    """Rebuild what the model emitted from a reasoning-parser split: reasoning, ``</think>`` if the block
    closed (content is not None), then the answer."""
    if reasoning is None:
        return content or ""
    if content is None:
        return "<think>\n" + reasoning
    return "<think>\n" + reasoning + "\n</think>\n\n" + content


def tool_calls_of(calls: Any) -> list[dict] | None:
    """``[{"name", "arguments"}]`` from OpenAI ``tool_calls`` (``arguments`` as the server sent it: a JSON
    string), None when there are none."""
    out = [{"name": (c.get("function") or {}).get("name") or "", "arguments": (c.get("function") or {}).get(
        "arguments") or ""} for c in calls or [] if isinstance(c, dict)]
    return out or None


def with_tool_calls(text: str, calls: list[dict] | None) -> str:
    """``text`` followed by each tool call as the model wrote it (Qwen's ``<tool_call>`` block: name, then the
    arguments as sent), so the loop metrics see tool-call arguments too."""
    for c in calls or []:
        text += f"\n<tool_call>\n{c['name']}\n{c['arguments']}\n</tool_call>"
    return text


def _finish(fr: Any) -> str | None:
    """A finish reason: SGLang's ``{"type": ...}`` or the OpenAI string."""
    if isinstance(fr, dict):
        return _opt_str(fr.get("type"), "finish_reason.type")
    return _opt_str(fr, "finish_reason")


class ServerClient:
    """Async client for one server base URL. Use as ``async with ServerClient(url) as sc:``, one per profile.

    ``timeout_s`` bounds each request (seconds); ``api_key`` is sent as a Bearer token; ``max_connections`` sizes
    the keep-alive pool (size it to the concurrency: through the SSH tunnel each connection is one channel)."""

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, api_key: str | None = None,
                 max_connections: int = 64):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s  # the whole request's bound (httpx's bounds each read: a slow-loris evades it)
        self._client = httpx.AsyncClient(
            base_url=base_url, headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            # one pool for every request of a profile: at most ``max_connections`` TCP connections (each one SSH
            # channel through the tunnel), kept alive and reused; idle ones are dropped after 4 s, before the
            # server's own keep-alive timeout (uvicorn's default, 5 s) closes them under a request being sent
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections,
                                keepalive_expiry=4.0))

    async def __aenter__(self) -> ServerClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self._client.aclose()

    async def health(self) -> int | None:
        """HTTP status of ``/health`` (200 ready, 503 warming up), or None when unreachable."""
        try:
            r = await self._client.get("/health", timeout=5.0)
            return r.status_code
        except httpx.HTTPError:
            return None

    async def server_info(self) -> dict:
        """``/server_info`` JSON object ({} when unavailable, or when the answer is not a JSON object within the
        bounds of :func:`parse_json` and :data:`MAX_RESPONSE_BYTES`); the whole request bounded at 10 s."""
        try:
            async with asyncio.timeout(10.0):
                async with self._client.stream("GET", "/server_info", timeout=10.0) as r:
                    raw = await _read_capped(r)
            info = parse_json(raw, "/server_info") if r.status_code == 200 else {}
            return info if isinstance(info, dict) else {}
        except (httpx.HTTPError, ValueError, TimeoutError):
            return {}

    async def model_info(self) -> dict:
        """``/get_model_info`` JSON (model_path, architectures...; {} when unavailable)."""
        try:
            r = await self._client.get("/get_model_info", timeout=10.0)
            return r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}

    async def context_length(self, info: dict | None = None) -> int | None:
        """The server's context length in tokens: ``context_length`` of ``/server_info`` (``info`` when the
        caller has it), else ``max_model_len`` of ``/v1/models`` (SGLang leaves the server argument null when it
        took the model's own), else None."""
        info = info if info is not None else await self.server_info()
        if isinstance(info.get("context_length"), int):
            return info["context_length"]
        try:
            r = await self._client.get("/v1/models", timeout=10.0)
            data = (r.json().get("data") or [{}])[0] if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        n = data.get("max_model_len") if isinstance(data, dict) else None
        return n if isinstance(n, int) else None

    async def flush_cache(self) -> bool:
        try:
            r = await self._client.post("/flush_cache", timeout=30.0)
            return r.status_code == 200
        except httpx.HTTPError:
            return False

    async def wait_idle(self, timeout_s: float = 10.0, interval_s: float = 0.1) -> float | None:
        """Wait until the server holds no request (``/flush_cache`` answers 200 only then, in SGLang as in the
        sim: it flushes the radix cache and the acceptance counters, so read ``/server_info`` first). Seconds
        waited, or None when it was still busy after ``timeout_s``."""
        t0 = time.perf_counter()
        while True:
            if await self.flush_cache():
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout_s:
                return None
            await asyncio.sleep(interval_s)

    async def _post(self, path: str, body: dict) -> tuple[dict, float, str | None]:
        """POST JSON; (response JSON object, wall seconds, error text or None). A failed request is data, not an
        exception: so is an answer that is not a JSON object (:func:`parse_json`), one over
        :data:`MAX_RESPONSE_BYTES`, or one not complete within ``timeout_s`` (the whole request: a server that
        trickles a byte at a time is bounded too)."""
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.stream("POST", path, json=body) as r:
                    raw = await _read_capped(r)
            if r.status_code != 200:
                return {}, time.perf_counter() - t0, f"HTTP {r.status_code}: {raw[:300].decode('utf-8', 'replace')}"
            data = parse_json(raw)
            if not isinstance(data, dict):
                raise BadResponse(f"the response is {_kind(data)}, not an object")
            return data, time.perf_counter() - t0, None
        except TimeoutError:
            return {}, time.perf_counter() - t0, f"no complete response within {self._timeout_s:g} s"
        except BadResponse as e:
            return {}, time.perf_counter() - t0, f"malformed response: {e}"
        except (httpx.HTTPError, ValueError) as e:
            return {}, time.perf_counter() - t0, f"{type(e).__name__}: {e}"

    async def chat(self, prompt: str, *, temperature: float, max_tokens: int, top_p: float = 1.0,
                   seed: int | None = None, model: str = "default", fields: dict[str, Any] | None = None) -> Completion:
        """POST ``/v1/chat/completions`` with one user message or the request shape ``fields``
        (:func:`chat_request`); ``text`` holds the reasoning, the content and the tool calls
        (:func:`with_tool_calls`)."""
        req = chat_request(prompt, temperature=temperature, max_tokens=max_tokens, top_p=top_p, seed=seed, model=model,
                           fields=fields)
        data, latency, error = await self._post(req["endpoint"], req["body"])
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        try:
            return _chat_completion(data, latency, req)
        except BadResponse as e:
            return Completion(latency_s=latency, error=f"malformed response: {e}", request=req)

    async def generate(self, text: str, *, temperature: float, max_new_tokens: int, top_p: float = 1.0,
                       seed: int | None = None, return_logprob: bool = False, top2: bool = False) -> Completion:
        """POST ``/generate`` (SGLang native); reads ``meta_info`` (tokens, finish reason, spec_verify_ct).

        With ``return_logprob`` also asks for the prompt's token ids (``logprob_start_len`` 0), each output
        token's decode logprob and the top-2 logprobs (``top_logprobs_num`` 2) for near-tie margins; ``top2``
        asks for the output logprobs and top-2 only (the near-tie rule at T = 0)."""
        req = generate_request(text, temperature=temperature, max_new_tokens=max_new_tokens, top_p=top_p, seed=seed,
                               return_logprob=return_logprob, top2=top2)
        data, latency, error = await self._post(req["endpoint"], req["body"])
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        try:
            return _generate_completion(data, latency, req, logprobs=return_logprob or top2)
        except BadResponse as e:
            return Completion(latency_s=latency, error=f"malformed response: {e}", request=req)

    async def _stream(self, path: str, body: dict, on_event: Callable[[dict], bool]) -> tuple[float, str | None]:
        """POST ``body`` with ``stream``; feed each server-sent event's JSON to ``on_event`` until it returns
        True (then the stream is closed: the connection is dropped, not read to the end) or ``[DONE]``.
        Returns (wall seconds, error text or None)."""
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._client.stream("POST", path, json={**body, "stream": True}) as r:
                    if r.status_code != 200:
                        text = (await _read_capped(r))[:300].decode(errors="replace")
                        return time.perf_counter() - t0, f"HTTP {r.status_code}: {text}"
                    async for line in _capped_lines(r):
                        if not line.startswith("data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            break
                        event = parse_json(payload, "a streamed event")
                        if not isinstance(event, dict):
                            raise BadResponse(f"a streamed event is {_kind(event)}, not an object")
                        if "error" in event and len(event) == 1:
                            err = event["error"]
                            return time.perf_counter() - t0, str(err.get("message") if isinstance(err, dict) else err)
                        if on_event(event):
                            break
            return time.perf_counter() - t0, None
        except TimeoutError:
            return time.perf_counter() - t0, f"no complete response within {self._timeout_s:g} s"
        except BadResponse as e:
            return time.perf_counter() - t0, f"malformed response: {e}"
        except (httpx.HTTPError, ValueError) as e:
            return time.perf_counter() - t0, f"{type(e).__name__}: {e}"

    async def abort(self, rid: str) -> bool:
        """POST ``/abort_request`` for one request id (SGLang 0.5.9's route); False when it fails."""
        try:
            r = await self._client.post("/abort_request", json={"rid": rid}, timeout=10.0)
            return r.status_code == 200
        except httpx.HTTPError:
            return False

    async def generate_stream(self, text: str, *, temperature: float, max_new_tokens: int, watch: Watch,
                              top_p: float = 1.0, seed: int | None = None, stream_interval: int = 16) -> Completion:
        """``/generate`` streamed: each event carries the cumulative text and output ids (SGLang's default,
        without ``--stream-output``); ``watch`` sees them and a dict from it stops the request: the stream is
        closed, the request aborted by its id, and the Completion holds what had arrived, ``finish_reason``
        :data:`~mtp_remote.analysis.settled.LOOP_STOP` and ``stop`` (with ``at_tokens``). ``stream_interval``
        (tokens per event, a sampling parameter) bounds the events' cost: each repeats the whole output."""
        from .analysis.settled import LOOP_STOP

        sp: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens,
                              "stream_interval": stream_interval}
        if seed is not None:
            sp["sampling_seed"] = seed
        last: dict = {}
        state: dict[str, Any] = {"stop": None, "ids": []}

        def on_event(event: dict) -> bool:
            nonlocal last
            last = event
            meta = _obj(event.get("meta_info"), "meta_info")
            ids = _ids(event.get("output_ids"), "output_ids")
            n = _opt_int(meta.get("completion_tokens"), "meta_info.completion_tokens")
            text = _opt_str(event.get("text"), "text") or ""
            if ids is not None:  # cumulative, or (``--stream-output``) this event's ids only: fewer than counted
                state["ids"] = state["ids"] + list(ids) if n is not None and len(ids) < n else list(ids)
            hit = watch(text, state["ids"] if ids is not None else None)
            if hit is not None:
                state["stop"] = hit
                return True
            return False

        req = {"endpoint": "/generate", "body": {"text": text, "sampling_params": sp, "stream": True}}
        latency, error = await self._stream("/generate", {"text": text, "sampling_params": sp}, on_event)
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        ids = state["ids"] or None
        try:
            comp = _generate_completion(last, latency, req, logprobs=False)
        except BadResponse as e:
            return Completion(latency_s=latency, error=f"malformed response: {e}", request=req)
        comp.output_ids = ids
        if ids is not None:
            comp.completion_tokens = len(ids)
        if state["stop"] is not None:
            comp.finish_reason = LOOP_STOP
            comp.stop = {**state["stop"], "at_tokens": comp.completion_tokens}
            if comp.raw_meta.get("id"):
                comp.stop["aborted"] = await self.abort(str(comp.raw_meta["id"]))
        return comp

    async def chat_stream(self, prompt: str, *, temperature: float, max_tokens: int, watch: Watch,
                          top_p: float = 1.0, seed: int | None = None, model: str = "default",
                          fields: dict[str, Any] | None = None) -> Completion:
        """``/v1/chat/completions`` streamed (reasoning, content and tool-call deltas, token counts from
        ``stream_options.continuous_usage_stats``); ``watch`` as in :meth:`generate_stream` (no ids here);
        ``fields`` as in :func:`chat_request`."""
        from .analysis.settled import LOOP_STOP

        body = chat_request(prompt, temperature=temperature, max_tokens=max_tokens, top_p=top_p, seed=seed,
                            model=model, fields=fields)["body"]
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        st: dict[str, Any] = {"r": None, "c": None, "usage": {}, "finish": None, "id": None, "stop": None,
                              "calls": {}}

        def text_so_far() -> str:
            calls = tool_calls_of([st["calls"][i] for i in sorted(st["calls"])])
            return with_tool_calls(join_reasoning(st["r"], st["c"] if st["c"] or not calls else ""), calls)

        def on_event(event: dict) -> bool:
            st["id"] = st["id"] or _opt_str(event.get("id"), "id")
            if event.get("usage"):
                st["usage"] = _usage(event["usage"])
            choices = event.get("choices") or []
            if not isinstance(choices, list):
                raise BadResponse(f"choices is {_kind(choices)}, not a list")
            for choice in choices:
                choice = _obj(choice, "a choice")
                delta = _obj(choice.get("delta"), "delta")
                if r := _opt_str(delta.get("reasoning_content"), "delta.reasoning_content"):
                    st["r"] = (st["r"] or "") + r
                if c := _opt_str(delta.get("content"), "delta.content"):
                    st["c"] = (st["c"] or "") + c
                tcs = delta.get("tool_calls") or []
                if not isinstance(tcs, list):
                    raise BadResponse(f"delta.tool_calls is {_kind(tcs)}, not a list")
                for tc in tcs:  # fragments by index: name once, arguments in pieces
                    tc = _obj(tc, "a tool call")
                    call = st["calls"].setdefault(_opt_int(tc.get("index"), "tool_calls.index") or 0,
                                                  {"function": {"name": "", "arguments": ""}})
                    fn = _obj(tc.get("function"), "tool_calls.function")
                    call["function"]["name"] += _opt_str(fn.get("name"), "tool_calls.function.name") or ""
                    call["function"]["arguments"] += _opt_str(fn.get("arguments"), "tool_calls.function.arguments") or ""
                if choice.get("finish_reason"):
                    st["finish"] = _finish(choice["finish_reason"])
            hit = watch(text_so_far(), None)
            if hit is not None:
                st["stop"] = hit
                return True
            return False

        req = {"endpoint": "/v1/chat/completions", "body": {**body, "stream": True}}
        latency, error = await self._stream("/v1/chat/completions", body, on_event)
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        usage = st["usage"] or {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": None}
        comp = Completion(
            text=text_so_far(), reasoning=st["r"], content=st["c"], finish_reason=st["finish"],
            tool_calls=tool_calls_of([st["calls"][i] for i in sorted(st["calls"])]), latency_s=latency, request=req,
            **usage)
        if st["stop"] is not None:
            comp.finish_reason = LOOP_STOP
            comp.stop = {**st["stop"], "at_tokens": comp.completion_tokens}
            if st["id"]:
                comp.stop["aborted"] = await self.abort(str(st["id"]).removeprefix("chatcmpl-"))
        return comp

    async def score(self, input_ids: list[int], start: int) -> list[float] | None:
        """Prefill-score ``input_ids`` (``max_new_tokens`` 0): logprob of each token from index ``start``
        given the tokens before it, as SGLang's ``input_token_logprobs``. None when the request fails."""
        body = {"input_ids": input_ids, "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                "return_logprob": True, "logprob_start_len": start}
        data, _, error = await self._post("/generate", body)
        if error:
            return None
        try:
            lps = _logprob_entries(_obj(data.get("meta_info"), "meta_info").get("input_token_logprobs"),
                                   "input_token_logprobs")
        except BadResponse:
            return None
        return [e[0] for e in lps]


def _usage(v: Any) -> dict:
    """OpenAI ``usage`` -> the Completion's token counts (``prompt_tokens``, ``completion_tokens``,
    ``reasoning_tokens``), each checked."""
    usage = _obj(v, "usage")
    details = _obj(usage.get("completion_tokens_details"), "usage.completion_tokens_details")
    reasoning = usage.get("reasoning_tokens", details.get("reasoning_tokens"))
    return {"prompt_tokens": _count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
            "completion_tokens": _count(usage.get("completion_tokens"), "usage.completion_tokens"),
            "reasoning_tokens": _opt_int(reasoning, "usage.reasoning_tokens")}


def _chat_completion(data: dict, latency: float, req: dict) -> Completion:
    """A ``/v1/chat/completions`` answer as a Completion; raises :class:`BadResponse` for a field of the wrong
    type."""
    choices = data.get("choices") or [{}]
    if not isinstance(choices, list):
        raise BadResponse(f"choices is {_kind(choices)}, not a list")
    choice = _obj(choices[0], "choices[0]")
    msg = _obj(choice.get("message"), "message")
    reasoning = _opt_str(msg.get("reasoning_content"), "message.reasoning_content")
    content = _opt_str(msg.get("content"), "message.content")
    raw_calls = msg.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise BadResponse(f"message.tool_calls is {_kind(raw_calls)}, not a list")
    calls = tool_calls_of(raw_calls)
    for c in calls or []:
        _opt_str(c["name"], "tool_calls.function.name")
        _opt_str(c["arguments"], "tool_calls.function.arguments")
    return Completion(
        text=with_tool_calls(join_reasoning(reasoning, content if content or not calls else ""), calls),
        reasoning=reasoning, content=content, tool_calls=calls,
        finish_reason=_finish(choice.get("finish_reason")), latency_s=latency,
        raw_meta={k: v for k, v in data.items() if k not in ("choices",)}, request=req, **_usage(data.get("usage")))


def _generate_completion(data: dict, latency: float, req: dict, *, logprobs: bool) -> Completion:
    """A ``/generate`` answer (or a stream's last event) as a Completion: ``meta_info``'s tokens, finish reason,
    ``spec_verify_ct``; with ``logprobs`` the decode logprobs, prompt ids and top-2 margins. Raises
    :class:`BadResponse` for a field of the wrong type (``meta_info`` a list, a count that is not a count)."""
    meta = _obj(data.get("meta_info"), "meta_info")
    comp = Completion(
        text=_opt_str(data.get("text"), "text") or "", finish_reason=_finish(meta.get("finish_reason")),
        prompt_tokens=_count(meta.get("prompt_tokens"), "meta_info.prompt_tokens"),
        completion_tokens=_count(meta.get("completion_tokens"), "meta_info.completion_tokens"),
        latency_s=latency, spec_verify_ct=_opt_int(meta.get("spec_verify_ct"), "meta_info.spec_verify_ct"),
        spec_accept_length=_opt_num(meta.get("spec_accept_length"), "meta_info.spec_accept_length"),
        output_ids=_ids(data.get("output_ids"), "output_ids") or _ids(meta.get("output_ids"), "meta_info.output_ids"),
        raw_meta={k: v for k, v in meta.items() if not k.endswith("logprobs")}, request=req)
    if logprobs:
        out_lp = _logprob_entries(meta.get("output_token_logprobs"), "output_token_logprobs")
        comp.output_logprobs = [e[0] for e in out_lp]
        comp.output_ids = comp.output_ids or [e[1] for e in out_lp]
        comp.prompt_ids = [e[1] for e in _logprob_entries(meta.get("input_token_logprobs"), "input_token_logprobs")]
        tops = meta.get("output_top_logprobs")
        if tops:
            if not isinstance(tops, list):
                raise BadResponse(f"output_top_logprobs is {_kind(tops)}, not a list")
            for t in tops:
                _logprob_entries(t, "output_top_logprobs")
            comp.top2_margins = [(t[0][0] - t[1][0]) if t and len(t) > 1 and t[0][0] is not None
                                 and t[1][0] is not None else float("inf") for t in tops]
    return comp
