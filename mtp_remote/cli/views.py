"""The commands over the inventory and the history: ``hosts``, ``history`` (their click adapters are in
``cli/runs.py`` and ``cli/main.py``). Light: the configuration and the SQLite history only (no scipy, no
workflow), so listing hosts or runs starts fast.

No network. Each function takes the command's options, prints its tables (rich) or ``--json`` and returns the
exit code; errors are MtpRemoteError, turned into one red line and exit 2 by the CLI's ``handle_errors``.
Imported through :mod:`mtp_remote.cli.lazy`.
"""

from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table

from ..config.inventory import load_inventory
from ..config.paths import HISTORY_FILE, find_inventory
from ..errors import ConfigError
from ..records.base import Number, Record
from ..report import history as store
from ..report.console import make_console


def hosts_table(inv, path) -> Table:
    """One row per inventory host (a rich Table): name (* default), how it is reached, engine, GPUs ("all" when
    ``gpus`` is unset: the server sees every GPU, not none), port, model, faults."""
    t = Table(title=f"Hosts — {path}", title_justify="left")
    for col in ("host", "transport", "address", "engine", "GPUs", "port", "model", "faults injected"):
        t.add_column(col)
    for name, h in inv.hosts.items():
        where = "this machine" if h.transport == "local" else f"{h.user + '@' if h.user else ''}{h.address}:{h.ssh_port}"
        if getattr(h, "gateway", None):
            where += f" via {h.gateway}"
        faults = h.env.get("SGLANG_SIM_FAULTS", "") if h.is_sim else ""
        engine = f"{h.engine} (simulated)" if h.is_sim else h.engine
        t.add_row(f"{name}{' *' if name == inv.default_host else ''}", h.transport, escape(where), engine,
                  ",".join(map(str, h.gpus)) if h.gpus else "all", str(h.port), escape(h.model_path or "–"),
                  escape(faults or "–"))
    t.caption = "* default host (used without -H)"
    return t


def host_dict(name: str, h, default: str) -> dict:
    """One inventory host as ``hosts --json`` prints it."""
    return {"name": name, "default": name == default, "transport": h.transport, "address": h.address,
            "user": h.user, "ssh_port": h.ssh_port, "engine": h.engine, "simulated": h.is_sim, "gpus": h.gpus,
            "port": h.port, "model_path": h.model_path, "workdir": h.workdir,
            "faults": h.env.get("SGLANG_SIM_FAULTS") if h.is_sim else None}


def hosts(inventory: str | None, *, as_json: bool) -> int:
    """``hosts``: the inventory's hosts (a table, or JSON)."""
    path = find_inventory(inventory)
    inv = load_inventory(path)
    if as_json:
        print(json.dumps({"inventory": str(path), "default_host": inv.default_host,
                          "hosts": [host_dict(n, h, inv.default_host) for n, h in inv.hosts.items()]}, indent=2))
        return 0
    make_console().print(hosts_table(inv, path))
    return 0


class HistoryRow(Record):
    """One run of the history (``report.history.history``): id, host, playbook, start, exit code, status and
    cause, run directory, seconds, the fleet nightly's group and id, verdicts by profile."""

    run_id: str
    host: str
    playbook: str | None = None
    started_at: str = ""
    exit_code: int | None = None
    status: str = "completed"
    cause: str | None = None
    run_dir: str | None = None
    duration_s: Number | None = None
    group: str | None = None
    fleet_id: str | None = None
    verdicts: dict[str, str] = {}


def history(*, host: str | None, group: str | None, runs_dir: str, history_db: str | None, limit: int,
            as_json: bool, probes: bool = False) -> int:
    """``history``: the recorded runs, newest first (a table, or JSON); ``probes``: the probes ``watch``
    recorded instead (``host``: one endpoint's). Raises ConfigError when none was recorded."""
    history_db = str(history_db or f"{runs_dir}/{HISTORY_FILE}")
    if probes:
        return _probe_history(history_db, endpoint=host, limit=limit, as_json=as_json)
    if not store.check_history_path(history_db).exists():
        raise ConfigError("no runs recorded yet (`mtp-remote diagnose` and `nightly` record every run)",
                          file=history_db)
    rows = store.history(history_db, host=host, group=group, limit=limit)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows and (host or group):  # an empty table alone reads as "no runs at all": name what there is
        hosts_seen, groups = store.recorded_names(history_db)
        what = " and ".join(x for x in (host and f"host {host!r}", group and f"group {group!r}") if x)
        make_console().print(f"{history_db}: no run recorded for {escape(what)}; hosts with runs: "
                             f"{escape(', '.join(hosts_seen) or 'none')}; groups with runs: "
                             f"{escape(', '.join(groups) or 'none')}", highlight=False)
        return 0
    t = Table(title=f"History — {history_db}" + (f" — group {group}" if group else ""))
    for col in ("run", "host", "group", "playbook", "started (UTC)", "status", "exit", "verdicts / cause"):
        t.add_column(col)
    for r in map(HistoryRow.of, rows):
        ok = r.status == "completed"
        what = ", ".join(f"{p}: {k}" for p, k in r.verdicts.items()) if ok else (r.cause or "")
        t.add_row(r.run_id, r.host, escape(r.group or "–"), r.playbook, r.started_at[:19].replace("T", " "),
                  r.status if ok else f"[red]{r.status}[/]", str(r.exit_code), escape(what))
    make_console().print(t)
    return 0


def _probe_history(history_db: str, *, endpoint: str | None, limit: int, as_json: bool) -> int:
    """The ``watch`` probes of ``history_db`` (a table, or JSON); ConfigError when none was recorded."""
    from ..report.console import probes_table

    rows = store.probe_history(history_db, endpoint=endpoint, limit=limit)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        raise ConfigError("no watch probe recorded" + (f" for endpoint {endpoint!r}" if endpoint else "") +
                          " (`mtp-remote watch` records each probe)", file=history_db)
    make_console().print(probes_table(rows, history_db))
    return 0
