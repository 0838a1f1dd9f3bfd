"""Request parsing and response building for the simulated engine's routes (SGLang's JSON shapes).

``/generate`` (source: sglang ``managers/tokenizer_manager.py`` meta_info): ``{"text", "output_ids",
"meta_info": {"id", "finish_reason": {"type": "stop"|"length", "matched"|"length"}, "prompt_tokens",
"completion_tokens", "cached_tokens", "e2e_latency", ...}}``; on speculative servers also ``spec_verify_ct``,
``spec_accept_length`` (completion_tokens / spec_verify_ct), ``spec_accept_rate`` (accepted drafts / drafted),
``spec_accept_histogram`` (verify steps by tokens committed); with ``return_logprob``
``input_token_logprobs`` / ``output_token_logprobs`` as ``[logprob, token_id, null]``. ``max_new_tokens`` 0
scores the input (prefill) without generating. ``/v1/chat/completions`` (OpenAI's shape with SGLang's
``reasoning_content`` split and ``usage.reasoning_tokens``) is :mod:`mtp_remote.sim.chat`, built on the helpers
here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

from mtp_remote.sim.decode import SamplingParams, score_tokens
from mtp_remote.sim.engine import Request, split_prompt_ids
from mtp_remote.sim.model import ToyModel
from mtp_remote.sim.tokens import ENDOFTEXT, IM_END, IM_START

_HIDDEN = {ENDOFTEXT, IM_START, IM_END}


class BadRequest(ValueError):
    """A request the server rejects with 400."""


def visible_text(srv, ids: list[int], finish_reason: dict | None) -> str:
    """Output text with end-of-sequence tokens skipped and a matched stop string trimmed (SGLang default)."""
    text = srv.vocab.decode([t for t in ids if t not in _HIDDEN])
    if finish_reason and isinstance(finish_reason.get("matched"), str):
        cut = text.find(finish_reason["matched"])
        if cut >= 0:
            text = text[:cut]
    return text


#: The keyword arguments of SGLang 0.5.9's ``SamplingParams.__init__``: any other key in ``sampling_params``
#: (``seed`` is the usual mistake; SGLang's is ``sampling_seed``) makes SGLang raise a TypeError inside the
#: request, answer 500 and log the traceback as ``Exception in ASGI application`` — the server keeps serving.
SGLANG_SAMPLING_KEYS = frozenset((
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
    "no_stop_trim", "custom_params", "stream_interval", "logit_bias", "sampling_seed"))


def check_sampling_keys(d: dict) -> None:
    """Raise SGLang's TypeError for a ``sampling_params`` key its ``SamplingParams`` does not take."""
    for key in d:
        if key not in SGLANG_SAMPLING_KEYS:
            raise TypeError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")


def sampling_params(d: dict, default_max: int) -> SamplingParams:
    """SGLang ``sampling_params`` (or OpenAI fields mapped to them) -> :class:`SamplingParams`."""
    try:
        stop = d.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        mx = d.get("max_new_tokens")
        sp = SamplingParams(
            temperature=float(d.get("temperature", 1.0) if d.get("temperature") is not None else 1.0),
            top_p=float(d.get("top_p", 1.0) if d.get("top_p") is not None else 1.0),
            top_k=int(d.get("top_k", -1) if d.get("top_k") is not None else -1),
            max_new_tokens=int(default_max if mx is None else mx),
            stop=stop, stop_token_ids=list(d.get("stop_token_ids") or []),
            ignore_eos=bool(d.get("ignore_eos", False)),
            seed=None if d.get("sampling_seed") is None else int(d["sampling_seed"]))
    except (TypeError, ValueError) as e:
        raise BadRequest(f"invalid sampling_params: {e}") from e
    if sp.temperature < 0 or not 0 < sp.top_p <= 1 or sp.max_new_tokens < 0:
        raise BadRequest("temperature must be >= 0, top_p in (0, 1], max_new_tokens >= 0")
    return sp


def _start(srv, ids: list[int], sp: SamplingParams, stream: bool) -> Request:
    prompt, replay = split_prompt_ids(ids)
    req = srv.engine.new_request(srv.vocab.decode(prompt), ids, sp, stream=stream)
    model = req.seq.model
    for t in replay:
        req.seq.state = model.step(req.seq.state, t)
    if sp.max_new_tokens == 0:
        req.seq.finish_reason = {"type": "length", "length": 0}
        req.finished_at = time.monotonic()
        req.done.set()
        if stream:
            req.updates.put_nowait(None)
    else:
        srv.engine.submit(req)
    return req


