"""The command line every Monte Carlo bench shares: ``--trials`` and ``--seed``, comma-separated list options,
and the closing line with the wall time (the figures in docs/ quote it as "N s on this machine")."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def mc_parser(doc: str, *, trials: int, seed: int = 0) -> argparse.ArgumentParser:
    """A parser described by the first line of ``doc`` with ``--trials`` (default ``trials``: tables, runs or
    months per row, as the bench counts them) and ``--seed`` (numpy's ``default_rng`` seed)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--trials", type=int, default=trials)
    ap.add_argument("--seed", type=int, default=seed)
    return ap


def csv_of(kind: Callable[[str], object]) -> Callable[[str], list]:
    """An argparse ``type`` for a comma-separated list: ``csv_of(int)("1,3,7") == [1, 3, 7]``; a bad item is
    argparse's usual "invalid value" error naming the option."""
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x.strip()]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r}: comma-separated {kind.__name__} values ({e})") from e
    parse.__name__ = f"list of {kind.__name__}"
    return parse


class Timed:
    """``with Timed(): ...`` prints ``(N s on this machine)`` when the block ends."""

    def __enter__(self) -> Timed:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        print(f"\n({time.perf_counter() - self.t0:.0f} s on this machine)")
