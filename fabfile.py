"""Fabric entry point: ``fab -l`` lists the tasks; ``fab diagnose`` runs the main job.

Thin shim: every task lives in :mod:`mtp_remote.tasks`.
"""

from mtp_remote.cli.tasks import (  # noqa: F401  # noqa: F401,E402  (issue 12: after the verdict)
    bisect_task,
    diagnose,
    fleet,
    launch,
    logs,
    mitigate,
    nightly,
    preflight,
    smoke,
    status,
    stop,
)
