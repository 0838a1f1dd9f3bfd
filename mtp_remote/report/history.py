"""History of runs (stdlib ``sqlite3``): every ``diagnose`` and ``nightly`` run, completed or failed.

One row per run (host, playbook, status ``completed``/``failed``/``interrupted`` with its cause, exit code,
time, directory) and one per verdict and per cell, so ``history`` lists every run and the nightly regression
check finds the earlier good runs (:mod:`mtp_remote.fleet.regression`). The database file
defaults to ``RUNS_DIR/history.sqlite``. ``watch`` records each probe of a live endpoint in table ``probes``
(:func:`record_probe`, :func:`probe_history`). A run of a fleet nightly (``nightly -H GROUP``) carries its group
(the inventory group, or the ``a,b,c`` list as given) and the fleet run id, so ``history --group`` lists one
night of a group. Databases written before the ``status``/``cause`` or ``host_group``/``fleet_id`` columns
existed are upgraded in place (``ALTER TABLE ... ADD COLUMN``); an old database keeps opening.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from ..errors import ConfigError
from ..records.summary import FleetTag, Summary

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, host TEXT NOT NULL, playbook TEXT NOT NULL, simulated INTEGER NOT NULL,
  started_at TEXT NOT NULL, duration_s REAL, exit_code INTEGER NOT NULL, run_dir TEXT, tool_version TEXT
);
CREATE TABLE IF NOT EXISTS verdicts (
  run_id TEXT NOT NULL REFERENCES runs(run_id), profile TEXT NOT NULL, kind TEXT NOT NULL,
  evidence TEXT, p_value REAL, PRIMARY KEY (run_id, profile)
);
CREATE TABLE IF NOT EXISTS cells (
  run_id TEXT NOT NULL REFERENCES runs(run_id), profile TEXT NOT NULL, temperature REAL NOT NULL,
  n INTEGER, loops INTEGER, loop_rate REAL, accept_length REAL, tokens_per_s REAL,
  PRIMARY KEY (run_id, profile, temperature)
);
CREATE TABLE IF NOT EXISTS probes (
  watch_id TEXT NOT NULL, endpoint TEXT NOT NULL, probe INTEGER NOT NULL, url TEXT, started_at TEXT NOT NULL,
  duration_s REAL, n INTEGER, errors INTEGER, loops INTEGER, loop_rate REAL, accept_length REAL,
  accept_length_nonloop REAL, tokens_per_s REAL, tokens_per_s_nonloop REAL, greedy_checked INTEGER,
  greedy_changed INTEGER, alerts TEXT, PRIMARY KEY (watch_id, endpoint, probe)
);
"""

BAD = ("spec-corrupts-output",)

#: Columns added after the first release, with their declarations: added to an older database on open.
ADDED_COLUMNS = (("status", "TEXT NOT NULL DEFAULT 'completed'"), ("cause", "TEXT"), ("host_group", "TEXT"),
                 ("fleet_id", "TEXT"))

#: Seconds a writer waits for another one (the hosts of a fleet nightly record their runs concurrently).
BUSY_TIMEOUT_S = 30.0


