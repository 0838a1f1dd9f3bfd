"""The CPU ports of SGLang's two CUDA tree ops (test scaffolding in the real venv) on a hand-checked chain.

topk 1, 3 steps, 4 draft tokens: the draft tree is the chain root → d1 → d2 → d3. Positions follow the depth;
greedy verification accepts d1 and d2 (the target agrees), rejects d3, and the target's own token at d2
becomes the bonus token — as sgl-kernel's ``eagle_utils.cu`` does on a GPU.
"""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = [pytest.mark.real, pytest.mark.timeout(1800)]  # one import of SGLang + torch: ~10 s quiet, minutes loaded

SCRIPT = r'''
import json, torch
from mtp_cpu_tree_ops import build_tree_kernel_efficient, verify_tree_greedy
n, seq_len = 4, 5
parent_list = torch.tensor([[-1, 0, 1]])
selected = torch.tensor([[0, 1, 2]])
seq_lens = torch.tensor([seq_len])
mask = torch.full((seq_len * n + n * n,), True)
positions = torch.empty(n, dtype=torch.long)
r_index, r_next, r_sib = torch.full((3, 1, n), -1, dtype=torch.long)
build_tree_kernel_efficient(parent_list, selected, seq_lens, mask, positions, r_index, r_next, r_sib, 1, 3, n, 0)
cand = torch.tensor([[7, 11, 12, 13]])
target = torch.tensor([[11, 12, 99, 5]])
predicts = torch.full((n,), -1, dtype=torch.long)
accept = torch.full((1, 4), -1, dtype=torch.long)
num = torch.zeros(1, dtype=torch.long)
verify_tree_greedy(predicts, accept, num, cand, r_index, r_next, r_sib, target)
rows = mask.view(n, seq_len + n)[:, seq_len:].int().tolist()
print(json.dumps({"positions": positions.tolist(), "index": r_index.tolist(), "next": r_next.tolist(),
                  "sibling": r_sib.tolist(), "mask": rows, "accept": accept.tolist(), "num": num.tolist(),
                  "predicts": predicts.tolist()}))
'''


def test_chain_tree_and_greedy_verification(real_engine):
    out = subprocess.run([real_engine.python, "-c", SCRIPT], capture_output=True, text=True, timeout=900,
                         check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["positions"] == [5, 6, 7, 8]
    assert got["index"] == [[0, 1, 2, 3]] and got["next"] == [[1, 2, 3, -1]] and got["sibling"] == [[-1] * 4]
    assert got["mask"] == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]  # each token sees its ancestors
    assert got["accept"] == [[0, 1, 2, -1]] and got["num"] == [2]
    assert got["predicts"] == [11, 12, 99, -1]
