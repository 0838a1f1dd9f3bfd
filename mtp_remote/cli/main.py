"""The ``mtp-remote`` command line (click): options → the command's arguments (:mod:`mtp_remote.commands.args`) →
:func:`mtp_remote.cli.render.run` (the command, its rendering, its exit code), the same path ``fab`` takes.

This is one of the two places that catch broad errors: an expected :class:`MtpRemoteError` becomes one red
line (plus its evidence) and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import sys

import click

from .. import __version__
from ..commands.args import BisectArgs, DiagnoseArgs, MitigateArgs, NightlyArgs
from ..config.paths import DEFAULT_NIGHTLY_PLAYBOOK, DEFAULT_PLAYBOOK
from . import lazy
from .host import launch, logs, preflight, smoke, status, stop
from .completion import complete_run_ids
from .options import handle_errors, host_opt, inventory_opt, one_host_opt, playbook_opt, runs_dir_option
from .runs import compare_cmd, hosts_cmd, report_cmd
from .tools import classify_log_cmd, lint_command_cmd
from .watch import watch_cmd

# Start-up time: ``--version``/``--help`` import only click and the light modules above (~0.1 s); each command
# reaches the workflows and the rich renderers through :mod:`mtp_remote.cli.lazy` when it runs.


_EPILOG = """\b
Exit codes: 0 healthy (or a finding that is not corruption), 1 a speculative profile corrupts output,
failed or regressed, 2 the run could not be done (config, SSH, lock, baseline), 3 inconclusive (no evidence
either way: resume as the next line says), 130 interrupted
(Ctrl-C/SIGTERM: our servers stopped, samples kept, the resume command printed).

\b
Inventory: -i FILE after the command (mtp-remote status -i FILE), else $MTP_REMOTE_INVENTORY, else
inventory.yaml here or in a parent directory.
Shell completion (bash; zsh_source, fish_source): eval "$(_MTP_REMOTE_COMPLETE=bash_source mtp-remote)"
(commands, options, -H hosts and groups, run ids)
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
@inventory_opt
@host_opt
@click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True, help="Playbook (YAML).")
@click.option("--profile", "profiles", multiple=True, help="Only these profiles (baseline always runs). Repeatable.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Override samples per prompt per temperature.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Override max tokens per request.")
@runs_dir_option("Where run directories are written.")
@click.option("--resume", metavar="RUN_ID", default=None, shell_complete=complete_run_ids, help="Continue a run: stored samples are not requested again.")
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
    args = DiagnoseArgs(runs_dir, inventory=inventory, host=host, playbook=playbook, profiles=tuple(profiles),
                        samples=samples, max_tokens=max_tokens, resume=resume, stop_on_loop=stop_on_loop,
                        attach=tuple(attach))
    sys.exit(lazy.render_runs().run("diagnose", args, as_json=as_json))


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
    sys.exit(lazy.tool_views().run_analyze(files, as_json=as_json, per_row=per_row))


@main.command()
@inventory_opt
@host_opt
@click.option("-p", "--playbook", default=DEFAULT_NIGHTLY_PLAYBOOK, show_default=True, help="Playbook (YAML).")
@runs_dir_option()
@click.option("--history", "history_db", default=None, help="SQLite history file (default RUNS_DIR/history.sqlite).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json (with the regression check) to stdout.")
@click.option("--metrics-file", default=None, metavar="PATH",
              help="Also write metrics.prom here, atomically (a node-exporter textfile collector's *.prom).")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True,
              help="With a group or a,b,c: hosts run at once.")
@handle_errors
def nightly(inventory, host, playbook, runs_dir, history_db, as_json, metrics_file, workers):
    """Diagnose, record the run in the history, and test for regressions against earlier good runs (cron/CI).

    Every night leaves runs/RUN_ID/ with summary.json, junit.xml and metrics.prom and a history row, also
    when the run could not be done (SSH down, lock held, baseline failed, bad config). A regression is a
    tested change against the host's earlier good runs (up to 10): loop rate (Fisher exact against their
    pooled loops) or speed (the spec/baseline ratio against its between-run spread), at a month's false-alarm
    budget (alpha/30 a night). Exit 1 when a speculative profile corrupts output or regressed, 2 when the
    run could not be done, 3 inconclusive (the night's samples decide nothing either way: a CI job does not
    pass without evidence), 130 interrupted.

    \b
    -H GROUP (or -H a,b,c): every host at once (--workers at a time), each
    with its own run directory, artefacts and history row with the group
    (`history --group GROUP`), checked against its own earlier runs; plus
    runs/fleet-ID/ with summary.json (each host's verdict, the hosts that
    disagree), junit.xml (one case per host) and metrics.prom (every host,
    labelled with the group). Exit code: the most severe of the hosts' (2, then
    1, then 3, then 0)."""
    args = NightlyArgs(runs_dir, inventory=inventory, host=host, playbook=playbook, history_db=history_db,
                       metrics_file=metrics_file, workers=workers)
    sys.exit(lazy.render_runs().run("nightly", args, as_json=as_json))


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
    sys.exit(lazy.views().history(host=host, group=group, runs_dir=runs_dir, history_db=history_db, limit=limit,
                                  as_json=as_json, probes=probes))


