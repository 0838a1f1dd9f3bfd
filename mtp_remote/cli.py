"""The ``mtp-remote`` command line (click). Thin: parse options, call :mod:`mtp_remote.api`, render.

This is one of the two places that catch broad errors: an expected :class:`MtpRemoteError` becomes one red
line (plus its evidence) and its exit code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import logging
import sys

import click

from . import __version__
from .entry import DEFAULT_INVENTORY, DEFAULT_PLAYBOOK, make_console
from .entry import api as _api
from .errors import EXIT_RUN_FAILED, MtpRemoteError
from .interrupts import Interrupts

# Start-up time: ``--version``/``--help`` import only click and the light modules above (~0.1 s). The api
# layer (scipy, numpy, httpx, pydantic, jinja2: ~1 s) and the rich renderers are imported inside the command
# that uses them ("deferred" below), so a command pays only for what it runs.


#: SIGINT/SIGTERM handling for this process (entry point state: one per process).
INTERRUPTS = Interrupts()


def handle_errors(fn):
    """Turn MtpRemoteError into a red line + evidence + exit code; KeyboardInterrupt into exit 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        INTERRUPTS.install()
        try:
            return fn(*args, **kwargs)
        except MtpRemoteError as e:
            from rich.console import Console  # deferred: only an error needs it
            from rich.markup import escape

            err_console = Console(stderr=True, log_path=False)
            err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
            if e.evidence:
                err_console.print(e.evidence, style="dim", highlight=False, markup=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            from rich.console import Console  # deferred: only an interrupt needs it

            Console(stderr=True, log_path=False).print("[red]interrupted[/]")
            sys.exit(130)
        except Exception as e:  # an SSH failure is a cause (one line, exit 2); anything else is a bug
            from .remote.connect import as_connect_error

            ssh = as_connect_error(e)
            if ssh is None:
                raise
            err_console.print(f"[bold red]error:[/] {escape(str(ssh))}", highlight=False)
            sys.exit(ssh.exit_code)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtp-remote")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Diagnose speculative-decoding (MTP/NEXTN/EAGLE) output corruption on SGLang hosts.

    Runs the same prompts against a baseline server and speculative profiles, measures repetition loops,
    and gives a verdict per profile with its evidence. Exit codes: 0 healthy, 1 a speculative profile
    corrupts output or failed to launch, 2 the run could not be done.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbose >= 2:  # paramiko's own handshake logs (quiet otherwise: see remote/ssh.py)
        logging.getLogger("paramiko").setLevel(logging.DEBUG)


_inventory_opt = click.option("-i", "--inventory", default=DEFAULT_INVENTORY, show_default=True,
                              help="Inventory of hosts (YAML).")
_host_opt = click.option("-H", "--host", default=None, help="Host name from the inventory (default: its default_host).")


@main.command()
@_inventory_opt
@_host_opt
@click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True, help="Playbook (YAML).")
@click.option("--profile", "profiles", multiple=True, help="Only these profiles (baseline always runs). Repeatable.")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Override samples per prompt per temperature.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None, help="Override max tokens per request.")
@click.option("--runs-dir", default="runs", show_default=True, help="Where run directories are written.")
@click.option("--resume", metavar="RUN_ID", default=None, help="Continue a run: stored samples are not requested again.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout instead of tables.")
@handle_errors
def diagnose(inventory, host, playbook, profiles, samples, max_tokens, runs_dir, resume, as_json):
    """Run the speculative vs baseline experiment on a host and give verdicts."""
    from .report.console import RichHooks, cells_table, verdict_table
    from .runner import Hooks

    console = make_console(stderr=as_json)
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample,
                  interrupted=lambda: INTERRUPTS.requested, checkpoint=INTERRUPTS.check)
    overrides = {k: v for k, v in (("samples", samples), ("max_tokens", max_tokens)) if v is not None}
    res = _api().diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir,
                       profiles=list(profiles) or None, resume=resume, hooks=hooks, overrides=overrides)
    if as_json:
        click.echo(json.dumps(res.summary, indent=2, default=str))
    else:
        console.print(cells_table(res.summary))
        console.print(verdict_table(res.summary))
        console.print(f"report: {res.run_dir / 'report.md'}  (exit code {res.exit_code})")
    sys.exit(res.exit_code)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line per text.")
