"""The simulated engine's OpenAI-compatible ``/v1/chat/completions`` (SGLang's shapes): the chat template (Qwen's
ChatML, with tools, tool turns and ``enable_thinking``), the context-length refusal, the ``reasoning_content`` split
of ``--reasoning-parser``, and — with ``tools`` in the request and ``--tool-call-parser`` on the server — the
answer returned as a tool call (whole, or streamed as argument fragments).
"""

from __future__ import annotations

import json

from mtp_remote.sim.engine import Request
from mtp_remote.sim.handlers import BadRequest, _start, abort_if_gone, now, sampling_params, sse, visible_text
from mtp_remote.sim.tokens import THINK_CLOSE


def _content(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def chat_prompt(messages: list[dict], tools: list | None = None, template_kwargs: dict | None = None) -> str:
    """Qwen3's ChatML template with the generation prompt (``<|im_start|>assistant\\n``): ``tools`` in a system
    block (``<tools>``), an assistant's ``tool_calls`` as ``<tool_call>`` blocks, a tool turn as a user turn
    holding ``<tool_response>``, earlier turns' reasoning dropped; ``enable_thinking: false`` in
    ``template_kwargs`` closes an empty think block after the generation prompt."""
    parts = []
    if tools:
        listed = "\n".join(json.dumps(t, sort_keys=True) for t in tools)
        system = ""
        if messages and messages[0].get("role") in ("system", "developer"):
            system, messages = _content(messages[0].get("content")) + "\n\n", messages[1:]
        parts.append(f"<|im_start|>system\n{system}# Tools\n\n<tools>\n{listed}\n</tools><|im_end|>\n")
    for m in messages:
        role, content = m.get("role", "user"), _content(m.get("content"))
        if role == "tool":
            role, content = "user", f"<tool_response>\n{content}\n</tool_response>"
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {} if isinstance(call, dict) else {}
            content += f"\n<tool_call>\n{json.dumps({'name': fn.get('name'), 'arguments': fn.get('arguments')})}" \
                       f"\n</tool_call>"
        parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    out = "".join(parts) + "<|im_start|>assistant\n"
    if (template_kwargs or {}).get("enable_thinking") is False:
        out += "<think>\n\n</think>\n\n"
    return out


def tool_call_of(srv, body: dict, rid: str) -> dict | None:
    """The tool call the simulated model makes: with ``tools`` in the request, a ``--tool-call-parser`` on the
    server and ``tool_choice`` not ``none``, the answer becomes the arguments of a call to the first tool
    (``{"answer": <answer text>}``), so a loop in the answer is a loop in the tool call's arguments."""
    tools = body.get("tools") or []
    if not tools or not srv.args.tool_call_parser or body.get("tool_choice") == "none":
        return None
    fn = (tools[0] or {}).get("function") or {}
    return {"id": f"call_{rid}", "type": "function", "function": {"name": fn.get("name") or "tool", "arguments": ""}}


def split_reasoning(text: str) -> tuple[str | None, str | None]:
    """(reasoning_content, content) as SGLang's qwen3 reasoning parser splits a completion."""
    if "<think>" not in text and "</think>" not in text:
        return None, text
    body = text.split("<think>", 1)[1] if "<think>" in text else text
    if "</think>" not in body:
        return body.strip(), None
    r, c = body.split("</think>", 1)
    return r.strip(), c.strip()


def _chat_request(srv, body: dict) -> Request:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    ids = srv.vocab.encode(chat_prompt(msgs, tools, body.get("chat_template_kwargs")))
    ctx = srv.args.context_length
    if len(ids) >= ctx:  # SGLang's TokenizerManager._validate_one_request
        raise BadRequest(f"The input ({len(ids)} tokens) is longer than the model's context length ({ctx} tokens).")
    mx = body.get("max_completion_tokens") or body.get("max_tokens")
    if mx is not None and len(ids) + int(mx) >= ctx:
        raise BadRequest(f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You "
                         f"requested a total of {len(ids) + int(mx)} tokens: {len(ids)} tokens from the input "
                         f"messages and {mx} tokens for the completion. Please reduce the number of tokens in the "
                         f"input messages or the completion to fit within the limit.")
    d = {"temperature": body.get("temperature"), "top_p": body.get("top_p"), "top_k": body.get("top_k"),
         "max_new_tokens": mx, "stop": body.get("stop"), "sampling_seed": body.get("seed"),
         "ignore_eos": body.get("ignore_eos", False), "stop_token_ids": body.get("stop_token_ids")}
    sp = sampling_params(d, max(srv.args.context_length - len(ids), 1))
    return _start(srv, ids, sp, bool(body.get("stream")))


def _reasoning_tokens(req: Request) -> int:
    ids = req.seq.output_ids
    return ids.index(THINK_CLOSE) + 1 if THINK_CLOSE in ids else len(ids)


def _finish(req: Request) -> tuple[str | None, object]:
    fr = req.seq.finish_reason
    if not fr:
        return None, None
    return ("length" if fr["type"] == "length" else "stop"), fr.get("matched")


async def chat(srv, body: dict) -> tuple[int, dict]:
    """``POST /v1/chat/completions`` (non-streaming)."""
    try:
        req = _chat_request(srv, body)
    except BadRequest as e:
        return 400, {"object": "error", "message": str(e), "type": "BadRequestError", "code": 400}
    await req.done.wait()
    text = visible_text(srv, req.seq.output_ids, req.seq.finish_reason)
    use_parser = srv.args.reasoning_parser and body.get("separate_reasoning", True)
    reasoning, content = split_reasoning(text) if use_parser else (None, text)
    reason, matched = _finish(req)
    call = tool_call_of(srv, body, req.rid) if content is not None else None
    if call is not None:
        call["function"]["arguments"] = json.dumps({"answer": content})
        content, reason = None, ("tool_calls" if reason == "stop" else reason)
    n, p = len(req.seq.output_ids), len(req.prompt_ids)
    rt = _reasoning_tokens(req) if srv.args.reasoning_parser else 0
    return 200, {
        "id": f"chatcmpl-{req.rid}", "object": "chat.completion", "created": now(),
        "model": body.get("model") or srv.args.served_model_name,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content,
                                             "reasoning_content": reasoning,
                                             "tool_calls": [call] if call is not None else None},
                     "logprobs": None, "finish_reason": reason, "matched_stop": matched}],
        "usage": {"prompt_tokens": p, "total_tokens": p + n, "completion_tokens": n,
                  "prompt_tokens_details": None, "reasoning_tokens": rt,
                  "completion_tokens_details": {"reasoning_tokens": rt}},
        "metadata": {"weight_version": "default"}}


