"""Where a run's tokens and time went, for ``summary.json`` and the reports: generated tokens and the tokens the
loop stop saved, and each profile's time split into launch/ready, sampling, stop and GPU release, and the tool's
own (the rest of its wall time: tunnel, log copy, bookkeeping). Pure: samples and profile runs in, records out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

from ..records.sample import Sample
from ..records.summary import LoopStopTotals, TimeRow, TimeSplit


@dataclass
class _Tokens:
    """One profile's token counts while they are added up (``LoopStopTotals.by_profile``'s values)."""

    generated_tokens: int = 0
    tokens_saved: int = 0
    loop_stops: int = 0
    kl_probe_tokens: int = 0


def token_accounting(samples: Iterable[Sample | dict], max_tokens: int) -> LoopStopTotals:
    """``generated_tokens`` (completion tokens over all samples, stopped ones counted up to their stop, plus
    the tokens the KL probe generated for its own requests at T = 1: ``kl_probe_tokens``, also given apart),
    ``tokens_saved`` (what the stopped samples did not generate: max_tokens - their tokens), ``loop_stops``
    (samples stopped once their loop was settled), ``without_stop_at_most`` (the tokens had each stopped sample
    run to ``max_tokens``: an upper bound, a loop may still end earlier), and the same per profile
    (``by_profile``); ``enabled`` is left for the summary to set."""
    per: dict[str, _Tokens] = {}
    for s in map(Sample.of, samples):
        d = per.setdefault(s.profile, _Tokens())
        probe = int((s.kl.probe_tokens if s.kl else None) or 0)
        tokens = int(s.completion_tokens or 0)
        d.generated_tokens += tokens + probe
        d.kl_probe_tokens += probe
        if s.loop_stop:
            d.loop_stops += 1
            d.tokens_saved += int(s.loop_stop.get("saved_tokens", max(max_tokens - tokens, 0)))
    total = _Tokens(*(sum(getattr(d, f.name) for d in per.values()) for f in fields(_Tokens)))
    return LoopStopTotals(generated_tokens=total.generated_tokens, tokens_saved=total.tokens_saved,
                          loop_stops=total.loop_stops, kl_probe_tokens=total.kl_probe_tokens,
                          without_stop_at_most=total.generated_tokens + total.tokens_saved,
                          by_profile={p: asdict(d) for p, d in per.items()})


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def time_split(profile_runs: list, duration_s: float | None = None) -> TimeSplit:
    """Per profile (seconds): ``launch_ready_s`` (launch until ready and /health 200), ``sampling_s``,
    ``stop_s`` (signal, drain, exit and GPU memory seen free), of it ``gpu_release_s``, and ``tool_s`` (the
    profile's wall time less those); for the run: the sums, ``command_s`` (``duration_s``: this command's own
    time, a resume's without the gap before it) and ``outside_profiles_s`` (connect, lock, facts, the leftover
    stop, the report: ``duration_s`` less the profiles' wall time)."""
    rows = []
    for pr in profile_runs:
        wall = getattr(pr, "wall_s", None)
        parts = [getattr(pr, k, None) or 0.0 for k in ("ready_s", "sampling_s", "stop_s")]
        rows.append(TimeRow(profile=pr.profile, wall_s=_r(wall), launch_ready_s=_r(pr.ready_s),
                            sampling_s=_r(pr.sampling_s), stop_s=_r(getattr(pr, "stop_s", None)),
                            gpu_release_s=_r(pr.gpu_release_s),
                            tool_s=_r(max(wall - sum(parts), 0.0)) if wall is not None else None))
    total = TimeRow(**{k: _r(sum(getattr(r, k) or 0.0 for r in rows)) for k in _SUMMED})
    if duration_s is not None:
        total.update(command_s=_r(duration_s), outside_profiles_s=_r(max(duration_s - (total.wall_s or 0.0), 0.0)))
    return TimeSplit(profiles=rows, total=total)


#: The per-profile times a run's total adds up.
_SUMMED = ("wall_s", "launch_ready_s", "sampling_s", "stop_s", "gpu_release_s", "tool_s")


def time_split_line(split: TimeSplit | dict) -> str:
    """One line for the console and report.md: ``launch/ready 12.0 s, sampling 40.1 s, stop + GPU release
    3.2 s, tool 1.4 s``."""
    t = TimeSplit.of(split).total
    tool = (t.tool_s or 0.0) + (t.outside_profiles_s or 0.0)
    return (f"launch/ready {t.launch_ready_s or 0:.1f} s, sampling {t.sampling_s or 0:.1f} s, "
            f"stop + GPU release {t.stop_s or 0:.1f} s, tool {tool:.1f} s")
