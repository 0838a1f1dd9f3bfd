"""The searches' documents as typed records (issue 26): ``mitigation.json`` (a single host's and a spread's) and
``bisect.json`` written by the code before the records (``data/``: files of real sim runs) read into
:class:`MitigationDoc` / :class:`BisectDoc` and are written back the same, key for key and in the same order;
the renderers read a record and its JSON mapping alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtp_remote.search.mitigation_report import render_markdown, table_rows
from mtp_remote.search.ranking import recommendation
from mtp_remote.search.records import BisectDoc, MitigationDoc

DATA = Path(__file__).parent / "data"


def _keys(value):
    """Every object's keys in order, nested (the shape of the written file)."""
    if isinstance(value, dict):
        return [(k, _keys(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_keys(v) for v in value]
    return None


@pytest.mark.parametrize("name,model", [("mitigation.json", MitigationDoc), ("mitigation-spread.json", MitigationDoc),
                                        ("bisect.json", BisectDoc)])
def test_a_document_written_before_the_records_is_written_back_identically(name, model):
    stored = json.loads((DATA / name).read_text())
    doc = model.of(stored)
    again = doc.to_dict()
    assert again == stored and _keys(again) == _keys(stored)
    assert json.dumps(again, indent=2) == json.dumps(stored, indent=2)


def test_a_mitigation_record_reads_as_typed_rows_and_renders_as_its_json_does():
    stored = json.loads((DATA / "mitigation.json").read_text())
    doc = MitigationDoc.of(stored)
    row = next(r for r in stored["rows"] if r["name"] == "no-overlap")
    assert doc.best == "no-overlap" and doc.row("no-overlap").status == row["status"] == "no-loops-seen"
    assert doc.row("no-overlap").flags == tuple(row["flags"]) and doc.row("no-overlap") == row
    assert [r.name for r in doc.with_status("baseline")] == ["baseline"]
    assert table_rows(doc) == table_rows(stored) and render_markdown(doc) == render_markdown(stored)
    assert recommendation(doc) == stored["recommendation"]


def test_a_bisect_record_keeps_its_tests_and_drops_the_minimal_change_when_unset():
    doc = BisectDoc.of(json.loads((DATA / "bisect.json").read_text()))
    assert doc.minimal == ["--speculative-algorithm NEXTN"] and doc.tests[0].outcome in ("pass", "fail", "unresolved")
    doc.unset("minimal")
    assert "minimal" not in doc.to_dict() and doc.minimal is None
