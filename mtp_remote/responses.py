"""SGLang's HTTP answers, checked: the request bodies the tool sends and the :class:`Completion` made of what comes
back (no I/O here; :mod:`mtp_remote.client` sends and reads).

Every field read from a server is checked for its type and range (:func:`parse_json` refuses NaN/Infinity and
JSON nested deeper than :data:`MAX_JSON_DEPTH`; :func:`as_count`, :func:`opt_num`, ... refuse a list where a count
goes): a malformed answer raises :class:`BadResponse`, which the client turns into that request's ``error`` — one
bad response is one failed sample, never a lost run (issue 33). Shapes follow SGLang 0.5.x: OpenAI chat
completions (``choices[0].message.{content,reasoning_content,tool_calls}``, ``usage``) and ``/generate``
(``text``, ``meta_info.{completion_tokens, spec_verify_ct, output_token_logprobs, ...}``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

#: The largest response body (or one streamed event) read, in bytes: a server that sends more is that request's
#: error (a 50 MB response held 5.9 GB of RSS before this bound).
MAX_RESPONSE_BYTES = 32 << 20
#: The deepest nesting of ``[`` / ``{`` accepted in a response (SGLang's are a few levels deep).
MAX_JSON_DEPTH = 64


class BadResponse(ValueError):
    """A response that is not what the API promises (not JSON, NaN, too deep or too big, a field of the wrong
    type): the error of that one request, never the run's."""


def no_constant(name: str) -> Any:
    raise BadResponse(f"{name} in the response (not a JSON number)")


def depth_ok(value: Any) -> bool:
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
        value = json.loads(raw, parse_constant=no_constant)
    except BadResponse:
        raise
    except RecursionError:
        raise BadResponse(f"{what} is nested too deeply") from None
    except ValueError as e:
        raise BadResponse(f"{what} is not JSON ({e})") from None
    if not depth_ok(value):
        raise BadResponse(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def kind_of(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(v), type(v).__name__)


def as_object(v: Any, name: str) -> dict:
    """An object field (absent: {})."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BadResponse(f"{name} is {kind_of(v)}, not an object")
    return v


def opt_int(v: Any, name: str) -> int | None:
    """A count (absent: None): an int, not a bool, not negative."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise BadResponse(f"{name} is {v!r}, not a count")
    return v


def as_count(v: Any, name: str) -> int:
    return opt_int(v, name) or 0


def opt_num(v: Any, name: str) -> float | None:
    """A finite number (absent: None)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise BadResponse(f"{name} is {v!r}, not a finite number")
    return v


def opt_str(v: Any, name: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise BadResponse(f"{name} is {kind_of(v)}, not a string")


def as_ids(v: Any, name: str) -> list[int] | None:
    """Token ids (absent: None)."""
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise BadResponse(f"{name} is not a list of token ids")
    return v


def logprob_entries(v: Any, name: str) -> list[list]:
    """SGLang's ``[[logprob, token id, ...], ...]`` (the logprob None for a prompt's first token)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadResponse(f"{name} is {kind_of(v)}, not a list")
    for e in v:
        if not isinstance(e, list) or len(e) < 2 or not isinstance(e[1], int) or isinstance(e[1], bool):
            raise BadResponse(f"{name} holds {kind_of(e)} {str(e)[:40]}, not [logprob, token id]")
        if e[0] is not None:
            opt_num(e[0], name)
    return v


class _Refused(Exception):
    """Carries a :class:`BadResponse` out of a field check through pydantic (which would wrap a ValueError)."""


def checked(check: Callable[[Any, str], Any], name: str) -> BeforeValidator:
    """A field read through ``check(value, name)`` (one of the checks above; its BadResponse is the answer's)."""
    def run(v: Any) -> Any:
        try:
            return check(v, name)
        except BadResponse as e:
            raise _Refused(e) from None
    return BeforeValidator(run)