@main.command()
@inventory_opt
@host_opt
@playbook_opt
@click.option("--from", "--from-run", "from_run", metavar="RUN_ID", default=None, shell_complete=complete_run_ids,
              help="The diagnose run to start from: its corrupting profile, and its baseline samples when host and "
                   "experiment match.")
@click.option("--profile", default=None, help="The corrupting speculative profile (default: from --from, else the first).")
@click.option("--candidate", "only", multiple=True, help="Only these candidates (names as listed). Repeatable.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Per-prompt sample budget per candidate.")
@runs_dir_option()
@click.option("--resume", metavar="RUN_ID", default=None, shell_complete=complete_run_ids, help="Continue a mitigation run: finished candidates are kept.")
@click.option("--json", "as_json", is_flag=True, help="Print mitigation.json to stdout instead of the table.")
@click.option("--spread", is_flag=True, help="With several hosts: each candidate on one host (hosts serving the same "
                                             "model and SGLang release), one merged table.")
@handle_errors
def mitigate(inventory, host, playbook, from_run, profile, only, samples, runs_dir, resume, as_json, spread):
    """Try flag changes on a corrupting profile; rank the loop-free ones by speed (exit 1: none is loop-free).

    -H a,b,c or a group runs it on every host (fleet); with --spread the candidates are shared out instead."""
    args = MitigateArgs(runs_dir, inventory=inventory, host=host, playbook=playbook, from_run=from_run, profile=profile,
                        only=tuple(only), samples=samples, resume=resume, spread=spread)
    sys.exit(lazy.render_runs().run("mitigate", args, as_json=as_json))


@main.command("bisect")
@inventory_opt
@one_host_opt
@playbook_opt
@click.option("--good", default=None, help="Good launch flags: a profile name or a flag string (default: the baseline).")
@click.option("--bad", default=None, help="Bad launch flags: a profile name or a flag string (default: the corrupting profile).")
@click.option("--repeats", type=click.IntRange(min=1), default=None, help="Per-prompt sample budget of each test.")
@click.option("--from", "--from-run", "from_run", metavar="RUN_ID", default=None, shell_complete=complete_run_ids, help="Diagnose run: corrupting profile and baseline samples.")
@runs_dir_option()
@click.option("--resume", metavar="RUN_ID", default=None, shell_complete=complete_run_ids,
              help="Continue bisect run RUN_ID: finished tests are not launched again, the interrupted one continues.")
@handle_errors
def bisect_cmd(inventory, host, playbook, good, bad, repeats, from_run, runs_dir, resume):
    """Find the minimal flag change from a good to a bad launch line that still corrupts output (ddmin).

    Each test's result is stored as it completes; Ctrl-C prints the --resume command."""
    args = BisectArgs(runs_dir, inventory=inventory, host=host, playbook=playbook, good=good, bad=bad, repeats=repeats,
                      from_run=from_run, resume=resume)
    sys.exit(lazy.render_runs().run("bisect", args))


@main.command("bug-report")
@click.argument("run_id", shell_complete=complete_run_ids)
@runs_dir_option()
@click.option("-o", "--output", default=None, help="Write the markdown here (default: RUNS_DIR/RUN_ID/bug-report.md).")
@handle_errors
def bug_report_cmd(run_id, runs_dir, output):
    """Write an upstream issue body (markdown) for a diagnose run: environment, minimal command, evidence,
    an excerpt of a looping output, mitigations; secrets and host names masked. Prints it too."""
    sys.exit(lazy.run_views().bug_report(run_id, runs_dir, output))


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
