"""A fleet nightly's ``summary.json`` (``fleet.nightly_fleet.fleet_summary``: ``kind`` ``nightly-fleet``) as its
readers need it typed: per host its status, exit code, run, verdicts, the profiles that corrupt, its regressions
and the cause when it could not run; the hosts that could not run, corrupt or regressed; the disagreements."""

from __future__ import annotations

from pydantic import Field

from .base import Number, Record
from .summary import PlaybookFacts


class FleetVerdict(Record):
    """One verdict of a host, as the fleet summary repeats it: profile, kind, evidence."""

    profile: str
    kind: str
    evidence: str | None = None


class FleetHost(Record):
    """One host of a fleet nightly: status (``completed``, ``failed``...), exit code, run id and directory,
    seconds, verdicts, the profiles that corrupt (or did not launch), the checks that regressed since
    ``regression_baseline``, the cause when it could not run, its facts."""

    host: str
    status: str = "completed"
    exit_code: int | None = None
    run_id: str | None = None
    run_dir: str | None = None
    duration_s: Number | None = None
    verdicts: list[FleetVerdict] = Field(default_factory=list)
    corrupts: list[str] = Field(default_factory=list)
    regressed: list[str] = Field(default_factory=list)
    regression_baseline: str | None = None
    cause: str | None = None
    facts: dict | None = None


class FleetSummary(Record):
    """The fleet nightly's summary: ids, group, the hosts planned, the playbook, times (``wall_s`` seconds), the
    exit code (the most severe of its hosts'), the hosts, and the hosts that could not run, corrupt or
    regressed, the disagreements (with their lines), the files."""

    schema_version: int = 1
    kind: str = "nightly-fleet"
    tool: str = "mtp-remote"
    tool_version: str | None = None
    fleet_id: str | None = None
    group: str | None = None
    hosts_planned: list[str] = Field(default_factory=list)
    playbook: PlaybookFacts = Field(default_factory=PlaybookFacts)
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: Number | None = None
    max_workers: int | None = None
    exit_code: int | None = None
    hosts: list[FleetHost] = Field(default_factory=list)
    could_not_run: list[str] = Field(default_factory=list)
    corrupt_hosts: list[str] = Field(default_factory=list)
    regressed_hosts: list[str] = Field(default_factory=list)
    disagreements: list[dict] = Field(default_factory=list)
    disagreement_lines: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)
