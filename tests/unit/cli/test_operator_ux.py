"""A newcomer's and a breaker's pass over the host-less commands: what each one says when the input is odd
(a samples.jsonl cut by an interrupted write or left empty, a run that failed or came out healthy given to
``bug-report``, a history filter that matches nothing), that a lint finding piped to a file stays on one line,
and that ``hosts``/``history`` do not pay for the scipy-heavy api layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from mtp_remote.cli.main import main
from mtp_remote.report import history as store
from tests.conftest import ROOT, free_port

LOOP = "The user's question is 2+2. " * 60
CALM = "Two plus two is four, because adding two to two gives four."


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """``mtp-remote`` as a real process; stdout is a pipe (not a terminal), 80 columns claimed."""
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"} | {"COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "mtp_remote.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or ROOT, timeout=60, check=False)


def test_a_lint_finding_piped_to_a_file_is_one_line_with_the_flag_and_its_fix():
    r = _cli("lint-command", "python -m sglang.launch_server --model-path /m --mem-fracton-static 0.9")
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "unknown-flag" in ln]
    assert line.startswith("  unknown-flag --mem-fracton-static -> --mem-fraction-static: ")
    assert line.endswith("did you mean --mem-fraction-static?"), r.stdout


def _samples(path, *texts: str, cut_after: int | None = None) -> None:
    """samples.jsonl-shaped lines ({"text": ...}); ``cut_after``: the record at that index is cut in the middle
    (as a run killed mid-write leaves it, and as --resume keeps it before the lines it appends)."""
    lines = [json.dumps({"text": t}) for t in texts]
    if cut_after is not None:
        lines[cut_after] = lines[cut_after][: len(lines[cut_after]) // 2]
    path.write_text("\n".join(lines) + "\n")


def test_analyze_skips_a_record_cut_short_names_it_and_analyses_every_other_line(tmp_path):
    f = tmp_path / "samples.jsonl"
    _samples(f, CALM, LOOP, CALM, LOOP, cut_after=1)  # line 2 cut, lines after it complete (a resumed run)
    r = CliRunner().invoke(main, ["analyze", "--json", str(f)])
    assert r.exit_code == 1, r.output  # line 4 loops: the analysis ran and found it
    rows = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [row["loop"] for row in rows] == [False, False, True]
    assert f"{f}: line 2 is a record cut short" in r.stderr and "skipped" in r.stderr


def test_analyze_still_refuses_a_jsonl_whose_lines_are_only_cut_records(tmp_path):
    f = tmp_path / "samples.jsonl"
    f.write_text('{"text": "The user\'s qu\n')
    r = CliRunner().invoke(main, ["analyze", str(f)])
    assert r.exit_code == 2
    assert f"{f}: no complete JSON line in it: line 1 is a record cut short" in r.stderr


def test_analyze_says_an_empty_samples_file_has_no_texts_instead_of_printing_nothing(tmp_path):
    f = tmp_path / "samples.jsonl"
    f.write_text("")
    r = CliRunner().invoke(main, ["analyze", str(f)])
    assert r.exit_code == 2
    assert f"{f}: no texts in it (empty)" in r.stderr and r.stdout == ""
    j = CliRunner().invoke(main, ["analyze", "--json", str(f)])
    assert j.exit_code == 2 and json.loads(j.stdout)["error"].startswith(f"{f}: no texts in it")


def test_analyze_refuses_an_empty_text_file_or_stdin_as_the_readme_says_instead_of_calling_it_no_loop(tmp_path):
    """`curl ... > out.txt` that failed leaves an empty file: it was analysed as a text with no loop (exit 0)."""
    f = tmp_path / "out.txt"
    f.write_text("\n")
    r = CliRunner().invoke(main, ["analyze", str(f)])
    assert r.exit_code == 2 and f"{f}: no texts in it (empty)" in r.stderr and r.stdout == ""
    s = CliRunner().invoke(main, ["analyze", "-"], input="")
    assert s.exit_code == 2 and "-: no texts in it (empty)" in s.stderr
    ok = CliRunner().invoke(main, ["analyze", "--json", str(f), "-"], input=CALM)
    assert ok.exit_code == 2 and json.loads(ok.stdout.splitlines()[-1])["file"] == "<stdin>"


def _run(runs, run_id: str, doc: dict) -> None:
    (runs / run_id).mkdir(parents=True)
    (runs / run_id / "summary.json").write_text(json.dumps({"run_id": run_id, "host": {"name": "gpu-1"}, **doc}))


def test_bug_report_of_a_run_that_failed_names_its_cause_and_writes_no_body(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "r-failed", {"status": "failed", "verdicts": [],
                            "cause": {"type": "LockHeld", "message": "[gpu-1] host is locked by ops@gpu-1"}})
    r = CliRunner().invoke(main, ["bug-report", "r-failed", "--runs-dir", str(runs)])
    assert r.exit_code == 2, r.output
    assert "run r-failed failed: [gpu-1] host is locked by ops@gpu-1; it has no verdict to report" in r.stderr
    assert not (runs / "r-failed" / "bug-report.md").exists()


def test_bug_report_of_a_healthy_run_names_its_verdicts_instead_of_claiming_corruption(tmp_path):
    runs = tmp_path / "runs"
    _run(runs, "r-ok", {"status": "completed", "verdicts": [{"profile": "mtp", "kind": "healthy", "evidence": ""}]})
    r = CliRunner().invoke(main, ["bug-report", "r-ok", "--runs-dir", str(runs)])
    assert r.exit_code == 2, r.output
    assert ("run r-ok has no spec-corrupts-output, crashed:<cause> or hung:<cause> verdict (verdicts: mtp: healthy)"
            in r.stderr)
    assert "corrupts output:" not in r.stdout and not (runs / "r-ok" / "bug-report.md").exists()


def test_history_filtered_to_nothing_names_the_hosts_and_groups_that_have_runs(tmp_path):
    runs = tmp_path / "runs"
    db = runs / "history.sqlite"
    runs.mkdir()
    for run_id, host, fleet in (("a", "gpu-1", {"group": "rack", "fleet_id": "f1"}), ("b", "gpu-2", None)):
        doc = {"run_id": run_id, "status": "completed", "host": {"name": host}, "playbook": {"name": "nightly"},
               "started_at": "2026-11-02T00:00:00", "exit_code": 0, "simulated": True, "cells": [],
               "verdicts": [{"profile": "mtp", "kind": "healthy", "evidence": ""}], **({"fleet": fleet} if fleet else {})}
        store.record_run(db, doc, runs / run_id)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["history", "-H", "gpu-9", "--runs-dir", str(runs)])
    assert r.exit_code == 0, r.output
    assert "no run recorded for host 'gpu-9'; hosts with runs: gpu-1, gpu-2; groups with runs: rack" in r.output
    j = CliRunner().invoke(main, ["history", "-H", "gpu-9", "--runs-dir", str(runs), "--json"])
    assert j.exit_code == 0 and json.loads(j.output) == []  # scripts still get an empty list
    assert store.recorded_names(db) == (["gpu-1", "gpu-2"], ["rack"])


def test_hosts_and_history_do_not_import_the_api_layer_or_scipy(tmp_path):
    (tmp_path / "runs").mkdir()
    store.record_run(tmp_path / "runs" / "history.sqlite",
                     {"run_id": "a", "status": "completed", "host": {"name": "h"}, "playbook": {"name": "p"},
                      "started_at": "2026-11-02T00:00:00", "exit_code": 0, "simulated": True, "verdicts": []},
                     tmp_path / "runs" / "a")
    for argv in (["hosts", "-i", str(ROOT / "inventory.yaml")], ["history", "--runs-dir", str(tmp_path / "runs")]):
        probe = ("from mtp_remote.cli.main import main\n"
                 f"try:\n    main({argv!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
                 "import sys, json\nprint(json.dumps(sorted(sys.modules)))")
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        mods = set(json.loads(out.strip().splitlines()[-1]))
        assert "sim-local" in out or "h " in out or "│ a" in out, out
        assert not {"scipy", "mtp_remote.experiment.diagnose", "numpy"} & mods, (argv, sorted({"scipy", "mtp_remote.experiment.diagnose"} & mods))


def _interrupt_inside_a_task(run) -> tuple[bool, str]:
    """Ctrl-C (a real SIGINT to this process, the entry points' handler installed) arriving while a task of the
    loop runs, as it did once in five Ctrl-C during `diagnose`: (KeyboardInterrupt raised?, what asyncio logged
    once the task is collected)."""
    import asyncio
    import gc
    import io
    import logging
    import signal

    from mtp_remote.interrupts import Interrupts

    async def sampling():
        signal.raise_signal(signal.SIGINT)  # the handler raises KeyboardInterrupt here, inside this task's step

    async def watched():
        task = asyncio.ensure_future(sampling())
        await asyncio.wait({task, asyncio.ensure_future(asyncio.sleep(5))}, return_when=asyncio.FIRST_COMPLETED)

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logging.getLogger("asyncio").addHandler(handler)
    old = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    Interrupts().install()
    raised = False
    try:
        run(watched())
    except KeyboardInterrupt:
        raised = True
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
        gc.collect()
        logging.getLogger("asyncio").removeHandler(handler)
    return raised, buf.getvalue()


def test_an_interrupt_inside_a_sampling_task_unwinds_without_an_asyncio_traceback():
    import asyncio

    from mtp_remote.interrupts import run_async

    raised, logged = _interrupt_inside_a_task(asyncio.run)  # the defect, reproduced with the plain loop
    assert raised and "Task exception was never retrieved" in logged and "KeyboardInterrupt" in logged
    raised, logged = _interrupt_inside_a_task(run_async)  # what runner/ops now use
    assert raised and logged == ""


def test_run_async_still_reports_an_unretrieved_error_that_is_not_an_interrupt():
    import asyncio
    import gc
    import io
    import logging

    from mtp_remote.interrupts import run_async

    async def boom():
        raise ValueError("a real bug")

    async def main():
        asyncio.ensure_future(boom())
        await asyncio.sleep(0.01)

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logging.getLogger("asyncio").addHandler(handler)
    try:
        run_async(main())
        gc.collect()
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
    assert "Task exception was never retrieved" in buf.getvalue() and "a real bug" in buf.getvalue()


def _sim_inventory(tmp_path):
    """A sim host of its own (free port, workdir tmp/wd): were a refusal to come late, nothing shared is touched."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(json.dumps({"default_host": "sim-local", "hosts": {"sim-local": {
        "transport": "local", "engine": "sim", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "env": {"SGLANG_SIM_TIME_SCALE": "0.01"}}}}))
    return inv


