"""What both entry points (``mtp-remote watch``, ``fab watch``) hand to :func:`mtp_remote.watch.watch.watch`: the
endpoints, the probe playbook and the options, checked here once (bad input is a ConfigError naming the option
and what is allowed)."""

from __future__ import annotations

import os
from pathlib import Path

from ..config.endpoints import Endpoint, parse_endpoints
from ..config.paths import HISTORY_FILE
from ..config.playbook import Playbook, load_playbook
from ..config.validation import ENV_NAME, is_name
from ..errors import ConfigError
from ..report.history import check_history_path
from .probe import default_probe_playbook
from .watch import WatchOptions

#: The shortest interval between rounds (seconds) that ``watch`` accepts: a probe round is several requests.
MIN_INTERVAL_S = 1.0


def probe_playbook(playbook: str | None = None, *, api: str | None = None, samples: int | None = None,
                   max_tokens: int | None = None) -> Playbook:
    """The probe set: ``playbook``'s prompts, api, template, sampling and concurrency (one request at a time
    unless it says otherwise), else :func:`~mtp_remote.watch.probe.default_probe_playbook`; ``api``,
    ``samples`` and ``max_tokens`` override."""
    over = {k: v for k, v in (("api", api), ("samples", samples), ("max_tokens", max_tokens)) if v is not None}
    if playbook is None:
        return default_probe_playbook(**over)
    pb = load_playbook(playbook)
    data = {**pb.model_dump(), "concurrency": pb.concurrency or 1, **over}
    try:
        return Playbook.model_validate(data)
    except ValueError as e:
        raise ConfigError(str(e).splitlines()[-1], file=playbook) from None


def listen_port(value: str | int | None) -> int | None:
    """``--listen``: ``PORT`` or ``127.0.0.1:PORT`` / ``localhost:PORT`` (the listener binds loopback only)."""
    if value is None:
        return None
    host, _, port = str(value).rpartition(":")
    if host not in ("", "127.0.0.1", "localhost"):
        raise ConfigError(f"{value!r}: the metrics listener binds 127.0.0.1 only; give PORT or 127.0.0.1:PORT",
                          field="--listen")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{value!r}: not a port (0-65535; 0 takes a free one)", field="--listen")
    return int(port)


def api_key_from_env(name: str | None) -> str | None:
    """The API key in environment variable ``name`` (never on the command line, where ``ps`` shows it)."""
    if name is None:
        return None
    if not is_name(name, ENV_NAME):
        raise ConfigError(f"{name!r} is not an environment variable name", field="--api-key-env")
    key = os.environ.get(name)
    if not key:
        raise ConfigError(f"environment variable {name} is not set (or empty)", field="--api-key-env")
    return key


def plan_watch(urls: list[str] | tuple[str, ...], *, playbook: str | None = None, api: str | None = None,
               samples: int | None = None, max_tokens: int | None = None, interval_s: float = 300.0,
               count: int | None = None, metrics_file: str | None = None, listen: str | int | None = None,
               history: str | None = None, no_history: bool = False, runs_dir: str | Path = "runs",
               on_alert: str | None = None, api_key_env: str | None = None
               ) -> tuple[list[Endpoint], Playbook, WatchOptions]:
    """Check every input and return (endpoints, probe playbook, options). Raises ConfigError naming the option:
    no URL, a URL that is not http(s) (or names a bad endpoint), an interval under :data:`MIN_INTERVAL_S`, a
    count under 1, a listener off loopback, a history path that is not an SQLite file."""
    if not urls:
        raise ConfigError("give at least one endpoint: URL or NAME=URL (e.g. http://127.0.0.1:30000)",
                          field="URL")
    try:
        endpoints = parse_endpoints(list(urls))
    except ValueError as e:
        raise ConfigError(str(e), field="URL") from None
    if interval_s < MIN_INTERVAL_S:
        raise ConfigError(f"{interval_s:g} s: at least {MIN_INTERVAL_S:g} s between probes (default 300)",
                          field="--interval")
    if count is not None and count < 1:
        raise ConfigError(f"{count}: at least 1 probe", field="--count")
    db = None if no_history else check_history_path(history or Path(runs_dir) / HISTORY_FILE)
    opts = WatchOptions(interval_s=interval_s, count=count, metrics_file=Path(metrics_file) if metrics_file else None,
                        listen=listen_port(listen), history_db=db, on_alert=on_alert or None,
                        api_key=api_key_from_env(api_key_env))
    return endpoints, probe_playbook(playbook, api=api, samples=samples, max_tokens=max_tokens), opts
