"""What both entry points (``cli/main.py``, ``cli/tasks.py``) import on first use: the experiment layer and the rich
renderers.

Start-up time is the reason this module exists: ``mtp-remote --version``/``--help`` and ``fab -l`` must not
pay for the experiment layer (scipy, numpy, httpx, pydantic, jinja2: ~1 s on a 2-core VM) or the rich renderers;
each command imports them through :func:`api` / :func:`make_console` when it runs. ``bench/`` times this. No
click here: ``fab -l`` does not need it (~35 ms).
"""

from __future__ import annotations


def api():
    """The :mod:`mtp_remote.experiment.diagnose` module (deferred: it pulls scipy/numpy/httpx/pydantic, ~1 s)."""
    from ..experiment import diagnose as module  # deferred: keeps --version/--help fast (scipy, numpy, httpx)

    return module


def hosts():
    """The :mod:`mtp_remote.experiment.hosts` module (deferred, and light: opening a host needs no verdict,
    runner nor report)."""
    from ..experiment import hosts as module  # deferred: keeps --version/--help fast (pydantic, the transport)

    return module


def make_console(*args, **kwargs):
    """:func:`mtp_remote.report.console.make_console` (deferred: rich tables/progress and jinja2)."""
    from ..report.console import make_console as make  # deferred: keeps --version/--help fast (rich, jinja2)

    return make(*args, **kwargs)
