"""The history knows fleets: a history written before the group columns existed still opens (and gains them),
``history`` filters by group and by host, and the regression check of a fleet host compares it with that
host's own last good run, never with another host of the group."""

from __future__ import annotations

import sqlite3
import threading

from mtp_remote.fleet.regression import check_regressions
from mtp_remote.report import history as store


def doc(run_id: str, host: str, *, started: str, loops: int = 0, fleet: dict | None = None,
        status: str = "completed") -> dict:
    d = {"run_id": run_id, "status": status, "host": {"name": host}, "playbook": {"name": "nightly", "alpha": 0.05},
         "started_at": started, "exit_code": 0, "simulated": True,
         "cells": [{"profile": "mtp", "temperature": 0.7, "n": 20, "loops": loops, "loop_rate": loops / 20,
                    "accept_length": 3.1, "tokens_per_s": 100.0}],
         "verdicts": [{"profile": "mtp", "kind": "spec-corrupts-output" if loops > 5 else "healthy", "evidence": ""}]}
    if fleet:
        d["fleet"] = fleet
    return d


def _old_db(path) -> None:
    """A history as the release before fleets wrote it: status and cause, no group columns."""
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, host TEXT NOT NULL, playbook TEXT NOT NULL, simulated INTEGER "
        "NOT NULL, started_at TEXT NOT NULL, duration_s REAL, exit_code INTEGER NOT NULL, run_dir TEXT, tool_version "
        "TEXT, status TEXT NOT NULL DEFAULT 'completed', cause TEXT);"
        "INSERT INTO runs (run_id, host, playbook, simulated, started_at, duration_s, exit_code, run_dir, "
        "tool_version, status, cause) VALUES ('old', 'gpu-1', 'nightly', 0, '2026-11-01T00:00:00', 1.0, 0, "
        "'runs/old', '0.1', 'completed', NULL);")
    con.commit()
    con.close()


def test_a_history_without_the_group_columns_opens_and_gains_them(tmp_path):
    db = tmp_path / "history.sqlite"
    _old_db(db)
    (old,) = store.history(db)
    assert old["run_id"] == "old" and old["group"] is None and old["fleet_id"] is None
    cols = {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")}
    assert {"host_group", "fleet_id", "status", "cause"} <= cols
    store.record_run(db, doc("new", "gpu-1", started="2026-11-02T00:00:00",
                             fleet={"group": "rack", "fleet_id": "fleet-1"}), tmp_path)
    rows = {r["run_id"]: r for r in store.history(db)}
    assert rows["new"]["group"] == "rack" and rows["new"]["fleet_id"] == "fleet-1"
    assert rows["old"]["status"] == "completed"


def test_concurrent_first_opens_of_an_old_history_all_succeed(tmp_path):
    db = tmp_path / "history.sqlite"
    _old_db(db)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            store.record_run(db, doc(f"r{i}", f"gpu-{i}", started=f"2026-11-02T00:00:0{i}",
                                     fleet={"group": "rack", "fleet_id": "fleet-1"}), tmp_path)
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r["host"] for r in store.history(db, group="rack")) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_history_filters_by_group_and_by_host(tmp_path):
    db = tmp_path / "history.sqlite"
    for i, host in enumerate(("gpu-1", "gpu-2", "gpu-3")):
        store.record_run(db, doc(f"f{i}", host, started="2026-11-03T02:30:00",
                                 fleet={"group": "rack", "fleet_id": "fleet-9"}), tmp_path)
    store.record_run(db, doc("single", "gpu-1", started="2026-11-03T09:00:00"), tmp_path)
    assert [r["host"] for r in store.history(db, group="rack")] == ["gpu-1", "gpu-2", "gpu-3"]
    assert [r["run_id"] for r in store.history(db, host="gpu-1")] == ["single", "f0"]
    assert [r["run_id"] for r in store.history(db, host="gpu-1", group="rack")] == ["f0"]
    assert store.history(db, group="other") == []


def test_a_fleet_host_is_compared_with_its_own_last_good_run_not_another_hosts(tmp_path):
    db = tmp_path / "history.sqlite"
    fleet = {"group": "rack", "fleet_id": "fleet-1"}
    store.record_run(db, doc("a1", "gpu-1", started="2026-11-01T02:30:00", loops=0, fleet=fleet), tmp_path)
    store.record_run(db, doc("b1", "gpu-2", started="2026-11-01T02:30:01", loops=14, fleet=fleet), tmp_path)
    tonight = doc("b2", "gpu-2", started="2026-11-02T02:30:00", loops=14)
    earlier = store.good_runs(db, host="gpu-2", playbook="nightly", before_run="b2")
    assert [r["run_id"] for r in earlier] == ["b1"]
    rep = check_regressions(tonight, earlier)
    assert rep.baseline_run == "b1" and rep.regressed == []  # it looped last night too: no regression
    mine = store.good_runs(db, host="gpu-1", playbook="nightly", before_run="a2")
    assert check_regressions(doc("a2", "gpu-1", started="2026-11-02T02:30:00", loops=14), mine).regressed == [
        "mtp T=0.7 (loop_rate)"]
