"""What both entry points (``cli.py``, ``tasks.py``) share at start-up: default file locations and the
heavy layers, imported on first use.

Start-up time is the reason this module exists: ``mtp-remote --version``/``--help`` and ``fab -l`` must not
pay for the api layer (scipy, numpy, httpx, pydantic, jinja2: ~1 s on a 2-core VM) or the rich renderers;
each command imports them through :func:`api` / :func:`make_console` when it runs. ``bench/`` times this.
"""

from __future__ import annotations

DEFAULT_INVENTORY = "inventory.yaml"
DEFAULT_PLAYBOOK = "playbooks/diagnose-mtp.yaml"


def api():
    """The :mod:`mtp_remote.api` module (deferred: it pulls scipy/numpy/httpx/pydantic, ~1 s)."""
    from . import api as module

    return module


def make_console(*args, **kwargs):
    """:func:`mtp_remote.report.console.make_console` (deferred: rich tables/progress and jinja2)."""
    from .report.console import make_console as make

    return make(*args, **kwargs)
