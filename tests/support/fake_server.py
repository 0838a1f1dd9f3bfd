"""A process that *is* someone else's SGLang server by its argv (``python -m sglang.launch_server --port N``),
without SGLang: a stub package on PYTHONPATH that sleeps. Foreign-process detection parses argv, so a
``python -c ... -m sglang.launch_server`` look-alike no longer counts as a server."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STUB = Path(tempfile.gettempdir()) / f"mtp-remote-fake-sglang-{os.getuid()}"


def spawn_fake_server(port: int, seconds: int = 300, args: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start ``python -m sglang.launch_server [ARGS] --port PORT`` (a stub that sleeps) in a session of its own."""
    pkg = _STUB / "sglang"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(f"import time\ntime.sleep({int(seconds)})\n")
    p = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *args, "--port", str(port)], start_new_session=True,
                         env={**os.environ, "PYTHONPATH": str(_STUB)})
    time.sleep(0.2)
    return p
