"""Per-request observations and their pooling into cells (one profile at one temperature).

:class:`SampleObs` is what the runner hands over for one request; :func:`summarize_cell` pools a cell's
samples into a :class:`CellSummary`: loop rate with its Wilson interval, acceptance and speed over all and
over non-looping samples (loops inflate both), think-block and finish-reason rates. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from .degeneracy import TextMetrics
from .settled import LOOP_STOP
from .stats import wilson_interval


@dataclass
class SampleObs:
    """What the runner hands over for one request.

    ``metrics`` is None when the request failed (then ``error`` says why). ``latency_s``: wall seconds for
    the whole request. ``spec_verify_ct``: verify steps reported by a speculative server (None otherwise).
    ``output_ids``/``text``: the output, used for the greedy comparison at T=0 (ids preferred).
    ``kl_k3``: the sample's KL probe (``divergence.kl_probe(...).mean_k3``, nats/token) when measured,
    ``kl_max_k3`` its largest per-token k3 (``max_k3``), ``kl_tokens`` the tokens probed (``n_tokens``);
    ``top2_margins``: per output token, logprob(top-1) - logprob(top-2), for the near-tie rule at T=0.
    ``answer_ok``: whether the answer contains the prompt's expected answer (``lossless.check_answer``), None
    when the prompt has none.
    """

    profile: str
    temperature: float
    prompt_id: str
    sample_index: int
    seed: int | None
    metrics: TextMetrics | None
    finish_reason: str | None
    completion_tokens: int
    latency_s: float
    spec_verify_ct: int | None
    output_ids: list[int] | None = None
    error: str | None = None
    text: str | None = None
    kl_k3: float | None = None
    top2_margins: list[float] | None = None
    answer_ok: bool | None = None
    kl_max_k3: float | None = None
    kl_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.metrics is not None and self.error is None

    @property
    def is_loop(self) -> bool:
        return bool(self.metrics is not None and self.metrics.is_loop)

    @property
    def is_degenerate(self) -> bool:
        """What the verdict counts: a loop, or a near loop (``metrics.near_loop``, when the detector provides
        it) in an output cut at ``max_tokens`` (``finish_reason == "length"``)."""
        if self.is_loop:
            return True
        return self.finish_reason == "length" and bool(getattr(self.metrics, "near_loop", False))

    @property
    def tokens_per_s(self) -> float | None:
        """completion_tokens / latency_s, None for failed requests or a non-positive latency."""
        if not self.ok or self.latency_s <= 0:
            return None
        return self.completion_tokens / self.latency_s

    @property
    def accept_length(self) -> float | None:
        """Per-request acceptance length as SGLang computes it: completion_tokens / spec_verify_ct."""
        if not self.ok or not self.spec_verify_ct:
            return None
        return self.completion_tokens / self.spec_verify_ct


@dataclass
class CellSummary:
    """One (profile, temperature) cell, all prompts pooled.

    ``n``: analysed samples (failed requests excluded, counted in ``n_errors``). ``loops``: degenerate samples
    (:attr:`SampleObs.is_degenerate`: loops plus length-cut near loops, the latter also in ``near_loops``).
    ``loop_ci``: 95 % Wilson
    interval. ``accept_length``: sum(completion_tokens) / sum(spec_verify_ct) (token-weighted, as SGLang's
    server-wide figure); ``*_nonloop``: the same over non-looping samples. ``tokens_per_s``: mean of the
    per-sample completion_tokens / latency_s. Rates are in [0, 1]; None where undefined.
    """

    profile: str
    temperature: float
    speculative: bool
    n: int
    n_errors: int
    loops: int
    loop_rate: float
    loop_ci: tuple[float, float]
    accept_length: float | None
    accept_length_nonloop: float | None
    tokens_per_s: float | None
    tokens_per_s_nonloop: float | None
    think_closed_rate: float | None
    finish_length_rate: float
    mean_completion_tokens: float
    steps_per_s: float | None = None
    mean_seq_rep_4: float | None = None
    loop_onsets: list[int] = field(default_factory=list)
    mean_kl_k3: float | None = None
    near_loops: int = 0
    loop_stops: int = 0  # samples we stopped once their loop was settled (their tokens/s and acceptance: so far)

    def to_dict(self) -> dict:
        return asdict(self)


def _accept(samples: Sequence[SampleObs]) -> float | None:
    rows = [s for s in samples if s.spec_verify_ct]
    if not rows:
        return None
    return sum(s.completion_tokens for s in rows) / sum(s.spec_verify_ct for s in rows)


def mean_of(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def summarize_cell(profile: str, temperature: float, speculative: bool,
                   samples: Sequence[SampleObs]) -> CellSummary:
    """Pool one cell's samples (any prompts) into a :class:`CellSummary`; never raises on empty input."""
    ok = [s for s in samples if s.ok]
    n = len(ok)
    loops = sum(s.is_degenerate for s in ok)
    clean = [s for s in ok if not s.is_degenerate]
    think = [s.metrics.think_closed for s in ok if s.metrics.think_closed is not None]
    steps = mean_of(s.spec_verify_ct / s.latency_s for s in ok if s.spec_verify_ct and s.latency_s > 0)
    return CellSummary(
        profile=profile, temperature=float(temperature), speculative=speculative, n=n,
        n_errors=len(samples) - n, loops=loops, loop_rate=loops / n if n else 0.0,
        loop_ci=wilson_interval(loops, n),
        accept_length=_accept(ok) if speculative else None,
        accept_length_nonloop=_accept(clean) if speculative else None,
        tokens_per_s=mean_of(s.tokens_per_s for s in ok),
        tokens_per_s_nonloop=mean_of(s.tokens_per_s for s in clean),
        think_closed_rate=sum(think) / len(think) if think else None,
        finish_length_rate=sum(s.finish_reason == "length" for s in ok) / n if n else 0.0,
        mean_completion_tokens=sum(s.completion_tokens for s in ok) / n if n else 0.0,
        steps_per_s=steps if speculative else None,
        mean_seq_rep_4=mean_of(s.metrics.seq_rep_4 for s in ok),
        loop_onsets=[s.metrics.loop.start_token for s in ok if s.metrics.loop],
        mean_kl_k3=mean_of(s.kl_k3 for s in ok),
        near_loops=sum(s.is_degenerate and not s.is_loop for s in ok),
        loop_stops=sum(s.finish_reason == LOOP_STOP for s in ok),
    )
