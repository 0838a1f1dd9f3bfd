"""The arguments of every command, typed: what the click options and the Fabric task options both become.

One frozen dataclass per command. The adapters (``cli/main.py``, ``host.py``, ``runs.py``; ``cli/tasks.py``)
turn their options into one of these (parsing and range checks are theirs: click types, or
the task's own checks for Fabric's strings) and call the command of the same name in
:mod:`mtp_remote.commands.run`, :mod:`~mtp_remote.commands.host` or :mod:`~mtp_remote.commands.fleet`.

Light on purpose (the stdlib and :mod:`mtp_remote.config.paths`): both entry points import it at start-up, and ``--help``/``fab -l`` stay fast.
Common fields: ``inventory`` is the ``-i`` file as given (None: ``$MTP_REMOTE_INVENTORY``, else
``inventory.yaml`` here or in a parent); ``host`` is ``-H`` as typed (None: the inventory's default host;
``a,b,c`` or a group name: every one of them at once, for the commands that run on many hosts);
``playbook`` is the YAML file as given (the default means the host's own ``playbook:`` when it sets one).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.paths import DEFAULT_NIGHTLY_PLAYBOOK, DEFAULT_PLAYBOOK
#: Hosts a fleet command runs at once unless told otherwise (``--workers``).
DEFAULT_WORKERS = 8
#: Seconds after SIGTERM before SIGKILL for ``stop`` (as a run's ``timeouts.drain_s``).
DEFAULT_TERM_S = 30.0


@dataclass(frozen=True)
class DiagnoseArgs:
    """``diagnose``: ``profiles`` only these speculative profiles (the baseline always runs; empty: all);
    ``samples``/``max_tokens``/``stop_on_loop`` override the playbook's (None: the playbook's);
    ``resume`` a run id to continue; ``runs_dir`` where run directories go; ``attach`` endpoints already
    serving (``NAME=URL`` each, one named as the playbook's baseline) diagnosed instead of launched profiles."""

    runs_dir: str
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK
    profiles: tuple[str, ...] = ()
    samples: int | None = None
    max_tokens: int | None = None
    resume: str | None = None
    stop_on_loop: bool | None = None
    attach: tuple[str, ...] = ()

    def overrides(self) -> dict:
        """The playbook fields this run overrides (``samples``, ``max_tokens``, ``stop_on_loop``)."""
        return {k: v for k, v in (("samples", self.samples), ("max_tokens", self.max_tokens),
                                  ("stop_on_loop", self.stop_on_loop)) if v is not None}


@dataclass(frozen=True)
class NightlyArgs:
    """``nightly``: ``history_db`` (None: RUNS_DIR/history.sqlite); ``metrics_file`` also gets metrics.prom;
    ``workers`` hosts at once for a group."""

    runs_dir: str
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_NIGHTLY_PLAYBOOK
    history_db: str | None = None
    metrics_file: str | None = None
    workers: int = DEFAULT_WORKERS


@dataclass(frozen=True)
class MitigateArgs:
    """``mitigate``: ``from_run`` the diagnose run to start from; ``profile`` the corrupting profile (None: from
    ``from_run``, else the first speculative one); ``only`` these candidates (empty: all); ``samples`` the
    per-prompt budget per candidate; ``spread`` shares the candidates out over several hosts."""

    runs_dir: str
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK
    from_run: str | None = None
    profile: str | None = None
    only: tuple[str, ...] = ()
    samples: int | None = None
    resume: str | None = None
    spread: bool = False


@dataclass(frozen=True)
class BisectArgs:
    """``bisect``: ``good``/``bad`` launch flags (a profile name or a flag string; None: the baseline / the
    corrupting profile); ``repeats`` the per-prompt budget of each test."""

    runs_dir: str
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK
    good: str | None = None
    bad: str | None = None
    repeats: int | None = None
    from_run: str | None = None
    resume: str | None = None


@dataclass(frozen=True)
class PreflightArgs:
    """``preflight``: read-only checks of a host, the playbook's profiles linted."""

    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK


@dataclass(frozen=True)
class StatusArgs:
    """``status``: our server, the port, GPU memory and the SGLang processes we did not start."""

    inventory: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class StopArgs:
    """``stop``: ``force`` also stops the foreign SGLang processes on this host's GPUs or port (by PID);
    ``term_s`` seconds after SIGTERM before SIGKILL."""

    inventory: str | None = None
    host: str | None = None
    force: bool = False
    term_s: float = DEFAULT_TERM_S


@dataclass(frozen=True)
class LaunchArgs:
    """``launch``: one profile's server, detached, waited for until ready."""

    profile: str | None
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK


@dataclass(frozen=True)
class LogsArgs:
    """``logs``: the last ``lines`` lines of our server's log (or the newest), ``follow`` keeps printing."""

    inventory: str | None = None
    host: str | None = None
    follow: bool = False
    lines: int = 50


@dataclass(frozen=True)
class SmokeArgs:
    """``smoke``: one prompt (None: the playbook's first) at ``temperature``; ``launch_hint`` is the command the
    answer names when no server runs (each front end names its own)."""

    launch_hint: str
    inventory: str | None = None
    host: str | None = None
    playbook: str = DEFAULT_PLAYBOOK
    prompt: str | None = None
    temperature: float = 0.7
    max_tokens: int | None = None


@dataclass(frozen=True)
class FleetArgs:
    """``fleet``: ``command`` (diagnose, mitigate, preflight, status, stop) on every host of ``hosts``
    (``a,b,c`` or a group), ``workers`` at once; ``samples`` overrides diagnose's and mitigate's."""

    command: str | None
    hosts: str | None
    runs_dir: str
    inventory: str | None = None
    playbook: str = DEFAULT_PLAYBOOK
    samples: int | None = None
    workers: int = DEFAULT_WORKERS