def check_history_path(path: str | Path) -> Path:
    """A usable history file: absent (it will be created) or an SQLite database. Raises ConfigError naming
    the file otherwise — before a nightly run spends hours, not after."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError("is a directory; give a file for the SQLite history", file=str(p), field="--history")
    if p.exists() and p.stat().st_size > 0:
        with p.open("rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise ConfigError("exists and is not an SQLite database; refusing to overwrite it", file=str(p),
                                  field="--history")
    return p


def _connect(path: Path) -> sqlite3.Connection:
    check_history_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    db.executescript(SCHEMA)
    cols = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
    for col, decl in ADDED_COLUMNS:
        if col not in cols:
            try:
                db.execute(f"ALTER TABLE runs ADD COLUMN {col} {decl}")
            except sqlite3.OperationalError as e:  # another host's thread of the same fleet added it first
                if "duplicate column" not in str(e):
                    raise
    return db


def record_run(path: str | Path, doc: Summary | dict, run_dir: str | Path) -> None:
    """Insert (or replace) one run's summary document (completed or failed) into the history at ``path``.
    Its ``fleet`` (group and fleet id, set by a fleet nightly) fills the group columns."""
    doc = Summary.of(doc)
    fleet = doc.fleet or FleetTag()
    with closing(_connect(Path(path))) as db, db:
        db.execute("INSERT OR REPLACE INTO runs (run_id, host, playbook, simulated, started_at, duration_s, "
                   "exit_code, run_dir, tool_version, status, cause, host_group, fleet_id) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (doc.run_id, doc.host.name, doc.playbook.name, int(bool(doc.simulated)), doc.started_at,
                    doc.duration_s, doc.exit_code, str(run_dir), doc.tool_version, doc.status, doc.cause_line,
                    fleet.group, fleet.fleet_id))
        db.execute("DELETE FROM verdicts WHERE run_id = ?", (doc.run_id,))
        db.execute("DELETE FROM cells WHERE run_id = ?", (doc.run_id,))
        db.executemany("INSERT INTO verdicts VALUES (?,?,?,?,?)",
                       [(doc.run_id, v.profile, v.kind, v.evidence, v.p_value) for v in doc.verdicts])
        db.executemany("INSERT INTO cells VALUES (?,?,?,?,?,?,?,?)",
                       [(doc.run_id, c.profile, c.temperature, c.n, c.loops, c.loop_rate, c.accept_length,
                         c.tokens_per_s) for c in doc.cells])


#: The columns of one ``watch`` probe (table ``probes``), in order.
PROBE_COLUMNS = ("watch_id", "endpoint", "probe", "url", "started_at", "duration_s", "n", "errors", "loops",
                 "loop_rate", "accept_length", "accept_length_nonloop", "tokens_per_s", "tokens_per_s_nonloop",
                 "greedy_checked", "greedy_changed", "alerts")


def record_probe(path: str | Path, row: dict) -> None:
    """Insert one ``watch`` probe (a dict with :data:`PROBE_COLUMNS`; ``alerts`` a list of reasons) into the
    history at ``path``."""
    vals = [",".join(row.get(c) or []) if c == "alerts" else row.get(c) for c in PROBE_COLUMNS]
    with closing(_connect(Path(path))) as db, db:
        db.execute(f"INSERT OR REPLACE INTO probes ({', '.join(PROBE_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(PROBE_COLUMNS))})", vals)


def probe_history(path: str | Path, *, endpoint: str | None = None, limit: int = 100) -> list[dict]:
    """Latest ``watch`` probes (newest first) as dicts with :data:`PROBE_COLUMNS` (``alerts`` a list);
    ``endpoint``: only that endpoint's."""
    p = Path(path)
    if not p.exists():
        return []
    with closing(_connect(p)) as db:
        q = f"SELECT {', '.join(PROBE_COLUMNS)} FROM probes"
        args: tuple = ()
        if endpoint:
            q, args = q + " WHERE endpoint = ?", (endpoint,)
        rows = db.execute(q + " ORDER BY started_at DESC, endpoint LIMIT ?", (*args, limit)).fetchall()
    out = [dict(zip(PROBE_COLUMNS, r)) for r in rows]
    for r in out:
        r["alerts"] = [a for a in (r["alerts"] or "").split(",") if a]
    return out


def previous_verdicts(path: str | Path, *, host: str, playbook: str, before_run: str) -> dict[str, str]:
    """{profile: verdict kind} of the latest earlier run of the same host and playbook ({} if none)."""
    p = Path(path)
    if not p.exists():
        return {}
    with closing(_connect(p)) as db:
        row = db.execute("SELECT run_id FROM runs WHERE host = ? AND playbook = ? AND run_id != ? "
                         "AND started_at <= (SELECT COALESCE(MAX(started_at), '9999') FROM runs WHERE run_id = ?) "
                         "ORDER BY started_at DESC LIMIT 1", (host, playbook, before_run, before_run)).fetchone()
        if row is None:
            return {}
        return dict(db.execute("SELECT profile, kind FROM verdicts WHERE run_id = ?", (row[0],)).fetchall())


def regressions(previous: dict[str, str], current: dict[str, str]) -> list[str]:
    """Profiles whose verdict turned bad (corrupt output or a failed launch) since the previous run."""
    def bad(kind: str) -> bool:
        return kind in BAD or kind.startswith(("launch-failed", "crashed", "hung"))

    return sorted(p for p, kind in current.items() if bad(kind) and p in previous and not bad(previous[p]))


