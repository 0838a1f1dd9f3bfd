"""The ``mtp-remote`` command line (click). Thin: parse options, call :mod:`mtp_remote.experiment.diagnose`, render.

This is one of the two places that catch broad errors: an expected :class:`MtpRemoteError` becomes one red
line (plus its evidence) and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import logging
import sys

import click
from rich.markup import escape

from .. import __version__
from ..config.paths import DEFAULT_PLAYBOOK, HISTORY_FILE
from .host import launch, logs, preflight, smoke, status, stop
from .lazy import api as _api
from .lazy import make_console
from .options import (
    INTERRUPTS,
    _console_hooks,
    _fleet,
    _host_opt,
    _inventory_opt,
    _playbook_opt,
    handle_errors,
    runs_dir_option,
)
from .runs import compare_cmd, hosts_cmd, report_cmd
from .tools import classify_log_cmd, lint_command_cmd
from .watch import watch_cmd

# Start-up time: ``--version``/``--help`` import only click and the light modules above (~0.1 s). The experiment
# layer (scipy, numpy, httpx, pydantic, jinja2: ~1 s) and the rich renderers are imported inside the command
# that uses them ("deferred" below), so a command pays only for what it runs.


_EPILOG = """\b
Exit codes: 0 healthy (or a finding that is not corruption), 1 a speculative profile corrupts output,
failed or regressed, 2 the run could not be done (config, SSH, lock, baseline), 3 inconclusive (no evidence
either way: resume as the next line says), 130 interrupted
(Ctrl-C/SIGTERM: our servers stopped, samples kept, the resume command printed).

\b
Inventory: -i FILE after the command (mtp-remote status -i FILE), else $MTP_REMOTE_INVENTORY, else
inventory.yaml here or in a parent directory.
Shell completion (bash): eval "$(_MTP_REMOTE_COMPLETE=bash_source mtp-remote)"  (zsh_source, fish_source)
"""


_HYPHEN = "\0"  # stands for "-" while click wraps: textwrap breaks after a hyphen, which split flags and words


class NoHyphenBreakFormatter(click.HelpFormatter):
    """click's help formatter, never breaking a line inside a hyphenated word (``--mamba-full-memory-ratio``,
    ``loop-free``): each hyphen stands as a NUL while textwrap wraps and is put back in :meth:`getvalue`."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", _HYPHEN))

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(a, b.replace("-", _HYPHEN)) for a, b in rows], col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_HYPHEN, "-")


class HelpContext(click.Context):
    formatter_class = NoHyphenBreakFormatter


class FullHelpGroup(click.Group):
    """A click group whose command list shows each command's whole first sentence, wrapped to the terminal
    (click cuts it to the width left over with "...", which lost the end of every command's doc). Its
    commands' help is formatted by :class:`NoHyphenBreakFormatter` too."""

    context_class = HelpContext

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.context_class = HelpContext
        super().add_command(cmd, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=FullHelpGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
             epilog=_EPILOG)
@click.version_option(__version__, prog_name="mtp-remote")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Diagnose speculative-decoding (MTP/NEXTN/EAGLE) output corruption on SGLang hosts.

    Runs the same prompts against a baseline server and speculative profiles, measures repetition loops,
    and gives a verdict per profile with its evidence. Runs, reports and history: `report`, `compare`,
    `history`; hosts: `hosts`.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbose >= 2:  # paramiko's own handshake logs (quiet otherwise: see remote/ssh.py)
        logging.getLogger("paramiko").setLevel(logging.DEBUG)


@main.command()
@_inventory_opt
@_host_opt
@click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True, help="Playbook (YAML).")
@click.option("--profile", "profiles", multiple=True, help="Only these profiles (baseline always runs). Repeatable.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Override samples per prompt per temperature.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Override max tokens per request.")
@runs_dir_option("Where run directories are written.")
@click.option("--resume", metavar="RUN_ID", default=None, help="Continue a run: stored samples are not requested again.")
@click.option("--stop-on-loop/--no-stop-on-loop", "stop_on_loop", default=None,
              help="Stop each request once its loop is settled (default: the playbook's stop_on_loop, true).")
