

# --- appended by mtp-remote's test scaffolding (tests/support/real_sglang.py): CPU tree ops -------------
if not (_is_cuda or _is_hip or _is_npu):
    from mtp_cpu_tree_ops import build_tree_kernel_efficient as sgl_build_tree_kernel_efficient
    from mtp_cpu_tree_ops import verify_tree_greedy as _mtp_cpu_verify_tree_greedy

    def verify_tree_greedy_func(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                retrive_next_token, retrive_next_sibling, target_predict, topk=-1):
        _mtp_cpu_verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                    retrive_next_token, retrive_next_sibling, target_predict)
        return predicts, accept_index, accept_token_num
