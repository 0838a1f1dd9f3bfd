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
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .responses import (
    MAX_RESPONSE_BYTES,
    BadResponse,
    ChatChunk,
    ChatDelta,
    ChunkChoice,
    Completion,
    GenerateAnswer,
    MetaInfo,
    ModelCard,
    ModelList,
    ServerInfo,
    StreamError,
    ToolCallDelta,
    ToolFunction,
    Watch,
    chat_completion,
    chat_request,
    finish_reason_of,
    generate_completion,
    generate_request,
    join_reasoning,
    kind_of,
    logprob_entries,
    parse_json,
    usage_of,
    with_tool_calls,
)


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
class _GenerateStream:
    """A streamed ``/generate`` so far: the output ids and what ``watch`` returned when it stopped it."""

    ids: list[int] = field(default_factory=list)
    stop: dict | None = None


@dataclass
class _ChatStream:
    """A streamed chat completion so far: reasoning and content pieces joined, tool calls by index (name once,
    arguments in pieces), usage, finish reason, the completion id and what ``watch`` returned."""

    reasoning: str | None = None
    content: str | None = None
    parts: dict[int, list[str]] = field(default_factory=dict)  # index -> [name, arguments]
    usage: dict | None = None
    finish: str | None = None
    id: str | None = None
    stop: dict | None = None

    def add(self, choice: ChunkChoice) -> None:
        """One streamed choice's delta (raises :class:`BadResponse` for a field of the wrong type)."""
        delta = ChatDelta.read(choice.delta, "delta")
        if delta.reasoning_content:
            self.reasoning = (self.reasoning or "") + delta.reasoning_content
        if delta.content:
            self.content = (self.content or "") + delta.content
        tcs = delta.tool_calls or []
        if not isinstance(tcs, list):
            raise BadResponse(f"delta.tool_calls is {kind_of(tcs)}, not a list")
        for tc in tcs:  # fragments by index: name once, arguments in pieces
            tc = ToolCallDelta.read(tc, "a tool call")
            part = self.parts.setdefault(tc.index or 0, ["", ""])
            fn = ToolFunction.read(tc.function, "tool_calls.function")
            part[0] += fn.name or ""
            part[1] += fn.arguments or ""
        if choice.finish_reason:
            self.finish = finish_reason_of(choice.finish_reason)

    def calls(self) -> list[dict] | None:
        """The tool calls so far, ``[{"name", "arguments"}]`` by index (None without any)."""
        return [{"name": n, "arguments": a} for n, a in (self.parts[i] for i in sorted(self.parts))] or None

    def text(self) -> str:
        """What the model emitted so far, as :func:`~mtp_remote.responses.chat_completion` builds it."""
        calls = self.calls()
        return with_tool_calls(join_reasoning(self.reasoning, self.content if self.content or not calls else ""),
                               calls)


def _route(req: dict[str, Any]) -> tuple[str, dict]:
    """(path, JSON body) of a request as :func:`~mtp_remote.responses.chat_request` builds it."""
    return req["endpoint"], req["body"]


@functools.cache
def tls_context():
    """httpx's default TLS context (certifi's CAs, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once per process
    and shared by every client: building it loads the CA bundle, ~40 ms of CPU, and a run makes a client per
    profile and per readiness poll."""
    return httpx.create_ssl_context()