def input_logprobs(srv, ids: list[int], start: int) -> list:
    """``[logprob, id, null]`` for input tokens from ``start``: a healthy prefill of the same model."""
    prompt, replay = split_prompt_ids(ids)
    model = ToyModel.for_prompt(srv.vocab.decode(prompt), srv.vocab, srv.engine.knobs)
    lps: list = ([None] + [-2.0 - (t % 997) / 250.0 for t in prompt[1:]]
                 + score_tokens(model, replay, noise=srv.engine.noise, launch=srv.engine.launch))
    return [[lp, t, None] for lp, t in zip(lps[start:], ids[start:])]


def meta_info(srv, req: Request, return_logprob: bool, logprob_start_len: int) -> dict:
    """SGLang's ``meta_info`` for a finished (or streaming) request."""
    seq = req.seq
    n = len(seq.output_ids)
    end = req.finished_at or time.monotonic()
    meta = {"id": req.rid, "finish_reason": seq.finish_reason, "prompt_tokens": len(req.prompt_ids),
            "weight_version": "default", "completion_tokens": n, "cached_tokens": 0,
            "e2e_latency": round(end - req.created, 6)}
    if srv.engine.spec_steps:
        k = srv.engine.spec_steps
        v = seq.verify_ct
        meta.update(spec_verify_ct=v, spec_accept_length=(n / v) if v else 0.0,
                    spec_accept_rate=((n - v) / (v * k)) if v else 0.0,
                    spec_accept_token_num=max(n - v, 0), spec_draft_token_num=v * k,
                    spec_accept_histogram=list(seq.accept_hist))
    if return_logprob:
        start = logprob_start_len if logprob_start_len >= 0 else max(len(req.prompt_ids) - 1, 0)
        meta["input_token_logprobs"] = input_logprobs(srv, req.prompt_ids, start)
        meta["output_token_logprobs"] = [[lp, t, None] for lp, t in zip(seq.logprobs, seq.output_ids)]
        if seq.top_logprobs:
            meta["output_top_logprobs"] = [[[lp, t, None] for lp, t in pos] for pos in seq.top_logprobs]
    return meta


def _inputs(srv, body: dict) -> list[list[int]]:
    if body.get("input_ids") is not None:
        ids = body["input_ids"]
        return [list(x) for x in ids] if ids and isinstance(ids[0], list) else [list(ids)]
    text = body.get("text")
    if text is None:
        raise BadRequest("Either text or input_ids should be provided.")
    texts = text if isinstance(text, list) else [text]
    return [srv.vocab.encode(t) for t in texts]


async def generate(srv, body: dict) -> tuple[int, object]:
    """``POST /generate`` -> (status, JSON); a list of prompts gives a list of results."""
    try:
        batch = _inputs(srv, body)
        sp_d = body.get("sampling_params") or {}
        check_sampling_keys(sp_d)
        sp = sampling_params(sp_d, 128)
        if body.get("return_logprob"):
            sp.top_logprobs_num = max(0, int(body.get("top_logprobs_num") or 0))
        reqs = [_start(srv, ids, sp, False) for ids in batch]
    except BadRequest as e:
        return 400, {"error": {"message": str(e)}}
    await asyncio.gather(*(r.done.wait() for r in reqs))
    lp, start = bool(body.get("return_logprob")), int(body.get("logprob_start_len", -1))
    outs = [{"text": visible_text(srv, r.seq.output_ids, r.seq.finish_reason),
             "output_ids": list(r.seq.output_ids), "meta_info": meta_info(srv, r, lp, start)} for r in reqs]
    single = not isinstance(body.get("text"), list) and not (
        body.get("input_ids") and isinstance(body["input_ids"][0], list))
    return 200, outs[0] if single else outs


