"""The one place the entry points import their heavy half: each function here imports a module on first use.

Start-up time is the reason: ``mtp-remote --version``/``--help`` and ``fab -l`` load only the adapters (click
options, Fabric tasks), :mod:`mtp_remote.commands.args` and the light config modules; what runs a command (the
workflows: scipy, numpy, httpx, pydantic, jinja2, ~1 s on a 2-core VM; the rich renderers) is imported here
when a command runs. Every adapter reaches the command layer through these functions and nothing else
imports lazily in ``cli/`` (``tests/unit/cli/test_startup.py`` pins what start-up imports; ``bench/`` times
it). No click here: ``fab -l`` does not need it.
"""

from __future__ import annotations

from types import ModuleType


def output() -> ModuleType:
    """:mod:`mtp_remote.cli.output`: an expected error as one red line, ``--json`` output (light)."""
    from . import output as module

    return module


def render() -> ModuleType:
    """:mod:`mtp_remote.cli.render`: runs a host command of :mod:`mtp_remote.commands` and renders it (both entry
    points), and shows an error."""
    from . import render as module

    return module


def render_runs() -> ModuleType:
    """:mod:`mtp_remote.cli.render_runs`: runs a command that runs experiments (diagnose, nightly, mitigate,
    bisect, fleet) and renders it."""
    from . import render_runs as module

    return module


def views() -> ModuleType:
    """:mod:`mtp_remote.cli.views`: the commands over the inventory and the history (``hosts``, ``history``;
    light: no scipy, no workflow)."""
    from . import views as module

    return module


def run_views() -> ModuleType:
    """:mod:`mtp_remote.cli.run_views`: the commands over the runs on disk (``report``, ``compare``,
    ``bug-report``)."""
    from . import run_views as module

    return module


def tool_views() -> ModuleType:
    """:mod:`mtp_remote.cli.tool_views`: the commands that need no host (``analyze``, ``classify-log``,
    ``lint-command``)."""
    from . import tool_views as module

    return module


def api() -> ModuleType:
    """The :mod:`mtp_remote.experiment.diagnose` module (the diagnose workflow and its defaults)."""
    from ..experiment import diagnose as module

    return module
