"""The test suite's port allocator (tests/support/ports.py): below the ephemeral range, never twice."""

from __future__ import annotations

import socket

from tests.support import ports


def test_ports_come_from_below_the_ephemeral_range_each_once_and_bindable():
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50
    low = ports._ephemeral_low()
    assert all(ports.BASE <= p < low for p in got)
    start = ports.BASE + ports._worker_index() * ports.SLICE
    assert all(start <= p < start + ports.SLICE for p in got)
    with socket.socket() as s:
        s.bind(("127.0.0.1", got[-1]))  # free when handed out


def test_a_port_someone_listens_on_is_skipped():
    nxt = ports.free_port() + 1
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", nxt))
        holder.listen()
        assert ports.free_port() != nxt
    finally:
        holder.close()


def test_xdist_workers_get_disjoint_slices(monkeypatch):
    starts = set()
    for w in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", w)
        starts.add(ports._worker_index())
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    starts.add(ports._worker_index())
    assert starts == {0, 1, 2, ports.WORKER_SLOTS - 1}
