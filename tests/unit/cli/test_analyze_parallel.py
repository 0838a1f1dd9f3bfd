"""``analyze`` spreads many texts over forked workers; the rows are the serial rows, in the same order."""

from __future__ import annotations

from mtp_remote.cli import tool_views as cli_ops


def _texts() -> list[tuple]:
    loop = "Let me think. " * 3 + "The user's question is 2+2. " * 40
    return [(f"t{i}", loop if i % 7 == 0 else f"Answer {i}: the sum is {i + 2}. " + "Prose goes on here. " * (i % 5),
             None) for i in range(60)]


def test_parallel_rows_are_the_serial_rows_in_order(monkeypatch):
    serial = list(map(cli_ops._analyze_one, _texts()))
    monkeypatch.setattr(cli_ops, "PARALLEL_MIN_TEXTS", 10)
    parallel = list(cli_ops._analyzed(_texts()))
    assert parallel == serial
    assert [r["file"] for r in parallel] == [f"t{i}" for i in range(60)]
    assert sum(1 for r in parallel if r["loop"]) == 9  # t0, t7, ..., t56
