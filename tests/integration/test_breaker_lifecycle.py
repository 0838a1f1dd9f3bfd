"""Edge cases of the server's life found by trying to break it: a server that dies right after its ready line
(before /health answers), and a log stream carrying bytes that are not UTF-8 or characters cut by a read."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import pytest
import yaml

from mtp_remote.errors import LaunchError
from mtp_remote.experiment import diagnose as api
from mtp_remote.remote.logs import READY_LINE
from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.sim

#: ``python -m sglang.launch_server``: SGLang's startup lines, its ready line, then exit 1 (no HTTP server)
_DIES_AFTER_READY = f'''import sys, time
for line in ["Load weight end. type=Qwen3ForCausalLM, avail mem=10.00 GB",
             "KV Cache is allocated. #tokens: 100000", "INFO:     Uvicorn running on http://127.0.0.1:1",
             "{READY_LINE}"]:
    print("[2026-12-01 00:00:00] " + line, flush=True)
    time.sleep(0.05)
sys.exit(1)
'''


def test_a_server_that_dies_right_after_its_ready_line_is_a_crash_at_once_not_a_wait_on_health(tmp_path):
    stub = tmp_path / "stub" / "sglang"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('__version__ = "0.5.9"\n')
    (stub / "launch_server.py").write_text(_DIES_AFTER_READY)
    inv = {"default_host": "h", "hosts": {"h": {
        "transport": "local", "engine": "sglang", "workdir": str(tmp_path / "wd"), "port": free_port(),
        "python": sys.executable, "model_path": "/models/m", "env": {"PYTHONPATH": str(tmp_path / "stub")}}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(samples=1, temperatures=[0.7], timeouts={"ready_s": 300},
              compare={**pb["compare"], "calibration": False})  # about the launch: no A/A relaunch
    (tmp_path / "pb.yaml").write_text(yaml.safe_dump(pb))
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as e:
        api.diagnose(inventory=str(tmp_path / "inventory.yaml"), playbook=str(tmp_path / "pb.yaml"),
                     runs_dir=tmp_path / "runs")
    took = time.monotonic() - t0
    assert took < 30, f"{took:.0f} s: the dead server was waited on (timeouts.ready_s is 300 s)"
    assert e.value.cause == "process_exited" and "after its ready line" in e.value.message
    assert READY_LINE in (e.value.evidence or "").splitlines()[-1]


#: writes bytes that are not UTF-8, many 2- and 3-byte characters (some cut by a read's boundary), the ready
#: line, waits until the test has seen it ready (the file ``argv[2]``, when given; a fixed 0.3 s was too short
#: for a ready check over SSH on a loaded machine: the writer had exited, "crashed"), more of the same, exits
_MIXED_BYTES = f'''import os, sys, time
with open(sys.argv[1], "wb") as f:
    f.write(b"bad \\xff\\xfe\\xc3 bytes\\n" * 50 + "caf\\u00e9 \\u2014 na\\u00efve\\n".encode() * 400
            + b"{READY_LINE}\\n")
    f.flush()
    deadline = time.monotonic() + 60
    while len(sys.argv) > 2 and not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.05)
    f.write("after \\u2014\\n".encode() * 700 + b"end \\xe2\\x80")  # the log ends inside a character
    f.flush()
'''


@contextlib.contextmanager
def _lifecycle_of(pid: int, log, tmp_path, request, over: str):
    """(ProcessServer, ServerRecord) for the process ``pid`` writing ``log``, reached locally or through the
    test sshd (``over``); the SSH connection is closed on exit."""
    from invoke import Context

    from mtp_remote.config.inventory import HostConfig
    from mtp_remote.serving.process import ProcessServer
    from mtp_remote.remote import connect as transport
    from mtp_remote.remote import facts, process

    if over == "ssh":
        host = HostConfig(**request.getfixturevalue("sshd").host_config(engine="sim", workdir=str(tmp_path)),
                          name="h")
        c = transport.connect(host)
    else:
        host, c = HostConfig(name="h", transport="local", engine="sim", workdir=str(tmp_path)), Context()
    try:
        info = facts.get_process_info(c, pid)
        rec = process.ServerRecord(pid=pid, pgid=pid, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                                   profile="x", port=0, log_path=str(log), run_id="r", started_at=time.time())
        yield ProcessServer(c, host, python=sys.executable, workdir=str(tmp_path), run_id="r"), rec
    finally:
        if over == "ssh":
            transport.close(c)


@pytest.mark.parametrize("over", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_the_log_stream_counts_bytes_and_decodes_utf8_across_reads(tmp_path, request, over):
    src, log = tmp_path / "writer.py", tmp_path / "srv.log"
    src.write_text(_MIXED_BYTES)
    go = tmp_path / "go"
    p = subprocess.Popen([sys.executable, str(src), str(log), str(go)], start_new_session=True)
    try:
        with _lifecycle_of(p.pid, log, tmp_path, request, over) as (lc, rec):
            stream = lc.follow(rec)
            assert lc.wait_ready(rec, timeout_s=30, stream=stream).kind == "ready"
            go.touch()  # the writer goes on: the rest of the log, then its exit
            p.wait(10)
            assert stream.wait_end(10), "the stream ends with the writer"
            data = log.read_bytes()
            assert stream.nbytes == len(data), "one byte counted per byte of the log, not per character decoded"
            assert stream.text == data.decode("utf-8", "replace"), "no character lost at a read's boundary"
            assert stream.text.count("\ufffd") == 151 and stream.text.count("\u2014") == 1100
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("over", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_the_polling_fallback_counts_the_logs_own_bytes_through_invalid_utf8_and_cut_characters(
        tmp_path, request, monkeypatch, over):
    """The poll that replaces a stream that ended (no tail -f, a dropped connection) reads from a byte offset:
    each poll's text, read in chunks that cut characters, joins into the log exactly, and the offsets add up
    to the log's size (before, replacement characters were counted as 3 bytes each and the offset drifted)."""
    from mtp_remote.remote import logfile

    monkeypatch.setattr(logfile, "CHUNK", 997)  # odd: chunks end inside 2- and 3-byte characters
    src, log = tmp_path / "writer.py", tmp_path / "srv.log"
    src.write_text(_MIXED_BYTES)
    subprocess.run([sys.executable, str(src), str(log)], check=True)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        with _lifecycle_of(p.pid, log, tmp_path, request, over) as (lc, rec):
            data, offset, texts, polls = log.read_bytes(), 0, [], 0
            while True:
                alive, text, n = lc.poll(rec, offset)
                assert alive
                polls += 1
                if n == 0:
                    break
                texts.append(text)
                offset += n
            assert polls > len(data) // 997, "the log came in many chunks"
            assert offset == len(data) - 2, "every byte counted once; the cut character at the end waits"
            assert "".join(texts) == data[:-2].decode("utf-8", "replace")
            assert "".join(texts).count("\ufffd") == 150
            p.kill()
            p.wait()
            last = lc.poll(rec, offset)
            assert (last.alive, last.text, last.nbytes) == (False, "\ufffd", 2), "a dead writer's cut end is shown"
    finally:
        p.kill()
        p.wait()


def test_fab_launch_stopped_by_sigterm_while_waiting_stops_its_server_and_exits_130(tmp_path):
    """As ``mtp-remote launch`` does (a CI job's timeout sends SIGTERM): before, fab died at once and left the
    server running."""
    import os
    import signal
    from pathlib import Path

    from tests.integration.test_interrupts import _read_until, _server_on
    from tests.integration.test_scenarios import write_config

    inv, pb = write_config(tmp_path, None)
    port = yaml.safe_load(Path(inv).read_text())["hosts"]["sim"]["port"]
    p = subprocess.Popen([sys.executable, "-m", "fabric", "-r", str(ROOT), "launch", "--profile", "baseline",
                          "--playbook", pb],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "MTP_REMOTE_INVENTORY": inv, "COLUMNS": "250"}, cwd=tmp_path)
    out = _read_until(p, r"baseline: launched PID")
    p.send_signal(signal.SIGTERM)
    rest, _ = p.communicate(timeout=60)
    out += rest
    assert p.returncode == 130 and "stopping the server we started" in out and "error: interrupted" in out, out
    assert not _server_on(port), out
