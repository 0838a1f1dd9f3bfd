"""Playbook models: the experiment an operator writes in ``playbooks/*.yaml`` (profiles, prompts, sampling, compare,
timeouts, mitigations), validated at the edge by :func:`load_playbook`."""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .validation import (
    MAX_SAMPLES,
    _check_flags,
    _load,
    _split_flags,
    _Strict,
    _WithEnv,
    _WithFlags,
    check_name,
)


class ProfileConfig(_WithEnv, _WithFlags):
    """One server configuration: the playbook's base flags plus these."""

    flags: list[str] = Field(default_factory=list, description="Extra SGLang flags (string or list)")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for this profile")
    image: str | None = Field(None, description="Image this profile's server runs from on a host whose server kind "
                                                "is container (default: the host's server.image)")
    description: str = ""

    @property
    def speculative(self) -> bool:
        return any(f.startswith("--speculative-algo") for f in self.flags)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./:@-]{0,255}", v):
            raise ValueError(f"{v!r} is not an image reference (registry/name:tag or name@sha256:...)")
        return v


class MitigationConfig(_WithFlags):
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


class Prompt(_Strict):
    id: str = Field(..., description="Short stable id, used for pairing and in reports")
    text: str = Field(..., description="The user message")
    expected: str | None = Field(
        None, description="The answer this prompt must give (e.g. \"4\" for \"What is 2+2?\"): a sample is right when "
                          "its answer (after </think>) contains it as whole tokens; accuracy per arm is compared "
                          "(a lossless check, analysis.lossless)")


class CompareConfig(_Strict):
    alpha: float = Field(0.05, gt=0, lt=1, description="Family-wise error rate of `spec-corrupts-output` (loop and "
                                                        "lossless tests, over the first run and its resumes)")
    margin: float = Field(
        0.05, gt=0, lt=1, description="Loop-rate excess (absolute, spec - baseline) that matters: `healthy` needs "
                                      "the upper confidence bound of the excess below it at every temperature > 0")
    spending: Literal["obrien-fleming", "pocock"] = Field(
        "obrien-fleming", description="Alpha spending over the looks of early stopping (analysis.stopping)")
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


class TimeoutsConfig(_Strict):
    ready_s: float = Field(1200.0, gt=0, description="Seconds to wait for the ready line and /health 200")
    request_s: float = Field(600.0, gt=0, description="Seconds per request")
    stall_s: float = Field(
        300.0, gt=0, description="Seconds without any server log output, while requests are in flight, after "
                                 "which the server counts as hung (SGLang's default --watchdog-timeout is 300)")
    term_s: float = Field(60.0, gt=0, description="Seconds after SIGTERM before SIGKILL, whatever the cause")
    drain_s: float = Field(
        30.0, gt=0, description="Seconds a SIGTERM gets to drain in-flight requests before SIGKILL (the smaller of "
                                "this and term_s applies). SGLang's drain has no timeout: a SIGTERM to the process "
                                "group kills the scheduler, so with a request in flight the server logs "
                                "'Gracefully exiting... Remaining number of requests N' every 5 s and never exits")
    gpu_release_s: float = Field(120.0, gt=0, description="Seconds to wait for GPU memory release after exit")


class Playbook(_Strict):
    """A YAML experiment: base flags, named profiles, prompts, sampling grid, comparison settings."""

    name: str = Field(..., description="Playbook name")
    description: str = ""
    base_flags: list[str] = Field(default_factory=list, description="SGLang flags shared by every profile")
    profiles: dict[str, ProfileConfig] = Field(..., description="Profiles by name")
    baseline: str = Field("baseline", description="The profile without speculation that others are compared to")
    prompts: list[Prompt] = Field(..., min_length=1)
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
    mitigations: list[MitigationConfig] = Field(
        default_factory=list, description="Candidate changes `mitigate` tries first, before its built-in list")

    @field_validator("base_flags", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_flags(v)

    @field_validator("base_flags")
    @classmethod
    def _owned(cls, v: list[str]) -> list[str]:
        return _check_flags(v)

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
        return v

    @model_validator(mode="after")
    def _check(self) -> Playbook:
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
    """Read a playbook YAML. Raises ConfigError with file and field on any problem."""
    return _load(path, Playbook, "name, profiles, prompts, ...")
