"""Issue 21's rows of the suite: the field-case diagnosis with and without the loop stop, and the real engine's abort.

- ``loopstop``: ``api.diagnose`` of the field playbook as shipped (``playbooks/diagnose-mtp.yaml``: 5 prompts, T = 0
  and 0.7, 4 samples, 2,048 tokens, baseline vs MTP) on the sim with ``state_leak`` at a realistic time scale
  (``--loopstop-scale``, default 1.0: the sim's GPU times as a 27B model on two GPUs), through the loopback sshd,
  twice in one run, side by side: with the loop stop (the default) and with ``stop_on_loop: false``. Figures:
  generated tokens, wall time, and whether the verdicts and every sample's loop label are the same.
- ``realabort``: real SGLang 0.5.9 on this CPU (the cached ``make real-setup`` venv), launched by the tool: a
  streamed request stopped by the client (closed stream + ``/abort_request``) and one only closed (SGLang's own
  abort, 2 s later): the time until the scheduler holds no request (``/flush_cache`` answers 200), then the stop's
  drain (no request left: no SIGKILL). Also whether the tiny model's greedy output settles into a loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx


def _labels(run_dir: Path) -> dict[tuple, bool]:
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {(r["profile"], r["temperature"], r["prompt_id"], r["sample_index"]): bool((r["metrics"] or {}).get("loop"))
            for r in rows}


def bench_loopstop(results: list, repeats: int, ssh_server, tmp: Path, *, scale: float, row, sim_host, write_config,
                   transports) -> None:
    from mtp_remote.experiment import diagnose as api
    from mtp_remote.experiment.runner import Hooks

    label, tcfg = transports(ssh_server)[-1]  # ssh when there is an sshd
    figures: dict[str, list[float]] = {k: [] for k in ("gen_on", "gen_off", "wall_on", "wall_off", "ratio_tok",
                                                       "ratio_wall", "same", "saved", "stops", "samp_on", "samp_off")}
    for r in range(repeats):
        docs = {}
        for mode in ("on", "off"):
            wd = tmp / f"loopstop-{mode}-{r}"
            cfg = sim_host(label, wd, tcfg, SGLANG_SIM_FAULTS="state_leak")
            cfg["env"]["SGLANG_SIM_TIME_SCALE"] = str(scale)
            inv, pb = write_config(tmp, {"h": cfg}, stop_on_loop=mode == "on")
            t0 = time.time()
            res = api.diagnose(inventory=inv, playbook=pb, runs_dir=tmp / f"runs-loopstop-{mode}",
                               hooks=Hooks(on_progress=lambda m, mode=mode: print(f"      [{mode}] {m}", flush=True)))
            docs[mode] = (res, time.time() - t0)
        (on, w_on), (off, w_off) = docs["on"], docs["off"]
        same = ([v["kind"] for v in on.summary["verdicts"]] == [v["kind"] for v in off.summary["verdicts"]]
                and _labels(on.run_dir) == _labels(off.run_dir))
        g_on, g_off = on.summary["generated_tokens"], off.summary["generated_tokens"]
        for k, v in (("gen_on", g_on), ("gen_off", g_off), ("wall_on", w_on), ("wall_off", w_off),
                     ("ratio_tok", g_on / g_off), ("ratio_wall", w_on / w_off), ("same", float(same)),
                     ("saved", on.summary["tokens_saved"]), ("stops", on.summary["loop_stop"]["loop_stops"]),
                     ("samp_on", on.summary["time_split"]["total"]["sampling_s"]),
                     ("samp_off", off.summary["time_split"]["total"]["sampling_s"])):
            figures[k].append(v)
        print(f"    run {r}: tokens {g_on} vs {g_off} ({g_on / g_off:.2f}x), wall {w_on:.0f} s vs {w_off:.0f} s, "
              f"verdicts {[v['kind'] for v in on.summary['verdicts']]} vs {[v['kind'] for v in off.summary['verdicts']]}"
              f", labels and verdicts the same: {same}; split with stop: {on.summary['time_split']['total']}",
              flush=True)
    t = f"(time scale {scale:g})"
    row(results, "loopstop", label, f"generated tokens, loop stop on {t}", "tok", figures["gen_on"])
    row(results, "loopstop", label, "generated tokens, loop stop off", "tok", figures["gen_off"])
    row(results, "loopstop", label, "generated tokens on / off", "x", figures["ratio_tok"])
    row(results, "loopstop", label, "tokens not generated (saved), on", "tok", figures["saved"])
    row(results, "loopstop", label, "samples stopped at their settled loop, on", "", figures["stops"])
    row(results, "loopstop", label, "wall time of the diagnosis, loop stop on", "s", figures["wall_on"])
    row(results, "loopstop", label, "wall time of the diagnosis, loop stop off", "s", figures["wall_off"])
    row(results, "loopstop", label, "sampling time (both profiles), on", "s", figures["samp_on"])
    row(results, "loopstop", label, "sampling time (both profiles), off", "s", figures["samp_off"])
    row(results, "loopstop", label, "wall on / off", "x", figures["ratio_wall"])
    row(results, "loopstop", label, "same verdicts and loop labels (1 = yes)", "", figures["same"])


def _until_idle(url: str, timeout_s: float = 15.0) -> float | None:
    """Seconds until the scheduler holds no request: ``/flush_cache`` answers 200 only then (SGLang 0.5.9's
    ``sglang:num_running_reqs`` gauge is refreshed with the batch statistics, so after an abort it keeps its last
    value until the next batch: no witness)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if httpx.post(url + "/flush_cache", timeout=10).status_code == 200:
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


