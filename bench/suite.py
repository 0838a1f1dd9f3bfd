"""The benchmark suite behind docs/PERFORMANCE.md: each row of issue 11's table beside its anchor, in one run.

    python -m bench [--repeats N] [--only ROW,...] [--no-ssh] [--json FILE] [--write-docs]

Rows (each locally and, where a transport is involved, through a throwaway OpenSSH sshd on 127.0.0.1 from
``tests/support/sshd.py``):

- ``ready``: ready line written -> the tool knows (``ProcessServer.wait_ready`` on a stand-in server that
  writes the line and flips its ``/health`` to 200 at the same instant), beside a 1 s ``curl`` loop on
  ``/health`` and SGLang's test helper's 10 s ``/health_generate`` poll, all three watching the same launch.
- ``stop``: the simulated engine launched and ready, then ``ProcessServer.stop``; the figure is the time from
  its GPU memory being free (the sim's own record: exit time + release delay) to the tool returning, beside
  ``kill -9 -PGID; sleep 5`` (the field's ``pkill -9 -f sglang; sleep 5``, limited to our process group).
- ``cycle``: ``api.diagnose`` of a small playbook (baseline + mtp) on the sim: per launch cycle, the tool's own
  time (wall - engine start - sampling - engine's stop), and the SSH exec sessions / ``c.run`` calls.
- ``occupancy``: requests in flight vs the server's limit (16) on the sim, from the server's own
  ``/metrics`` (``sglang:num_running_reqs``, polled every 50 ms) until the profile's last 16 requests, and the
  client's count (``ProfileRun.occupancy``); fixed sampling and early stopping.
- ``cli``: ``mtp-remote --version``/``--help`` and ``fab -l`` start time beside a bare ``python -c pass``.
- ``analyze``: ``mtp-remote analyze`` of a 1,000-sample samples.jsonl (``bench/data.py``): wall and CPU time.
- ``commands``: ``status``, ``preflight``, ``report last`` over the sshd (``bench/bench_commands.py``).
- ``loopstop``, ``realabort``: issue 21 (``bench/bench_loop_stop.py``): the field-case diagnosis with and without
  the loop stop on the sim at a realistic time scale over the sshd; real SGLang's abort of a stopped request.

Every figure: median and spread (p10/p90, min/max) over ``--repeats``; the machine (cores, CPU, python, load
average) is printed with them. Not a test; the docs quote only what this prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
#: MTP_BENCH_SRC=DIR measures the mtp_remote of another tree (e.g. `git archive main`), for before/after figures
SRC = os.environ.get("MTP_BENCH_SRC")
if SRC:
    sys.path.insert(0, SRC)

import httpx
import yaml

from mtp_remote.experiment import diagnose as api
from mtp_remote.serving.process import ProcessServer
from mtp_remote.remote import connect, facts, process

ROWS = ("cli", "analyze", "ready", "stop", "cycle", "occupancy", "loopstop", "realabort", "commands")
BIN = Path(sys.executable).parent
MTP = [sys.executable, "-c", "import sys; from mtp_remote.cli.main import main; sys.argv[0] = 'mtp-remote'; main()"] \
    if SRC else [str(BIN / "mtp-remote")]


# -- figures --------------------------------------------------------------------------------------------------


def stats(xs: list[float]) -> dict:
    """median, p10, p90, min, max, n of ``xs`` (same unit)."""
    s = sorted(xs)
    if not s:
        return {"n": 0}

    def q(p: float) -> float:
        k = p * (len(s) - 1)
        lo = int(k)
        return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)

    return {"n": len(s), "median": statistics.median(s), "p10": q(0.1), "p90": q(0.9), "min": s[0], "max": s[-1]}


def machine() -> dict:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}", "load_avg": [round(x, 2) for x in os.getloadavg()]}


def _row(results: list, row: str, transport: str, what: str, unit: str, xs: list[float], **extra) -> None:
    results.append({"row": row, "transport": transport, "what": what, "unit": unit, **stats(xs), **extra})
    s = results[-1]
    if s["n"]:
        print(f"  {row:9} {transport:5} {what:48} median {s['median']:9.3f} {unit:3} "
              f"p10 {s['p10']:8.3f} p90 {s['p90']:8.3f} (n={s['n']})", flush=True)


# -- hosts ----------------------------------------------------------------------------------------------------


def sim_host(name: str, workdir: Path, transport_cfg: dict | None, **env) -> dict:
    cfg = dict(transport_cfg or {"transport": "local"})
    cfg.update(engine="sim", workdir=str(workdir), port=_free_port(), python=sys.executable,
               env={"SGLANG_SIM_TIME_SCALE": "0.02", **env})
    return cfg


def _free_port() -> int:
    from tests.support.sshd import free_port

    return free_port()


def write_config(d: Path, hosts: dict, **playbook) -> tuple[str, str]:
    inv = d / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": next(iter(hosts)), "hosts": hosts}))
    pb = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())
    pb.update(playbook)
    path = d / f"pb-{len(list(d.glob('pb-*')))}.yaml"
    path.write_text(yaml.safe_dump(pb))
    return str(inv), str(path)


def transports(ssh_server) -> list[tuple[str, dict | None]]:
    out = [("local", None)]
    if ssh_server is not None:
        out.append(("ssh", ssh_server.host_config()))
    return out


# -- row: CLI start ----------------------------------------------------------------------------------------------


def _time_cmd(argv: list[str], repeats: int, cwd: Path = ROOT) -> tuple[list[float], list[float]]:
    """Wall and CPU (user+sys of the child) seconds of ``repeats`` runs after one warm-up."""
    walls, cpus = [], []
    for i in range(repeats + 1):
        before = os.times()
        t = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": SRC} if SRC else None
        subprocess.run(argv, cwd=SRC or cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                       check=False)
        wall = time.perf_counter() - t
        after = os.times()
        if i:
            walls.append(wall)
            cpus.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
    return walls, cpus


def bench_cli(results: list, repeats: int) -> None:
    n = max(repeats * 4, 10)
    for what, argv in (("python -c pass (anchor)", [sys.executable, "-c", "pass"]),
                       ("fab --version (Fabric's own floor)", [str(BIN / "fab"), "--version"]),
                       ("mtp-remote --version", [*MTP, "--version"]),
                       ("mtp-remote --help", [*MTP, "--help"]),
                       ("fab -l", [str(BIN / "fab"), "-l"])):
        walls, cpus = _time_cmd(argv, n)
        _row(results, "cli", "-", what, "ms", [1000 * w for w in walls], cpu_ms=1000 * statistics.median(cpus))


# -- row: analyze ----------------------------------------------------------------------------------------------


def bench_analyze(results: list, repeats: int, tmp: Path) -> None:
    from bench.data import write_samples

    path = write_samples(tmp / "samples.jsonl", 1000)
    for what, extra in (("analyze 1,000 samples (summary, default)", []), ("analyze 1,000 samples --rows", ["--rows"]),
                        ("analyze 1,000 samples --json", ["--json"])):
        walls, cpus = _time_cmd([*MTP, "analyze", *extra, str(path)], repeats)
        _row(results, "analyze", "-", what, "s", walls, cpu_s=statistics.median(cpus))


# -- row: readiness --------------------------------------------------------------------------------------------

STAND_IN = textwrap.dedent('''
    import http.server, sys, threading, time
    log, delay, port = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    ready = False
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if ready else 503); self.end_headers()
        def log_message(self, *a): pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with open(log, "a") as f:
        f.write("[2026-11-30 10:00:00 TP0] Load weight end. elapsed=1.00 s\\n"); f.flush()
        time.sleep(delay)
        f.write("[2026-11-30 10:00:01] INFO:     Uvicorn running on http://127.0.0.1:%d\\n" % port); f.flush()
        time.sleep(delay)
        t = time.time(); ready = True
        f.write("[2026-11-30 10:00:02] The server is fired up and ready to roll!\\n"); f.flush()
    open(log + ".t", "w").write(repr(t))
    time.sleep(30)
''')


def _anchor_loop(c, url: str, period_s: float, out: list, key: str) -> None:
    """The anchors as an operator runs them on the host: ``until curl -sf URL; do sleep P; done``."""
    c.run(f"until curl -sf -o /dev/null {url}; do sleep {period_s:g}; done", hide=True, warn=True, in_stream=False)
    out.append((key, time.time()))


def bench_ready(results: list, repeats: int, ssh_server, tmp: Path, anchors: bool = True) -> None:
    from mtp_remote.config.inventory import HostConfig

    for label, tcfg in transports(ssh_server):
        host = HostConfig(name=f"bench-{label}", **sim_host(label, tmp / f"ready-{label}", tcfg))
        wd = tmp / f"ready-{label}"
        wd.mkdir(parents=True, exist_ok=True)
        script = wd / "server.py"
        script.write_text(STAND_IN)
        c = connect.connect(host)
        anchor_cs = [connect.connect(host) for _ in range(2)] if anchors else []
        lat: dict[str, list[float]] = {"tool": [], "curl1": [], "poll10": []}
        try:
            for i in range(repeats):
                port = _free_port()
                log = wd / f"{i}.log"
                log.touch()
                delay = random.uniform(0.3, 0.8)
                p = subprocess.Popen([sys.executable, str(script), str(log), str(delay), str(port)],
                                     start_new_session=True)
                got: list = []
                threads = []
                if anchors:
                    for ac, period, path, key in ((anchor_cs[0], 1, "/health", "curl1"),
                                                  (anchor_cs[1], 10, "/health_generate", "poll10")):
                        th = threading.Thread(target=_anchor_loop, daemon=True,
                                              args=(ac, f"http://127.0.0.1:{port}{path}", period, got, key))
                        th.start()
                        threads.append(th)
                try:
                    info = None
                    while info is None or str(script) not in info.cmdline:
                        info = facts.get_process_info(c, p.pid)
                    rec = process.ServerRecord(pid=p.pid, pgid=p.pid, start_ticks=info.start_ticks,
                                               cmdline=list(info.cmdline), profile="bench", port=port,
                                               log_path=str(log), run_id="bench", started_at=time.time())
                    lc = ProcessServer(c, host, python=sys.executable, workdir=str(wd), run_id="bench")
                    # as the runner does: the tunnel opened while the server starts, the log stream kept
                    # open, and the ready line confirmed by /health through the tunnel
                    with connect.open_tunnel(c, host.model_copy(update={"port": port})) as tun, \
                            httpx.Client(base_url=tun.url, timeout=5) as hc:
                        def health(hc=hc) -> bool:
                            try:
                                return hc.get("/health").status_code == 200
                            except httpx.HTTPError:
                                return False

                        stream = lc.follow(rec)
                        out = lc.wait_ready(rec, timeout_s=30, stream=stream, health=health)
                        known = time.time()
                        stream.__exit__(None, None, None)
                    assert out.ok, out.describe()
                    stamp = Path(str(log) + ".t")
                    while not stamp.exists() or not stamp.read_text():
                        time.sleep(0.001)
                    t_ready = float(stamp.read_text())
                    lat["tool"].append(known - t_ready)
                    for th in threads:
                        th.join(timeout=15)
                    for key, t in got:
                        lat[key].append(t - t_ready)
                finally:
                    p.kill()
                    p.wait()
        finally:
            for cc in (c, *anchor_cs):
                connect.close(cc)
        _row(results, "ready", label, "ready line -> tool knows (wait_ready)", "ms", [1000 * x for x in lat["tool"]])
        if anchors:
            _row(results, "ready", label, "anchor: 1 s curl loop on /health", "ms", [1000 * x for x in lat["curl1"]])
            _row(results, "ready", label, "anchor: 10 s /health_generate poll", "ms",
                 [1000 * x for x in lat["poll10"]])


# -- row: stop -> GPU memory free ------------------------------------------------------------------------------


class Poller:
    """A daemon thread running :meth:`_loop` until :meth:`stop` (``self._stop`` is set)."""

    def __init__(self):
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self._t.start()
        return self

    def _loop(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=2)


class HolderWatch(Poller):
    """When the simulated engine's GPU memory is really free: every holder record of the sim host
    (``<workdir>/sim-gpus/procs/<pid>.json``) is freed ``release_delay`` after its process exited (the exit
    time the process wrote itself, else the first moment this watcher saw it dead — as a driver frees memory
    a moment after the exit). Reads only; polls every 2 ms from :meth:`start` until :meth:`free_at` is known."""

    def __init__(self, state_dir: Path):
        super().__init__()
        self.dir = state_dir / "procs"
        self.seen: dict[int, dict] = {}
        self.dead_at: dict[int, float] = {}

    def start(self) -> HolderWatch:
        for p in self.dir.glob("*.json") if self.dir.exists() else ():
            with contextlib.suppress(OSError, ValueError):
                d = json.loads(p.read_text())
                self.seen[int(d["pid"])] = d
        return super().start()

    def _loop(self) -> None:
        from mtp_remote.sim.gpu import proc_start_ticks

        while not self._stop.is_set():
            now = time.time()
            for pid in list(self.seen):
                p = self.dir / f"{pid}.json"
                with contextlib.suppress(OSError, ValueError):
                    self.seen[pid] = json.loads(p.read_text())
                if pid not in self.dead_at and proc_start_ticks(pid) is None:
                    self.dead_at[pid] = now
            time.sleep(0.002)

    def free_at(self) -> float | None:
        """Epoch seconds at which the last holder's memory was free, None while one still lives."""
        ts = []
        for pid, d in self.seen.items():
            gone = d.get("gone_at") or self.dead_at.get(pid)
            if gone is None:
                return None
            ts.append(min(float(gone), self.dead_at.get(pid, float(gone))) + float(d.get("release_delay", 0.5)))
        return max(ts) if ts else None