class Answer(BaseModel):
    """A JSON object of SGLang's answers as a model: the fields the tool reads, each checked; the others kept."""

    model_config = ConfigDict(extra="allow")

    @classmethod
    def read(cls, value: Any, name: str = "the response"):
        """``value`` (an object; absent: {}) as this model; raises :class:`BadResponse` naming the bad field."""
        try:
            return cls.model_validate(as_object(value, name))
        except _Refused as e:
            raise e.args[0] from None
        except ValidationError as e:
            raise BadResponse(f"{name}: {e}") from None


def _finish(v: Any, _name: str) -> str | None:
    return finish_reason_of(v)


class FinishReason(Answer):
    """SGLang's ``finish_reason`` object: ``{"type": "stop" | "length" | "abort", ...}``."""

    type: Annotated[str | None, checked(opt_str, "finish_reason.type")] = None


class MetaInfo(Answer):
    """``/generate``'s ``meta_info`` (SGLang 0.5.x ``tokenizer_manager``): token counts, finish reason, the
    speculative verify steps and acceptance length, output ids, and (when asked) the logprob lists — those
    are checked where they are read (:func:`logprob_entries`)."""

    finish_reason: Annotated[str | None, checked(_finish, "finish_reason")] = None
    prompt_tokens: Annotated[int, checked(as_count, "meta_info.prompt_tokens")] = 0
    completion_tokens: Annotated[int, checked(as_count, "meta_info.completion_tokens")] = 0
    spec_verify_ct: Annotated[int | None, checked(opt_int, "meta_info.spec_verify_ct")] = None
    spec_accept_length: Annotated[int | float | None, checked(opt_num, "meta_info.spec_accept_length")] = None
    output_ids: Annotated[list[int] | None, checked(as_ids, "meta_info.output_ids")] = None
    output_token_logprobs: Any = None
    input_token_logprobs: Any = None
    output_top_logprobs: Any = None
    id: Any = None


class GenerateAnswer(Answer):
    """A ``/generate`` answer or one streamed event: ``text`` (cumulative when streamed), ``output_ids``,
    ``meta_info`` (:class:`MetaInfo`)."""

    meta_info: Annotated[dict, checked(as_object, "meta_info")] = {}
    text: Annotated[str | None, checked(opt_str, "text")] = None
    output_ids: Annotated[list[int] | None, checked(as_ids, "output_ids")] = None

    def meta(self) -> MetaInfo:
        return MetaInfo.read(self.meta_info, "meta_info")


def _calls(v: Any, name: str) -> list | None:
    if v is not None and not isinstance(v, list):
        raise BadResponse(f"{name} is {kind_of(v)}, not a list")
    return v


class ChatMessage(Answer):
    """``choices[0].message`` of a chat completion: ``content``, ``reasoning_content`` (a reasoning parser's
    split) and ``tool_calls`` (OpenAI's ``[{"function": {"name", "arguments"}}]``)."""

    reasoning_content: Annotated[str | None, checked(opt_str, "message.reasoning_content")] = None
    content: Annotated[str | None, checked(opt_str, "message.content")] = None
    tool_calls: Annotated[list | None, checked(_calls, "message.tool_calls")] = None


class ChatChoice(Answer):
    """One choice of a chat completion: its ``message`` and ``finish_reason``."""

    message: Annotated[dict, checked(as_object, "message")] = {}
    finish_reason: Any = None


class ChatAnswer(Answer):
    """A ``/v1/chat/completions`` answer: ``choices`` and ``usage`` (the rest is kept as the raw meta)."""

    choices: Any = None
    usage: Any = None


class UsageDetails(Answer):
    """``usage.completion_tokens_details``: where OpenAI puts ``reasoning_tokens``."""

    reasoning_tokens: Annotated[int | None, checked(opt_int, "usage.reasoning_tokens")] = None