def test_mitigate_from_a_run_that_failed_refuses_before_touching_the_host(tmp_path):
    import pytest

    from mtp_remote.errors import ConfigError
    from mtp_remote.search.mitigate import mitigate

    runs = tmp_path / "runs"
    _run(runs, "r-failed", {"status": "failed", "verdicts": [],
                            "cause": {"type": "LockHeld", "message": "[sim-local] host is locked by root@vm"}})
    inv = _sim_inventory(tmp_path)
    with pytest.raises(ConfigError) as e:
        mitigate(inventory=str(inv), playbook=str(ROOT / "playbooks" / "diagnose-mtp.yaml"), runs_dir=runs,
                 from_run="r-failed")
    assert not (tmp_path / "wd").exists()  # the host was not touched
    assert str(e.value) == ("--from: run r-failed failed: [sim-local] host is locked by root@vm; --from needs a "
                            "completed diagnose run (run `mtp-remote diagnose` again, or leave --from out)")
    assert sorted(p.name for p in runs.iterdir()) == ["r-failed"]  # no mitigation run was started


def test_the_reason_nothing_is_reused_reads_as_a_sentence(tmp_path):
    from mtp_remote.config.inventory import load_inventory
    from mtp_remote.config.playbook import load_playbook
    from mtp_remote.search.from_run import reuse_check

    host = load_inventory(ROOT / "inventory.yaml").get("sim-local")
    pb = load_playbook(ROOT / "playbooks" / "diagnose-mtp.yaml")
    assert reuse_check(tmp_path, host, pb, "mtp") == f"{tmp_path / 'run.json'} is missing or unreadable"
    (tmp_path / "run.json").write_text(json.dumps({"fingerprint": {"host": "other", "playbook": {}}}))
    why = reuse_check(tmp_path, host, pb, "mtp")
    assert why.startswith("host, engine, model_path") and why.endswith(", profile baseline, profile mtp differ"), why


