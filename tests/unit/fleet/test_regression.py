"""The nightly regression check tests differences (Fisher for loops, between-run spread for speed), the
history keeps every run (completed or failed, old databases upgraded), and the inventory is found from the
environment or a parent directory."""

from __future__ import annotations

import sqlite3

import pytest

from mtp_remote.analysis.runstats import loop_diff, loops_vs_history, overdispersion, speed_diff, speed_vs_history
from mtp_remote.config import paths
from mtp_remote.fleet.regression import check_regressions, describe
from mtp_remote.report import history as store


def doc(run_id: str, cells: dict, *, started: str, verdicts=None, status="completed") -> dict:
    return {"run_id": run_id, "status": status, "host": {"name": "gpu"}, "playbook": {"name": "nightly", "alpha": 0.05},
            "started_at": started, "exit_code": 0, "simulated": False,
            "cells": [{"profile": p, "temperature": t, "n": n, "loops": k, "loop_rate": k / n if n else 0,
                       "accept_length": None, "tokens_per_s": s} for (p, t), (k, n, s) in cells.items()],
            "verdicts": verdicts or [{"profile": "mtp", "kind": "healthy", "evidence": ""}]}


def test_fisher_flags_a_loop_rate_that_rose_and_not_one_that_wobbled():
    assert loop_diff(0, 20, 16, 20).p_worse < 1e-6
    assert loop_diff(1, 20, 2, 20).p_worse > 0.4
    assert loop_diff(5, 20, 0, 20).p_worse == 1.0 and loop_diff(5, 20, 0, 20).p_two_sided < 0.05


def test_speed_between_runs_uses_welch_and_mann_whitney():
    d = speed_diff([100, 101, 99, 100.5], [80, 81, 79, 80.5])
    assert d.ratio == pytest.approx(0.8, rel=0.01)
    assert d.p_welch < 1e-4 and d.p_mannwhitney < 0.05
    assert speed_diff([100], [80]).p_welch is None


def test_speed_against_history_needs_three_runs_and_uses_their_spread():
    assert speed_vs_history(50.0, [100.0, 101.0]).p_slower is None
    noisy = speed_vs_history(90.0, [100.0, 80.0, 110.0, 95.0])  # within the nights' spread
    steady = speed_vs_history(90.0, [100.0, 100.5, 99.5, 100.2])  # far outside it
    assert noisy.p_slower > 0.2 and steady.p_slower < 0.001


def test_a_regression_is_a_tested_rise_in_loops_not_a_changed_label(tmp_path):
    db = tmp_path / "h.sqlite"
    for i, speed in enumerate((100.0, 101.0, 99.0)):
        store.record_run(db, doc(f"r{i}", {("mtp", 0.7): (0, 20, speed)}, started=f"2026-11-0{i + 1}T00:00:00"), tmp_path)
    store.record_run(db, doc("bad", {}, started="2026-11-04T00:00:00", status="failed", verdicts=[]), tmp_path)
    # label flips to inconclusive with 1 loop more: no tested change, no regression
    wobble = doc("w", {("mtp", 0.7): (1, 20, 100.5)}, started="2026-11-05T00:00:00",
                 verdicts=[{"profile": "mtp", "kind": "inconclusive", "evidence": ""}])
    earlier = store.good_runs(db, host="gpu", playbook="nightly", before_run="w")
    assert [r["run_id"] for r in earlier] == ["r2", "r1", "r0"], "the failed run is not a good run"
    assert check_regressions(wobble, earlier).regressed == []
    worse = doc("x", {("mtp", 0.7): (12, 20, 100.0)}, started="2026-11-05T00:00:00")
    rep = check_regressions(worse, earlier)
    assert rep.baseline_run == "r2" and rep.regressed == ["mtp T=0.7 (loop_rate)"]
    assert "12/20 loops tonight vs 0/60 over 3 earlier good run(s)" in describe(rep)[0]
    # speed is judged on mtp over the baseline of the same night (issue 31): the stored runs have no baseline
    # cell, so it is not tested; with one, a slower night of both arms is no regression, a slower mtp is
    assert check_regressions(doc("y", {("mtp", 0.7): (0, 20, 80.0)}, started="2026-11-05T00:00:00"),
                             earlier).regressed == []


