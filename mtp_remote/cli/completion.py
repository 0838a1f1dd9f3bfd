"""Shell completion of host names (``-H``) and run ids (``--resume``, ``--from``, ``bug-report RUN_ID``, ``report``,
``compare``), through click's own completion (``eval "$(_MTP_REMOTE_COMPLETE=bash_source mtp-remote)"``; zsh and
fish: ``zsh_source`` / ``fish_source``). Completion never fails: an inventory or runs directory that cannot be
read completes nothing. Reads only: the inventory's YAML keys (hosts and groups, not validated) and the names of
the runs directory's entries."""

from __future__ import annotations

from pathlib import Path

import click
from click.shell_completion import CompletionItem


#: The most run ids offered (newest first): a runs directory of a year of nightlies holds hundreds.
MAX_RUNS = 50


def host_names(inventory: str | Path | None) -> tuple[list[str], list[str]]:
    """(hosts, groups) named by ``inventory`` (the file ``-i`` gives, else the one a command would find), without
    validating it; ([], []) when it cannot be read."""
    import yaml

    from ..config.paths import find_inventory  # imported when completing: --version/--help stay light

    try:
        path = find_inventory(inventory)
        if path.stat().st_size > 4 << 20:
            return [], []
        data = yaml.safe_load(path.read_text()) or {}
        hosts, groups = data.get("hosts") or {}, data.get("groups") or {}
        return ([str(h) for h in hosts] if isinstance(hosts, dict) else [],
                [str(g) for g in groups] if isinstance(groups, dict) else [])
    except Exception:  # noqa: BLE001 - completion completes nothing rather than fail
        return [], []


def complete_hosts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``-H``: the inventory's hosts and groups; after ``a,`` the rest of a list ``a,b``."""
    hosts, groups = host_names(ctx.params.get("inventory"))
    head, _, last = incomplete.rpartition(",")
    prefix = f"{head}," if head else ""
    names = [(h, "host") for h in hosts] + ([] if head else [(g, "group") for g in groups])
    return [CompletionItem(prefix + n, help=kind) for n, kind in names if n.startswith(last)]


def run_ids(runs_dir: str | Path | None) -> list[str]:
    """Run ids in ``runs_dir`` (default: where runs go), newest first (ids start with their UTC time), at most
    :data:`MAX_RUNS`; [] when it cannot be read."""
    from ..config.paths import default_runs_dir
    from ..config.validation import is_name

    try:
        root = Path(runs_dir) if runs_dir else default_runs_dir()
        names = [p.name for p in root.iterdir() if p.is_dir() and is_name(p.name) and p.name[:1].isdigit()
                 or p.is_dir() and p.name.startswith("fleet-")]
    except OSError:
        return []
    return sorted(names, reverse=True)[:MAX_RUNS]


def complete_run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """A run id of the command's ``--runs-dir`` (or the default), ``last`` where the argument takes it."""
    ids = run_ids(ctx.params.get("runs_dir"))
    if param.name in ("run", "run_b"):
        ids = ["last", *ids]
    return [CompletionItem(i) for i in ids if i.startswith(incomplete)]
