"""Test scaffolding for the real-engine tests: the shipped real hosts pointed at this session's cached engine, one
real SGLang served for the length of a ``with`` block, greedy ``/generate`` by token ids, and transformers'
reference output on the same weights.

The hosts are the inventory's entries as shipped (``real-cpu``, ``real-hybrid``, ``real-hybrid-leak``,
``real-hybrid-overaccept``) with only the port and workdir moved (the machine is shared) and the venv and
model paths of the engine this session built (``tests/support/real_sglang.py``). Servers bind 127.0.0.1 and
are always stopped by PID (``ProcessServer.stop``) when the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml
from invoke import Context

from mtp_remote.analysis.settled import LOOP_STOP
from mtp_remote.client import ServerClient
from mtp_remote.config.inventory import HostConfig
from mtp_remote.config.playbook import Playbook, load_playbook
from mtp_remote.remote.commands import server_argv, server_env
from mtp_remote.serving.process import ProcessServer
from tests.support.ports import free_port
from tests.support.real_sglang import SHIMS, RealEngine

ROOT = Path(__file__).resolve().parent.parent.parent
#: Budgets of the real-engine tests, sized for a busy machine (a test that fails only because the machine is
#: loaded is a defect of the test), in seconds. Measured on 2 shared cores: one SGLang start 25 s quiet, 60-90 s
#: loaded; one NEXTN batch took 225 s at load 8, writing no log line meanwhile (SGLang logs a decode batch every
#: 40 steps), so the shipped playbooks' ``stall_s`` (120 s / 240 s) is raised in the tests' copies.
READY_S = 900.0
REQUEST_S = 1800.0
STALL_S = 1200.0
#: The chat template of the test models' tokenizer, as the real playbooks' prompt_template writes it.
CHAT = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n"


def shipped_host(name: str) -> dict:
    """The inventory's entry for host ``name``, as shipped (a plain dict)."""
    return dict(yaml.safe_load((ROOT / "inventory.yaml").read_text())["hosts"][name])


#: The shipped hosts that serve the trained hybrid (``hybrid-chat/``); the other ``real-hybrid*`` hosts serve the
#: random one.
CHAT_HOSTS = ("real-hybrid", "real-hybrid-loop")


def model_of(engine: RealEngine, name: str) -> str:
    """The cached model a shipped real host serves: the dense model for ``real-cpu``, the trained hybrid for
    :data:`CHAT_HOSTS`, the random hybrid for the rest."""
    if name == "real-cpu":
        return engine.model_path
    return engine.hybrid_chat_model_path if name in CHAT_HOSTS else engine.hybrid_model_path


def local_host(engine: RealEngine, name: str, workdir: Path, **changes) -> dict:
    """Shipped host ``name`` on a free port and a private workdir, naming this session's engine and a copy of its
    shipped playbook with the test budgets (:func:`budgeted_playbook`, written beside ``workdir``)."""
    host = shipped_host(name)
    playbook = budgeted_playbook(ROOT / host["playbook"], workdir.parent / f"{name}.playbook.yaml")
    host.update(port=free_port(), workdir=str(workdir), python=engine.python, model_path=model_of(engine, name),
                playbook=playbook)
    host.update(changes)
    return host


def with_budgets(pb: dict) -> dict:
    """Playbook ``pb`` (a plain dict) with its ``timeouts`` raised to at least :data:`READY_S`, :data:`REQUEST_S`
    and :data:`STALL_S` (never lowered)."""
    timeouts = dict(pb.get("timeouts") or {})
    for key, floor in (("ready_s", READY_S), ("request_s", REQUEST_S), ("stall_s", STALL_S)):
        timeouts[key] = max(float(timeouts.get(key, 0)), floor)
    return dict(pb, timeouts=timeouts)


def budgeted_playbook(source: Path, dest: Path) -> str:
    """Write the playbook ``source`` with the test budgets (:func:`with_budgets`) to ``dest``; returns its path."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(with_budgets(yaml.safe_load(Path(source).read_text())), sort_keys=False))
    return str(dest)


def write_inventory(tmp_path: Path, hosts: dict[str, dict]) -> str:
    """An inventory file of ``hosts`` (name → entry) under ``tmp_path``; returns its path."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"default_host": next(iter(hosts)), "hosts": hosts}))
    return str(inv)