@click.option("--attach", "attach", multiple=True, metavar="NAME=URL",
              help="Diagnose an endpoint already serving instead of launching (never launched, signalled or stopped; "
                   "no lock). Repeatable; name the baseline as the playbook's (baseline=URL).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout instead of tables.")
@handle_errors
def diagnose(inventory, host, playbook, profiles, samples, max_tokens, runs_dir, resume, stop_on_loop, attach,
             as_json):
    """Run the speculative vs baseline experiment on a host and give verdicts.

    -H a,b,c or an inventory group runs it on every host at once (fleet report, disagreeing hosts named).
    --attach baseline=URL --attach NAME=URL compares endpoints that are already serving (no inventory needed)."""
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..report.console import (  # deferred: keeps --version/--help fast
        RichHooks,
        cells_table,
        print_run_end,
        verdict_table,
    )

    if not attach and _fleet("diagnose", inventory, host, playbook=playbook, runs_dir=runs_dir, samples=samples,
                             as_json=as_json, stop_on_loop=stop_on_loop):
        return

    console = make_console(stderr=as_json)
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                  interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    overrides = {k: v for k, v in (("samples", samples), ("max_tokens", max_tokens), ("stop_on_loop", stop_on_loop))
                 if v is not None}
    res = _api().diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir,
                       profiles=list(profiles) or None, resume=resume, hooks=hooks, overrides=overrides,
                       attach=list(attach) or None)
    if as_json:
        click.echo(json.dumps(res.summary, indent=2, default=str))
    else:
        console.print(cells_table(res.summary))
        console.print(verdict_table(res.summary))
        print_run_end(console, res.summary, res.run_dir, res.exit_code, inventory=inventory)
    sys.exit(res.exit_code)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per text.")
@click.option("--rows/--summary", "per_row", default=None,
              help="One table row per text, or a summary (default: rows up to 20 texts, else a summary).")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@handle_errors
def analyze(as_json, per_row, files):
    """Measure degeneracy (loops, near loops, seq-rep-4, compression, think block) of texts.

    FILE is read by its kind: .json a chat/generate response body, .jsonl samples (one record a line;
    the chunks of a streamed chat completion, `data:` lines too, make one text), anything else plain text
    (even when the text is JSON); '-' reads standard input. A file that cannot be
    read is reported ({"file", "error"} with --json) and the others are still analysed. Many texts (a
    samples.jsonl) print a summary and the looping ones; --rows prints every row. Exits 2 when any
    file failed, else 1 when any text loops, else 0."""
    from .tools import run_analyze  # deferred: keeps --version/--help fast

    sys.exit(run_analyze(files, as_json=as_json, per_row=per_row))


@main.command()
@_inventory_opt
@_host_opt
@click.option("-p", "--playbook", default="playbooks/nightly.yaml", show_default=True, help="Playbook (YAML).")
@runs_dir_option()
@click.option("--history", "history_db", default=None, help="SQLite history file (default RUNS_DIR/history.sqlite).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json (with the regression check) to stdout.")
@click.option("--metrics-file", default=None, metavar="PATH",
              help="Also write metrics.prom here, atomically (a node-exporter textfile collector's *.prom).")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True,
              help="With a group or a,b,c: hosts run at once.")
