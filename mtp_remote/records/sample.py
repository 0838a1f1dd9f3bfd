"""A sample: one request and its response, a line of ``samples.jsonl`` (written by
``experiment.sampling.sample_record``, appended as it arrives)."""

from __future__ import annotations

import json

from .base import Number, Record


class KlProbe(Record):
    """The KL probe of one sample (``kl``): the k3 estimator of decode vs prefill logprobs, in nats per token
    (mean and largest) over ``n_tokens`` tokens."""

    mean_k3: Number | None = None
    max_k3: Number | None = None
    n_tokens: int | None = None
    probe_tokens: int | None = None  # tokens the probe's own request generated (0: the sample itself was probed)


class SampleMetrics(Record):
    """The degeneracy metrics stored with a sample (``analysis.degeneracy.DegeneracyMetrics.to_dict``): the loop
    (kind, unit in tokens, repeats, where it starts and ends), the near-loop, the text's repetition figures and
    the reasoning/answer split. The analysis recomputes them from the text; these are for readers of the file."""

    loop: bool | dict | None = False
    loop_kind: str | None = None
    loop_unit_tokens: int | None = None
    loop_repeats: int | None = None
    loop_start_token: int | None = None
    loop_start_char: int | None = None
    loop_end_token: int | None = None
    loop_fraction: Number | None = None
    near_loop: bool | dict | None = False
    near_loop_unit_tokens: int | None = None
    near_loop_repeats: int | None = None
    near_loop_start_token: int | None = None
    near_loop_start_char: int | None = None
    near_loop_end_token: int | None = None
    near_loop_fraction: Number | None = None
    n_tokens: int | None = None
    seq_rep_4: Number | None = None
    distinct_1: Number | None = None
    distinct_2: Number | None = None
    compression_ratio: Number | None = None
    think_closed: bool | None = None
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    longest_repeated_span: int | None = None


class Sample(Record):
    """One line of ``samples.jsonl``. Where it belongs (profile, temperature, prompt id, sample index, seed), the
    response (text, finish reason, tokens, latency in seconds, ``spec_verify_ct`` and acceptance length when the
    server speculates), ``error`` for a failed request (then no text), its stored ``metrics``, the KL probe
    (``kl``), top-2 logprob margins (T = 0), ``loop_stop`` when we stopped it at its settled loop (the rule, the
    loop, ``at_tokens``, ``saved_tokens``), the ``request`` exactly as sent (``{"endpoint", "body"}``) and a chat
    response's ``tool_calls``. Only ``profile`` is required: a record written by hand (a test, a script) may
    leave out what it does not use."""

    profile: str
    speculative: bool = False
    temperature: Number = 0.0
    prompt_id: str = ""
    sample_index: int = 0
    seed: int | None = None
    api: str | None = None
    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    latency_s: Number | None = None
    spec_verify_ct: int | None = None
    accept_length: Number | None = None
    output_ids: list[int] | None = None
    error: str | None = None
    metrics: SampleMetrics | None = None
    kl: KlProbe | None = None
    think_opened_by_prompt: bool = False
    top2_margins: list[Number] | None = None
    loop_stop: dict | None = None
    request: dict | None = None
    tool_calls: list[dict] | None = None

    @property
    def key(self) -> tuple:
        """Identity for pairing and resume: (profile, temperature, prompt id, sample index)."""
        return (self.profile, float(self.temperature), self.prompt_id, self.sample_index)

    @property
    def ok(self) -> bool:
        """The request returned (no ``error``)."""
        return self.error is None

    @property
    def loops(self) -> bool:
        """Its stored metrics say it loops."""
        return bool(self.metrics and self.metrics.loop)

    def to_json_line(self) -> str:
        """The line of ``samples.jsonl`` (no newline)."""
        return json.dumps(self.to_dict())