def _launch_sim(c, host, pb_path: str, wd: Path):
    from mtp_remote.config.playbook import load_playbook
    from mtp_remote.experiment.plan import plan_run

    pb = load_playbook(pb_path)
    lc = ProcessServer(c, host, python=sys.executable, workdir=str(wd), run_id=f"bench-{time.monotonic_ns()}")
    lc.prepare()
    lp = plan_run(host, pb, lc.workdir)[0]
    rec = lc.launch(lp.profile, lp.argv, lp.env)
    out = lc.wait_ready(rec, timeout_s=120)
    assert out.ok, out.describe()
    return lc, rec


def bench_stop(results: list, repeats: int, ssh_server, tmp: Path) -> None:
    from mtp_remote.config.inventory import HostConfig

    for label, tcfg in transports(ssh_server):
        wd = tmp / f"stop-{label}"
        cfg = sim_host(label, wd, tcfg)
        _, pb = write_config(tmp, {"h": cfg}, profiles={"baseline": {"flags": ""}})
        host = HostConfig(name=f"bench-{label}", **cfg)
        c = connect.connect(host)
        tool, tool_total, engine, anchor = [], [], [], []
        try:
            for _ in range(repeats):
                lc, rec = _launch_sim(c, host, pb, wd)
                watch = HolderWatch(wd / "sim-gpus").start()
                t0 = time.time()
                res = lc.stop(term_s=30, gpu_release_s=60)
                t1 = time.time()
                time.sleep(0.05)
                watch.stop()
                free = watch.free_at()
                assert free is not None and res.found == "running", (res.describe(), watch.seen)
                tool.append(t1 - free)
                tool_total.append(t1 - t0)
                engine.append(free - t0)
                # the anchor on the same kind of launch
                lc, rec = _launch_sim(c, host, pb, wd)
                watch = HolderWatch(wd / "sim-gpus").start()
                c.run(f"kill -9 -{int(rec.pgid)}; sleep 5", hide=True, warn=True, in_stream=False)
                t1 = time.time()
                while watch.free_at() is None and time.time() < t1 + 10:
                    time.sleep(0.01)
                watch.stop()
                anchor.append(t1 - watch.free_at())
                lc.stop(term_s=5, gpu_release_s=10)  # the record and lock of the killed server
        finally:
            connect.close(c)
        _row(results, "stop", label, "memory free -> stop returns (tool, beyond engine)", "ms",
             [1000 * x for x in tool])
        _row(results, "stop", label, "stop called -> returns (total)", "ms", [1000 * x for x in tool_total])
        _row(results, "stop", label, "stop called -> memory free (signal + engine exit + release)", "ms", [1000 * x for x in engine])
        _row(results, "stop", label, "anchor: memory free -> `kill -9; sleep 5` ends", "ms",
             [1000 * x for x in anchor])