@handle_errors
def nightly(inventory, host, playbook, runs_dir, history_db, as_json, metrics_file, workers):
    """Diagnose, record the run in the history, and test for regressions since the last good run (cron/CI).

    Every night leaves runs/RUN_ID/ with summary.json, junit.xml and metrics.prom and a history row, also
    when the run could not be done (SSH down, lock held, baseline failed, bad config). A regression is a
    tested change against the last good run: loop rate (Fisher exact) or speed (against the between-run
    spread of earlier good runs). Exit 1 when a speculative profile corrupts output or regressed, 2 when the
    run could not be done, 130 interrupted.

    \b
    -H GROUP (or -H a,b,c): every host at once (--workers at a time), each
    with its own run directory, artefacts and history row with the group
    (`history --group GROUP`), checked against its own last good run; plus
    runs/fleet-ID/ with summary.json (each host's verdict, the hosts that
    disagree), junit.xml (one case per host) and metrics.prom (every host,
    labelled with the group). Exit code: the largest of the hosts'."""
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..fleet.nightly import fleet_spec, run_nightly  # deferred: keeps --version/--help fast
    from ..fleet.regression import describe  # deferred: keeps --version/--help fast
    from ..report.console import RichHooks, print_run_end, verdict_table  # deferred: rich renderers

    console = make_console(stderr=as_json)
    fleet = fleet_spec(inventory, host)
    if fleet is not None:
        _nightly_fleet(console, fleet, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                       history_db=history_db, as_json=as_json, metrics_file=metrics_file, workers=workers)
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample, on_loop=rh.on_loop,
                  interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    res = run_nightly(inventory=inventory, host=host, playbook=playbook, runs_dir=runs_dir, history_db=history_db,
                      hooks=hooks, metrics_file=metrics_file)
    doc = res.summary
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))
    if res.error is not None:
        err_console = make_console(stderr=True)
        err_console.print(f"[bold red]error:[/] {escape(str(res.error))}", highlight=False)
        if res.error.evidence:
            err_console.print(res.error.evidence, style="dim", highlight=False, markup=False)
        console.print(f"history {res.history_db}", highlight=False)
        print_run_end(console, doc, res.run_dir, res.exit_code, inventory=inventory)
        sys.exit(res.exit_code)
    if not as_json:
        console.print(verdict_table(doc))
    rep = res.regression
    if rep is not None and rep.baseline_run is None:
        console.print("regression check: no earlier good run of this host and playbook to compare with")
    elif rep is not None:
        lines = describe(rep)
        console.print(f"regression check against {rep.baseline_run}: "
                      + ("[bold red]regressed[/]" if lines else "[green]no tested regression[/]"))
        for line in lines:
            console.print(f"  {escape(line)}", highlight=False)
    console.print(f"history {res.history_db}", highlight=False)
    print_run_end(console, doc, res.run_dir, res.exit_code, inventory=inventory)
    sys.exit(res.exit_code)


