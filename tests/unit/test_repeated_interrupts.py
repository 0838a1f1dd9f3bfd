"""Ctrl-C pressed more than once. CI failure (stop 15): `fab logs --follow`, Ctrl-C pressed again while the
first one was leaving (0.5 s later, on a loaded machine), died by SIGINT (return code -2) after printing
"error: interrupted" instead of exiting 130. Only the first signal unwinds; the second warns; the third leaves
at once; once the entry point is leaving, further signals are ignored."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _script(body: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent("""
        import signal, sys
        from mtp_remote.interrupts import Interrupts
        it = Interrupts().install()
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_the_first_interrupt_raises_the_second_warns_the_third_leaves_with_130():
    r = _script("""
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            print("unwinding", it.requested, it.count, flush=True)
            signal.raise_signal(signal.SIGINT)  # pressed again during the cleanup: it goes on
            print("cleanup finished", it.count, flush=True)
            signal.raise_signal(signal.SIGTERM)  # a third: leave now
            print("never printed", flush=True)
    """)
    assert r.returncode == 130, r
    assert r.stdout.splitlines() == ["unwinding True 1", "cleanup finished 2"]
    assert "already stopping, with what this command started" in r.stderr and "Ctrl-C once more" in r.stderr
    assert "left at once; servers this run started may still be running" in r.stderr


def test_once_leaving_further_interrupts_are_ignored_and_the_exit_code_stays_130():
    r = _script("""
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            it.exiting()
            for _ in range(3):
                signal.raise_signal(signal.SIGINT)  # as during interpreter shutdown
            sys.exit(130)
    """)
    assert (r.returncode, r.stderr) == (130, "")