# -- row: launch cycle -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def counting():
    """Count ``c.run`` calls (invoke Context and Fabric Connection) and SSH exec sessions / direct-tcpip
    channels (paramiko) while the block runs. Yields the dict of counters."""
    import fabric
    import invoke
    import paramiko

    counts = {"c.run": 0, "ssh_exec": 0, "ssh_tcpip": 0}
    saved = [(invoke.Context, "run", invoke.Context.run), (fabric.Connection, "run", fabric.Connection.run),
             (paramiko.Channel, "exec_command", paramiko.Channel.exec_command),
             (paramiko.Transport, "open_channel", paramiko.Transport.open_channel)]

    def wrap(orig, key):
        def f(self, *a, **k):
            if key == "ssh_tcpip":
                if (a[0] if a else k.get("kind")) == "direct-tcpip":
                    counts[key] += 1
            else:
                counts[key] += 1
            return orig(self, *a, **k)
        return f

    invoke.Context.run = wrap(saved[0][2], "c.run")
    fabric.Connection.run = wrap(saved[1][2], "c.run")
    paramiko.Channel.exec_command = wrap(saved[2][2], "ssh_exec")
    paramiko.Transport.open_channel = wrap(saved[3][2], "ssh_tcpip")
    try:
        yield counts
    finally:
        for cls, name, orig in saved:
            setattr(cls, name, orig)


