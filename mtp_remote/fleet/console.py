"""The fleet report on the console (rich): the per-host table, the hosts that disagree, where the report is and
each host's next step."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ..files import load_json_file
from ..report.next_step import inventory_option, next_step
from .outcomes import FleetReport, at_a_clause, describe_disagreement


#: The detail column's length on the console (cut at a clause end; fleet.md has the whole text).
DETAIL_CHARS = 240


def fleet_table(report: FleetReport):
    t = Table(title=f"Fleet {report.command}: {len(report.hosts)} hosts, wall {report.wall_s:.1f} s")
    for col in ("host", "exit", "verdicts", "time", "detail"):
        t.add_column(col, overflow="fold")
    for h in report.hosts:
        t.add_row(h.host, str(h.exit_code), ", ".join(f"{k}: {v}" for k, v in h.verdicts.items()) or "–",
                  f"{h.duration_s:.1f} s",
                  f"[red]{escape(h.error)}[/]" if h.error else escape(at_a_clause(h.detail, DETAIL_CHARS)))
    return t


def print_fleet(console, report: FleetReport, runs_dir="runs", inventory=None) -> int:
    """Print the fleet table, the disagreeing hosts and where the report is; returns the fleet exit code."""
    console.print(fleet_table(report))
    for d in report.disagreements:
        console.print(f"[bold yellow]disagree:[/] {escape(describe_disagreement(d))}")
    d = report.to_dict()
    console.print(f"wall {report.wall_s:.1f} s; slowest host {d['slowest_host_s']:.1f} s; sum {d['sum_host_s']:.1f} s")
    where = Path(runs_dir) / f"fleet-{report.run_id}" / "fleet.md"
    console.print(f"report: {where}  (exit code {report.exit_code})" if where.exists() else
                  f"exit code {report.exit_code}")
    for line in fleet_next_steps(report, runs_dir, inventory=inventory):
        console.print(line, highlight=False, markup=False)
    return report.exit_code


def _summary_or_none(path: Path) -> dict | None:
    """A host's summary.json, or None when it is missing or unreadable (then the host's error says why)."""
    try:
        return load_json_file(path)
    except (OSError, ValueError):
        return None


def fleet_next_steps(report: FleetReport, runs_dir="runs", *, inventory=None) -> list[str]:
    """The ``next:`` lines after a fleet diagnose: one per host with something to do (each host's own next step,
    from its ``summary.json``, as a single-host run prints it; a host that could not be run: its cause and the
    preflight to run), or one line when no host has anything to fix. Other commands: none. ``inventory``: the ``-i``
    the fleet was given (each command names it)."""
    if report.command != "diagnose":
        return []

    lines, calm = [], []
    for h in report.hosts:
        run_dir = Path(runs_dir) / h.run_id if h.run_id else None
        summary = run_dir / "summary.json" if run_dir else None
        doc = _summary_or_none(summary) if summary is not None else None
        if doc is not None:
            step = next_step(doc, run_dir, inventory=inventory)
        elif h.error:
            step = (f"fix the cause ({h.error}), then check the host: "
                    f"`mtp-remote preflight -H {h.host}{inventory_option(inventory)}`")
        else:
            continue
        (calm if step.startswith("nothing to fix") else lines).append(f"next [{h.host}]: {step}")
    if not lines and calm:
        return [f"next: nothing to fix on {len(calm)} host(s); compare each with an earlier run: "
                f"`mtp-remote compare RUN_A RUN_B`"]
    return lines
