"""The job-array nightly's pure parts: the inventory its tasks read, each host's outcome from what its task left
(or why it never ran), and the opt-in drain hook."""

from __future__ import annotations

import yaml
from invoke import MockContext, Result

from mtp_remote.fleet.fleet import HostOutcome
from mtp_remote.fleet.nightly_array import drain_hook, task_inventory, task_outcomes


def test_tasks_read_the_groups_hosts_reached_locally_on_their_node(tmp_path):
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": "a", "hosts": {
        "a": {"transport": "ssh", "address": "login1", "user": "ops", "key_file": "~/.ssh/k", "engine": "sim",
              "env": {"SGLANG_SIM_FAULTS": "state_leak"}, "server": {"kind": "slurm", "gres": "gpu:2"}},
        "b": {"transport": "ssh", "address": "login1", "engine": "sim", "server": {"kind": "slurm"}},
        "c": {"transport": "local"}}}))
    doc = yaml.safe_load(task_inventory(inv, ["a", "b"], "nodes"))
    assert sorted(doc["hosts"]) == ["a", "b"]
    assert doc["hosts"]["a"] == {"transport": "local", "engine": "sim", "env": {"SGLANG_SIM_FAULTS": "state_leak"},
                                 "server": {"kind": "slurm", "gres": "gpu:2"}}
    assert doc["groups"] == {"nodes": ["a", "b"]}


def test_a_host_whose_task_never_ran_is_said_as_such_with_the_schedulers_last_word(tmp_path):
    results = {0: {"index": 0, "host": "a", "node": "gpu-1", "status": "done", "exit_code": 0, "run_id": None,
                   "verdicts": {"mtp": "healthy"}, "started": 10.0, "finished": 40.0, "error": None},
               1: {"index": 1, "host": "b", "node": "gpu-2", "status": "started", "started": 10.0}}
    seen = {0: {"state": "RUNNING", "reason": "None", "node": "gpu-1", "ran": True},
            1: {"state": "RUNNING", "reason": "None", "node": "gpu-2", "ran": True},
            2: {"state": "PENDING", "reason": "ReqNodeNotAvail", "node": "", "ran": False,
                "cancelled": "no task started within server.pending_s = 300 s"}}
    outcomes, part = task_outcomes(["a", "b", "c", "d"], results, seen, 77, tmp_path, tmp_path / "h.sqlite")
    by = {o.host: o for o in outcomes}
    assert by["a"].exit_code == 0 and by["a"].verdicts == {"mtp": "healthy"} and by["a"].duration_s == 30.0
    assert by["a"].facts == {"node": "gpu-1"}
    assert by["b"].exit_code == 2 and "started on gpu-2 but left no result" in by["b"].error
    assert by["c"].error == ("its array task 77_2 never ran: no task started within server.pending_s = 300 s "
                             "(last seen PENDING: ReqNodeNotAvail)")
    assert by["d"].error == "its array task 77_3 never ran (the scheduler never listed it)"
    assert part["never_ran"] == ["b", "c", "d"]
    assert part["nodes"] == {"a": "gpu-1", "b": "gpu-2", "c": "", "d": ""}


def test_the_drain_hook_is_off_by_default_and_runs_only_for_corrupting_nodes():
    outcomes = [HostOutcome("a", 1, {"mtp": "spec-corrupts-output"}), HostOutcome("b", 0, {"mtp": "healthy"})]
    nodes = {"a": "gpu-1", "b": "gpu-2"}
    assert drain_hook(MockContext(), None, outcomes, nodes, lambda h, m: None) == []  # MockContext: nothing ran
    cmd = 'scontrol update nodename=gpu-1 state=drain reason="mtp-remote: spec-corrupts-output on a"'
    c = MockContext(run={cmd: Result("", exited=0)})
    done = drain_hook(c, 'scontrol update nodename=%n state=drain reason="mtp-remote: %v on %h"', outcomes, nodes,
                      lambda h, m: None)
    assert done == [{"host": "a", "node": "gpu-1", "command": cmd, "exit_code": 0, "output": ""}]