class LogWatch(Poller):
    """When each server log under ``<workdir>/logs`` first appeared and when its ready line was written
    (polled every 5 ms, local file system: the sshd is on loopback)."""

    def __init__(self, logs: Path):
        super().__init__()
        self.logs = logs
        self.first: dict[str, float] = {}
        self.ready: dict[str, float] = {}
        self._pos: dict[str, int] = {}

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for p in self.logs.glob("*/*.log"):
                k = str(p)
                self.first.setdefault(k, now)
                if k in self.ready:
                    continue
                with contextlib.suppress(OSError), p.open("rb") as f:
                    f.seek(self._pos.get(k, 0))
                    data = f.read()
                    if b"fired up and ready to roll" in data:
                        self.ready[k] = now
                    self._pos[k] = max(0, self._pos.get(k, 0) + data.rfind(b"\n") + 1)
            time.sleep(0.005)


def bench_cycle(results: list, repeats: int, ssh_server, tmp: Path) -> None:
    from mtp_remote.experiment.runner import Hooks

    for label, tcfg in transports(ssh_server):
        own, runs, execs, tcp = [], [], [], []
        for r in range(repeats):
            wd = tmp / f"cycle-{label}-{r}"
            cfg = sim_host(label, wd, tcfg, SGLANG_SIM_FAULTS="state_leak")
            inv, pb = write_config(tmp, {"h": cfg}, samples=2, max_tokens=256, temperatures=[0.7],
                                   prompts=[{"id": f"p{i}", "text": t} for i, t in enumerate(
                                       ["What is 2+2?", "What is the capital of France?"])])
            marks: list[tuple[str, float]] = []

            def on_progress(msg: str, marks=marks) -> None:
                if msg.endswith(("launching (baseline)", "launching (speculative)")):
                    marks.append((msg.split(":", 1)[0], time.time()))

            (wd / "logs").mkdir(parents=True, exist_ok=True)
            watch = LogWatch(wd / "logs").start()
            stops = HolderWatchAll(wd / "sim-gpus").start()
            with counting() as counts:
                t0 = time.time()
                res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp / "runs", hooks=Hooks(on_progress=on_progress))
                t_end = time.time()
            watch.stop()
            stops.stop()
            profiles = {p["profile"]: p for p in res.summary["profiles"]}
            bounds = [t for _, t in marks] + [t_end]
            engine_stop = stops.engine_stop_s()
            for i, (name, t_start) in enumerate(marks):
                wall = bounds[i + 1] - t_start
                log = next(k for k in watch.first if k.endswith(f"/{name}.log"))
                start = watch.ready[log] - watch.first[log]
                own.append(wall - start - (profiles[name]["sampling_s"] or 0) - engine_stop.get(i, 0.0))
            cycles = len(marks)
            runs.append(counts["c.run"] / cycles)
            execs.append(counts["ssh_exec"] / cycles)
            tcp.append(counts["ssh_tcpip"] / cycles)
            print(f"    run {r}: {t_end - t0:.1f} s wall, {cycles} cycles, {counts}", flush=True)
        _row(results, "cycle", label, "tool's own time per launch cycle", "s", own)
        _row(results, "cycle", label, "c.run calls per cycle", "", runs)
        if label == "ssh":
            _row(results, "cycle", label, "SSH exec sessions per cycle", "", execs)
            _row(results, "cycle", label, "SSH direct-tcpip channels per cycle", "", tcp)


