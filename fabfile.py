"""Fabric entry point: ``fab -l`` lists the tasks; ``fab diagnose`` runs the main job.

Thin shim: every task lives in :mod:`mtp_remote.cli.tasks`.
"""

from mtp_remote.cli.tasks import diagnose, launch, logs, preflight, smoke, status, stop  # noqa: F401
from mtp_remote.cli.tasks import bisect_task, fleet, mitigate, nightly  # noqa: F401,E402  (issue 12: after the verdict)
from mtp_remote.cli.tasks import watch  # noqa: F401,E402  (issue 29: live endpoints)