class Usage(Answer):
    """OpenAI ``usage``: prompt and completion tokens, and the reasoning tokens (SGLang's own field, else
    ``completion_tokens_details``)."""

    prompt_tokens: Annotated[int, checked(as_count, "usage.prompt_tokens")] = 0
    completion_tokens: Annotated[int, checked(as_count, "usage.completion_tokens")] = 0
    reasoning_tokens: Annotated[int | None, checked(opt_int, "usage.reasoning_tokens")] = None
    completion_tokens_details: Annotated[dict, checked(as_object, "usage.completion_tokens_details")] = {}


class ToolFunction(Answer):
    """A tool call's ``function``: its ``name`` and ``arguments`` (a JSON string as the server sent it; streamed,
    a fragment)."""

    name: Annotated[str | None, checked(opt_str, "tool_calls.function.name")] = None
    arguments: Annotated[str | None, checked(opt_str, "tool_calls.function.arguments")] = None


class ToolCallDelta(Answer):
    """A streamed tool-call fragment: its ``index`` and the ``function`` pieces."""

    index: Annotated[int | None, checked(opt_int, "tool_calls.index")] = None
    function: Annotated[dict, checked(as_object, "tool_calls.function")] = {}


class ChatDelta(Answer):
    """A streamed chat choice's ``delta``: reasoning and content pieces, tool-call fragments."""

    reasoning_content: Annotated[str | None, checked(opt_str, "delta.reasoning_content")] = None
    content: Annotated[str | None, checked(opt_str, "delta.content")] = None
    tool_calls: Any = None


class ChunkChoice(Answer):
    """One choice of a streamed chat chunk: its ``delta`` and ``finish_reason``."""

    delta: Annotated[dict, checked(as_object, "delta")] = {}
    finish_reason: Any = None


class ChatChunk(Answer):
    """A streamed chat chunk: the completion ``id``, ``usage`` (with ``continuous_usage_stats``), ``choices``."""

    id: Annotated[str | None, checked(opt_str, "id")] = None
    usage: Any = None
    choices: Any = None


class StreamError(Answer):
    """A streamed error event's ``error``: ``{"message": ...}``."""

    message: Any = None


class InternalState(Answer):
    """One scheduler's ``internal_states`` entry of ``/server_info``: ``avg_spec_accept_length``, the server-wide
    average acceptance length (all traffic)."""

    avg_spec_accept_length: Any = None


class ServerInfo(Answer):
    """``/server_info`` (``/get_server_info``): the server arguments and internal state; the tool reads the
    ``context_length`` (null when the server took the model's own), the ``version``, the
    ``speculative_algorithm`` and the schedulers' ``internal_states``."""

    context_length: Any = None
    version: Any = None
    speculative_algorithm: Any = None
    internal_states: Any = None
    model_path: Any = None
    simulated: Any = None  # the simulated engine's own field

    def accept_length(self) -> float | None:
        """The first scheduler's ``avg_spec_accept_length`` (None when it reports none)."""
        first = (self.internal_states or [{}])[0]
        v = InternalState.model_validate(first).avg_spec_accept_length if isinstance(first, dict) else None
        return float(v) if isinstance(v, (int, float)) else None


class ModelInfo(Answer):
    """``/get_model_info``: the served ``model_path`` and the model's ``architectures``."""

    model_path: Any = None
    architectures: Any = None


class ModelCard(Answer):
    """One entry of ``/v1/models``: ``max_model_len`` (tokens)."""

    max_model_len: Any = None