def _nightly_fleet(console, fleet, *, inventory, playbook, runs_dir, history_db, as_json, metrics_file, workers):
    """The nightly over a group: run it, print the fleet table and where the artefacts are, exit."""
    from ..experiment.runner import Hooks  # deferred: keeps --version/--help fast
    from ..fleet.fleet import print_fleet  # deferred: keeps --version/--help fast
    from ..fleet.nightly_fleet import run_nightly_fleet  # deferred: keeps --version/--help fast

    hosts, group = fleet
    hooks = Hooks(interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    res = run_nightly_fleet(hosts, group=group, inventory=inventory, playbook=playbook, runs_dir=runs_dir,
                            history_db=history_db, hooks=hooks, metrics_file=metrics_file, max_workers=workers,
                            on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}", highlight=False))
    if as_json:
        click.echo(json.dumps(res.summary, indent=2, default=str))
    print_fleet(console, res.report, runs_dir=runs_dir, inventory=inventory)
    doc = res.summary
    for h in doc["hosts"]:
        if h["regressed"]:
            console.print(f"[bold red]regressed[/] {h['host']} since {h['regression_baseline']}: "
                          f"{escape(', '.join(h['regressed']))}", highlight=False)
    console.print(f"fleet nightly {doc['fleet_id']} (group {escape(group)}): {res.fleet_dir}/summary.json, "
                  f"junit.xml, metrics.prom; history {res.history_db}", highlight=False)
    sys.exit(res.exit_code)


@main.command("history")
@click.option("-H", "--host", default=None, help="Only runs of this host (default: every host).")
@click.option("-g", "--group", default=None, help="Only runs of this group's fleet nightlies (the group name, or "
                                                  "the a,b,c list the nightly was given).")
@runs_dir_option("Runs directory whose history.sqlite is read.")
@click.option("--history", "history_db", default=None, help="SQLite history file (default RUNS_DIR/history.sqlite).")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--probes", is_flag=True, help="List `watch` probes instead of runs (-H: one endpoint's).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def history_cmd(host, group, runs_dir, history_db, limit, probes, as_json):
    """List recorded runs (newest first): every diagnose and nightly, completed or failed, with verdicts.

    A fleet nightly (nightly -H GROUP) records one row per host with its group; --group lists them.
    --probes lists the probes `watch` recorded (loops, acceptance, greedy stability, alerts)."""
    from rich.table import Table  # deferred: keeps --version/--help fast

    from ..errors import ConfigError  # deferred: keeps --version/--help fast
    from ..report import history as store  # deferred: keeps --version/--help fast

    history_db = str(history_db or f"{runs_dir}/{HISTORY_FILE}")
    if probes:
        from ..report.console import probes_table  # deferred: keeps --version/--help fast

        rows = store.probe_history(history_db, endpoint=host, limit=limit)
        if as_json:
            click.echo(json.dumps(rows, indent=2))
        elif not rows:
            raise ConfigError("no watch probe recorded" + (f" for endpoint {host!r}" if host else "") +
                              " (`mtp-remote watch` records each probe)", file=history_db)
        else:
            make_console().print(probes_table(rows, history_db))
        return
    if not store.check_history_path(history_db).exists():
        raise ConfigError("no runs recorded yet (`mtp-remote diagnose` and `nightly` record every run)",
                          file=history_db)
    rows = store.history(history_db, host=host, group=group, limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows and (host or group):  # an empty table alone reads as "no runs at all": name what there is
        hosts, groups = store.recorded_names(history_db)
        what = " and ".join(x for x in (host and f"host {host!r}", group and f"group {group!r}") if x)
        make_console().print(f"{history_db}: no run recorded for {escape(what)}; hosts with runs: "
                             f"{escape(', '.join(hosts) or 'none')}; groups with runs: "
                             f"{escape(', '.join(groups) or 'none')}", highlight=False)
        return
    t = Table(title=f"History — {history_db}" + (f" — group {group}" if group else ""))
    for col in ("run", "host", "group", "playbook", "started (UTC)", "status", "exit", "verdicts / cause"):
        t.add_column(col)
    for r in rows:
        ok = r["status"] == "completed"
        what = ", ".join(f"{p}: {k}" for p, k in r["verdicts"].items()) if ok else (r["cause"] or "")
        t.add_row(r["run_id"], r["host"], escape(r["group"] or "–"), r["playbook"],
                  r["started_at"][:19].replace("T", " "),
                  r["status"] if ok else f"[red]{r['status']}[/]", str(r["exit_code"]), escape(what))
    make_console().print(t)


@main.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--from", "--from-run", "from_run", metavar="RUN_ID", default=None,
              help="The diagnose run to start from: its corrupting profile, and its baseline samples when host and "
                   "experiment match.")
@click.option("--profile", default=None, help="The corrupting speculative profile (default: from --from, else the first).")
@click.option("--candidate", "only", multiple=True, help="Only these candidates (names as listed). Repeatable.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Per-prompt sample budget per candidate.")
@runs_dir_option()
@click.option("--resume", metavar="RUN_ID", default=None, help="Continue a mitigation run: finished candidates are kept.")
@click.option("--json", "as_json", is_flag=True, help="Print mitigation.json to stdout instead of the table.")
@click.option("--spread", is_flag=True, help="With several hosts: each candidate on one host (hosts serving the same "
                                             "model and SGLang release), one merged table.")
@handle_errors
def mitigate(inventory, host, playbook, from_run, profile, only, samples, runs_dir, resume, as_json, spread):
    """Try flag changes on a corrupting profile; rank the loop-free ones by speed (exit 1: none is loop-free).

    -H a,b,c or a group runs it on every host (fleet); with --spread the candidates are shared out instead."""
    from ..experiment.hosts import fleet_hosts  # deferred: keeps --version/--help fast
    from ..fleet.fleet import print_mitigation, spread_mitigate  # deferred: keeps --version/--help fast

    if spread and len(hosts := fleet_hosts(inventory, host)) > 1:
        console = make_console()
        doc = spread_mitigate(hosts, inventory=inventory, playbook=playbook, runs_dir=runs_dir, samples=samples,
                              only=list(only) or None,
                              on_progress=lambda h, m: console.print(f"[dim]\\[{h}][/] {escape(m)}", highlight=False))
        print_mitigation(console, doc)
        for h, why in doc["left_out"].items():
            console.print(f"[yellow]left out {h}:[/] {escape(why)}")
        sys.exit(doc["exit_code"])
    if _fleet("mitigate", inventory, host, playbook=playbook, runs_dir=runs_dir, samples=samples,
              only=list(only) or None, as_json=as_json):
        return
    from ..search.mitigate import mitigate as run_mitigate  # deferred: keeps --version/--help fast

    console = make_console(stderr=as_json)
    hooks = _console_hooks(console)
    res = run_mitigate(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, profile=profile,
                       from_run=from_run, resume=resume, only=list(only) or None, samples=samples, hooks=hooks)
    if as_json:
        click.echo(json.dumps(res.document, indent=2, default=str))
    else:
        print_mitigation(console, res.document)
        console.print(f"report: {res.run_dir / 'mitigation.md'}  (exit code {res.exit_code})")
    sys.exit(res.exit_code)


@main.command("bisect")
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--good", default=None, help="Good launch flags: a profile name or a flag string (default: the baseline).")
@click.option("--bad", default=None, help="Bad launch flags: a profile name or a flag string (default: the corrupting profile).")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="Per-prompt sample budget of each test.")
@click.option("--from", "--from-run", "from_run", metavar="RUN_ID", default=None, help="Diagnose run: corrupting profile and baseline samples.")
@runs_dir_option()
@click.option("--resume", metavar="RUN_ID", default=None,
              help="Continue bisect run RUN_ID: finished tests are not launched again, the interrupted one continues.")
@handle_errors
def bisect_cmd(inventory, host, playbook, good, bad, repeats, from_run, runs_dir, resume):
    """Find the minimal flag change from a good to a bad launch line that still corrupts output (ddmin).

    Each test's result is stored as it completes; Ctrl-C prints the --resume command."""
    from ..search.bisect import bisect as run_bisect  # deferred: keeps --version/--help fast

    console = make_console()
    hooks = _console_hooks(console)
    res = run_bisect(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir, good=good, bad=bad,
                     repeats=repeats, from_run=from_run, hooks=hooks, resume=resume)
    doc = res.document
    for t in doc["tests"]:
        console.print(f"  {t['name']}: {t['outcome']:<10} {', '.join(t['changes'])}", highlight=False, markup=False)
    if doc.get("minimal") is None:
        console.print(f"[yellow]{doc['message']}[/]")
    else:
        click.echo(f"minimal change ({len(doc['tests'])} tests): {', '.join(doc['minimal']) or '(none)'}")
        click.echo(f"reproduce with: {doc['command']}")
    console.print(f"record: {res.run_dir / 'bisect.json'}")
    sys.exit(res.exit_code)


@main.command("bug-report")
@click.argument("run_id")
@runs_dir_option()
@click.option("-o", "--output", default=None, help="Write the markdown here (default: RUNS_DIR/RUN_ID/bug-report.md).")
@handle_errors
def bug_report_cmd(run_id, runs_dir, output):
    """Write an upstream issue body (markdown) for a diagnose run: environment, minimal command, evidence,
    an excerpt of a looping output, mitigations; secrets and host names masked. Prints it too."""
    from pathlib import Path  # deferred: keeps --version/--help fast

    from ..runs.bugreport import write_bug_report  # deferred: keeps --version/--help fast

    path, text = write_bug_report(run_id, runs_dir=Path(runs_dir), output=Path(output) if output else None)
    click.echo(text)
    click.echo(f"(written to {path})", err=True)


def _register_ops() -> None:
    main.add_command(classify_log_cmd, "classify-log")
    main.add_command(lint_command_cmd, "lint-command")
    main.add_command(watch_cmd, "watch")


def _register_runs() -> None:
    for cmd in (hosts_cmd, report_cmd, compare_cmd):
        main.add_command(handle_errors_cmd(cmd))


def handle_errors_cmd(cmd: click.Command) -> click.Command:
    """Wrap a click command's callback in :func:`handle_errors` (one red line + exit code)."""
    cmd.callback = handle_errors(cmd.callback)
    return cmd


_register_runs()
for _cmd in (preflight, status, stop, launch, logs, smoke):
    main.add_command(_cmd)


_register_ops()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
