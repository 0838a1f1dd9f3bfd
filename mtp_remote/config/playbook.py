"""Playbook models: the experiment an operator writes in ``playbooks/*.yaml`` (profiles, prompts, sampling, compare,
timeouts, mitigations), validated at the edge by :func:`load_playbook`."""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_serializer, model_validator

from .shapes import (
    ReplaySource,
    check_extra_body,
    check_messages,
    last_user_text,
    read_prompt_file,
    replay_prompts,
)
from .endpoints import check_url
from .validation import (
    ENV_NAME,
    MAX_SAMPLES,
    check_flags,
    load_model,
    split_flags,
    StrictModel,
    WithEnv,
    WithFlags,
    check_name,
)


class AttachConfig(StrictModel):
    """An endpoint already serving (attached): never launched, signalled or stopped by mtp-remote, no host lock
    for it. ``url``: its base URL, reached directly from the driver; ``port``: a port on the host, reached
    through the host's SSH tunnel (127.0.0.1 there). Its flags and model are read from ``/server_info`` and
    ``/get_model_info``."""

    url: str | None = Field(None, description="Base URL reached directly (http:// or https://)")
    port: int | None = Field(None, ge=1, le=65535, description="Port on the host, reached through its SSH tunnel")
    api_key_env: str | None = Field(None, description="Environment variable (on the driver) holding the "
                                                      "endpoint's API key, sent as a Bearer token")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return check_url(v, "attach.url") if v is not None else v

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        return check_name(v, "attach.api_key_env", ENV_NAME) if v is not None else v

    @model_validator(mode="after")
    def _one(self) -> AttachConfig:
        if (self.url is None) == (self.port is None):
            raise ValueError("attach: give url (reached directly) or port (on the host, through its SSH tunnel)")
        return self

    @property
    def where(self) -> str:
        """``http://...`` or ``host port N`` (for messages)."""
        return self.url if self.url is not None else f"host port {self.port}"


class ProfileConfig(WithEnv, WithFlags):
    """One server configuration: the playbook's base flags plus these, or (``attach``) an endpoint already
    serving, whose flags are read from it."""

    flags: list[str] = Field(default_factory=list, description="Extra SGLang flags (string or list)")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for this profile")
    image: str | None = Field(None, description="Image this profile's server runs from on a host whose server kind "
                                                "is container (default: the host's server.image)")
    description: str = ""
    attach: AttachConfig | None = Field(
        None, description="An endpoint already serving instead of a launch (no flags or env then: they are read "
                          "from its /server_info); never launched, signalled or stopped")

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict[str, Any]:
        """``attach`` only when set: a launched profile dumps as before it (a run recorded earlier resumes)."""
        out = handler(self)
        if out.get("attach") is None:
            out.pop("attach", None)
        return out

    @model_validator(mode="after")
    def _attached_has_no_launch(self) -> ProfileConfig:
        if self.attach is not None and (self.flags or self.env):
            raise ValueError("an attached profile has no flags or env: it is not launched (its flags are read "
                             "from its /server_info)")
        return self

    @property
    def speculative(self) -> bool:
        """Whether the flags speculate (an attached profile: False here; its /server_info tells at run time)."""
        return any(f.startswith("--speculative-algo") for f in self.flags)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./:@-]{0,255}", v):
            raise ValueError(f"{v!r} is not an image reference (registry/name:tag or name@sha256:...)")
        return v


class LoadConfig(StrictModel):
    """Bounds on the load sent to attached endpoints (production servers): requests in flight and requests
    started per second. Launched profiles keep ``concurrency``."""

    concurrency: int = Field(2, ge=1, description="Requests in flight on an attached endpoint")
    request_rate: float | None = Field(
        2.0, gt=0, description="Requests started per second on an attached endpoint at most (null: no bound)")


class MitigationConfig(WithFlags):
    """One candidate change for ``mitigate``: flags set on the corrupting profile (replacing the same flag's
    value) and flags removed from it."""

    name: str = Field(..., description="Candidate name (a profile name in the mitigation run)")
    flags: list[str] = Field(default_factory=list, description="SGLang flags to set (string or list)")
    remove: list[str] = Field(default_factory=list, description="SGLang flags to remove from the profile")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v, "mitigation name")


