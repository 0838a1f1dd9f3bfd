"""``stop --force`` signals foreign processes by PID in one host-side step (signal.sh): TERM, wait, KILL the
survivors; a PID whose start time no longer matches the listing (exited, number reused) is left alone."""

from __future__ import annotations

import subprocess
import sys
import time

from invoke import Context

from mtp_remote.remote import facts, process


def _start(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.3)  # the handler is installed
    return p


def test_term_then_kill_by_pid_and_a_reused_pid_is_left_alone():
    c = Context()
    polite = _start("import time\nwhile True: time.sleep(0.05)")
    stubborn = _start("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.05)")
    bystander = _start("import time\nwhile True: time.sleep(0.05)")
    try:
        start = {p.pid: facts.get_process_info(c, p.pid).start_ticks for p in (polite, stubborn, bystander)}
        t0 = time.monotonic()
        killed = process.signal_pids(c, [(polite.pid, start[polite.pid]), (stubborn.pid, start[stubborn.pid]),
                                         (bystander.pid, start[bystander.pid] + 1)], term_s=1)
        took = time.monotonic() - t0
        assert killed == [stubborn.pid]
        assert polite.wait(5) == -15 and stubborn.wait(5) == -9
        assert bystander.poll() is None, "a PID listed with another start time (reused) was not signalled"
        assert 1.0 <= took < 4.0, took
    finally:
        for p in (polite, stubborn, bystander):
            p.kill()
            p.wait()


def test_the_signal_report_parses_kills_and_survivors():
    from mtp_remote.remote.hostscripts import parse_signal

    out = "signal TERM 10\nsignal TERM 11\nskipped 12\nprogress x\nsignal KILL 11\nsurvivors\nresult ok\n"
    assert parse_signal(out) == (True, [11], [])
    assert parse_signal("signal TERM 10\nsignal KILL 10\nsurvivors 10\nresult ok\n") == (True, [10], [10])
    assert parse_signal("") == (False, [], [])
