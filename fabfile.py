"""Fabric entry point: ``fab -l`` lists the tasks; ``fab diagnose`` runs the main job.

Thin shim: every task lives in :mod:`mtp_remote.tasks`.
"""

from mtp_remote.tasks import diagnose  # noqa: F401