class HolderWatchAll(HolderWatch):
    """:class:`HolderWatch` over a whole run: picks up holder records as servers start; per server (in launch
    order) the engine's own stop time = memory free - the server's first exit mark."""

    def _loop(self) -> None:
        from mtp_remote.sim.gpu import proc_start_ticks

        while not self._stop.is_set():
            now = time.time()
            for p in self.dir.glob("*.json") if self.dir.exists() else ():
                with contextlib.suppress(OSError, ValueError):
                    d = json.loads(p.read_text())
                    d.setdefault("_first_seen", self.seen.get(int(d["pid"]), {}).get("_first_seen", now))
                    self.seen[int(d["pid"])] = d
            for pid in list(self.seen):
                if pid not in self.dead_at and proc_start_ticks(pid) is None:
                    self.dead_at[pid] = now
            time.sleep(0.005)

    def engine_stop_s(self) -> dict[int, float]:
        """{launch index: seconds from the first of its schedulers exiting to its memory being free}."""
        groups: dict[float, list[int]] = {}
        for pid, d in sorted(self.seen.items(), key=lambda kv: kv[1]["_first_seen"]):
            key = round(d["_first_seen"], 0)
            groups.setdefault(key, []).append(pid)
        out = {}
        for i, pids in enumerate(groups.values()):
            gone = [min(float(self.seen[p].get("gone_at") or 1e18), self.dead_at.get(p, 1e18)) for p in pids]
            free = [g + float(self.seen[p].get("release_delay", 0.5)) for g, p in zip(gone, pids)]
            if all(g < 1e17 for g in gone):
                out[i] = max(free) - min(gone)
        return out


