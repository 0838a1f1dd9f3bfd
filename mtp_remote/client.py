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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


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


def _join_reasoning(reasoning: str | None, content: str | None) -> str:
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
    if isinstance(fr, dict):
        return fr.get("type")
    return fr


class ServerClient:
    """Async client for one server base URL. Use as ``async with ServerClient(url) as sc:``, one per profile.

    ``timeout_s`` bounds each request (seconds); ``api_key`` is sent as a Bearer token; ``max_connections`` sizes
    the keep-alive pool (size it to the concurrency: through the SSH tunnel each connection is one channel)."""

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, api_key: str | None = None,
                 max_connections: int = 64):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
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
        """``/server_info`` JSON ({} when unavailable)."""
        try:
            r = await self._client.get("/server_info", timeout=10.0)
            return r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
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
        """POST JSON; (response JSON, wall seconds, error text or None). A failed request is data, not an
        exception."""
        t0 = time.perf_counter()
        try:
            r = await self._client.post(path, json=body)
            if r.status_code != 200:
                return {}, time.perf_counter() - t0, f"HTTP {r.status_code}: {r.text[:300]}"
            return r.json(), time.perf_counter() - t0, None
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
        choice = (data.get("choices") or [{}])[0]
        msg = choice.get("message") or {}
        usage = data.get("usage") or {}
        reasoning, content = msg.get("reasoning_content"), msg.get("content")
        calls = tool_calls_of(msg.get("tool_calls"))
        details = usage.get("completion_tokens_details") or {}
        return Completion(
            text=with_tool_calls(_join_reasoning(reasoning, content if content or not calls else ""), calls),
            reasoning=reasoning, content=content, tool_calls=calls,
            finish_reason=_finish(choice.get("finish_reason")), prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            reasoning_tokens=usage.get("reasoning_tokens", details.get("reasoning_tokens")),
            latency_s=latency, raw_meta={k: v for k, v in data.items() if k not in ("choices",)}, request=req)

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
        meta = data.get("meta_info") or {}
        comp = Completion(
            text=data.get("text", ""), finish_reason=_finish(meta.get("finish_reason")),
            prompt_tokens=meta.get("prompt_tokens", 0), completion_tokens=meta.get("completion_tokens", 0),
            latency_s=latency, spec_verify_ct=meta.get("spec_verify_ct"),
            spec_accept_length=meta.get("spec_accept_length"),
            output_ids=data.get("output_ids") or meta.get("output_ids"),
            raw_meta={k: v for k, v in meta.items() if not k.endswith("logprobs")}, request=req)
        if return_logprob or top2:
            out_lp = meta.get("output_token_logprobs") or []
            comp.output_logprobs = [e[0] for e in out_lp]
            comp.output_ids = comp.output_ids or [e[1] for e in out_lp]
            comp.prompt_ids = [e[1] for e in meta.get("input_token_logprobs") or []]
            tops = meta.get("output_top_logprobs")
            if tops:
                comp.top2_margins = [(t[0][0] - t[1][0]) if t and len(t) > 1 else float("inf") for t in tops]
        return comp

    async def _stream(self, path: str, body: dict, on_event: Callable[[dict], bool]) -> tuple[float, str | None]:
        """POST ``body`` with ``stream``; feed each server-sent event's JSON to ``on_event`` until it returns
        True (then the stream is closed: the connection is dropped, not read to the end) or ``[DONE]``.
        Returns (wall seconds, error text or None)."""
        t0 = time.perf_counter()
        try:
            async with self._client.stream("POST", path, json={**body, "stream": True}) as r:
                if r.status_code != 200:
                    text = (await r.aread()).decode(errors="replace")
                    return time.perf_counter() - t0, f"HTTP {r.status_code}: {text[:300]}"
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    event = json.loads(payload)
                    if isinstance(event, dict) and "error" in event and len(event) == 1:
                        err = event["error"]
                        return time.perf_counter() - t0, str(err.get("message") if isinstance(err, dict) else err)
                    if on_event(event):
                        break
            return time.perf_counter() - t0, None
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
            ids = event.get("output_ids")
            meta = event.get("meta_info") or {}
            if ids is not None:  # cumulative, or (``--stream-output``) this event's ids only: fewer than counted
                n = meta.get("completion_tokens")
                state["ids"] = state["ids"] + list(ids) if n is not None and len(ids) < n else list(ids)
            hit = watch(event.get("text", ""), state["ids"] if ids is not None else None)
            if hit is not None:
                state["stop"] = hit
                return True
            return False

        req = {"endpoint": "/generate", "body": {"text": text, "sampling_params": sp, "stream": True}}
        latency, error = await self._stream("/generate", {"text": text, "sampling_params": sp}, on_event)
        if error:
            return Completion(latency_s=latency, error=error, request=req)
        meta = last.get("meta_info") or {}
        ids = state["ids"] or None
        comp = Completion(
            text=last.get("text", ""), finish_reason=_finish(meta.get("finish_reason")),
            prompt_tokens=meta.get("prompt_tokens", 0),
            completion_tokens=len(ids) if ids is not None else meta.get("completion_tokens", 0),
            latency_s=latency, spec_verify_ct=meta.get("spec_verify_ct"),
            spec_accept_length=meta.get("spec_accept_length"), output_ids=ids,
            raw_meta={k: v for k, v in meta.items() if not k.endswith("logprobs")}, request=req)
        if state["stop"] is not None:
            comp.finish_reason = LOOP_STOP
            comp.stop = {**state["stop"], "at_tokens": comp.completion_tokens}
            if meta.get("id"):
                comp.stop["aborted"] = await self.abort(str(meta["id"]))
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
            return with_tool_calls(_join_reasoning(st["r"], st["c"] if st["c"] or not calls else ""), calls)

        def on_event(event: dict) -> bool:
            st["id"] = st["id"] or event.get("id")
            if event.get("usage"):
                st["usage"] = event["usage"]
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content"):
                    st["r"] = (st["r"] or "") + delta["reasoning_content"]
                if delta.get("content"):
                    st["c"] = (st["c"] or "") + delta["content"]
                for tc in delta.get("tool_calls") or []:  # fragments by index: name once, arguments in pieces
                    call = st["calls"].setdefault(tc.get("index", 0), {"function": {"name": "", "arguments": ""}})
                    fn = tc.get("function") or {}
                    call["function"]["name"] += fn.get("name") or ""
                    call["function"]["arguments"] += fn.get("arguments") or ""
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
        usage = st["usage"]
        details = usage.get("completion_tokens_details") or {}
        comp = Completion(
            text=text_so_far(), reasoning=st["r"], content=st["c"], finish_reason=st["finish"],
            tool_calls=tool_calls_of([st["calls"][i] for i in sorted(st["calls"])]),
            prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0),
            reasoning_tokens=usage.get("reasoning_tokens", details.get("reasoning_tokens")), latency_s=latency,
            request=req)
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
        try:
            r = await self._client.post("/generate", json=body)
            if r.status_code != 200:
                return None
            lps = (r.json().get("meta_info") or {}).get("input_token_logprobs") or []
        except (httpx.HTTPError, ValueError):
            return None
        return [e[0] for e in lps]
