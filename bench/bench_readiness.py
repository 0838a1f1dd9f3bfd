"""Readiness latency: seconds from the ready line being written to the log until ``wait_ready`` knows.

A stand-in server process (a real process in its own session) writes startup lines, then the ready line with
the wall-clock time it wrote it; ``ProcessServer.wait_ready`` follows the log (local transport, and over a
throwaway sshd on 127.0.0.1 when one is available) and the latency is the time it returned minus that time.

    python bench/bench_readiness.py [--repeats 20] [--markdown]

Not a test: numbers go to docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mtp_remote.config.inventory import HostConfig
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import connect, facts, process

SERVER = textwrap.dedent('''
    import sys, time
    log, delay = sys.argv[1], float(sys.argv[2])
    with open(log, "a") as f:
        f.write("[2026-11-30 10:00:00 TP0] Load weight end. elapsed=1.00 s\\n"); f.flush()
        time.sleep(delay)
        f.write("[2026-11-30 10:00:01] INFO:     Uvicorn running on http://127.0.0.1:30000\\n"); f.flush()
        time.sleep(delay)
        t = time.time()
        f.write("[2026-11-30 10:00:02] The server is fired up and ready to roll!\\n"); f.flush()
    open(log + ".t", "w").write(repr(t))
    time.sleep(60)
''')


def measure(c, host: HostConfig, workdir: Path, delay: float) -> float:
    log = workdir / f"{time.monotonic_ns()}.log"
    script = workdir / "server.py"
    script.write_text(SERVER)
    log.touch()  # as in a real launch, where the shell's redirect creates the log before wait_ready starts
    p = subprocess.Popen([sys.executable, str(script), str(log), str(delay)], start_new_session=True)
    try:
        info = None
        while info is None or str(script) not in info.cmdline:
            info = facts.get_process_info(c, p.pid)
        rec = process.ServerRecord(pid=p.pid, pgid=p.pid, start_ticks=info.start_ticks, cmdline=list(info.cmdline),
                                   profile="bench", port=0, log_path=str(log), run_id="bench", started_at=time.time())
        lc = ProcessServer(c, host, python=sys.executable, workdir=str(workdir), run_id="bench")
        out = lc.wait_ready(rec, timeout_s=30)
        known = time.time()
        assert out.ok, out.describe()
        stamp = Path(str(log) + ".t")
        while not stamp.exists() or not stamp.read_text():  # written just after the ready line
            time.sleep(0.001)
        return known - float(stamp.read_text())
    finally:
        p.kill()
        p.wait()


def run(label: str, c, host: HostConfig, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        xs = [measure(c, host, Path(d), delay) for delay in [0.3, 0.47, 0.71] * (repeats // 3 + 1)][:repeats]
    return {"transport": label, "n": len(xs), "median_ms": 1000 * statistics.median(xs),
            "p90_ms": 1000 * sorted(xs)[int(0.9 * (len(xs) - 1))], "max_ms": 1000 * max(xs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    local = HostConfig(name="local", transport="local", engine="sim")
    rows = [run("local", connect.connect(local), local, args.repeats)]
    try:
        from tests.support.sshd import SshdError, running_sshd

        with running_sshd() as sshd:
            host = HostConfig(name="ssh", engine="sim", **sshd.host_config())
            c = connect.connect(host)
            try:
                rows.append(run("ssh (127.0.0.1)", c, host, args.repeats))
            finally:
                connect.close(c)
    except SshdError as e:
        print(f"ssh skipped: {e}", file=sys.stderr)
    if args.markdown:
        print("| transport | runs | median ms | p90 ms | max ms |\n|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['transport']} | {r['n']} | {r['median_ms']:.0f} | {r['p90_ms']:.0f} | {r['max_ms']:.0f} |")
    else:
        for r in rows:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