# -- row: requests in flight -----------------------------------------------------------------------------------


class MetricsWatch(Poller):
    """Poll the server's ``/metrics`` every 50 ms: (epoch s, running, queued, requests done)."""

    def __init__(self, url: str):
        super().__init__()
        self.url = url
        self.samples: list[tuple[float, float, float, float]] = []

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                text = urllib.request.urlopen(self.url, timeout=1).read().decode()
                v = {}
                for line in text.splitlines():
                    if line.startswith("sglang:"):
                        name = line.split("{", 1)[0]
                        v[name] = float(line.rsplit(" ", 1)[1])
                self.samples.append((time.time(), v.get("sglang:num_running_reqs", 0.0),
                                     v.get("sglang:num_queue_reqs", 0.0), v.get("sglang:num_requests_total", 0.0)))
            time.sleep(0.05)


def server_share(samples: list[tuple], n_requests: int, limit: int) -> tuple[float, float, float] | None:
    """Mean running/limit, mean queued and mean min(running + queued, limit)/limit (what the server holds: the
    client's part; a held request waits in the queue for the engine's next step before it runs), from the first
    sample with a request running until ``n_requests - limit`` requests are done (the last ``limit`` requests
    are the tail, where fewer is all there is). The server's counter restarts per launch, so ``samples`` are
    one launch's."""
    start = next((i for i, s in enumerate(samples) if s[1] > 0), None)
    if start is None:
        return None
    base = samples[start][3]
    win = [s for s in samples[start:] if s[3] - base < max(n_requests - limit, 1)]
    if not win:
        return None
    return (statistics.mean(s[1] for s in win) / limit, statistics.mean(s[2] for s in win),
            statistics.mean(min(s[1] + s[2], limit) for s in win) / limit)


