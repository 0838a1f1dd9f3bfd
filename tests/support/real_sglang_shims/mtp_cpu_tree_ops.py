"""CPU (pure torch/Python) versions of two CUDA-only sgl_kernel ops used by SGLang's EAGLE/STANDALONE path.

Test scaffolding written into the real-SGLang test venv by ``tests/support/real_sglang.py``; never imported
by mtp_remote. Semantics follow sgl-kernel's ``csrc/speculative/eagle_utils.cu`` (SGLang 0.5.9 /
sgl-kernel 0.3.21): same arguments, same in-place outputs. Batches here are tiny (a few requests, a few
draft tokens), so plain Python loops over ``.tolist()`` copies are fast enough.
"""

from __future__ import annotations

import torch

FULL_MASK, QLEN_ONLY, QLEN_ONLY_BITPACKING = 0, 1, 2


def _find(selected: list[int], token_idx: int, limit: int) -> int:
    """Index of ``token_idx`` in ``selected[:limit]``; ``limit`` when absent (the kernel's loop end)."""
    for pos in range(limit):
        if selected[pos] == token_idx:
            return pos
    return limit


def build_tree_kernel_efficient(parent_list, selected_index, verified_seq_len, tree_mask, positions,
                                retrive_index, retrive_next_token, retrive_next_sibling, topk, depth,
                                draft_token_num, tree_mask_mode) -> None:
    """Fill the draft tree of each request: attention mask rows, positions, and the first-child /
    next-sibling links used by verification.

    Shapes: parent_list [bs, topk*(depth-1)+1]; selected_index [bs, n-1]; verified_seq_len [bs];
    tree_mask flat bool (FULL_MASK: sum(seq_len)*n + bs*n*n; QLEN_ONLY: bs*n*n); positions [bs*n];
    retrive_* [bs, n], all written in place (n = draft_token_num)."""
    if int(tree_mask_mode) == QLEN_ONLY_BITPACKING:
        raise NotImplementedError("QLEN_ONLY_BITPACKING tree masks are not ported to CPU")
    n = int(draft_token_num)
    parents = parent_list.tolist()
    selected = selected_index.tolist()
    seq_lens = [int(x) for x in verified_seq_len.tolist()]
    mask = tree_mask.tolist()
    pos = positions.tolist()
    r_index = retrive_index.tolist()
    r_next = retrive_next_token.tolist()
    r_sib = retrive_next_sibling.tolist()
    prefix = 0
    for b, seq_len in enumerate(seq_lens):
        sel = selected[b]
        seq_tree_idx = n * n * b + prefix * n
        prefix += seq_len
        for tid in range(n):
            if int(tree_mask_mode) == FULL_MASK:
                row = seq_tree_idx + (seq_len + n) * tid + seq_len + 1
            else:
                row = n * n * b + n * tid + 1
            mask[row - 1] = True
            for i in range(n - 1):
                mask[row + i] = False
            if tid == 0:
                continue
            cur, depth_of = tid - 1, 0
            while True:
                depth_of += 1
                mask[row + cur] = True
                parent_tb = sel[cur] // topk
                if parent_tb == 0:
                    break
                cur = _find(sel, parents[b][parent_tb], n - 1)
                if cur == n - 1:  # no parent selected (NaN logprobs): the kernel would read past the end
                    break
            pos[b * n + tid] = depth_of + seq_len
        pos[b * n] = seq_len
        for i in range(n - 1, 0, -1):
            r_index[b][i] = b * n + i
            parent_tb = sel[i - 1] // topk
            parent_pos = 0
            if parent_tb > 0:
                found = _find(sel, parents[b][parent_tb], n - 1)
                if found == n - 1:
                    continue  # the kernel prints "invalid eagle tree" and skips the token
                parent_pos = found + 1
            if r_next[b][parent_pos] == -1:
                r_next[b][parent_pos] = i
            else:
                r_sib[b][i] = r_next[b][parent_pos]
                r_next[b][parent_pos] = i
        r_index[b][0] = b * n
    tree_mask.copy_(torch.tensor(mask, dtype=tree_mask.dtype))
    positions.copy_(torch.tensor(pos, dtype=positions.dtype))
    retrive_index.copy_(torch.tensor(r_index, dtype=retrive_index.dtype))
    retrive_next_token.copy_(torch.tensor(r_next, dtype=retrive_next_token.dtype))
    retrive_next_sibling.copy_(torch.tensor(r_sib, dtype=retrive_next_sibling.dtype))


def verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                       retrive_next_token, retrive_next_sibling, target_predict) -> None:
    """Greedy verification: walk the draft tree from the root, at each depth accept the child whose token
    equals the target's argmax at the last accepted node; stop at the first depth with no match.

    Shapes: predicts [bs*n] (flat, written); accept_index [bs, steps+1] (written); accept_token_num [bs]
    (written: accepted draft tokens, bonus not counted); candidates, retrive_*, target_predict [bs, n]."""
    bs, n = candidates.shape
    steps = accept_index.shape[1]
    cand = candidates.tolist()
    r_index = retrive_index.tolist()
    r_next = retrive_next_token.tolist()
    r_sib = retrive_next_sibling.tolist()
    target = target_predict.reshape(-1).tolist()
    pred = predicts.tolist()
    acc = accept_index.tolist()
    num = accept_token_num.tolist()
    for b in range(bs):
        last = r_index[b][0]
        acc[b][0] = last
        accepted = 0
        cur = 0
        for _ in range(1, steps):
            cur = r_next[b][cur]
            while cur != -1:
                if cand[b][cur] == target[last]:
                    pred[last] = cand[b][cur]
                    accepted += 1
                    acc[b][accepted] = r_index[b][cur]
                    last = r_index[b][cur]
                    break
                cur = r_sib[b][cur]
            if cur == -1:
                break
        num[b] = accepted
        pred[last] = target[last]
    predicts.copy_(torch.tensor(pred, dtype=predicts.dtype))
    accept_index.copy_(torch.tensor(acc, dtype=accept_index.dtype))
    accept_token_num.copy_(torch.tensor(num, dtype=accept_token_num.dtype))