def history(path: str | Path, *, host: str | None = None, group: str | None = None, limit: int = 20) -> list[dict]:
    """Latest runs (newest first) with status, cause, run directory, group (None outside a fleet nightly),
    fleet run id and verdicts, as dicts. ``host``/``group``: only that host's / that group's runs."""
    p = Path(path)
    if not p.exists():
        return []
    with closing(_connect(p)) as db:
        q = ("SELECT run_id, host, playbook, started_at, exit_code, status, cause, run_dir, duration_s, host_group, "
             "fleet_id FROM runs")
        where = [(c, v) for c, v in (("host", host), ("host_group", group)) if v]
        if where:
            q += " WHERE " + " AND ".join(f"{c} = ?" for c, _ in where)
        rows = db.execute(q + " ORDER BY started_at DESC, host LIMIT ?", (*(v for _, v in where), limit)).fetchall()
        out = []
        for run_id, h, pb, started, code, status, cause, run_dir, duration, grp, fleet_id in rows:
            verdicts = dict(db.execute("SELECT profile, kind FROM verdicts WHERE run_id = ?", (run_id,)).fetchall())
            out.append({"run_id": run_id, "host": h, "playbook": pb, "started_at": started, "exit_code": code,
                        "status": status, "cause": cause, "run_dir": run_dir, "duration_s": duration,
                        "group": grp, "fleet_id": fleet_id, "verdicts": verdicts})
        return out


def recorded_names(path: str | Path) -> tuple[list[str], list[str]]:
    """(hosts, groups) that have at least one run in the history at ``path``, sorted ([] and [] if none): what
    ``history -H``/``--group`` can filter on."""
    p = Path(path)
    if not p.exists():
        return [], []
    with closing(_connect(p)) as db:
        hosts = [r[0] for r in db.execute("SELECT DISTINCT host FROM runs ORDER BY host")]
        groups = [r[0] for r in db.execute("SELECT DISTINCT host_group FROM runs WHERE host_group IS NOT NULL "
                                           "ORDER BY host_group")]
    return hosts, groups


def open_samples_for_append(path: str | Path):
    """Open ``samples.jsonl`` for appending, first ending a truncated last line (a run killed mid-write):
    otherwise the next record would be glued onto the broken one and both lost on reading. Returns the
    open text file."""
    p = Path(path)
    f = p.open("a+b")
    try:
        f.seek(0, 2)
        if f.tell() > 0:
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.seek(0, 2)
                f.write(b"\n")
        f.flush()
    finally:
        f.close()
    return p.open("a", encoding="utf-8")


def good_runs(path: str | Path, *, host: str, playbook: str, before_run: str, limit: int = 10) -> list[dict]:
    """Earlier completed runs of the same host and playbook, newest first, each with its cells
    ``{(profile, temperature): {"n", "loops", "loop_rate", "accept_length", "tokens_per_s"}}``.

    "Earlier" is by start time against ``before_run`` (any run when it is not in the history)."""
    p = Path(path)
    if not p.exists():
        return []
    with closing(_connect(p)) as db:
        rows = db.execute(
            "SELECT run_id, started_at FROM runs WHERE host = ? AND playbook = ? AND run_id != ? "
            "AND status = 'completed' AND started_at <= (SELECT COALESCE(MAX(started_at), '9999') FROM runs "
            "WHERE run_id = ?) ORDER BY started_at DESC LIMIT ?",
            (host, playbook, before_run, before_run, limit)).fetchall()
        out = []
        for run_id, started in rows:
            cells = {(prof, float(t)): {"n": n, "loops": k, "loop_rate": r, "accept_length": a, "tokens_per_s": s}
                     for prof, t, n, k, r, a, s in db.execute(
                         "SELECT profile, temperature, n, loops, loop_rate, accept_length, tokens_per_s FROM cells "
                         "WHERE run_id = ?", (run_id,))}
            verdicts = dict(db.execute("SELECT profile, kind FROM verdicts WHERE run_id = ?", (run_id,)).fetchall())
            out.append({"run_id": run_id, "started_at": started, "cells": cells, "verdicts": verdicts})
        return out
