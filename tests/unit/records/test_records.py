"""The record types keep what they read: unknown fields written back in place, absent ones read as their
defaults, numbers as written; mapping reads still answer; a summary of the wrong shape is a ConfigError naming
its field."""

from __future__ import annotations

import json

import pytest

from mtp_remote.errors import ConfigError
from mtp_remote.records.sample import Sample
from mtp_remote.records.summary import Comparison, Summary
from mtp_remote.report.document import load_summary


def test_a_field_it_does_not_know_is_kept_and_written_back_after_the_known_ones():
    doc = Summary.model_validate({"run_id": "r1", "from_the_future": {"x": 1}, "status": "completed"})
    assert doc.to_dict() == {"run_id": "r1", "status": "completed", "from_the_future": {"x": 1}}
    assert list(doc.to_dict()) == ["run_id", "status", "from_the_future"]
    assert doc.from_the_future == {"x": 1} and doc["from_the_future"] == {"x": 1}


def test_an_absent_field_reads_as_its_default_and_is_not_written():
    doc = Summary.model_validate({"run_id": "r1"})
    assert (doc.status, doc.verdicts, doc.playbook.baseline, doc.completed) == ("completed", [], "baseline", True)
    assert "status" not in doc and doc.get("status", "x") == "x"
    assert doc.to_json() == '{\n  "run_id": "r1"\n}\n'


def test_numbers_keep_their_type_so_the_bytes_do_not_change():
    row = Comparison.model_validate({"temperature": 0, "p": 1, "bound": 0.5})
    assert json.dumps(row.to_dict()) == '{"temperature": 0, "p": 1, "bound": 0.5}'
    s = Sample.model_validate_json('{"profile": "mtp", "temperature": 0.7, "top2_margins": [Infinity, 0.5]}')
    assert s.to_json_line() == '{"profile": "mtp", "temperature": 0.7, "top2_margins": [Infinity, 0.5]}'


def test_mapping_reads_answer_as_the_dict_did():
    s = Sample.model_validate({"profile": "mtp", "metrics": {"loop": True, "loop_unit_tokens": 6}})
    assert s["profile"] == "mtp" and s.get("error") is None and s.get("seed", 7) == 7
    assert {**s} == {"profile": "mtp", "metrics": s.metrics} and s.metrics.loop_unit_tokens == 6
    assert s == {"profile": "mtp", "metrics": {"loop": True, "loop_unit_tokens": 6}}
    with pytest.raises(KeyError):
        s["text"]  # noqa: B018 - absent, as in the dict
    s.update(error="boom", text=None)
    assert list(s.to_dict()) == ["profile", "text", "error", "metrics"]


def test_a_summary_of_the_wrong_shape_is_a_config_error_naming_the_field(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"run_id": "r1", "verdicts": [{"profile": "mtp"}]}))
    with pytest.raises(ConfigError) as e:
        load_summary(tmp_path)
    assert e.value.field == "verdicts.0.kind"
    assert "summary.json" in str(e.value.file)
