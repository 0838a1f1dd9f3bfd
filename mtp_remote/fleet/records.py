"""The fleet's records as types: a host's collected facts as the spread reads them (:class:`ServedFacts`), the
regression check's rows (:class:`RegressionCheck`), the job array's manifest and task records, and the hosts that
disagree (:class:`Disagreement`). Written and read as the JSON they always were
(:class:`~mtp_remote.search.records.Record`: fields set or read are written, undeclared ones kept)."""

from __future__ import annotations

from ..records.summary import RegressionCheck
from ..search.records import Number, Record

__all__ = ["RegressionCheck", "ServedFacts", "ArrayManifest"]


class ServedFacts(Record):
    """What a host serves, from its collected facts (``outcomes.host_facts``: SGLang release, model path,
    architectures joined by ``, ``; ``error`` when they could not be collected). Other facts are kept."""

    sglang: str | None = None
    model_path: str | None = None
    architectures: str | None = None
    error: str | None = None

    def key(self) -> tuple:
        """(release, model path, architectures): hosts with equal keys can share one mitigation's candidates."""
        return self.sglang, self.model_path, self.architectures


class ArrayManifest(Record):
    """``manifest.json`` of a job-array nightly's fleet directory: the fleet id, the group, the hosts (task
    ``i`` runs ``hosts[i]``)."""

    fleet_id: str
    group: str
    hosts: list[str]


class TaskRecord(Record):
    """``results/<index>.json``: one array task's record, written when it starts (``status`` ``started``) and
    again when it is done (``done``, with the exit code, run id, error, verdicts by profile, the host's facts as
    read on its node, and ``finished``). ``started``/``finished``: Unix seconds."""

    index: int
    host: str
    node: str | None = None
    job: str | None = None
    job_id: str | None = None
    started: Number | None = None
    status: str = "started"
    exit_code: int | None = None
    run_id: str | None = None
    error: str | None = None
    verdicts: dict[str, str] = {}
    facts: dict = {}
    finished: Number | None = None


class FactDifference(Record):
    """A collected fact whose values on the odd hosts (``odd``) and on the others (``others``) do not overlap."""

    fact: str
    odd: list[str]
    others: list[str]


class Disagreement(Record):
    """A verdict (``key``: profile or check) not the same on every host that ran: the minority's ``verdict`` on
    ``hosts``, the ``majority`` on ``majority_hosts``, and the facts they differ in."""

    key: str
    verdict: str | None = None
    hosts: list[str] = []
    majority: str | None = None
    majority_hosts: list[str] = []
    differing_facts: list[FactDifference] = []