class Prompt(StrictModel):
    """One prompt: a user message (``text``, or ``file``: the message read from a text file), or a whole chat
    request shape (``messages`` with ``tools``, ``chat_template_kwargs``...: ``api: chat`` only). Exactly one of
    ``text``/``file`` or ``messages`` is written; a ``file`` prompt's ``text`` is filled from the file when the
    playbook is loaded (so ``text`` is then its content and ``file`` where it came from)."""

    id: str = Field(..., description="Short stable id, used for pairing and in reports")
    text: str | None = Field(None, description="The user message")
    file: str | None = Field(
        None, description="A text file (path relative to the playbook) whose content is the user message: long "
                          "prompts; its token count plus max_tokens is checked against the server's context length "
                          "before sampling")
    messages: list[dict[str, Any]] | None = Field(
        None, description="A multi-turn conversation sent as is (OpenAI chat messages: roles system, developer, "
                          "user, assistant with optional tool_calls, tool with tool_call_id); api: chat only")
    tools: list[dict[str, Any]] | None = Field(
        None, description="OpenAI tool definitions sent with the request ({type: function, function: {name, "
                          "description, parameters}}); api: chat only")
    chat_template_kwargs: dict[str, Any] | None = Field(
        None, description="Sent as is to the chat template, e.g. {enable_thinking: false}; api: chat only")
    separate_reasoning: bool | None = Field(
        None, description="SGLang's separate_reasoning: false returns the reasoning inside content (the loop "
                          "metrics see it either way); unset: the server's default; api: chat only")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Other request fields sent as is (tool_choice, top_k, stop, "
                                          "response_format...; a replayed request keeps its own here). The "
                                          "sampling grid's fields (temperature, top_p, max_tokens, seed) and "
                                          "stream are the playbook's and are refused here")
    source: str | None = Field(None, description="Where a replayed prompt came from (file#line); set by `replay`")
    expected: str | None = Field(
        None, description="The answer this prompt must give (e.g. \"4\" for \"What is 2+2?\"): a sample is right when "
                          "its answer (after </think>) contains it as whole tokens; accuracy per arm is compared "
                          "(a lossless check, analysis.lossless)")

    @field_validator("messages")
    @classmethod
    def _messages(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        return check_messages(v) if v is not None else v

    @field_validator("extra_body")
    @classmethod
    def _extra(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_extra_body(v)

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> Prompt:
        if self.file is not None and self.text is None:
            base = (info.context or {}).get("base_dir", Path("."))
            self.text = read_prompt_file(base, self.file)
        if (self.text is None) == (self.messages is None):
            raise ValueError(f"prompt {self.id!r}: give exactly one of text, file or messages")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler) -> dict[str, Any]:
        """The request-shape fields only when set: a plain prompt dumps as before them (``id``, ``text``,
        ``expected``), so runs recorded earlier still resume (their fingerprint holds the prompts)."""
        out = handler(self)
        return {k: v for k, v in out.items() if k in ("id", "text", "expected") or v not in (None, {}, [])}

    @property
    def is_shaped(self) -> bool:
        """Whether the request is more than one user message (messages, tools, template kwargs, extra fields)."""
        return bool(self.messages is not None or self.tools or self.chat_template_kwargs is not None
                    or self.separate_reasoning is not None or self.extra_body)

    @property
    def user_text(self) -> str:
        """The text shown for this prompt: ``text``, or the last user message of ``messages``."""
        if self.text is not None:
            return self.text
        return last_user_text(self.messages or [])

    def chat_fields(self) -> dict[str, Any] | None:
        """The ``/v1/chat/completions`` body fields of this prompt beyond the sampling grid (``messages``,
        ``tools``, ``chat_template_kwargs``, ``separate_reasoning``, ``extra_body``), or None for a plain user
        message (:func:`mtp_remote.client.chat_request` builds that one)."""
        if not self.is_shaped:
            return None
        out: dict[str, Any] = dict(self.extra_body)
        out["messages"] = self.messages if self.messages is not None else [{"role": "user", "content": self.text}]
        if self.tools:
            out["tools"] = self.tools
        if self.chat_template_kwargs is not None:
            out["chat_template_kwargs"] = self.chat_template_kwargs
        if self.separate_reasoning is not None:
            out["separate_reasoning"] = self.separate_reasoning
        return out


class CompareConfig(StrictModel):
    alpha: float = Field(0.05, gt=0, lt=1, description="Family-wise error rate of `spec-corrupts-output` (loop and "
                                                        "lossless tests, over the first run and its resumes)")
    margin: float = Field(
        0.05, gt=0, lt=1, description="Loop-rate excess (absolute, spec - baseline) that matters: `healthy` needs "
                                      "the upper confidence bound of the excess below it at every temperature > 0")
    greedy_margin: float = Field(
        0.10, gt=0, lt=1, description="Per-prompt greedy divergence rate (beyond near ties, excess over the A/A arm's) "
                                      "that matters in a plan with no temperature above 0: `healthy` needs its exact "
                                      "upper bound at 1 - alpha below it (0 of 29 distinct prompts bounds it under "
                                      "10 %, 0 of 59 under 5 %)")
    spending: Literal["obrien-fleming", "pocock"] = Field(
        "obrien-fleming", description="Alpha spending over the looks of early stopping (analysis.stopping)")
    judge_speed: bool = Field(
        True, description="Judge tokens/s (`spec-slower`): false on a host whose speed says nothing of a deployment's "
                          "(the CPU test hosts, where SGLang's kernels run interpreted and every verify step costs "
                          "its tokens); the verdict then gives the ratio as not judged")
    calibration: bool = Field(
        False, description="Relaunch the baseline as an A/A arm (profile `<baseline>-aa`, sampled like the baseline) "
                           "to measure this host's greedy divergence, KL floor, run-to-run speed spread and launch "
                           "effect on the loop rate; the near-tie margin, lossless tests and speed verdict then use "
                           "them")
    calibration_concurrency: int | None = Field(
        None, ge=1, description="Requests in flight for the A/A arm; default the baseline's (the A/A arm is run like "
                                "the baseline, so it measures the launch, not a concurrency change)")
    resumes: int = Field(
        3, ge=0, le=6, description="Resumes (`--resume --samples N`) the design allows, at 2x, 4x, 8x ... the first "
                                   "run's samples: the first run leaves 20 % of alpha to them, so any chain of resumes "
                                   "keeps the family-wise error at alpha (0: the first run spends it all). Fixed at the "
                                   "first run (summary.json design)")


class TimeoutsConfig(StrictModel):
    ready_s: float = Field(1200.0, gt=0, description="Seconds to wait for the ready line and /health 200")
    request_s: float = Field(600.0, gt=0, description="Seconds per request")
    stall_s: float = Field(
        300.0, gt=0, description="Seconds without any server log output and without progress on our requests (no "
                                 "response completed, no streamed output grew), while requests are in flight, "
                                 "after which the server counts as hung (SGLang's default --watchdog-timeout is "
                                 "300)")
    term_s: float = Field(60.0, gt=0, description="Seconds after SIGTERM before SIGKILL, whatever the cause")
    drain_s: float = Field(
        30.0, gt=0, description="Seconds a SIGTERM gets to drain in-flight requests before SIGKILL (the smaller of "
                                "this and term_s applies). SGLang's drain has no timeout: a SIGTERM to the process "
                                "group kills the scheduler, so with a request in flight the server logs "
                                "'Gracefully exiting... Remaining number of requests N' every 5 s and never exits")
    gpu_release_s: float = Field(120.0, gt=0, description="Seconds to wait for GPU memory release after exit")


class Playbook(StrictModel):
    """A YAML experiment: base flags, named profiles, prompts, sampling grid, comparison settings."""

    name: str = Field(..., description="Playbook name")
    description: str = ""
    base_flags: list[str] = Field(default_factory=list, description="SGLang flags shared by every profile")
    profiles: dict[str, ProfileConfig] = Field(..., description="Profiles by name")
    baseline: str = Field("baseline", description="The profile without speculation that others are compared to")
    prompts: list[Prompt] = Field(default_factory=list, description="The prompts (at least one, here or from "
                                                                    "`replay`)")
    replay: list[ReplaySource] = Field(
        default_factory=list, description="JSONL files of recorded production chat requests (one OpenAI "
                                          "/v1/chat/completions body a line, as logged), added to the prompts: "
                                          "their messages, tools and other fields are sent as recorded, with the "
                                          "playbook's sampling grid; api: chat only")
    temperatures: list[float] = Field([0.0, 0.7], min_length=1, description="Sampling temperatures")
    samples: int = Field(4, ge=1, le=MAX_SAMPLES, description="Samples per prompt per temperature and profile (T > 0)")
    greedy_samples: int = Field(
        1, ge=1, le=MAX_SAMPLES, description="Samples per prompt at temperature 0: greedy decoding is deterministic, so repeats "
                             "are not independent evidence (raise it only to measure nondeterminism)")
    max_tokens: int = Field(2048, ge=1, le=1 << 24, description="max_tokens / max_new_tokens per request")
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int = Field(1234, description="Base seed; sample i of a prompt uses seed + i in every arm")
    api: Literal["chat", "generate"] = Field("chat", description="/v1/chat/completions or /generate")
    prompt_template: str = Field(
        "{prompt}", description="/generate only: the text sent, with {prompt} replaced by the prompt "
                                "(put the model's chat template here; /generate does not apply one)")
    concurrency: int | None = Field(None, ge=1, description="Requests in flight; default --max-running-requests")
    kl_probe: bool = Field(
        False, description="/generate only: ask for decode logprobs, re-score each output by prefill and report "
                           "the mean k3 KL estimator per sample (a healthy server gives ~0)")
    early_stop: bool = Field(
        False, description="Sample in rounds (one sample per prompt per round) and stop a cell once its "
                           "decision is settled (analysis.stopping); `samples` is then the budget")
    stop_on_loop: bool = Field(
        True, description="Stream each request at T > 0 and stop it once its loop is settled (the escaped-loop "
                          "rule, analysis.settled): the sample's loop label is the same, the rest of its tokens "
                          "are not generated; false (or --no-stop-on-loop) runs every request to its end")
    compare: CompareConfig = Field(default_factory=CompareConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    load: LoadConfig = Field(default_factory=LoadConfig, description="Load bounds for attached endpoints")
    mitigations: list[MitigationConfig] = Field(
        default_factory=list, description="Candidate changes `mitigate` tries first, before its built-in list")

    @field_validator("base_flags", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return split_flags(v)

    @field_validator("base_flags")
    @classmethod
    def _owned(cls, v: list[str]) -> list[str]:
        return check_flags(v)

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
        return v

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Playbook:
        base = (info.context or {}).get("base_dir", Path("."))
        for src in self.replay:  # once: a playbook re-validated from its dump holds the replayed prompts already
            if not any(p.source and p.source.startswith(f"{src.path}#") for p in self.prompts):
                for d in replay_prompts(base, src):
                    try:
                        self.prompts.append(Prompt.model_validate(d))
                    except ValidationError as e:
                        problem = e.errors()[0]["msg"].removeprefix("Value error, ")
                        raise ValueError(f"replay {d['source']}: {problem}") from None
        if not self.prompts:
            raise ValueError("prompts: give at least one prompt (or a `replay` file)")
        shaped = [p.id for p in self.prompts if p.is_shaped]
        if shaped and self.api != "chat":
            raise ValueError(f"prompts {shaped[:5]} have messages, tools or chat fields: they need api: chat "
                             f"(/generate takes a templated text)")
        if self.baseline not in self.profiles:
            raise ValueError(f"baseline {self.baseline!r} is not a profile; choose one of {sorted(self.profiles)}")
        if self.profiles[self.baseline].speculative:
            raise ValueError(f"baseline profile {self.baseline!r} must not have --speculative-* flags")
        for name in self.profiles:
            check_name(name, "profile name")
        if self.kl_probe and self.api != "generate":
            raise ValueError("kl_probe needs api: generate (chat responses carry no token logprobs here)")
        if "{prompt}" not in self.prompt_template:
            raise ValueError("prompt_template must contain {prompt}")
        ids = [p.id for p in self.prompts]
        if len(set(ids)) != len(ids):
            raise ValueError("prompt ids must be unique")
        return self

    @property
    def think_opened_by_prompt(self) -> bool:
        """True when /generate's prompt template opens the think block itself (Qwen3 templates end in
        ``<think>``): outputs then hold only the reasoning's inside and, if it closed, ``</think>``."""
        tail = self.prompt_template.split("{prompt}", 1)[1]
        return self.api == "generate" and "<think>" in tail and "</think>" not in tail

    def samples_at(self, temperature: float) -> int:
        """Samples per prompt at ``temperature``: ``greedy_samples`` at 0, ``samples`` above."""
        return self.greedy_samples if temperature == 0 else self.samples

    @property
    def attached(self) -> dict[str, AttachConfig]:
        """Profiles that are attached endpoints: name -> where."""
        return {n: p.attach for n, p in self.profiles.items() if p.attach is not None}

    def profile_order(self) -> list[str]:
        """Baseline first, then the others in file order."""
        return [self.baseline] + [p for p in self.profiles if p != self.baseline]

    def max_running_requests(self) -> int:
        """--max-running-requests from the base flags, or 16."""
        flags = self.base_flags
        for i, f in enumerate(flags):
            if f == "--max-running-requests" and i + 1 < len(flags):
                return int(flags[i + 1])
            if f.startswith("--max-running-requests="):
                return int(f.split("=", 1)[1])
        return 16


def load_playbook(path: str | Path) -> Playbook:
    """Read a playbook YAML; prompts' ``file`` and ``replay`` files are read relative to its directory. Raises
    ConfigError with file and field on any problem."""
    return load_model(path, Playbook, "name, profiles, prompts, ...", context={"base_dir": Path(path).parent})
