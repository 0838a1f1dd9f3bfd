"""``run.json``: what a run's first launch records so a resume continues the same experiment: the run id, its
first start (ISO-8601 UTC), the experiment's fingerprint (host, engine, model, addresses, python, the host's
environment and the playbook, masked: ``experiment.diagnose.experiment_fingerprint``) and the design every
resume continues (``analysis.diagnosis.record_design``; absent in runs recorded before designs were)."""

from __future__ import annotations

from .base import Record


class RunRecord(Record):
    """``run.json`` (written by ``experiment.diagnose``; a resume refuses a different fingerprint)."""

    run_id: str | None = None
    started_at: str
    fingerprint: dict
    design: dict | None = None
