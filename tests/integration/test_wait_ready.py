"""wait_ready on real corpus log text written by a real process: Ready, Crashed (with cause and hint), TimedOut."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Context

from mtp_remote.config.inventory import HostConfig
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import facts, process

REPLAY = Path(__file__).parent / "replay_log.py"


@pytest.fixture
def replay(tmp_path, corpus):
    procs = []

    def start(name: str, then: str, delay: float = 0.002):
        log = tmp_path / f"{name}.log"
        p = subprocess.Popen([sys.executable, str(REPLAY), str(corpus / "logs" / f"{name}.log"), str(log),
                              str(delay), then], start_new_session=True)
        procs.append(p)
        c = Context()
        info = None
        for _ in range(100):
            info = facts.get_process_info(c, p.pid)
            if info and str(REPLAY) in info.cmdline:
                break
            time.sleep(0.01)
        rec = process.ServerRecord(pid=p.pid, pgid=p.pid, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                                   profile=name, port=0, log_path=str(log), run_id="r", started_at=time.time())
        host = HostConfig(name="replay", transport="local", engine="sim", workdir=str(tmp_path))
        return ProcessServer(c, host, python=sys.executable, workdir=str(tmp_path), run_id="r"), rec

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_a_ready_log_gives_ready_with_its_milestones_in_order(replay):
    lc, rec = replay("l01_ready_tp2_nextn", "stay")
    out = lc.wait_ready(rec, timeout_s=30)
    assert out.kind == "ready"
    assert [m["name"] for m in out.milestones] == ["weights_loaded", "kv_cache_allocated", "cuda_graph_captured",
                                                   "http_up", "ready"]
    assert "The server is fired up and ready to roll!" in out.log_tail[-1] or any(
        "ready to roll" in ln for ln in out.log_tail)


def test_a_kv_pool_failure_is_a_crash_with_cause_and_hint_even_before_the_process_exits(replay):
    lc, rec = replay("l03_kv_pool_too_small", "stay")
    out = lc.wait_ready(rec, timeout_s=30)
    assert out.kind == "crashed" and out.cause == "kv_pool_too_small"
    assert "increase --mem-fraction-static" in out.hint
    assert 0 < len(out.log_tail) <= 30


def test_a_process_that_exits_is_a_crash_classified_from_its_log(replay):
    lc, rec = replay("l12_unknown_flag", "exit")
    out = lc.wait_ready(rec, timeout_s=30)
    assert out.kind == "crashed" and out.cause == "argparse_error"


def test_a_log_that_stops_short_of_ready_times_out(replay):
    lc, rec = replay("l02_still_starting", "stay")
    t0 = time.monotonic()
    out = lc.wait_ready(rec, timeout_s=1.0)
    assert out.kind == "timed_out" and 1.0 <= time.monotonic() - t0 < 5
    assert {"weights_loaded", "kv_cache_allocated"} <= {m["name"] for m in out.milestones}
    assert "starting" in out.hint


def test_a_half_written_fatal_line_is_judged_only_once_complete(corpus):
    from types import SimpleNamespace

    from mtp_remote.serving.readiness import Watch
    from mtp_remote.remote.logs import READY_LINE

    # the field log crashed after readiness; drop the ready line so the crash happens during the wait
    text = (corpus / "logs" / "l10_mamba_cache_exhausted.log").read_text().replace(READY_LINE, "warming up")
    cut = text.index("Not enough space") + len("Not en")  # the chunk ends mid-line
    lc = SimpleNamespace(on_progress=lambda msg: None)
    rec = SimpleNamespace(profile="mtp")
    w = Watch(lc, rec, timeout_s=60, health=None)
    assert w.step(text[:cut], alive=True) is None  # "AssertionError: Not en" alone decides nothing
    out = w.step(text[cut:], alive=True)
    assert out.kind == "crashed" and out.cause == "mamba_cache_exhausted"


@pytest.mark.parametrize("then", ["stay", "exit"])
def test_a_host_whose_tail_cannot_follow_is_polled_to_the_same_outcome(replay, tmp_path, monkeypatch, then):
    """a tail that cannot follow (-f refused): the stream ends at once while the server lives; one poll says the server
    lives, and the wait goes on by polling (children recorded by their own step then)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tail").write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -f ] && { echo "tail: unrecognized option -f" >&2; '
                               'exit 1; }; done\nexec /usr/bin/tail "$@"\n')
    (fake / "tail").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{__import__('os').environ['PATH']}")
    lc, rec = replay("l01_ready_tp2_nextn" if then == "stay" else "l12_unknown_flag", then)
    out = lc.wait_ready(rec, timeout_s=30)
    if then == "stay":
        assert out.kind == "ready" and [m["name"] for m in out.milestones][-1] == "ready"
        assert (tmp_path / "server.children").exists(), "the polled wait recorded the children itself"
    else:
        assert out.kind == "crashed" and out.cause == "argparse_error"