def _night(i, mtp_speed, base_speed, mtp_loops=0):
    return doc(f"n{i}", {("baseline", 0.7): (0, 60, base_speed), ("mtp", 0.7): (mtp_loops, 60, mtp_speed)},
               started=f"2026-11-{i + 1:02d}T02:30:00") | {"playbook": {"name": "nightly", "alpha": 0.05,
                                                                       "baseline": "baseline"}}


def _history(nights):
    return [{"run_id": d["run_id"], "cells": {(c["profile"], c["temperature"]): c for c in d["cells"]}}
            for d in reversed(nights)]


def test_speed_is_the_speculative_over_the_baseline_ratio_that_cancels_the_nights_load():
    nights = [_night(i, 150.0 * f, 100.0 * f) for i, f in enumerate((1.0, 0.8, 1.1, 0.9))]  # loaded nights: both arms
    loaded = _night(9, 90.0, 60.0)  # both arms 40 % slower tonight: the ratio is 1.5 as always
    rep = check_regressions(loaded, _history(nights))
    assert rep.regressed == [] and [c for c in rep.checks if c["kind"] == "speed"][0]["ratio"] == pytest.approx(1.5)
    nights = [_night(i, 150.0 * f, 100.0) for i, f in enumerate((1.0, 1.01, 0.99, 1.0))]
    slower = _night(9, 120.0, 100.0)  # mtp 20 % slower, the baseline not
    rep = check_regressions(slower, _history(nights))
    assert rep.regressed == ["mtp T=0.7 (speed)"]
    assert "1.20x the baseline's tok/s tonight vs 1.50" in describe(rep)[0]


def test_one_night_spends_a_thirtieth_of_the_months_false_alarm_budget():
    nights = [_night(i, 150.0, 100.0, mtp_loops=1) for i in range(3)]
    rep = check_regressions(_night(9, 150.0, 100.0, mtp_loops=6), _history(nights))  # 6/60 vs 3/180: p = 0.0087
    loop = next(c for c in rep.checks if c["kind"] == "loop_rate" and c["profile"] == "mtp")
    assert rep.night_alpha == pytest.approx(0.05 / 30) and 0.05 / 30 < loop["p"] < 0.05 and rep.regressed == []
    rep = check_regressions(_night(9, 150.0, 100.0, mtp_loops=20), _history(nights))  # 20/60 vs 1/60
    assert rep.regressed == ["mtp T=0.7 (loop_rate)"]


def test_no_earlier_good_run_means_nothing_to_compare():
    rep = check_regressions(doc("x", {("mtp", 0.7): (12, 20, 100.0)}, started="2026-11-05"), [])
    assert rep.baseline_run is None and rep.regressed == []


def test_an_old_history_without_status_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.sqlite"
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE runs (run_id TEXT PRIMARY KEY, host TEXT NOT NULL, playbook TEXT NOT NULL, "
                      "simulated INTEGER NOT NULL, started_at TEXT NOT NULL, duration_s REAL, exit_code INTEGER "
                      "NOT NULL, run_dir TEXT, tool_version TEXT);"
                      "INSERT INTO runs VALUES ('old', 'gpu', 'nightly', 0, '2026-01-01', 1.0, 0, 'runs/old', '0.0');")
    con.commit()
    con.close()
    store.record_run(db, doc("new", {}, started="2026-11-01", status="failed", verdicts=[]) |
                     {"cause": {"message": "cannot reach gpu:22"}}, tmp_path)
    rows = {r["run_id"]: r for r in store.history(db)}
    assert rows["old"]["status"] == "completed"
    assert rows["new"]["status"] == "failed" and rows["new"]["cause"] == "cannot reach gpu:22"


def test_the_inventory_is_found_from_the_environment_or_a_parent_directory(tmp_path, monkeypatch):
    (tmp_path / "inventory.yaml").write_text("x")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.delenv(paths.INVENTORY_ENV, raising=False)
    assert paths.find_inventory(None, cwd=deep) == tmp_path / "inventory.yaml"
    monkeypatch.setenv(paths.INVENTORY_ENV, str(tmp_path / "elsewhere.yaml"))
    assert paths.find_inventory(None, cwd=deep) == tmp_path / "elsewhere.yaml"
    assert paths.find_inventory("given.yaml", cwd=deep).name == "given.yaml"


