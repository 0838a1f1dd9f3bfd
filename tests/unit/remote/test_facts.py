"""Fact and host-script parsers against recorded outputs (tests/unit/remote/facts/*.json: fact, args, output, expected)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from mtp_remote.remote import facts

CASES = sorted((Path(__file__).parent / "facts").glob("*.json"))


def _parse(fact: str, output: str):
    if fact == "process_info":
        info = facts.parse_process_info(output)
        return None if info is None else {**asdict(info), "cmdline": list(info.cmdline)}
    if fact == "ps":
        return [asdict(p) for p in facts.parse_ps(output)]
    if fact == "gpu_apps":
        return [asdict(a) for a in facts.parse_gpu_apps(output)]
    if fact == "gpus":
        return [asdict(g) for g in facts.parse_gpus(output)]
    if fact == "listening_ports":
        return sorted(facts.parse_listening_ports(output))
    if fact == "processes":
        from mtp_remote.remote.foreign import server_kind

        return [[p.pid, p.start_ticks, server_kind(p.argv)] for p in facts.parse_processes(output)]
    if fact in ("launch", "stop", "workdir"):
        from mtp_remote.remote import hostscripts

        parse = {"launch": hostscripts.parse_launch, "stop": hostscripts.parse_stop,
                 "workdir": hostscripts.parse_workdir}[fact]
        return asdict(parse(output))
    if fact == "children":
        from mtp_remote.remote import hostscripts

        return list(hostscripts.parse_children(output))
    raise AssertionError(f"unknown fact {fact}")


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fact_parser_gives_the_recorded_answer(path):
    case = json.loads(path.read_text())
    assert _parse(case["fact"], case["output"]) == case["expected"]


def test_process_info_reads_fields_after_a_comm_with_spaces_and_parentheses():
    out = "77 (weird ) name) R 5 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n--cmdline--\nx\n"
    info = facts.parse_process_info(out)
    assert (info.pid, info.ppid, info.pgid, info.start_ticks, info.cmdline) == (77, 5, 77, 4242, ("x",))


def test_tilde_paths_resolve_against_the_remote_home():
    assert facts.resolve_path("/home/ops", "~/.mtp-remote") == "/home/ops/.mtp-remote"
    assert facts.resolve_path("/home/ops", "/srv/x") == "/srv/x"


def test_sim_hosts_use_the_nvidia_smi_stand_in():
    from mtp_remote.config.inventory import HostConfig

    sim = HostConfig(name="s", transport="local", engine="sim")
    real = HostConfig(name="r", address="gpu", engine="sglang")
    assert facts.nvidia_smi(sim, "/opt/py 3/python", "/w") == (
        "timeout -k 2 10 env SGLANG_SIM_STATE_DIR=/w/sim-gpus '/opt/py 3/python' -m mtp_remote.sim.nvidia_smi")
    assert facts.nvidia_smi(real, "python3", "/w") == "timeout -k 2 10 nvidia-smi"  # bounded: a wedged driver
