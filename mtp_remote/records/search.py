"""The documents of the searches built on the experiment, as their readers need them typed: ``mitigation.json``
(``search.mitigate``: candidate fixes ranked) and ``bisect.json`` (``search.bisect``: the minimal flag change).
Only what their readers use is declared; the rest is kept as read. The searches write these documents
themselves."""

from __future__ import annotations

from pydantic import Field

from .base import Record
from .summary import Environment


class MitigationRecord(Record):
    """``mitigation.json``: the run, the diagnose run it started from (``from_run``), the host's facts, the ranked
    rows (``search.ranking``: dicts as the ranking wrote them), the best loop-free candidate and the
    recommendation sentence. Read-side: only what the bug report reads is declared; every other field
    (fingerprint, candidates, launch failures...) is kept as the search wrote it."""

    run_id: str | None = None
    from_run: str | None = None
    facts: Environment | None = None
    rows: list[dict] = Field(default_factory=list)
    best: str | None = None
    recommendation: str | None = None


class BisectTest(Record):
    """One bisect test launch: its name (``t1``...), the flag changes applied, the launch line's flags, the
    outcome (``pass``/``fail``/``unresolved``), its verdict with evidence."""

    name: str = ""
    changes: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    outcome: str | None = None
    verdict: str | None = None
    evidence: str | None = None


class BisectRecord(Record):
    """``bisect.json``: the run, the diagnose run it started from, the good launch line as given (``good_spec``),
    the tests, the minimal change and the command that reproduces it. Read-side, as :class:`MitigationRecord`."""

    run_id: str | None = None
    from_run: str | None = None
    good_spec: str | None = None
    tests: list[BisectTest] = Field(default_factory=list)
    minimal: list[str] | None = None
    command: str | None = None
