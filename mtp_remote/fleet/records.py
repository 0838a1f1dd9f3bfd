"""The fleet's records as types: a host's collected facts as the spread reads them (:class:`ServedFacts`), the
regression check's rows (:class:`RegressionCheck`). Written and read as the JSON they always were
(:class:`~mtp_remote.search.records.Record`: fields set or read are written, undeclared ones kept)."""

from __future__ import annotations

from ..search.records import Record


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
