"""``compare``'s result (``runs.compare.compare_runs``): two runs cell by cell, as records. The JSON it prints
(``compare --json``) is :meth:`RunComparison.to_dict`."""

from __future__ import annotations

from pydantic import Field

from .base import Number, Record


class RunHead(Record):
    """One side of a comparison: the run's id, directory, host, playbook, status, start and tool version."""

    run_id: str | None = None
    dir: str = ""
    host: str | None = None
    playbook: str | None = None
    status: str = "completed"
    started_at: str | None = None
    tool_version: str | None = None


class VerdictChange(Record):
    """A profile's verdict in run A and in run B (None where that run has no verdict for it)."""

    profile: str
    a: str | None = None
    b: str | None = None


class CellChange(Record):
    """One (profile, temperature) cell of both runs: ``only_in`` "a"/"b" for a cell in one run only (then no
    test); else ``loops`` (``analysis.stats.LoopDiff.to_dict``: counts, rates, one-sided and two-sided p),
    acceptance in each run, ``speed`` (``SpeedDiff.to_dict`` and its ``scope``) and, off the baseline,
    ``spec_over_base``: the cell's mean speed over its own run's baseline's, in each run."""

    profile: str
    temperature: Number
    only_in: str | None = None
    loops: dict | None = None
    accept_a: Number | None = None
    accept_b: Number | None = None
    speed: dict | None = None
    spec_over_base: dict | None = None


class RunComparison(Record):
    """Run A (the reference) against run B (the one under test): their heads, the verdicts, the cells."""

    a: RunHead
    b: RunHead
    verdicts: list[VerdictChange] = Field(default_factory=list)
    cells: list[CellChange] = Field(default_factory=list)