@contextlib.contextmanager
def serving(host: dict, playbook: Playbook | str, profile: str, *, ready_s: float,
            run_id: str = "real-test") -> Iterator[tuple[str, object]]:
    """Launch ``profile`` of ``playbook`` on the local ``host`` (an inventory entry with ``name``), wait until
    ready (AssertionError with the log tail otherwise) and yield ``(base url, wait outcome)``; stop it after."""
    cfg = HostConfig.model_validate(host)
    pb = playbook if isinstance(playbook, Playbook) else load_playbook(playbook)
    lc = ProcessServer(Context(), cfg, python=cfg.python, workdir=cfg.workdir, run_id=run_id)
    try:
        lc.prepare()
        rec = lc.launch(profile, server_argv(cfg, pb, profile), server_env(cfg, pb, profile, lc.workdir))
        url = f"http://127.0.0.1:{cfg.port}"
        yield url, wait_ready_with_health(lc, rec, url, ready_s)
    finally:
        lc.stop(term_s=30, drain_s=10, gpu_release_s=10)
        port_freed(cfg.port)  # the next launch's port check must find it free


def wait_ready_with_health(lc: ProcessServer, rec, url: str, ready_s: float):
    """``lc.wait_ready`` on a real server (bounded by ``ready_s`` seconds) with ``/health`` at ``url`` as its
    health check; asserts it got ready (the outcome and the log tail otherwise) and returns the outcome."""

    def health() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    outcome = lc.wait_ready(rec, timeout_s=ready_s, health=health)
    assert outcome.ok, outcome.describe() + "\n" + "\n".join(outcome.log_tail)
    return outcome


def port_freed(port: int, within_s: float = 30.0) -> bool:
    """Whether nothing accepts on 127.0.0.1:``port`` within ``within_s`` seconds (polled every 0.2 s). The stop
    returns once our process group is gone; on a loaded machine a listener has been seen to linger a moment
    after that, and the next launch's port check then refuses the port."""
    deadline = time.monotonic() + within_s
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def generate_ids(url: str, prompt_ids: list[int], max_new_tokens: int, *, timeout_s: float = REQUEST_S) -> dict:
    """Greedy ``/generate`` from token ids, no EOS stop: SGLang's response (``output_ids``, ``meta_info``)."""
    r = httpx.post(f"{url}/generate", timeout=timeout_s, json={
        "input_ids": prompt_ids,
        "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True}})
    r.raise_for_status()
    return r.json()


def hf_reference(engine: RealEngine, model_dir: str, prompts: list[str], max_new_tokens: int,
                 dtype: str = "float32") -> dict:
    """transformers' greedy output on ``model_dir`` (``real_sglang_shims/hf_reference.py`` in the real venv):
    ``{"prompt_ids": [[...]], "output_ids": [[...]]}``, one list per prompt text."""
    proc = subprocess.run([engine.python, str(SHIMS / "hf_reference.py"), model_dir, dtype, str(max_new_tokens)],
                          input=json.dumps(prompts), capture_output=True, text=True, timeout=REQUEST_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def abort_then_close(url: str, prompt: str) -> tuple[float, float]:
    """The loop stop's abort path on real SGLang at ``url``, then a stream only closed: seconds until each one's
    slot is free (``/flush_cache`` answers 200 only when no request is left). Asserts the stop was an abort
    (finish reason ``loop-stop``, 16+ tokens kept) and that the closed stream was still decoding at first."""
    async def stopped_then_idle():
        async with ServerClient(url) as sc:
            stop = await sc.generate_stream(  # a stand-in watch stops it after 16 tokens, as the loop stop does
                prompt, temperature=0.7, max_new_tokens=2000, seed=1, stream_interval=4,
                watch=lambda text, ids: {"rule": "test"} if ids and len(ids) >= 16 else None)
            return stop, await sc.wait_idle(timeout_s=REQUEST_S, interval_s=0.1)

    stop, freed = asyncio.run(stopped_then_idle())
    assert stop.error is None and stop.finish_reason == LOOP_STOP and stop.stop["aborted"] is True
    assert 16 <= stop.completion_tokens == len(stop.output_ids) < 2000
    assert freed is not None, "the aborted request's slot was not freed"
    with httpx.Client(base_url=url, timeout=REQUEST_S) as h, h.stream("POST", "/generate", json={
            "text": prompt, "stream": True,
            "sampling_params": {"temperature": 0.7, "max_new_tokens": 2000, "stream_interval": 4}}) as r:
        events = 0
        for line in r.iter_lines():
            events += line.startswith("data: {")
            if events == 3:
                break

    async def busy_then_idle():
        async with ServerClient(url) as sc:
            return not await sc.flush_cache(), await sc.wait_idle(timeout_s=REQUEST_S, interval_s=0.1)

    busy, closed = asyncio.run(busy_then_idle())
    assert busy, "the closed stream's request had ended at once"  # closed only: still decoding ...
    assert closed is not None, "the closed stream's request never ended"  # ... until SGLang's abort task
    return freed, closed
