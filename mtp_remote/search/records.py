"""The searches' documents as typed records: ``mitigation.json`` (:class:`MitigationDoc`, its rows
:class:`CandidateResult`) and ``bisect.json`` (:class:`BisectDoc`, its tests :class:`BisectTest`).

Each record reads the JSON the searches have always written and writes it back the same: declared fields are
typed attributes, fields a record does not declare (an older or newer writer's) are kept and written back after
them, and a field the document never had is not written (``to_dict`` writes what was set or read). Rows and tests
are written whole, every field, as they always were. Mapping reads (``doc["best"]``, ``row.get("host")``) are kept
for scripts and tests that read these documents as dicts; the package reads attributes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from ..records.base import Number
from ..records.base import Record as BaseRecord
from ..records.summary import Environment

__all__ = ["Number", "Record"]


def plain(value: Any) -> Any:
    """``value`` as plain JSON values: records as their :meth:`Record.to_dict`, tuples as lists."""
    if isinstance(value, BaseRecord):
        return value.to_dict()
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Record(BaseRecord):
    """A record (:class:`mtp_remote.records.base.Record`) written by the searches and the fleet: nested records
    written through their own ``to_dict`` and ``WHOLE`` ones (rows, tests) with every declared field (they were
    dataclasses written whole). A ``WHOLE`` record reads every declared field as a mapping too."""

    WHOLE: ClassVar[bool] = False

    @classmethod
    def of(cls, value: Any):
        """``value`` as this record: itself when it is one, else validated from its mapping."""
        return value if isinstance(value, cls) else cls.model_validate(plain(value))

    def to_dict(self) -> dict:
        """The JSON object: declared fields in order (those set or read, or all when ``WHOLE``), then the
        undeclared ones as read."""
        out = {k: plain(getattr(self, k)) for k in type(self).model_fields
               if self.WHOLE or k in self.model_fields_set}
        out.update((k, plain(v)) for k, v in (self.model_extra or {}).items())
        return out

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self.keys() if self.WHOLE else super().__contains__(key))

    def keys(self) -> list[str]:
        """The fields the record writes (so ``{**record}`` is a mapping of its fields)."""
        return list(self.to_dict())


class CandidateResult(Record):
    """One row of the mitigation table. ``status``: loop-free, corrupts, undecided, launch-failed, crashed (its
    server crashed or hung while sampling: not a cure), skipped,
    reference (the corrupting profile as deployed) or pending. Loop counts are pooled over T > 0 (spec vs
    baseline), ``p`` the decision rule's deciding adjusted p; ``tokens_per_s`` (mean) and ``accept_length``
    over non-looping samples; ``log_speed`` / ``base_log_speed`` the summaries (n, mean, var) of ln(tokens/s)
    over this row's and its baseline's non-looping samples; ``speed_vs_baseline`` the ratio of their geometric
    means with ``speed_ci`` its 95 % Welch interval [low, high]; ``speed_cost`` 1 - the same ratio over the
    reference's (what the change costs of the speed-up; None without such samples) with ``speed_cost_ci``;
    ``flag_changes`` flags added, removed or changed against the as-deployed profile; ``tied_with`` the #1's
    name when the samples cannot separate this row's speed from #1's (see :mod:`mtp_remote.search.ranking`);
    ``bound_p`` the p-value of its bound test ("loop excess at least the margin", ``stats.bound_p_value``, the
    largest over T > 0 cells) and ``bound_p_adjusted`` Holm's over the ``family`` candidates judged together
    (``ranking.familywise_loop_free``: ``loop-free`` needs it below alpha, else ``no-loops-seen`` when no
    degenerate sample was seen); status ``not-comparable``: from a host where the as-deployed profile does not
    reproduce the bug (``mitigate --spread``), not ranked."""

    WHOLE: ClassVar[bool] = True

    name: str
    change: str
    source: str
    status: str
    verdict: str | None = None
    evidence: str = ""
    loops: int | None = None
    n: int | None = None
    base_loops: int | None = None
    base_n: int | None = None
    p: Number | None = None
    accept_length: Number | None = None
    tokens_per_s: Number | None = None
    speed_vs_baseline: Number | None = None
    speed_cost: Number | None = None
    flags: tuple[str, ...] = ()
    rank: int | None = None
    speed_ci: list[Number] | None = None
    speed_cost_ci: list[Number] | None = None
    log_speed: dict | None = None
    base_log_speed: dict | None = None
    flag_changes: int | None = None
    tied_with: str | None = None
    host: str | None = None  #: where it ran, when candidates were spread over a fleet
    bound_p: Number | None = None
    bound_p_adjusted: Number | None = None
    family: int | None = None

    def where(self) -> str:
        """The row's name, with ``@host`` when it ran on one host of a spread."""
        return self.name + (f" @{self.host}" if self.host else "")


