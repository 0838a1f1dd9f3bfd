"""The documents of the searches built on the experiment, as their readers need them typed: ``mitigation.json``
(``search.mitigate``: candidate fixes ranked) and ``bisect.json`` (``search.bisect``: the minimal flag change).
Fields are declared in the order the searches write them; the rest (fingerprints, candidates, rows) are kept as
read. The searches write these documents themselves."""

from __future__ import annotations

from pydantic import Field

from .base import Number, Record
from .summary import Environment


class MitigationRecord(Record):
    """``mitigation.json``: the run, the host and playbook, the profile searched, the diagnose run it started
    from (``from_run``), the host's facts, the candidates and the ranked rows (``search.ranking``: dicts as the
    ranking wrote them), the best loop-free candidate, the exit code and the recommendation sentence."""

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
    done: list[str] = Field(default_factory=list)
    reused: str | None = None
    facts: Environment | None = None
    candidates: list[dict] = Field(default_factory=list)
    launch_failures: dict = Field(default_factory=dict)
    finished_at: str | None = None
    speed_confidence: Number | None = None
    baseline: str | None = None
    rows: list[dict] = Field(default_factory=list)
    best: str | None = None
    exit_code: int | None = None
    recommendation: str | None = None


class BisectTest(Record):
    """One bisect test launch: its name (``t1``...), the flag changes applied, the launch line's flags, the
    outcome (``pass``/``fail``/``unresolved``), its verdict with evidence and the level it was judged at."""

    name: str = ""
    changes: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    outcome: str | None = None
    verdict: str | None = None
    evidence: str | None = None
    alpha: Number | None = None


class BisectRecord(Record):
    """``bisect.json``: the run, host and playbook, the diagnose run it started from, the good and bad launch
    lines (``good_spec``: the good one as given), the changes between them, the tests, the minimal change and the
    command that reproduces it."""

    schema_version: int | None = None
    kind: str | None = None
    run_id: str | None = None
    host: str | None = None
    simulated: bool | None = None
    playbook: str | None = None
    from_run: str | None = None
    started_at: str | None = None
    good: list[str] = Field(default_factory=list)
    bad: list[str] = Field(default_factory=list)
    good_spec: str | None = None
    bad_spec: str | None = None
    repeats_asked: int | None = None
    fingerprint: dict | None = None
    changes: list[str] = Field(default_factory=list)
    repeats: int | None = None
    tests: list[BisectTest] = Field(default_factory=list)
    pending: dict | None = None
    baseline_reused: str | None = None
    minimal: list[str] | None = None
    minimal_flags: list[str] | None = None
    exit_code: int | None = None
    command: str | None = None
    finished_at: str | None = None
