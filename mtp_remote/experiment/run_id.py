"""Run ids: ``YYYYmmdd-HHMMSS-xxxx`` (UTC, then 4 random hex digits), the name of a run's directory. Light (the
stdlib only): the host commands and the fleet runner name runs without importing the experiment."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone


def new_run_id(now: datetime | None = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxx`` in UTC."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)