def test_fab_refuses_an_inventory_given_to_its_own_ssh_key_option():
    """`fab status -i inv.yaml` (the README's `-i FILE` is mtp-remote's): fab takes -i as its SSH key file even
    after the task name, and the task ran on the default inventory's hosts without a word."""
    fab = os.path.join(os.path.dirname(sys.executable), "fab")
    env = {k: v for k, v in os.environ.items() if k != "MTP_REMOTE_INVENTORY"}
    r = subprocess.run([fab, "status", "-i", "other-inventory.yaml"], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert ("error: -i other-inventory.yaml: fab's -i is its SSH key file, not the inventory; give the inventory "
            "as --inventory other-inventory.yaml") in " ".join(r.stderr.split())
    assert "Status" not in r.stdout  # nothing ran


def test_a_group_given_to_a_one_host_command_is_named_a_group_with_the_ways_to_run_it_on_all():
    from mtp_remote.config.inventory import load_inventory
    from mtp_remote.errors import ConfigError

    inv = load_inventory(ROOT / "inventory.yaml")
    try:
        inv.get("sims")
    except ConfigError as e:
        msg = str(e)
    else:
        raise AssertionError("a group is not a host")
    assert msg.startswith("hosts: 'sims' is a group (sim-local, sim-healthy), and this runs on one host")
    assert "`mtp-remote CMD -H sims`" in msg and "`fab fleet --command CMD --hosts sims`" in msg
    assert inv.get("sim-local").name == "sim-local" and inv.expand("sims") == ["sim-local", "sim-healthy"]


def test_a_metrics_file_that_cannot_be_written_is_refused_before_the_night_runs(tmp_path):
    """It was found after the whole night (hours on a real host), as a bare FileNotFoundError traceback, exit 1.
    The inventory's host is never contacted: the refusal comes first (no run directory appears)."""
    runs = tmp_path / "runs"
    inv = str(_sim_inventory(tmp_path))
    for target, why in ((tmp_path / "no-such-dir" / "m.prom", f"its directory {tmp_path / 'no-such-dir'} does not exist"),
                        (tmp_path, "is a directory; give a file name")):
        r = CliRunner().invoke(main, ["nightly", "-i", inv, "--runs-dir", str(runs),
                                      "--metrics-file", str(target)])
        assert r.exit_code == 2, r.output
        assert f"error: {target}: --metrics-file: {why}" in " ".join(r.stderr.split()), r.stderr
        assert r.exc_info is None or isinstance(r.exc_info[1], SystemExit)  # no traceback
        assert not runs.exists() and not (tmp_path / "wd").exists()


def test_publishing_metrics_into_a_vanished_directory_names_the_file_and_the_kept_copy(tmp_path):
    import pytest

    from mtp_remote.errors import ConfigError
    from mtp_remote.fleet.nightly import publish_metrics

    src = tmp_path / "metrics.prom"
    src.write_text("mtp_remote_up 1\n")
    dest = tmp_path / "gone" / "m.prom"
    with pytest.raises(ConfigError) as e:
        publish_metrics(src, dest)
    assert str(e.value) == (f"{dest}: --metrics-file: cannot write it (No such file or directory); the run's own "
                            f"metrics.prom is {src}")
    (tmp_path / "gone").mkdir()
    publish_metrics(src, dest)
    assert dest.read_text() == "mtp_remote_up 1\n" and [p.name for p in (tmp_path / "gone").iterdir()] == ["m.prom"]


def test_hosts_shows_all_gpus_for_a_host_without_a_gpu_list_not_a_dash():
    r = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["hosts", "-i", str(ROOT / "inventory.yaml")])
    assert r.exit_code == 0, r.output
    (row,) = [ln for ln in r.output.splitlines() if ln.startswith("│ sim-local")]
    assert [c.strip() for c in row.split("│")][4:6] == ["sim (simulated)", "all"], row


