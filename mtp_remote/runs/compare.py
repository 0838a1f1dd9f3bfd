"""Two runs on disk compared cell by cell (finding a run and re-rendering it: :mod:`~mtp_remote.runs.rundirs`).

``compare_runs(a, b)`` pairs the cells (profile, temperature) of two run directories and tests each
difference: loop rate by Fisher's exact test (one-sided "b loops more" and two-sided), acceptance length side
by side, speed by Welch's t-test and the Mann-Whitney U test on the per-sample decode speeds
(completion_tokens / latency_s of each successful request in ``samples.jsonl``); see
:mod:`mtp_remote.analysis.runstats`. Reads files only, never the network.
"""

from __future__ import annotations

from pathlib import Path

from ..analysis.runstats import loop_diff, speed_diff
from .rundirs import load_run


def _speeds(samples: list[dict]) -> dict[tuple[str, float], list[float]]:
    out: dict[tuple[str, float], list[float]] = {}
    for s in samples:
        lat = float(s.get("latency_s") or 0.0)
        if s.get("error") is None and lat > 0:
            out.setdefault((s["profile"], float(s["temperature"])), []).append(
                int(s.get("completion_tokens") or 0) / lat)
    return out


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """Cell-by-cell comparison of two runs (``a`` the reference, ``b`` the one under test).

    Returns ``{"a": {run_id, host, playbook, status}, "b": {...}, "verdicts": [{profile, a, b}],
    "cells": [{profile, temperature, loops: LoopDiff dict, accept_a, accept_b, speed: SpeedDiff dict,
    only_in}]}``; ``only_in`` is "a"/"b" for a cell present in one run only (no test)."""
    (doc_a, s_a), (doc_b, s_b) = load_run(run_a), load_run(run_b)
    cells_a = {(c["profile"], float(c["temperature"])): c for c in doc_a.get("cells", [])}
    cells_b = {(c["profile"], float(c["temperature"])): c for c in doc_b.get("cells", [])}
    speed_a, speed_b = _speeds(s_a), _speeds(s_b)
    rows = []
    for key in list(dict.fromkeys([*cells_a, *cells_b])):
        ca, cb = cells_a.get(key), cells_b.get(key)
        row = {"profile": key[0], "temperature": key[1], "only_in": None if ca and cb else ("a" if ca else "b")}
        if ca and cb:
            row["loops"] = loop_diff(ca["loops"], ca["n"], cb["loops"], cb["n"]).to_dict()
            row["accept_a"], row["accept_b"] = ca.get("accept_length"), cb.get("accept_length")
            row["speed"] = speed_diff(speed_a.get(key, []), speed_b.get(key, [])).to_dict()
        rows.append(row)
    va = {v["profile"]: v["kind"] for v in doc_a.get("verdicts", [])}
    vb = {v["profile"]: v["kind"] for v in doc_b.get("verdicts", [])}

    def head(doc: dict, d: Path) -> dict:
        return {"run_id": doc.get("run_id"), "dir": str(d), "host": doc["host"]["name"],
                "playbook": doc["playbook"]["name"], "status": doc.get("status", "completed"),
                "started_at": doc.get("started_at"), "tool_version": doc.get("tool_version")}

    return {"a": head(doc_a, run_a), "b": head(doc_b, run_b),
            "verdicts": [{"profile": p, "a": va.get(p), "b": vb.get(p)} for p in dict.fromkeys([*va, *vb])],
            "cells": rows}
