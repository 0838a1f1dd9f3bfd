"""What a user waits for and is told when sshd goes away, against a real sshd that the test kills (the sim as the
remote): the reconnect bound is the whole wait from the drop to the exit, and the message states it; a standalone
``stop`` cut by the drop says the record is kept and to run ``stop`` again — and that second stop finishes."""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.test_real_behaviour_lifecycle import _request_in_flight
from tests.ssh.test_ssh_faults import _cli, _error, _files, _servers_on, _when_samples

pytestmark = [pytest.mark.ssh, pytest.mark.sim]

BOUND_S = 3.0  # 3 × connect_timeout (1 s in _files)


def test_the_reconnect_bound_is_what_the_user_waits_and_the_message_says_it(own_sshd, tmp_path):
    inv, pb, port = _files(tmp_path, own_sshd.server)
    runs = tmp_path / "runs"
    killed: list[float] = []
    _when_samples(runs, 2, lambda: (own_sshd.stop(), killed.append(time.monotonic())))
    code, out, err = _cli("diagnose", "-i", inv, "-p", pb, "-H", "gpu", "--runs-dir", str(runs))
    waited = time.monotonic() - killed[0]
    assert code == 2, (out, err)
    line = _error(err)
    said = float(re.search(r"gave up reconnecting (\d+) s after the drop \(the bound: (\d+) s", line).group(1))
    assert said <= BOUND_S + 1, line
    # one account of the drop (issue 33 minor: progress said "re-opened" above the error saying it was not)
    assert re.search(r"the SSH connection dropped \d+ time\(s\); not re-opened; ", out), out
    assert "; re-opened" not in out and "re-opened in" not in out + line, out
    # the wait after the kill: the bound, plus the process's own exit (4.2 s of it at load 15, CI stop 25); before,
    # each later step (the stop, the log copy, the lock's release) waited a bound of its own again: 4 bounds, 12 s+
    assert waited < BOUND_S + 6, f"exit {waited:.1f} s after sshd was killed; the message said {said:.0f} s"
    own_sshd.start()
    assert _cli("stop", "-i", inv, "-H", "gpu")[0] == 0
    assert not _servers_on(port)


def test_a_standalone_stop_cut_by_a_drop_says_the_record_is_kept_and_a_second_stop_finishes(own_sshd, tmp_path):
    inv, pb, port = _files(tmp_path, own_sshd.server)
    code, out, err = _cli("launch", "-i", inv, "-p", pb, "-H", "gpu", "--profile", "baseline")
    assert code == 0, (out, err)
    _request_in_flight(port)  # SGLang's drain with a request in flight never ends: the stop waits on it
    time.sleep(0.5)
    cut = []

    def on_line(line: str) -> None:
        if "SIGTERM sent" in line and not cut:
            cut.append(1)
            own_sshd.stop()

    code, out, err = _cli("stop", "-i", inv, "-H", "gpu", "--term-timeout", "20", on_line=on_line)
    assert cut and code == 2, (out, err)
    assert "Traceback" not in err, err
    line = _error(err)
    assert "the server record is kept on gpu" in line and "run the stop again" in line, line
    assert "mtp-remote stop -H gpu" in line
    assert _servers_on(port), "the server is still there (the stop was cut)"
    own_sshd.start()
    code, out, err = _cli("stop", "-i", inv, "-H", "gpu", "--term-timeout", "2")
    assert code == 0, (out, err)
    assert "stopped PID" in out, out
    assert not _servers_on(port)
