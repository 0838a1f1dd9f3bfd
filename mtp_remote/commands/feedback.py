"""What a command says while it runs: :class:`Feedback`, built once by the entry point and handed to the command."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..experiment.runner import Hooks


def _quiet(host: str, message: str) -> None:
    """The default ``on_host``: says nothing."""


@dataclass(frozen=True)
class Feedback:
    """``hooks``: the runner's progress and interrupt hooks for a run on one host (their ``on_progress`` also
    takes the steps of ``stop`` and ``launch``); ``on_host(host, message)``: one progress line of one host of
    a fleet (several hosts at once). Both print nothing by default."""

    hooks: Hooks = field(default_factory=Hooks)
    on_host: Callable[[str, str], None] = _quiet

    def interrupts_only(self) -> Hooks:
        """The interrupt hooks alone (a fleet's hosts report through ``on_host``, not through progress bars)."""
        return Hooks(interrupted=self.hooks.interrupted, checkpoint=self.hooks.checkpoint)