async def chat_stream(srv, body: dict):
    """``POST /v1/chat/completions`` with ``stream``: OpenAI chunks with content/reasoning deltas."""
    try:
        req = _chat_request(srv, body)
    except BadRequest as e:
        yield sse({"object": "error", "message": str(e), "type": "BadRequestError", "code": 400})
        return
    cid, model = f"chatcmpl-{req.rid}", body.get("model") or srv.args.served_model_name
    use_parser = srv.args.reasoning_parser and body.get("separate_reasoning", True)

    def chunk(delta: dict, reason=None, matched=None) -> str:
        return sse({"id": cid, "object": "chat.completion.chunk", "created": now(), "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason,
                                 "matched_stop": matched}]})

    options = body.get("stream_options") or {}
    continuous = bool(options.get("include_usage") and options.get("continuous_usage_stats"))

    def usage() -> dict:
        n, p = len(req.seq.output_ids), len(req.prompt_ids)
        return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n,
                "reasoning_tokens": _reasoning_tokens(req) if srv.args.reasoning_parser else 0}

    yield chunk({"role": "assistant", "content": ""})
    call = tool_call_of(srv, body, req.rid)
    sent_r, sent_c, closed = "", "", False
    try:
        while True:
            await req.updates.get()
            finished = req.seq.finished  # before the yield: the engine steps on while the chunk is sent
            text = visible_text(srv, req.seq.output_ids, req.seq.finish_reason)
            r, c = split_reasoning(text) if use_parser else (None, text)
            closed = closed or c is not None
            r, c = r or "", c or ""
            delta = {}
            if r[len(sent_r):]:
                delta["reasoning_content"] = r[len(sent_r):]
            if c[len(sent_c):]:
                delta.update(_call_delta(call, sent_c, c[len(sent_c):]) if call else {"content": c[len(sent_c):]})
            sent_r, sent_c = r, c
            if finished and call and closed:  # the call's arguments end (or the whole call, for an empty answer)
                delta.setdefault("tool_calls", []).extend(_call_delta(call, sent_c, None)["tool_calls"])
            if delta:
                out = json.loads(chunk(delta)[6:])
                if continuous:  # SGLang: usage on every chunk with ``continuous_usage_stats``
                    out["usage"] = usage()
                yield sse(out)
            if finished:
                break
    finally:
        abort_if_gone(srv, req)
    reason, matched = _finish(req)
    if call and closed and reason == "stop":
        reason = "tool_calls"
    yield chunk({}, reason, matched)
    if options.get("include_usage"):
        yield sse({"id": cid, "object": "chat.completion.chunk", "created": now(), "model": model, "choices": [],
                   "usage": usage()})
    yield "data: [DONE]\n\n"


def _call_delta(call: dict, sent: str, piece: str | None) -> dict:
    """The ``tool_calls`` delta of a streamed answer turned tool call (:func:`tool_call_of`): the call's id, name
    and the arguments' opening with the first piece, the piece JSON-escaped after, the closing with ``None``."""
    opening = not sent and not call.get("opened")
    if piece is None:
        frag = ('{"answer": "' if opening else "") + '"}'
    else:
        frag = ('{"answer": "' if opening else "") + json.dumps(piece)[1:-1]
    d: dict = {"index": 0, "function": {"arguments": frag}}
    if opening:
        call["opened"] = True
        d.update(id=call["id"], type="function")
        d["function"]["name"] = call["function"]["name"]
    return {"tool_calls": [d]}