#: (sim time scale, samples per prompt): short requests (~0.4 s: the client's turnaround weighs most) and
#: longer ones (~1.5 s, several generations of 16 slots in the measured window)
OCCUPANCY_WORKLOADS = (("0.05", 8), ("0.2", 16))


def bench_occupancy(results: list, repeats: int, ssh_server, tmp: Path,
                    workloads: tuple = OCCUPANCY_WORKLOADS) -> None:
    for scale, samples in workloads:
        _bench_occupancy(results, repeats, ssh_server, tmp, scale, samples)


def _bench_occupancy(results: list, repeats: int, ssh_server, tmp: Path, scale: str, n_samples: int) -> None:
    limit = 16
    for label, tcfg in transports(ssh_server):
        for mode, extra in (("fixed", {}), ("early stop", {"early_stop": True})):
            server, held, client, queued, latency = [], [], [], [], []
            for r in range(repeats):
                wd = tmp / f"occ-{scale}-{label}-{mode.replace(' ', '')}-{r}"
                cfg = sim_host(label, wd, tcfg, SGLANG_SIM_FAULTS="state_leak", SGLANG_SIM_TIME_SCALE=scale)
                base = yaml.safe_load((ROOT / "playbooks" / "diagnose-mtp.yaml").read_text())["base_flags"]
                inv, pb = write_config(tmp, {"h": cfg}, samples=n_samples, max_tokens=512, temperatures=[0.7],
                                       base_flags=base + " --enable-metrics", **extra)
                mw = MetricsWatch(f"http://127.0.0.1:{cfg['port']}/metrics").start()
                res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp / "runs")
                mw.stop()
                samples = [json.loads(x) for x in (res.run_dir / "samples.jsonl").read_text().splitlines()]
                latency += [s["latency_s"] for s in samples if s.get("latency_s")]
                # one launch per profile: split the metrics where the request counter restarts
                launches, cur = [], []
                for s in mw.samples:
                    if cur and s[3] < cur[-1][3]:
                        launches.append(cur)
                        cur = []
                    cur.append(s)
                launches.append(cur)
                launches = [ln for ln in launches if any(s[1] > 0 for s in ln)]
                for p, ln in zip(res.summary["profiles"], launches):
                    n = sum(1 for s in samples if s["profile"] == p["profile"])
                    got = server_share(ln, n, limit)
                    if got is not None:
                        server.append(100 * got[0])
                        queued.append(got[1])
                        held.append(100 * got[2])
                    occ = p.get("occupancy") or {}
                    if "share" in occ:
                        client.append(100 * occ["share"])
            what = f"5 × {n_samples} requests of ~{statistics.median(latency):.1f} s" if latency else f"scale {scale}"
            _row(results, "occupancy", label, f"server running / 16, {mode}, {what} (until last 16)", "%", server,
                 queued=statistics.mean(queued) if queued else None,
                 latency_s=statistics.median(latency) if latency else None, time_scale=scale)
            _row(results, "occupancy", label, f"server holds (running + waiting) / 16, {mode}, {what}", "%",
                 held)
            _row(results, "occupancy", label, f"client in flight / 16, {mode}, {what} (until queue empty)", "%", client)