class ModelList(Answer):
    """``/v1/models``: ``data``, a list of :class:`ModelCard`."""

    data: Any = None


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
    string), None when there are none. Raises :class:`BadResponse` for a name or arguments not a string."""
    fns = [ToolFunction.read(ToolCallDelta.read(c, "a tool call").function, "tool_calls.function")
           for c in calls or [] if isinstance(c, dict)]
    return [{"name": f.name or "", "arguments": f.arguments or ""} for f in fns] or None


def with_tool_calls(text: str, calls: list[dict] | None) -> str:
    """``text`` followed by each tool call as the model wrote it (Qwen's ``<tool_call>`` block: name, then the
    arguments as sent), so the loop metrics see tool-call arguments too."""
    for c in calls or []:
        text += f"\n<tool_call>\n{c['name']}\n{c['arguments']}\n</tool_call>"
    return text


def finish_reason_of(fr: Any) -> str | None:
    """A finish reason: SGLang's ``{"type": ...}`` or the OpenAI string."""
    if isinstance(fr, dict):
        return FinishReason.read(fr, "finish_reason").type
    return opt_str(fr, "finish_reason")


def usage_of(v: Any) -> dict:
    """OpenAI ``usage`` -> the Completion's token counts (``prompt_tokens``, ``completion_tokens``,
    ``reasoning_tokens``), each checked."""
    usage = Usage.read(v, "usage")
    details = UsageDetails.read(usage.completion_tokens_details, "usage.completion_tokens_details")
    reasoning = usage.reasoning_tokens if "reasoning_tokens" in usage.model_fields_set else details.reasoning_tokens
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "reasoning_tokens": reasoning}


def chat_completion(data: dict, latency: float, req: dict) -> Completion:
    """A ``/v1/chat/completions`` answer as a Completion; raises :class:`BadResponse` for a field of the wrong
    type."""
    answer = ChatAnswer.read(data)
    choices = answer.choices or [{}]
    if not isinstance(choices, list):
        raise BadResponse(f"choices is {kind_of(choices)}, not a list")
    choice = ChatChoice.read(choices[0], "choices[0]")
    msg = ChatMessage.read(choice.message, "message")
    reasoning, content = msg.reasoning_content, msg.content
    calls = tool_calls_of(msg.tool_calls)
    return Completion(
        text=with_tool_calls(join_reasoning(reasoning, content if content or not calls else ""), calls),
        reasoning=reasoning, content=content, tool_calls=calls,
        finish_reason=finish_reason_of(choice.finish_reason), latency_s=latency,
        raw_meta={k: v for k, v in data.items() if k not in ("choices",)}, request=req, **usage_of(answer.usage))


def generate_completion(data: dict, latency: float, req: dict, *, logprobs: bool) -> Completion:
    """A ``/generate`` answer (or a stream's last event) as a Completion: ``meta_info``'s tokens, finish reason,
    ``spec_verify_ct``; with ``logprobs`` the decode logprobs, prompt ids and top-2 margins. Raises
    :class:`BadResponse` for a field of the wrong type (``meta_info`` a list, a count that is not a count)."""
    answer = GenerateAnswer.read(data)
    meta = answer.meta()
    comp = Completion(
        text=answer.text or "", finish_reason=meta.finish_reason, prompt_tokens=meta.prompt_tokens,
        completion_tokens=meta.completion_tokens, latency_s=latency, spec_verify_ct=meta.spec_verify_ct,
        spec_accept_length=meta.spec_accept_length, output_ids=answer.output_ids or meta.output_ids,
        raw_meta={k: v for k, v in answer.meta_info.items() if not k.endswith("logprobs")}, request=req)
    if logprobs:
        out_lp = logprob_entries(meta.output_token_logprobs, "output_token_logprobs")
        comp.output_logprobs = [e[0] for e in out_lp]
        comp.output_ids = comp.output_ids or [e[1] for e in out_lp]
        comp.prompt_ids = [e[1] for e in logprob_entries(meta.input_token_logprobs, "input_token_logprobs")]
        tops = meta.output_top_logprobs
        if tops:
            if not isinstance(tops, list):
                raise BadResponse(f"output_top_logprobs is {kind_of(tops)}, not a list")
            for t in tops:
                logprob_entries(t, "output_top_logprobs")
            comp.top2_margins = [(t[0][0] - t[1][0]) if t and len(t) > 1 and t[0][0] is not None
                                 and t[1][0] is not None else float("inf") for t in tops]
    return comp
