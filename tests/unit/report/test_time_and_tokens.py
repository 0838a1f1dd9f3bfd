"""Where the time and the tokens go: the progress line a non-terminal gets while sampling, the time split per
profile and the token accounting of summary.json, and the snapshot script that reads a host's facts at once."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

from invoke import Context
from rich.console import Console

from mtp_remote.remote import facts, process, snapshot
from mtp_remote.report.accounting import time_split, time_split_line, token_accounting
from mtp_remote.report.console import RichHooks


def test_a_non_terminal_gets_a_progress_line_while_sampling_and_none_after():
    out = io.StringIO()
    rh = RichHooks(Console(file=out, force_terminal=False, width=200), heartbeat_s=0.05)
    rh.on_profile("mtp", 20)
    for done in range(1, 15):
        rh.on_sample("mtp", done, 20)
    for _ in range(3):
        rh.on_loop("mtp")
    time.sleep(0.2)
    lines = [x for x in out.getvalue().splitlines() if x.startswith("mtp: ")]
    assert lines and lines[-1].startswith("mtp: mtp 14/20 samples, 3 loops, ") and lines[-1].endswith(" s")
    for done in range(15, 21):
        rh.on_sample("mtp", done, 20)
    n = len(out.getvalue().splitlines())
    time.sleep(0.15)
    assert len(out.getvalue().splitlines()) == n  # the heartbeat ended with the profile
    assert "mtp: 20 samples done" in out.getvalue()


def _pr(profile, wall, ready, sampling, stop, release):
    return SimpleNamespace(profile=profile, wall_s=wall, ready_s=ready, sampling_s=sampling, stop_s=stop,
                           gpu_release_s=release)


def test_the_time_split_gives_each_profile_its_parts_and_the_tool_the_rest():
    split = time_split([_pr("baseline", 30.0, 12.0, 15.0, 2.0, 1.0), _pr("mtp", 40.0, 13.0, 24.0, 2.5, 1.5)], 73.0)
    base, mtp = split["profiles"]
    assert base["tool_s"] == 1.0 and mtp["tool_s"] == 0.5
    assert split["total"] == {"wall_s": 70.0, "launch_ready_s": 25.0, "sampling_s": 39.0, "stop_s": 4.5,
                              "gpu_release_s": 2.5, "tool_s": 1.5, "command_s": 73.0,
                              "outside_profiles_s": 3.0}
    assert time_split_line(split) == ("launch/ready 25.0 s, sampling 39.0 s, stop + GPU release 4.5 s, "
                                      "tool 4.5 s")


def test_tokens_generated_and_saved_count_stopped_samples_up_to_their_stop():
    samples = [{"profile": "baseline", "completion_tokens": 400, "loop_stop": None},
               {"profile": "mtp", "completion_tokens": 300, "loop_stop": {"saved_tokens": 1748}},
               {"profile": "mtp", "completion_tokens": 2048}]
    t = token_accounting(samples, 2048)
    assert (t["generated_tokens"], t["tokens_saved"], t["loop_stops"]) == (2748, 1748, 1)
    assert t["without_stop_at_most"] == 4496
    assert t["by_profile"]["mtp"] == {"generated_tokens": 2348, "tokens_saved": 1748, "loop_stops": 1,
                                      "kl_probe_tokens": 0}


def test_tokens_the_kl_probe_generated_for_its_own_requests_are_counted():
    # issue 31: a T = 0.7 sample's probe regenerates it at T = 1; those tokens were not in generated_tokens
    samples = [{"profile": "mtp", "completion_tokens": 300, "kl": {"mean_k3": 1e-5, "probe_tokens": 280}},
               {"profile": "mtp", "completion_tokens": 200, "kl": {"mean_k3": 1e-5, "probe_tokens": 0}},  # T = 0
               {"profile": "baseline", "completion_tokens": 100, "kl": None}]
    t = token_accounting(samples, 2048)
    assert (t["generated_tokens"], t["kl_probe_tokens"]) == (880, 280)
    assert t["by_profile"]["mtp"]["generated_tokens"] == 780 and t["by_profile"]["baseline"]["kl_probe_tokens"] == 0


def test_one_snapshot_script_runs_every_section_and_keeps_each_output_and_exit_status(tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / process.PIDFILE).write_text("1\n")  # PID 1 always exists
    snap = snapshot.run_snapshot(Context(), {
        "record": process.read_record_command(str(wd)), "proc": snapshot.record_process_command(str(wd)),
        "tcp": facts.listening_ports_command(), "fails": "echo half; exit 3", "bare": "printf 'no newline'"})
    assert process.parse_record(snap["record"].stdout) is None  # no server.json: no record, no warning
    assert facts.parse_process_info(snap["proc"].stdout).pid == 1
    assert snap["fails"] == snapshot.Section("half\n", 3) and snap["bare"] == snapshot.Section("no newline", 0)
    assert snapshot.home_relative("~/.mtp-remote/x") == ".mtp-remote/x" and snapshot.home_relative("/abs") == "/abs"
    assert snapshot.home_relative("~") == "."