@click.option("--rows/--summary", "per_row", default=None,
              help="One table row per text, or a summary (default: rows up to 20 texts, else a summary).")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@handle_errors
def analyze(as_json, per_row, files):
    """Measure degeneracy (loops, near loops, seq-rep-4, compression, think block) of texts.

    FILE is read by its kind: .json a chat/generate response body, .jsonl samples (one record a line),
    anything else plain text (even when the text is JSON); '-' reads standard input. A file that cannot be
    read is reported ({"file", "error"} with --json) and the others are still analysed. Many texts (a
    samples.jsonl) print a summary and the looping ones; --rows prints every row. Exits 2 when any
    file failed, else 1 when any text loops, else 0."""
    from .cli_ops import run_analyze

    sys.exit(run_analyze(files, as_json=as_json, per_row=per_row))


_playbook_opt = click.option("-p", "--playbook", default=DEFAULT_PLAYBOOK, show_default=True,
                             help="Playbook (YAML): flags and profiles.")


@main.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@handle_errors
def preflight(inventory, host, playbook, as_json):
    """Read-only checks: SSH, python/SGLang/torch, GPUs, model, disk, port, foreign processes, flag lint."""
    from .config import load_playbook
    from .ops import preflight as run_preflight
    from .report.console import checks_table

    pb = load_playbook(playbook)
    with _api().open_host(inventory, host) as (cfg, c, py):
        checks = run_preflight(c, cfg, pb, py)
    if as_json:
        click.echo(json.dumps([ch.to_dict() for ch in checks], indent=2))
    else:
        make_console().print(checks_table(cfg.name, checks))
    sys.exit(EXIT_RUN_FAILED if any(ch.status == "fail" for ch in checks) else 0)


@main.command()
@_inventory_opt
@_host_opt
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status(inventory, host, as_json):
    """Our server (if any), the port, GPU memory and SGLang processes we did not start."""
    from .ops import status as run_status
    from .report.console import status_table

    with _api().open_host(inventory, host) as (cfg, c, py):
        st = run_status(c, cfg, py)
    if as_json:
        click.echo(json.dumps(st.to_dict(), indent=2))
    else:
        make_console().print(status_table(st))


@main.command()
@_inventory_opt
@_host_opt
@click.option("--force", is_flag=True, help="Also stop SGLang processes we did not start, each by PID, after listing them.")
@click.option("--term-timeout", type=float, default=60.0, show_default=True, help="Seconds after SIGTERM before SIGKILL.")
@handle_errors
def stop(inventory, host, force, term_timeout):
    """Stop the server we started (SIGTERM, then SIGKILL) and wait for its GPU memory to be released."""
    from .ops import stop as run_stop
    from .report.console import print_stop, progress_printer  # deferred: rich renderers

    console = make_console()
    with _api().open_host(inventory, host) as (cfg, c, py):
        res = run_stop(c, cfg, py, force=force, term_s=term_timeout, on_progress=progress_printer(console))
    print_stop(console, res)


@main.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--profile", required=True, help="Profile of the playbook to launch.")
@handle_errors
def launch(inventory, host, playbook, profile):
    """Launch one profile's server detached and wait until it is ready (it keeps running)."""
    from .config import load_playbook
    from .ops import launch as run_launch
    from .report.console import progress_printer  # deferred: rich renderers
    from .runner import new_run_id

    pb = load_playbook(playbook)
    console = make_console()
    with _api().open_host(inventory, host) as (cfg, c, py):
        outcome = run_launch(c, cfg, pb, profile, py, run_id=new_run_id(), on_progress=progress_printer(console))
    if not outcome.ok:
        from .server import raise_for_outcome

        raise_for_outcome(outcome)
    console.print(f"[green]{escape(outcome.describe())}[/]; server on {escape(cfg.name)} 127.0.0.1:{cfg.port}")