def test_a_bad_sglang_version_is_named_by_the_option_the_user_typed():
    r = CliRunner().invoke(main, ["lint-command", "--sglang-version", "abc", "python -m sglang.launch_server --tp 2"])
    assert r.exit_code == 2
    assert "--sglang-version: not an SGLang version: 'abc' (expected e.g. 0.5.9)" in r.stderr


def test_fab_stop_term_timeout_takes_seconds_and_refuses_anything_else_by_name(tmp_path):
    """`fab stop --term-timeout` is new (mtp-remote stop had it alone); a float default made Invoke cast the value
    itself, and `--term-timeout=abc` was a bare ValueError traceback. Checked before the inventory is read."""
    fab = os.path.join(os.path.dirname(sys.executable), "fab")
    for bad in ("abc", "0", "nan"):
        r = subprocess.run([fab, "-r", str(ROOT), "stop", f"--term-timeout={bad}", "--inventory",
                            str(tmp_path / "missing.yaml")], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r
        assert r.stderr.strip() == f"error: --term-timeout: must be a number of seconds >= 1, not '{bad}'", r.stderr
    r = subprocess.run([fab, "-r", str(ROOT), "stop", "--term-timeout=5", "--inventory", str(tmp_path / "missing.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "missing.yaml: file not found" in r.stderr and "Traceback" not in r.stderr