def test_a_profile_that_launched_last_time_and_no_longer_starts_is_a_regression():
    earlier = [{"run_id": "r0", "cells": {("mtp", 0.7): {"n": 20, "loops": 0, "tokens_per_s": 100.0}}, "verdicts": {}}]
    tonight = doc("x", {}, started="2026-11-05",
                  verdicts=[{"profile": "mtp", "kind": "launch-failed:oom", "evidence": "CUDA out of memory"}])
    rep = check_regressions(tonight, earlier)
    assert rep.regressed == ["mtp (launch)"] and describe(rep) == ["mtp (launch): launch-failed:oom; launched in r0"]


def test_the_loop_rate_is_tested_against_the_earlier_nights_pooled_and_the_next_night_still_finds_it():
    nights = [_night(i, 150.0, 100.0, mtp_loops=1) for i in range(10)]
    jump = _night(10, 150.0, 100.0, mtp_loops=9)  # 2 % -> 15 %
    # against the last night alone (9/60 vs 1/60) the test cannot reach a night's level; pooled it does
    assert loop_diff(1, 60, 9, 60).p_worse > 0.05 / 30
    rep = check_regressions(jump, _history(nights))
    loop = next(c for c in rep.checks if c["kind"] == "loop_rate" and c["profile"] == "mtp")
    assert (loop["history_loops"], loop["history_n"], loop["history_runs"]) == (10, 600, 10)
    assert loop["p"] == pytest.approx(loop_diff(10, 600, 9, 60).p_worse) and loop["p"] < 1e-4
    assert rep.regressed == ["mtp T=0.7 (loop_rate)"]
    assert "9/60 loops tonight vs 10/600 over 10 earlier good run(s)" in describe(rep)[0]
    assert loop["history_rho"] == 0.0  # ten steady nights: no spread beyond binomial
    # the night after: the regressed night is one of the ten pooled (18/600) and reads as a spread between nights
    # (rho > 0): the beta-binomial tail, not Fisher, decides, and 9/60 is a night like one already seen. The
    # nightly reported the jump the night it came (docs/metrics.md: 59.5 % that night, 66 % within two)
    rep = check_regressions(_night(11, 150.0, 100.0, mtp_loops=9), _history(nights + [jump]))
    loop = next(c for c in rep.checks if c["kind"] == "loop_rate" and c["profile"] == "mtp")
    assert (loop["history_loops"], loop["history_n"]) == (18, 600) and loop["history_rho"] > 0.0
    assert loop["p"] > loop_diff(18, 600, 9, 60).p_worse and rep.regressed == []
    assert "spread beyond binomial (rho" in loop["note"] and "8.5 %, above alpha" in loop["note"]


def test_nights_that_vary_beyond_their_binomial_spread_widen_the_loop_test():
    steady = [(1, 60), (2, 60), (2, 60), (1, 60), (2, 60), (1, 60), (2, 60), (1, 60)]
    varied = [(0, 60), (0, 60), (5, 60), (0, 60), (6, 60), (0, 60), (0, 60), (1, 60)]  # the same 12 loops in 480
    assert overdispersion([steady]) == 0.0 and overdispersion([[(3, 60)]]) == 0.0
    rho = overdispersion([varied])
    assert 0.05 < rho < 0.2, rho
    # the other arms' nights add to the estimate of the host's spread: steady ones pull it down
    assert 0.0 < overdispersion([varied, steady, steady]) < rho
    calm, wide = loops_vs_history(6, 60, steady), loops_vs_history(6, 60, varied)
    assert calm.p_fisher == pytest.approx(wide.p_fisher) and calm.p_betabinom is None
    assert calm.p_worse == calm.p_fisher < 0.01
    assert wide.p_betabinom > 0.05 and wide.p_worse == wide.p_betabinom  # a night like tonight was seen before