class ServerClient:
    """Async client for one server base URL. Use as ``async with ServerClient(url) as sc:``, one per profile.

    ``timeout_s`` bounds each request (seconds); ``api_key`` is sent as a Bearer token; ``max_connections`` sizes
    the keep-alive pool (size it to the concurrency: through the SSH tunnel each connection is one channel)."""

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, api_key: str | None = None,
                 max_connections: int = 64):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s  # the whole request's bound (httpx's bounds each read: a slow-loris evades it)
        self._client = httpx.AsyncClient(
            base_url=base_url, headers=headers, verify=tls_context(),
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
        info = ServerInfo.model_validate(info if info is not None else await self.server_info())
        if isinstance(info.context_length, int):
            return info.context_length
        try:
            r = await self._client.get("/v1/models", timeout=10.0)
            data = (ModelList.model_validate(r.json()).data or [{}])[0] if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError, AttributeError, TypeError, KeyError, IndexError):
            return None
        n = ModelCard.model_validate(data).max_model_len if isinstance(data, dict) else None
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
                raise BadResponse(f"the response is {kind_of(data)}, not an object")
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
        data, latency, error = await self._post(*_route(req))
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        try:
            return chat_completion(data, latency, req)
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
        data, latency, error = await self._post(*_route(req))
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        try:
            return generate_completion(data, latency, req, logprobs=return_logprob or top2)
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
                            raise BadResponse(f"a streamed event is {kind_of(event)}, not an object")
                        if "error" in event and len(event) == 1:
                            (err,) = event.values()
                            return time.perf_counter() - t0, str(StreamError.model_validate(err).message
                                                                 if isinstance(err, dict) else err)
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
        state = _GenerateStream()

        def on_event(event: dict) -> bool:
            nonlocal last
            last = event
            answer = GenerateAnswer.read(event, "a streamed event")
            n = answer.meta().completion_tokens  # 0 when not counted
            ids = answer.output_ids
            if ids is not None:  # cumulative, or (``--stream-output``) this event's ids only: fewer than counted
                state.ids = state.ids + list(ids) if len(ids) < n else list(ids)
            hit = watch(answer.text or "", state.ids if ids is not None else None)
            if hit is not None:
                state.stop = hit
                return True
            return False

        req = {"endpoint": "/generate", "body": {"text": text, "sampling_params": sp, "stream": True}}
        latency, error = await self._stream("/generate", {"text": text, "sampling_params": sp}, on_event)
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        ids = state.ids or None
        try:
            comp = generate_completion(last, latency, req, logprobs=False)
        except BadResponse as e:
            return Completion(latency_s=latency, error=f"malformed response: {e}", request=req)
        comp.output_ids = ids
        if ids is not None:
            comp.completion_tokens = len(ids)
        if state.stop is not None:
            comp.finish_reason = LOOP_STOP
            rid = MetaInfo.model_validate(comp.raw_meta).id
            comp.stop = {**state.stop, "at_tokens": comp.completion_tokens}
            if rid:
                comp.stop.update(aborted=await self.abort(str(rid)))
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
        body.update(stream_options={"include_usage": True, "continuous_usage_stats": True})
        st = _ChatStream()

        def on_event(event: dict) -> bool:
            chunk = ChatChunk.read(event, "a streamed event")
            st.id = st.id or chunk.id
            if chunk.usage:
                st.usage = usage_of(chunk.usage)
            choices = chunk.choices or []
            if not isinstance(choices, list):
                raise BadResponse(f"choices is {kind_of(choices)}, not a list")
            for choice in choices:
                st.add(ChunkChoice.read(choice, "a choice"))
            hit = watch(st.text(), None)
            if hit is not None:
                st.stop = hit
                return True
            return False

        req = {"endpoint": "/v1/chat/completions", "body": {**body, "stream": True}}
        latency, error = await self._stream("/v1/chat/completions", body, on_event)
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        usage = st.usage or {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": None}
        comp = Completion(text=st.text(), reasoning=st.reasoning, content=st.content, finish_reason=st.finish,
                          tool_calls=st.calls(), latency_s=latency, request=req, **usage)
        if st.stop is not None:
            comp.finish_reason = LOOP_STOP
            comp.stop = {**st.stop, "at_tokens": comp.completion_tokens}
            if st.id:
                comp.stop.update(aborted=await self.abort(str(st.id).removeprefix("chatcmpl-")))
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
            lps = logprob_entries(GenerateAnswer.read(data).meta().input_token_logprobs, "input_token_logprobs")
        except BadResponse:
            return None
        return [e[0] for e in lps]

