"""samples.jsonl after a crash mid-write: the truncated last line is ended before the next record is
appended, so resuming loses only the broken sample, never the next one."""

from __future__ import annotations

import json

from mtp_remote.experiment.sampling import load_samples
from mtp_remote.report.history import open_samples_for_append


def test_a_truncated_last_line_does_not_swallow_the_next_record(tmp_path):
    path = tmp_path / "samples.jsonl"
    good = {"profile": "baseline", "temperature": 0.7, "prompt_id": "a", "sample_index": 0}
    path.write_text(json.dumps(good) + "\n" + '{"profile": "baseline", "temperature": 0.7, "prom')  # killed here
    nxt = {**good, "sample_index": 1}
    with open_samples_for_append(path) as f:
        f.write(json.dumps(nxt) + "\n")
    assert load_samples(path) == [good, nxt]


def test_an_intact_or_missing_file_is_appended_to_as_is(tmp_path):
    path = tmp_path / "samples.jsonl"
    with open_samples_for_append(path) as f:
        f.write('{"a": 1}\n')
    with open_samples_for_append(path) as f:
        f.write('{"a": 2}\n')
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
