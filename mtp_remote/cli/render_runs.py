"""How both entry points run the commands that run experiments (``diagnose``, ``nightly``, ``mitigate``, ``bisect``,
``fab fleet``) and show their results: :func:`run` as :func:`mtp_remote.cli.render.run` does for the host
commands. Reached through :mod:`mtp_remote.cli.lazy` (it imports the workflows: scipy, ~1 s).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..commands import fleet as fleet_commands
from ..commands import run as run_commands
from ..fleet.console import print_fleet
from ..fleet.nightly import NightlyResult
from ..fleet.nightly_fleet import FleetNightlyResult
from ..fleet.outcomes import FleetReport
from ..fleet.regression import RegressionReport, describe
from ..report.console import cells_table, print_run_end, verdict_table
from ..search.console import print_mitigation
from ..search.records import BisectTest
from .output import print_json, report_error
from .render import render_fleet, run_command


def run(name: str, args, *, as_json: bool = False) -> int:
    """Run command ``name`` (diagnose, nightly, mitigate, bisect, fleet) with ``args`` and render the result;
    returns the exit code (:func:`mtp_remote.cli.render.run_command`)."""
    command, renderer = COMMANDS[name]
    return run_command(command, renderer, args, as_json=as_json)


def regression_lines(rep: RegressionReport | None) -> list[str]:
    """The nightly's regression check as printed (rich markup): its verdict line, then one line per regression."""
    if rep is None:
        return []
    if rep.baseline_run is None:
        return ["regression check: no earlier good run of this host and playbook to compare with"]
    lines = describe(rep)
    return ([f"regression check against {rep.baseline_run}: "
             + ("[bold red]regressed[/]" if lines else "[green]no tested regression[/]")]
            + [f"  {escape(line)}" for line in lines])


def render_diagnose(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if as_json:
        print_json(res.summary)
    else:
        console.print(cells_table(res.summary))
        console.print(verdict_table(res.summary))
        print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=args.inventory)
    return res.exit_code


def render_nightly(console: Console, res: NightlyResult | FleetNightlyResult, args, as_json: bool) -> int:
    """The verdicts (or why the night could not be done), the regression check, the history and what next."""
    if isinstance(res, FleetNightlyResult):
        return render_nightly_fleet(console, res, args, as_json)
    if as_json:
        print_json(res.summary)
    if res.error is not None:
        report_error(res.error)
    else:
        if not as_json:
            console.print(verdict_table(res.summary))
        for line in regression_lines(res.regression):
            console.print(line, highlight=False)
    console.print(f"history {res.history_db}", highlight=False)
    print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=args.inventory)
    return res.exit_code


def render_nightly_fleet(console: Console, res: FleetNightlyResult, args, as_json: bool) -> int:
    if as_json:
        print_json(res.summary)
    print_fleet(console, res.report, runs_dir=args.runs_dir, inventory=args.inventory)
    doc = res.summary
    for h in doc.hosts:
        if h.regressed:
            console.print(f"[bold red]regressed[/] {h.host} since {h.regression_baseline}: "
                          f"{escape(', '.join(h.regressed))}", highlight=False)
    console.print(f"fleet nightly {doc.fleet_id} (group {escape(doc.group)}): {res.fleet_dir}/summary.json, "
                  f"junit.xml, metrics.prom; history {res.history_db}", highlight=False)
    return res.exit_code


def render_mitigate(console: Console, res, args, as_json: bool) -> int:
    if isinstance(res, FleetReport):
        return render_fleet(console, res, args, as_json)
    if isinstance(res, run_commands.SpreadMitigation):
        print_mitigation(console, res.document)
        for h, why in res.document.left_out.items():
            console.print(f"[yellow]left out {h}:[/] {escape(why)}")
        return res.exit_code
    if as_json:
        print_json(res.document.to_dict())
    else:
        print_mitigation(console, res.document)
        console.print(f"report: {res.run_dir / 'mitigation.md'}  (exit code {res.exit_code})")
    return res.exit_code


def bisect_test_line(test: BisectTest | dict) -> str:
    """One bisect test as printed: its name, outcome and the changes it applied (``(the good flags)`` for none);
    an unresolved test also says why (its verdict and evidence), so the line never ends at the outcome."""
    test = BisectTest.of(test)
    line = f"  {test.name}: {test.outcome:<10} {', '.join(test.changes) or '(the good flags)'}"
    if test.outcome == "unresolved" and test.verdict:
        line += f" -- {test.verdict}: {test.evidence or 'no evidence recorded'}"
    return line


def render_bisect(console: Console, res, args, as_json: bool) -> int:
    """Every test with its outcome and changes, then the minimal change and how to reproduce it."""
    doc = res.document
    for t in doc.tests:
        console.print(bisect_test_line(t), highlight=False, markup=False)
    if doc.minimal is None:
        console.print(f"[yellow]{escape(doc.message)}[/]")
    else:
        print(f"minimal change ({len(doc.tests)} tests): {', '.join(doc.minimal) or '(none)'}", flush=True)
        print(f"reproduce with: {doc.command}", flush=True)
    console.print(f"record: {res.run_dir / 'bisect.json'}")
    return res.exit_code


COMMANDS = {"diagnose": (run_commands.diagnose, render_diagnose), "nightly": (run_commands.nightly, render_nightly),
            "mitigate": (run_commands.mitigate, render_mitigate), "bisect": (run_commands.bisect, render_bisect),
            "fleet": (fleet_commands.fleet, render_fleet)}