async def generate_stream(srv, body: dict):
    """``POST /generate`` with ``stream``: cumulative ``text`` per event, then ``data: [DONE]``."""
    try:
        ids = _inputs(srv, body)[0]
        req = _start(srv, ids, sampling_params(body.get("sampling_params") or {}, 128), True)
    except BadRequest as e:
        yield sse({"error": {"message": str(e)}})
        return
    lp, start = bool(body.get("return_logprob")), int(body.get("logprob_start_len", -1))
    interval = max(1, int((body.get("sampling_params") or {}).get("stream_interval") or 1))
    sent = 0
    try:
        while True:
            await req.updates.get()
            seq = req.seq
            finished = seq.finished  # before the yield: the engine steps on while the event is sent
            if not finished and len(seq.output_ids) - sent < interval:
                continue  # ``stream_interval``: one event per that many tokens
            sent = len(seq.output_ids)
            yield sse({"text": visible_text(srv, seq.output_ids, seq.finish_reason),
                       "output_ids": list(seq.output_ids),
                       "meta_info": meta_info(srv, req, lp and finished, start)})
            if finished:
                break
    finally:
        abort_if_gone(srv, req)
    yield "data: [DONE]\n\n"


#: Seconds after a streaming client went away before the request is aborted: SGLang 0.5.9's
#: ``TokenizerManager.create_abort_task`` (a background task of the streaming response) sleeps 2 s, then aborts.
ABORT_AFTER_DISCONNECT_S = 2.0


def abort_if_gone(srv, req: Request) -> None:
    """The stream of ``req`` ended (closed by the client, or done): abort it if it is still pending, after
    :data:`ABORT_AFTER_DISCONNECT_S`, as SGLang does (it keeps decoding meanwhile)."""
    if req.seq.finished:
        return
    try:
        asyncio.get_running_loop().call_later(ABORT_AFTER_DISCONNECT_S, srv.engine.abort, req.rid)
    except RuntimeError:  # no loop any more: the server is exiting
        pass


def abort_request(srv, body: dict) -> int:
    """``POST /abort_request`` (``{"rid": ..., "abort_all": bool}``): 200 whether or not the request was
    pending, as SGLang answers."""
    if body.get("abort_all"):
        for r in list(srv.engine.waiting) + list(srv.engine.running):
            srv.engine.abort(r.rid)
    elif body.get("rid"):
        srv.engine.abort(str(body["rid"]))
    return 200


async def health_generate(srv) -> bool:
    """Generate one token through the scheduler; False when it does not finish in time (a hung server), after
    logging SGLang's ``Health check failed`` line (as in ``corpus/logs/l09``)."""
    sp = SamplingParams(temperature=0.0, max_new_tokens=1)
    req = _start(srv, srv.vocab.encode("Health check."), sp, False)
    tic = time.time()
    try:
        await asyncio.wait_for(req.done.wait(), timeout=max(20.0 * srv.scale, 1.0))
        return True
    except asyncio.TimeoutError:
        last = srv.engine.last_output_at or tic
        srv.log.line("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. "
                     f"tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
                     f"last_heartbeat time: {time.strftime('%H:%M:%S', time.localtime(last))}")
        return False


def server_info(srv) -> dict:
    """``/server_info``: server args, ``internal_states`` and version (SGLang's shape)."""
    e, m = srv.engine, srv.mem
    state = {"last_gen_throughput": round(e.last_gen_throughput, 2),
             "memory_usage": {"weight": round(m.weights_gb, 2), "kvcache": round(m.kv_gb, 2),
                              "token_capacity": m.kv_tokens, "graph": round(m.graph_gb, 2)},
             "effective_max_running_requests_per_dp": srv.args.max_running_requests}
    if e.spec_steps and e.avg_spec_accept_length is not None:
        state["avg_spec_accept_length"] = e.avg_spec_accept_length
    info = dataclasses.asdict(srv.args)
    info.update(internal_states=[state], version=srv.version, simulated=True)
    return info


def model_info(srv) -> dict:
    """``/model_info``."""
    arch = "Qwen3_5ForConditionalGeneration" if srv.mem.hybrid else "Qwen3ForCausalLM"
    return {"model_path": srv.args.model_path, "tokenizer_path": srv.args.tokenizer_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
            "has_audio_understanding": False, "model_type": "qwen3_5" if srv.mem.hybrid else "qwen3",
            "architectures": [arch]}


def sse(obj) -> str:
    """One server-sent event as SGLang writes them."""
    return f"data: {json.dumps(obj)}\n\n"


def now() -> int:
    """Unix time in whole seconds (OpenAI ``created``)."""
    return int(time.time())
