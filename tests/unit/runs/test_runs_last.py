"""``last`` is the newest run by start time among the runs the command can read: a fleet nightly's
``runs/fleet-<id>/`` (its name sorts after every dated run id) is neither ``last`` for ``report``/``compare``
nor, after it, the reason a newer host run is not found."""

from __future__ import annotations

import json

import pytest

from mtp_remote.runs.compare import readable_run, resolve_run, run_dirs
from mtp_remote.errors import ConfigError


def _run(root, name, started, **extra):
    d = root / name
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"schema_version": 1, "run_id": name, "started_at": started, **extra}))
    return d


def test_last_is_the_newest_host_run_by_time_whatever_the_fleet_directories_are_named(tmp_path):
    _run(tmp_path, "20261201-020000-aaaa", "2026-12-01T02:00:00+00:00")
    _run(tmp_path, "fleet-20261201-030000-bbbb", "2026-12-01T03:00:00+00:00", kind="nightly-fleet",
         hosts=[{"host": "a", "run_id": "20261201-030001-cccc"}])
    assert resolve_run("last", tmp_path).name == "20261201-020000-aaaa"
    newer = _run(tmp_path, "20261201-040000-dddd", "2026-12-01T04:00:00+00:00")
    assert resolve_run("last", tmp_path) == newer
    assert resolve_run(None, tmp_path) == newer


def test_time_not_name_orders_runs_and_the_fleet_kind_is_listed_only_when_asked_for(tmp_path):
    # a run id given by hand (or a clock set back) does not order by name
    late = _run(tmp_path, "0-manual", "2026-12-02T09:00:00Z")
    _run(tmp_path, "20261201-040000-dddd", "2026-12-01T04:00:00+00:00")
    fleet = _run(tmp_path, "fleet-x", "2026-12-03T00:00:00+00:00", kind="nightly-fleet")
    assert resolve_run("last", tmp_path) == late
    assert run_dirs(tmp_path, None)[-1] == fleet
    assert run_dirs(tmp_path, ("nightly-fleet",)) == [fleet]


def test_a_fleet_summary_given_by_name_to_a_command_that_reads_host_runs_names_the_hosts_runs(tmp_path):
    fleet = _run(tmp_path, "fleet-x", "2026-12-03T00:00:00+00:00", kind="nightly-fleet",
                 hosts=[{"host": "a", "run_id": "20261203-000001-aaaa"}, {"host": "b", "run_id": None}])
    with pytest.raises(ConfigError) as e:
        readable_run(resolve_run("fleet-x", tmp_path), ("run",), "compare")
    assert "fleet-x is a nightly-fleet summary, and compare reads a host's run" in str(e.value)
    assert "its hosts' runs: 20261203-000001-aaaa" in str(e.value)
    assert readable_run(fleet, ("nightly-fleet",), "history") == fleet