class MitigationDoc(Record):
    """``mitigation.json``: the run's state (its id, host, playbook, the profile mitigated, the ``--from`` run,
    the per-prompt ``samples`` budget, the experiment ``fingerprint``, the candidates planned and those ``done``,
    launch failures as [cause, hint, after_ready], what was ``reused``), then the ranked ``rows``, the
    recommended candidate (``best``), the exit code and the ``recommendation`` sentence. ``mitigate --spread``
    writes the same document with ``hosts``, ``left_out`` (host → why), ``untried`` (host → its candidates) and
    ``wall_s``."""

    schema_version: int | None = None
    run_id: str | None = None
    kind: str | None = None
    host: str | None = None
    playbook: str | None = None
    profile: str | None = None
    from_run: str | None = None
    samples: int | None = None
    started_at: str | None = None
    simulated: bool | None = None
    fingerprint: dict | None = None
    done: list[str] = []
    reused: str | None = None
    facts: Environment | None = None
    candidates: list[dict] = []
    launch_failures: dict[str, list] = {}
    finished_at: str | None = None
    speed_confidence: Number | None = None
    baseline: str | None = None
    hosts: list[str] | None = None
    left_out: dict[str, str] = {}
    rows: list[CandidateResult] = []
    best: str | None = None
    untried: dict[str, list[str]] = {}
    exit_code: int | None = None
    wall_s: Number | None = None
    recommendation: str | None = None

    #: The order of a spread's document (``mitigate --spread`` writes its own fields, in this order).
    SPREAD_ORDER: ClassVar[tuple[str, ...]] = (
        "kind", "run_id", "host", "profile", "simulated", "facts", "reused", "hosts", "left_out", "rows", "best",
        "untried", "exit_code", "wall_s", "recommendation")

    def to_dict(self) -> dict:
        """The JSON object, in the order its writer wrote it (a spread's in :data:`SPREAD_ORDER`)."""
        out = super().to_dict()
        if self.kind != "mitigate-spread":
            return out
        first = [k for k in self.SPREAD_ORDER if k in out]
        return {k: out[k] for k in first + [k for k in out if k not in first]}

    def row(self, name: str | None) -> CandidateResult | None:
        """The row named ``name`` (None when there is none)."""
        return next((r for r in self.rows if r.name == name), None)

    def with_status(self, *statuses: str) -> list[CandidateResult]:
        """The rows whose status is one of ``statuses``, in table order."""
        return [r for r in self.rows if r.status in statuses]


class PendingTest(Record):
    """The bisect test in flight: its name (``t<i>``) and flags (its samples continue on resume)."""

    name: str
    flags: list[str]


class BisectTest(Record):
    """One bisect test launch: its name (``t<i>``), the changes applied (in words), the flags launched, the
    outcome (``pass``/``fail``/``unresolved``), its verdict with evidence, and the level it was judged at."""

    name: str
    changes: list[str] = []
    flags: list[str] = []
    outcome: str
    verdict: str | None = None
    evidence: str | None = None
    alpha: Number | None = None


class BisectDoc(Record):
    """``bisect.json``: the good and bad launch lines (flags, and as given: ``good_spec``/``bad_spec``), the
    changes between them, the budget, the tests so far and the one in flight (``pending``), the baseline samples
    reused from ``from_run``; when done the ``minimal`` change with its flags and launch ``command`` (exit code
    0), or the ``message`` why there was nothing to bisect (exit code 1)."""

    schema_version: int | None = None
    kind: str | None = None
    run_id: str | None = None
    host: str | None = None
    simulated: bool | None = None
    playbook: str | None = None
    from_run: str | None = None
    started_at: str | None = None
    good: list[str] = []
    bad: list[str] = []
    good_spec: str | None = None
    bad_spec: str | None = None
    repeats_asked: int | None = None
    fingerprint: dict | None = None
    changes: list[str] = []
    repeats: int | None = None
    tests: list[BisectTest] = []
    pending: PendingTest | None = None
    baseline_reused: int | None = None
    minimal: list[str] | None = None
    minimal_flags: list[str] | None = None
    exit_code: int | None = None
    message: str | None = None
    command: str | None = None
    finished_at: str | None = None


class SpeedFields(Record):
    """A row's speed figures (``ranking.speed_fields``): ``speed_vs_baseline`` (ratio of geometric-mean
    tokens/s) with ``speed_ci`` [low, high], and ``speed_cost`` (1 − the ratio to the as-deployed profile) with
    ``speed_cost_ci``; None where undefined."""

    WHOLE: ClassVar[bool] = True

    speed_vs_baseline: Number | None = None
    speed_ci: list[Number] | None = None
    speed_cost: Number | None = None
    speed_cost_ci: list[Number] | None = None


class ArmStats(SpeedFields):
    """One profile judged against the baseline (``mitigate.judge_profile``): the verdict with evidence, loops
    pooled over T > 0 (``loops``/``n`` vs ``base_loops``/``base_n``), the deciding adjusted ``p``, non-looping
    ``tokens_per_s`` and ``accept_length`` (and the baseline's ``base_tokens_per_s``), the ln(tokens/s) summaries
    ``log_speed``/``base_log_speed`` (``analysis.speed.LogSpeed.to_dict``) and the bound test's ``bound_p``."""

    verdict: str | None = None
    evidence: str = ""
    base_tokens_per_s: Number | None = None
    loops: int | None = None
    n: int | None = None
    base_loops: int | None = None
    base_n: int | None = None
    p: Number | None = None
    accept_length: Number | None = None
    tokens_per_s: Number | None = None
    log_speed: dict | None = None
    base_log_speed: dict | None = None
    bound_p: Number | None = None

    #: The fields a mitigation row takes from its statistics.
    ROW_FIELDS: ClassVar[tuple[str, ...]] = (
        "verdict", "evidence", "loops", "n", "base_loops", "base_n", "p", "accept_length", "tokens_per_s",
        "speed_vs_baseline", "speed_ci", "log_speed", "base_log_speed", "bound_p")

    def row_fields(self) -> dict:
        """The :data:`ROW_FIELDS` as keyword arguments of a :class:`CandidateResult`."""
        return {k: getattr(self, k) for k in self.ROW_FIELDS}
