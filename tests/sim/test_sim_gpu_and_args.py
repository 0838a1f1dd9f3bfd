"""The nvidia-smi stand-in, GPU memory release, process titles, and SGLang's argv rules in the sim."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from mtp_remote.remote.logs import classify_log
from mtp_remote.sim.args import parse_server_args
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.memory import plan_memory
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


def test_sim_startup_log_is_classified_like_the_field_ready_log(sim):
    s = sim(FIELD_FLAGS + MTP_FLAGS)
    labels = json.loads((CORPUS / "logs" / "labels.json").read_text())["l01_ready_tp2_nextn"]
    result = classify_log(s.log)
    assert result.cls == labels["cls"]
    assert [m.name for m in result.milestones] == labels["milestones"]


def test_nvidia_smi_reports_scheduler_processes_of_the_server_group(sim):
    s = sim(FIELD_FLAGS)
    gpus = s.nvidia_smi("--query-gpu=index,name,uuid,memory.used,memory.total,memory.free", "--format=csv")
    header, *rows = gpus.strip().splitlines()
    assert header == "index, name, uuid, memory.used [MiB], memory.total [MiB], memory.free [MiB]"
    assert len(rows) == 2
    idx, name, uuid, used, total, free = (f.strip() for f in rows[0].split(","))
    assert (idx, name, total) == ("0", "NVIDIA RTX A6000", "49140 MiB") and uuid.startswith("GPU-")
    assert int(used.split()[0]) + int(free.split()[0]) == 49140 and int(used.split()[0]) > 40000
    apps = s.nvidia_smi("--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                        "--format=csv,noheader,nounits").strip().splitlines()
    pids = [int(r.split(",")[0]) for r in apps]
    assert [r.split(", ")[1] for r in apps] == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
    assert all(os.getpgid(p) == s.proc.pid for p in pids)
    assert all(Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sglang::scheduler_TP") for p in pids)
    assert "GPU 1: NVIDIA RTX A6000 (UUID: GPU-" in s.nvidia_smi("-L")
    assert s.nvidia_smi("--query-compute-apps=pid,bogus", "--format=csv").startswith('Field "bogus"')


def test_gpu_memory_is_released_shortly_after_a_sigterm_exit(sim):
    s = sim(FIELD_FLAGS)
    query = ("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
    assert len(s.nvidia_smi(*query).splitlines()) == 2
    os.killpg(s.proc.pid, signal.SIGTERM)
    assert s.wait_exit(10) == -signal.SIGKILL  # idle: the drain ends and SGLang kills itself
    deadline = time.monotonic() + 5
    while s.nvidia_smi(*query).strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.nvidia_smi(*query).strip() == ""
    used = s.nvidia_smi("--query-gpu=memory.used", "--format=csv,noheader,nounits").split()
    assert used == ["0", "0"]


@pytest.mark.parametrize(("argv", "expected"), [
    (["--model", "/m", "--tp", "4", "--speculative-algo", "NEXTN"],
     {"model_path": "/m", "tp_size": 4, "speculative_algorithm": "EAGLE", "max_running_requests": 48,
      "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}),
    (["--model-path", "/m", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
      "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8", "--max-running-requests", "16"],
     {"speculative_num_draft_tokens": 4, "max_running_requests": 16}),
    (["--model-path", "/m", "--disable-radix"], {"disable_radix_cache": True, "speculative_algorithm": None}),
])
def test_argv_follows_sglangs_names_prefixes_and_post_processing(argv, expected):
    args, _ = parse_server_args(argv)
    assert {k: getattr(args, k) for k in expected} == expected


def test_topk1_forcing_logs_sglangs_warning():
    _, warnings = parse_server_args(["--model-path", "/m", "--speculative-algorithm", "NEXTN",
                                     "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                                     "--speculative-num-draft-tokens", "8"])
    assert "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1" \
        in warnings


def test_memory_plan_follows_the_field_log_and_mem_fraction_static():
    args, _ = parse_server_args(FIELD_FLAGS + MTP_FLAGS)
    plan = plan_memory(args, 49140, parse_faults(""))
    assert plan.failure is None and abs(plan.weights_gb - 25.52) < 0.01 and plan.mamba_slots == 48
    low, _ = parse_server_args(FIELD_FLAGS + ["--mem-fraction-static", "0.55"])
    assert plan_memory(low, 49140, parse_faults("")).failure == "kv_pool_too_small"
    high, _ = parse_server_args(FIELD_FLAGS + ["--mem-fraction-static", "0.99"])
    assert plan_memory(high, 49140, parse_faults("")).failure == "cuda_graph_oom"


def test_unknown_fault_names_are_refused():
    with pytest.raises(ValueError, match="valid: state_leak"):
        parse_faults("state_leek")
