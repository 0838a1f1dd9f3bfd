"""The sim can be mitigated: which flags trigger and cure ``state_leak``, and what each flag costs in speed.

In-process (no server): the fault switch table (``sim.mitigation``), the loop rate as the speculative depth
falls, and the performance model's price of each cure, on the field playbook's prompts.
"""

from __future__ import annotations

import pytest

from mtp_remote.sim.args import parse_server_args
from mtp_remote.sim.faults import parse_faults
from mtp_remote.sim.mitigation import SWITCHES, fault_active, iteration_cost
from tests.sim.conftest import FIELD_FLAGS, MTP_FLAGS
from tests.sim.test_sim_model import sample_cell
from tests.sim.test_sim_perf import tokens_per_second as perf_tokens_per_second


def tokens_per_second(flags: list[str], faults: str = "") -> float:
    """test_sim_perf's measure at a larger time scale (0.3, 256 tokens), so that simulated GPU time, not this
    machine's CPU, sets the pace."""
    return perf_tokens_per_second(flags, faults, scale=0.3, max_new_tokens=256)


def args_of(*flags: str):
    return parse_server_args(FIELD_FLAGS + list(flags))[0]


def test_state_leak_needs_speculation_and_overlap_scheduling():
    leak = parse_faults("state_leak")
    assert fault_active("state_leak", args_of(*MTP_FLAGS), leak)
    assert not fault_active("state_leak", args_of(), leak)
    assert not fault_active("state_leak", args_of(*MTP_FLAGS, "--disable-overlap-schedule"), leak)
    assert not fault_active("state_leak", args_of(*MTP_FLAGS), parse_faults(""))


def test_the_switch_table_names_radix_cache_as_no_cure_with_the_0_5_9_reason():
    no_effect = dict(SWITCHES["state_leak"].no_effect)
    assert "0.5.9" in no_effect["--disable-radix-cache"]
    assert fault_active("state_leak", args_of(*MTP_FLAGS, "--disable-radix-cache"), parse_faults("state_leak"))


def test_fewer_speculative_steps_reduce_the_leak_but_do_not_cure_it():
    rates = [sample_cell(spec=s, leak=True, n=6)[0] for s in (3, 2, 1)]
    assert rates[0] > rates[1] > rates[2]
    assert rates[0] >= 18  # of 30


@pytest.mark.parametrize(("flags", "low", "high"), [
    (["--disable-overlap-schedule"], 1.10, 1.16), (["--mamba-scheduler-strategy", "extra_buffer"], 1.03, 1.07),
    (["--disable-cuda-graph"], 1.44, 1.46), (["--mamba-ssm-dtype", "float32"], 1.09, 1.11)])
def test_every_cure_has_a_modelled_per_iteration_price(flags, low, high):
    base = 0.036 + 0.0008 * 16 + 0.004 * 3
    ratio = iteration_cost(base, args_of(*MTP_FLAGS, *flags)) / iteration_cost(base, args_of(*MTP_FLAGS))
    assert low <= ratio <= high


def test_disabling_overlap_costs_measured_tokens_per_second_and_keeps_speculation_faster_than_none():
    base = tokens_per_second([])
    healthy = tokens_per_second(MTP_FLAGS)
    no_overlap = tokens_per_second(MTP_FLAGS + ["--disable-overlap-schedule"], "state_leak")
    # modelled 1/1.13 (test above); measured 0.735 at load 10-15 (CI, stop 25), so the floor is the model's with
    # room for a loaded machine: what the test holds is that the cure costs speed and keeps speculation worth it
    assert 0.6 <= no_overlap / healthy <= 0.97
    assert no_overlap > 1.2 * base