PROMPT = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"


def bench_realabort(results: list, repeats: int, tmp: Path, *, row) -> None:
    """Real SGLang 0.5.9 on this CPU (local transport: the abort path is the engine's, not the transport's)."""
    from mtp_remote.analysis.settled import LoopWatch
    from mtp_remote.client import ServerClient
    from mtp_remote.config.inventory import HostConfig
    from mtp_remote.config.playbook import Playbook
    from mtp_remote.remote import connect as transport
    from mtp_remote.remote.commands import server_argv, server_env
    from mtp_remote.serving.process import ProcessServer
    from tests.support.ports import free_port
    from tests.support.real_sglang import ensure_real_sglang

    eng = ensure_real_sglang()
    pb = Playbook.model_validate(dict(
        name="realabort", base_flags="--device cpu --disable-overlap-schedule --max-total-tokens 8192 "
                                     "--max-running-requests 8 --attention-backend triton "
                                     "--triton-attention-num-kv-splits 1 --disable-cuda-graph --enable-metrics",
        profiles={"baseline": {"flags": ""}}, prompts=[{"id": "p", "text": "x"}], api="generate"))
    host = HostConfig.model_validate(dict(
        name="real-abort", transport="local", engine="sglang", python=eng.python, model_path=eng.model_path,
        workdir=str(tmp / "real-wd"), port=free_port(), env={"SGLANG_USE_CPU_ENGINE": "1", "TRITON_INTERPRET": "1"}))
    c = transport.connect(host)
    lc = ProcessServer(c, host, python=host.python, workdir=host.workdir, run_id="realabort")
    url = f"http://127.0.0.1:{host.port}"
    freed_abort, freed_close, drains, loops = [], [], [], []
    try:
        lc.prepare()
        for r in range(repeats):
            rec = lc.launch("baseline", server_argv(host, pb, "baseline"), server_env(host, pb, "baseline", lc.workdir))

            def health() -> bool:
                try:
                    return httpx.get(url + "/health", timeout=5).status_code == 200
                except httpx.HTTPError:
                    return False

            out = lc.wait_ready(rec, timeout_s=600, health=health)
            assert out.ok, out.describe()

            async def go() -> None:
                async with ServerClient(url) as sc:
                    for temp in (0.0,):  # does the tiny model's greedy output settle into a loop? (~1-8 tokens/s)
                        w = LoopWatch()
                        comp = await sc.generate_stream(PROMPT, temperature=temp, max_new_tokens=160, seed=r,
                                                        watch=lambda t, i, w=w: (h := w.look(t, i)) and h.to_dict())
                        loops.append((temp, comp.finish_reason, comp.completion_tokens, comp.stop))
                        _until_idle(url)
                    # the abort path on a long request: stop after 24 tokens
                    await sc.generate_stream(PROMPT, temperature=0.7, max_new_tokens=2000, seed=r, stream_interval=4,
                                             watch=lambda t, i: {"rule": "bench"} if i and len(i) >= 24 else None)
                    freed_abort.append(_until_idle(url))

            asyncio.run(go())
            with httpx.Client(base_url=url, timeout=60) as h, h.stream("POST", "/generate", json={
                    "text": PROMPT, "stream": True,
                    "sampling_params": {"temperature": 0.7, "max_new_tokens": 2000, "stream_interval": 4}}) as resp:
                for k, _ in enumerate(x for x in resp.iter_lines() if x.startswith("data: {")):
                    if k == 5:
                        break
            freed_close.append(_until_idle(url))
            t0 = time.monotonic()
            res = lc.stop(term_s=60, drain_s=8, gpu_release_s=20)
            drains.append(time.monotonic() - t0)
            log = lc.read_log(rec.log_path)
            held = re.findall(r"Remaining number of requests (\d+)", log)
            print(f"    run {r}: loops {loops[-2:]}; slot free after abort {freed_abort[-1]} s, after close "
                  f"{freed_close[-1]} s; stop {drains[-1]:.2f} s ({res.describe()}); drain counts {held}", flush=True)
            (tmp / f"realabort-{r}.log").write_text(log)
    finally:
        lc.stop(term_s=30, drain_s=5, gpu_release_s=20, unlock=True)
        transport.close(c)
    row(results, "realabort", "local", "closed stream + /abort_request -> scheduler idle", "s",
        [x for x in freed_abort if x is not None])
    row(results, "realabort", "local", "closed stream only (SGLang aborts 2 s later) -> scheduler idle", "s",
        [x for x in freed_close if x is not None])
    row(results, "realabort", "local", "stop afterwards (drain with 0 requests, exit, release)", "s", drains)