def test_the_stream_ends_with_the_server_and_holds_its_whole_log(replay, tmp_path):
    lc, rec = replay("l01_ready_tp2_nextn", "stay")
    stream = lc.follow(rec)
    out = lc.wait_ready(rec, timeout_s=30, stream=stream)
    assert out.kind == "ready"
    __import__("os").kill(rec.pid, 9)
    assert stream.wait_end(5.0), "the stream ended by itself once the server exited"
    assert stream.complete and stream.text == Path(rec.log_path).read_text()
    assert stream.text.count("\n") == Path(rec.log_path).read_text().count("\n") > 20


def test_a_log_deleted_on_the_host_is_still_followed_to_the_servers_last_line(tmp_path):
    """tail -f follows the open file: what the server writes after its log was deleted still arrives."""
    log = tmp_path / "s.log"
    p = subprocess.Popen(["sh", "-c", f"exec > {log}; echo starting; echo 'The server is fired up and ready to roll!';"
                          f" sleep 0.6; echo after-delete-1; sleep 0.2; echo after-delete-2; exit 0"],
                         start_new_session=True)
    try:
        c = Context()
        info = facts.get_process_info(c, p.pid)
        rec = process.ServerRecord(pid=p.pid, pgid=p.pid, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                                   profile="x", port=0, log_path=str(log), run_id="r", started_at=time.time())
        host = HostConfig(name="x", transport="local", engine="sim", workdir=str(tmp_path))
        lc = ProcessServer(c, host, python=sys.executable, workdir=str(tmp_path), run_id="r")
        stream = lc.follow(rec)
        assert lc.wait_ready(rec, timeout_s=10, stream=stream).ok
        log.unlink()
        p.wait(5)
        assert stream.wait_end(5.0)
        assert stream.text.endswith("after-delete-1\nafter-delete-2\n"), stream.text
    finally:
        p.kill()
        p.wait()


def _long_server(tmp_path, log: Path):
    """A 'server' that lives 60 s (until killed), its record and a lifecycle on it."""
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    c = Context()
    info = facts.get_process_info(c, p.pid)
    rec = process.ServerRecord(pid=p.pid, pgid=p.pid, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                               profile="x", port=0, log_path=str(log), run_id="r", started_at=time.time())
    host = HostConfig(name="x", transport="local", engine="sim", workdir=str(tmp_path))
    return p, rec, ProcessServer(c, host, python=sys.executable, workdir=str(tmp_path), run_id="r")


def _closed_within(stream, seconds: float) -> float | None:
    import threading

    t0 = time.monotonic()
    t = threading.Thread(target=stream.close, daemon=True)
    t.start()
    t.join(seconds)
    return None if t.is_alive() else time.monotonic() - t0


def test_closing_a_stream_the_moment_it_opened_stops_its_tail_and_returns(tmp_path):
    """`fab launch` + SIGTERM as the wait began hung (1 in 12 runs under load): the stream was closed before its
    first line (the tail's PID) arrived, so nothing was killed, and the close joined a follow that ends only with
    the server -- whose stop came after the close. The close now waits for the PID and stops the tail."""
    log = tmp_path / "s.log"
    log.write_text("starting\n")
    p, rec, lc = _long_server(tmp_path, log)
    try:
        for _ in range(3):
            stream = lc.follow(rec)
            took = _closed_within(stream, 15)  # at once: no read before, as in an interrupted launch
            assert took is not None and took < 6, took
            assert stream.ended and p.poll() is None  # the tail stopped; the server was not touched
    finally:
        p.kill()
        p.wait()


def test_a_stream_whose_tail_never_starts_is_left_to_end_with_the_server_not_waited_on(tmp_path, monkeypatch):
    """The log never appears (the host side waits for it before starting its tail): no PID ever comes. The close
    gives up after its bounded waits instead of joining a follow that ends only with the server."""
    from mtp_remote.remote import follow

    monkeypatch.setattr(follow, "PID_WAIT_S", 0.3)
    p, rec, lc = _long_server(tmp_path, tmp_path / "never-written.log")
    try:
        stream = lc.follow(rec)
        took = _closed_within(stream, 15)
        assert took is not None and 5 <= took < 9, took  # 0.3 s for the PID, 5 s for the stream to end, 1 s join
        assert not stream.ended
        p.kill()
        p.wait()
        deadline = time.monotonic() + 5
        while not stream.ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stream.ended  # the follow ended by itself once the server was gone
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
