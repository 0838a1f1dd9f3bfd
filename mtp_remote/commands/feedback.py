"""What a command says while it runs: :class:`Feedback`, built once by the entry point and handed to the command.

Plain callables (no experiment import): the host commands take it as it is; the run commands turn it into the
runner's hooks (:func:`mtp_remote.commands.run.runner_hooks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _nothing(*args) -> None:
    """Says nothing (every hook's default)."""


def _never() -> bool:
    return False


@dataclass(frozen=True)
class Feedback:
    """A run on one host: ``on_progress(message)`` a line per event (also the steps of ``stop`` and ``launch``),
    ``on_profile(profile, n_requests)``, ``on_sample(profile, done, total)``, ``on_loop(profile)`` (a sample came
    back degenerate); ``interrupted()`` whether the user asked to stop, ``checkpoint()`` raises
    KeyboardInterrupt if so. Several hosts at once: ``on_host(host, message)`` a progress line of one host.
    Every one says nothing by default."""

    on_progress: Callable[[str], None] = _nothing
    on_profile: Callable[[str, int], None] = _nothing
    on_sample: Callable[[str, int, int], None] = _nothing
    on_loop: Callable[[str], None] = _nothing
    interrupted: Callable[[], bool] = _never
    checkpoint: Callable[[], None] = _nothing
    on_host: Callable[[str, str], None] = _nothing
