"""Servers that outlive one profile: one kept running for the next launch of the same argv and environment, one
an earlier attempt of this run left running (adopted on a resume), and the leftover of an earlier run (stopped,
its log kept). All through the seam (:class:`~mtp_remote.serving.base.ServerKind`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config.playbook import TimeoutsConfig
from ..remote.commands import mask_argv, mask_log_secrets, mask_text
from ..serving.base import LogFollower, ServerKind, WaitOutcome
from .plan import LaunchPlan, server_key
from .rideout import riding_out
from .sampling import load_samples


@dataclass
class KeptServer:
    """A server left running after ``profile`` because the next launch has the same argv and environment: its
    record, its log stream (still following it), its ready outcome and :func:`~mtp_remote.experiment.plan.server_key`."""

    rec: object
    stream: LogFollower | None
    outcome: WaitOutcome
    profile: str
    key: tuple
    adopted: bool = False  # left running by an earlier attempt of this run (a resume), already announced
    log_offset: int = 0  # characters of its log stream's text when it was kept: the next profile's part starts here


def adopt_leftover(server: ServerKind, launches: list[LaunchPlan], samples_path: Path, *, ready_s: float,
                   on_progress: Callable[[str], None]) -> KeptServer | None:
    """On a resume (``samples_path`` exists): the server this run left running (its connection dropped), kept for
    the first launch that still has samples to take when it runs exactly that launch's argv — same run id, same
    port, the same masked command line (the playbook's fingerprint was checked for the resume), still the server
    we started (:meth:`~mtp_remote.serving.base.ServerKind.find_leftover`) and ready within ``min(ready_s, 60)``
    seconds. None otherwise."""
    if not samples_path.exists():
        return None  # a new run: nothing of its own can be running
    rec = riding_out(server, server.find_leftover, None)
    if rec is None:
        return None
    done = {s.key for s in load_samples(samples_path) if s.error is None}
    lp = next((x for x in launches if any(r.key not in done for r in x.requests)), None)
    if lp is None or rec.argv_masked != mask_argv(lp.argv):
        return None
    stream = server.follow(rec)
    outcome = server.wait_ready(rec, timeout_s=min(ready_s, 60.0), stream=stream)
    if not outcome.ok:
        if stream is not None:
            stream.__exit__(None, None, None)
        return None
    on_progress(f"{lp.profile}: the server this run left running ({rec.label}) has its argv: used, not relaunched")
    return KeptServer(rec=rec, stream=stream, outcome=outcome, profile=f"{rec.profile} (left running)",
                      key=server_key(lp), adopted=True)


def stop_leftover(server: ServerKind, timeouts: TimeoutsConfig, logs_dir: Path, secrets: list[str], *,
                  on_progress: Callable[[str], None]) -> None:
    """Stop the server an earlier run left on the host (if any); its log, secrets masked, is copied to
    ``logs_dir/previous-<ident>.log``."""
    res = server.stop(term_s=timeouts.term_s, drain_s=timeouts.drain_s, gpu_release_s=timeouts.gpu_release_s)
    if res.found in ("running", "group-only", "gone") and res.log_path:
        text = server.read_log(res.log_path)
        if text:
            dest = logs_dir / f"previous-{res.ident}.log"
            dest.write_text(mask_log_secrets(mask_text(text, secrets)))
            on_progress(f"stopped a server left by an earlier run ({res.label}); "
                        f"its log {res.log_path} is kept and copied to {dest}")