@main.command()
@_inventory_opt
@_host_opt
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=50, show_default=True, help="Lines of tail to show.")
@handle_errors
def logs(inventory, host, follow, lines):
    """Show the log of our server (or the newest one), optionally following it."""
    from .ops import current_log, follow_log, server_alive

    with _api().open_host(inventory, host) as (cfg, c, py):
        path, pid = current_log(c, cfg)
        click.echo(f"==> {path} <==", err=True)
        if follow and pid is None:
            click.echo("(no server of ours is running: showing the log's end, not following)", err=True)
        keep = follow and pid is not None
        for chunk in follow_log(c, path, lines=lines, until=lambda: not keep or not server_alive(c, pid)):
            click.echo(chunk, nl=not keep)


@main.command()
@_inventory_opt
@_host_opt
@_playbook_opt
@click.option("--prompt", default=None, help="Prompt to send (default: the playbook's first).")
@click.option("--temperature", type=float, default=0.7, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def smoke(inventory, host, playbook, prompt, temperature, max_tokens, as_json):
    """Send one prompt to the running server and say whether its output loops (exit 1 if it does)."""
    from .config import load_playbook
    from .ops import running_api_key
    from .ops import smoke as run_smoke
    from .remote import connect as transport
    from .report.console import print_smoke  # deferred: rich renderers

    pb = load_playbook(playbook)
    with _api().open_host(inventory, host) as (cfg, c, py):
        with transport.tunnel(c, cfg) as url:
            res = run_smoke(url, pb, prompt=prompt, temperature=temperature, max_tokens=max_tokens,
                                api_key=running_api_key(c, cfg, pb))
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        print_smoke(make_console(), res)
    sys.exit(1 if res["verdict"] == "loops" else 0)


@main.command()
@_inventory_opt
@_host_opt
@click.option("-p", "--playbook", default="playbooks/nightly.yaml", show_default=True, help="Playbook (YAML).")
@click.option("--runs-dir", default="runs", show_default=True)
@click.option("--history", "history_db", default=None, help="SQLite history file (default RUNS_DIR/history.sqlite).")
@handle_errors
def nightly(inventory, host, playbook, runs_dir, history_db):
    """Diagnose, record the run in the history, and flag regressions since the last run (for cron/CI).

    Exit 1 when a speculative profile corrupts output or regressed, 2 when the run could not be done.
    Writes junit.xml and metrics.prom in the run directory."""
    from pathlib import Path

    from . import store
    from .report.console import verdict_table

    console = make_console()
    db = store.check_history_path(history_db or Path(runs_dir) / "history.sqlite")
    res = _api().diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir)
    doc = res.summary
    store.record_run(db, doc, res.run_dir)
    prev = store.previous_verdicts(db, host=doc["host"]["name"], playbook=doc["playbook"]["name"], before_run=res.run_id)
    regressed = store.regressions(prev, {v["profile"]: v["kind"] for v in doc["verdicts"]})
    console.print(verdict_table(doc))
    if regressed:
        console.print(f"[bold red]regression:[/] {', '.join(regressed)} (previously {', '.join(prev[p] for p in regressed)})")
    console.print(f"run {res.run_id}: {res.run_dir}; history {db}")
    sys.exit(max(res.exit_code, 1 if regressed else 0))


@main.command("history")
@click.option("-H", "--host", default=None, help="Only runs of this host (default: every host).")
@click.option("--history", "history_db", default="runs/history.sqlite", show_default=True)
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def history_cmd(host, history_db, limit, as_json):
    """List recorded runs (newest first) with their verdicts."""

    from rich.table import Table

    from .errors import ConfigError

    from . import store

    if not store.check_history_path(history_db).exists():
        raise ConfigError("no history yet (`mtp-remote nightly` writes it)", file=history_db)
    rows = store.history(history_db, host=host, limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    t = Table(title=f"History — {history_db}")
    for col in ("run", "host", "playbook", "started", "exit", "verdicts"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["run_id"], r["host"], r["playbook"], r["started_at"][:19], str(r["exit_code"]),
                  ", ".join(f"{p}: {k}" for p, k in r["verdicts"].items()))
    make_console().print(t)


def _register_ops() -> None:
    try:
        from .cli_ops import classify_log_cmd
    except ImportError:  # pragma: no cover - module under construction
        return
    main.add_command(classify_log_cmd, "classify-log")
    try:
        from .cli_ops import lint_command_cmd
    except ImportError:  # pragma: no cover
        return
    main.add_command(lint_command_cmd, "lint-command")


_register_ops()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