# -- main ------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="repetitions per figure (default 5; cli uses 4x)")
    ap.add_argument("--only", default=",".join(ROWS), help=f"comma-separated rows among {', '.join(ROWS)}")
    ap.add_argument("--no-ssh", action="store_true", help="skip the runs through the loopback sshd")
    ap.add_argument("--no-anchors", action="store_true", help="skip the 1 s / 10 s readiness anchors (faster)")
    ap.add_argument("--json", dest="json_out", default=None, help="write the figures as JSON here")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/PERFORMANCE.md from this run")
    ap.add_argument("--note", default="", help="a sentence for the docs about the conditions of this run")
    ap.add_argument("--loopstop-scale", type=float, default=1.0,
                    help="sim time scale of the loopstop row (default 1.0: realistic GPU times)")
    ap.add_argument("--loopstop-repeats", type=int, default=1, help="repetitions of the loopstop and realabort rows")
    args = ap.parse_args(argv)
    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = set(rows) - set(ROWS)
    if unknown:
        ap.error(f"unknown rows {sorted(unknown)}; choose among {', '.join(ROWS)}")
    m = machine()
    print(f"machine: {m}", flush=True)
    results: list[dict] = []
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="mtp-bench-") as d, contextlib.ExitStack() as stack:
        tmp = Path(d)
        ssh_server = None
        if not args.no_ssh and set(rows) & {"ready", "stop", "cycle", "occupancy", "loopstop", "commands"}:
            from tests.support.sshd import running_sshd, sshd_binary

            if sshd_binary() is None:
                print("no sshd binary: SSH rows skipped", flush=True)
            else:
                (tmp / "sshd").mkdir()
                ssh_server = stack.enter_context(running_sshd(tmp / "sshd"))
        for row in rows:
            print(f"{row}:", flush=True)
            t = time.time()
            if row == "cli":
                bench_cli(results, args.repeats)
            elif row == "analyze":
                bench_analyze(results, args.repeats, tmp)
            elif row == "ready":
                bench_ready(results, args.repeats, ssh_server, tmp, anchors=not args.no_anchors)
            elif row == "stop":
                bench_stop(results, args.repeats, ssh_server, tmp)
            elif row == "cycle":
                bench_cycle(results, args.repeats, ssh_server, tmp)
            elif row == "occupancy":
                bench_occupancy(results, args.repeats, ssh_server, tmp)
            elif row == "loopstop":
                from bench.bench_loop_stop import bench_loopstop

                bench_loopstop(results, args.loopstop_repeats, ssh_server, tmp, scale=args.loopstop_scale, row=_row,
                               sim_host=sim_host, write_config=write_config, transports=transports)
            elif row == "commands":
                from bench.bench_commands import bench_commands

                bench_commands(results, args.repeats, ssh_server, tmp, row=_row, sim_host=sim_host,
                               write_config=write_config, transports=transports, time_cmd=_time_cmd, mtp=MTP)
            elif row == "realabort":
                from bench.bench_loop_stop import bench_realabort

                bench_realabort(results, args.loopstop_repeats, tmp, row=_row)
            print(f"  ({time.time() - t:.0f} s)", flush=True)
            doc = _document(m, args, t_start, results)
            if args.json_out:  # after every row: a run cut short keeps what it measured
                Path(args.json_out).write_text(json.dumps(doc, indent=1))
    if args.write_docs:
        from bench.docs import write_performance_md

        write_performance_md(doc, ROOT / "docs" / "PERFORMANCE.md")
        print("wrote docs/PERFORMANCE.md", flush=True)
    return 0


def _document(m: dict, args, t_start: float, results: list[dict]) -> dict:
    m = {**m, "load_avg_end": [round(x, 2) for x in os.getloadavg()]}
    return {"machine": m, "repeats": args.repeats, "note": args.note, "results": results, "git": _git_rev(),
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t_start)),
            "duration_s": round(time.time() - t_start)}


def _git_rev() -> str:
    with contextlib.suppress(Exception):
        def git(*a: str) -> str:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

        return git("rev-parse", "--short", "HEAD") + (
            " (+ local changes)" if git("status", "--porcelain", "--untracked-files=no") else "")
    return "?"


if __name__ == "__main__":
    sys.exit(main())
