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
from rich.console import Console

from . import __version__, api
from .errors import EXIT_RUN_FAILED, MtpRemoteError

err_console = Console(stderr=True)


def handle_errors(fn):
    """Turn MtpRemoteError into a red line + evidence + exit code; KeyboardInterrupt into exit 130."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MtpRemoteError as e:
            err_console.print(f"[bold red]error:[/] {e}", highlight=False)
            if e.evidence:
                err_console.print(e.evidence, style="dim", highlight=False, markup=False)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            err_console.print("[red]interrupted[/]; samples stored so far are kept (use --resume RUN_ID)")
            sys.exit(130)

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


_inventory_opt = click.option("-i", "--inventory", default=api.DEFAULT_INVENTORY, show_default=True,
                              help="Inventory of hosts (YAML).")
_host_opt = click.option("-H", "--host", default=None, help="Host name from the inventory (default: its default_host).")


@main.command()
@_inventory_opt
@_host_opt
@click.option("-p", "--playbook", default=api.DEFAULT_PLAYBOOK, show_default=True, help="Playbook (YAML).")
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

    console = Console(stderr=as_json)
    rh = RichHooks(console)
    hooks = Hooks(on_progress=rh.on_progress, on_profile=rh.on_profile, on_sample=rh.on_sample)
    overrides = {k: v for k, v in (("samples", samples), ("max_tokens", max_tokens)) if v is not None}
    res = api.diagnose(inventory=inventory, playbook=playbook, host=host, runs_dir=runs_dir,
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
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@handle_errors
def analyze(as_json, files):
    """Measure degeneracy (loops, seq-rep-4, compression, think block) of texts.

    FILE is plain text, a chat/generate JSON response body, or samples.jsonl; '-' reads standard input.
    Exits 1 when any text loops."""
    from rich.table import Table

    from .analysis.degeneracy import analyze_text
    from .inputs import read_texts

    rows = []
    for f in files:
        for label, text, ids in read_texts(f):
            rows.append({"file": label, **analyze_text(text, ids).to_dict()})
    if as_json:
        for r in rows:
            click.echo(json.dumps(r))
    else:
        t = Table(title="Degeneracy")
        for col in ("file", "loop", "unit × repeats", "loop start (char)", "seq-rep-4", "compression", "think closed"):
            t.add_column(col)
        for r in rows:
            unit = f"{r['loop_unit_tokens']} × {r['loop_repeats']}" if r["loop"] else "–"
            t.add_row(r["file"], "[red]yes[/]" if r["loop"] else "no", unit,
                      str(r["loop_start_char"]) if r["loop"] else "–", f"{r['seq_rep_4']:.3f}",
                      f"{r['compression_ratio']:.2f}", str(r["think_closed"]))
        Console().print(t)
    sys.exit(1 if any(r["loop"] for r in rows) else 0)


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
