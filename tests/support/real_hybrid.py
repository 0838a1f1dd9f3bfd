"""Test scaffolding: what the cached real-SGLang venv needs to serve a hybrid Gated-DeltaNet model with NEXTN.

Called by ``tests/support/real_sglang.py`` while it builds the venv (layout ``cpu-v2``); nothing in
``mtp_remote/`` imports it. Each patch is a text replacement of one SGLang 0.5.9 passage, asserted to match
exactly once, so a different SGLang fails the build loudly instead of serving something else. The blocks met and
why each patch is the way past (SGLang 0.5.9 file:line, measured on this machine):

1. ``layers/attention/hybrid_linear_attn_backend.py:83``: the CPU branch asserts Intel AMX and imports five
   ``*_cpu`` ops only SGLang's AMX build of sgl-kernel has -> imported from ``mtp_cpu_gdn_ops`` (stand-ins:
   SGLang's own Triton kernels interpreted, torch where the interpreter cannot run fla's kernels).
2. ``mem_cache/memory_pool.py:277,291``: ``MambaPool`` allocates the speculative intermediate SSM/conv caches
   on ``device="cuda"`` -> the pool's device.
3. ``server_args.py:1729``: ``--mamba-scheduler-strategy extra_buffer`` asserts CUDA -> CPU allowed (the
   torch prefill stand-in returns the per-64-token states extra_buffer tracks).
4. The faults of ``mtp_real_faults.py`` (switched off unless ``MTP_REMOTE_REAL_FAULTS`` is set): one call
   appended to ``hybrid_linear_attn_backend.py`` and to ``speculative/eagle_info.py``.
5. The state faults (``stale_state``, ``commit_late``, ``conv_leak``, ``rewind``; their SGLang file:line and why
   each is plausible: ``mtp_real_faults.py``), a build step of their own (:func:`install_state_faults`): the
   module copied again and one more call appended to ``hybrid_linear_attn_backend.py``.

Conv states default to bf16 (``configs/mamba_utils.py:68``): the host sets ``SGLANG_MAMBA_CONV_DTYPE=float32``
beside ``--dtype float32`` (a mismatch crashes extra_buffer at ``hybrid_linear_attn_backend.py:989``), because
Triton 3.9's interpreter computes garbage on bf16 data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mtp_remote.errors import MtpRemoteError

SHIMS = Path(__file__).resolve().parent / "real_sglang_shims"
BACKEND = "sglang/srt/layers/attention/hybrid_linear_attn_backend.py"

_AMX_BRANCH = '''    assert (
        cpu_has_amx_support()
    ), "CPU requires AMX support for hybrid linear attn backend"
    from sgl_kernel.mamba import (
        causal_conv1d_fn_cpu,
        causal_conv1d_update_cpu,
        chunk_gated_delta_rule_cpu,
    )
'''
_STAND_INS = '''    from mtp_cpu_gdn_ops import CHUNK_SIZE as FLA_CHUNK_SIZE  # mtp-remote test shim (extra_buffer tracking)
    from mtp_cpu_gdn_ops import (  # mtp-remote test shim: no AMX build of sgl-kernel on this CPU
        causal_conv1d_fn_cpu,
        causal_conv1d_update_cpu,
        chunk_gated_delta_rule_cpu,
        fused_gdn_gating_cpu,
        fused_sigmoid_gating_delta_rule_update_cpu,
    )
'''
_EXTRA_BUFFER_ASSERT = '''            assert (
                is_cuda()
            ), "Mamba extra_buffer is only supported on CUDA devices with FLA backend"
'''
_EXTRA_BUFFER_CPU = '''            assert is_cuda() or self.device == "cpu", (  # mtp-remote test shim: CPU allowed
                "Mamba extra_buffer is only supported on CUDA devices with FLA backend"
            )
'''

#: (file under site-packages, old passage, new passage, how many times the old one occurs)
PATCHES: tuple[tuple[str, str, str, int], ...] = (
    (BACKEND, _AMX_BRANCH, _STAND_INS, 1),
    (BACKEND, "        torch.ops.sgl_kernel.fused_sigmoid_gating_delta_rule_update_cpu\n",
     "        fused_sigmoid_gating_delta_rule_update_cpu\n", 1),
    (BACKEND, "    fused_gdn_gating = torch.ops.sgl_kernel.fused_gdn_gating_cpu\n",
     "    fused_gdn_gating = fused_gdn_gating_cpu\n", 1),
    ("sglang/srt/mem_cache/memory_pool.py", '                    dtype=ssm_dtype,\n                    device="cuda",\n',
     "                    dtype=ssm_dtype,\n                    device=device,  # mtp-remote test shim\n", 1),
    ("sglang/srt/mem_cache/memory_pool.py",
     '                        dtype=conv_dtype,\n                        device="cuda",\n',
     "                        dtype=conv_dtype,\n                        device=device,  # mtp-remote test shim\n", 1),
    ("sglang/srt/server_args.py", _EXTRA_BUFFER_ASSERT, _EXTRA_BUFFER_CPU, 1),
)

#: (file under site-packages, text appended): the fault hooks, inert unless MTP_REMOTE_REAL_FAULTS is set
APPENDS: tuple[tuple[str, str], ...] = (
    (BACKEND, "\n\n# --- appended by mtp-remote's test scaffolding (tests/support/real_hybrid.py): fault hook\n"
              "import mtp_real_faults as _mtp_real_faults\n\n"
              "_mtp_real_faults.install_leak(HybridLinearAttnBackend)\n"),
    ("sglang/srt/speculative/eagle_info.py",
     "\n\n# --- appended by mtp-remote's test scaffolding (tests/support/real_hybrid.py): fault hook\n"
     "import sys as _sys\n\nimport mtp_real_faults as _mtp_real_faults\n\n"
     "_mtp_real_faults.install_accept_all(_sys.modules[__name__])\n"),
)

#: Appended to the backend by :func:`install_state_faults`: the prefill record of fault ``rewind``.
STATE_FAULT_APPEND = (BACKEND, "\n\n# --- appended by mtp-remote's test scaffolding (tests/support/real_hybrid.py): "
                               "state faults\n_mtp_real_faults.install_prefill_record(GDNAttnBackend)\n")

#: Run by the venv's python after patching: the hybrid backend imports the stand-ins and the hooks are in place.
CHECK = ("import os; os.environ['TRITON_INTERPRET'] = '1'; "
         "import sglang.srt.layers.attention.hybrid_linear_attn_backend as b, sglang.srt.speculative.eagle_info as e; "
         "assert b.HybridLinearAttnBackend.update_mamba_state_after_mtp_verify._mtp_fault; "
         "assert e.verify_tree_greedy_func._mtp_fault; import mtp_cpu_gdn_ops; print('hybrid ok')")
#: Run by the venv's python after :func:`install_state_faults`: every state fault is known and both wrappers are on.
CHECK_STATE = ("import os; os.environ['TRITON_INTERPRET'] = '1'; "
               "import sglang.srt.layers.attention.hybrid_linear_attn_backend as b, mtp_real_faults as f; "
               "assert b.GDNAttnBackend.forward_extend._mtp_fault; "
               "assert b.HybridLinearAttnBackend.update_mamba_state_after_mtp_verify._mtp_fault; "
               "assert {'stale_state', 'commit_late', 'conv_leak', 'rewind'} <= set(f.KNOWN); print('state faults ok')")


def install_hybrid_shims(site: Path) -> None:
    """Patch the venv's SGLang (``site``: its site-packages) and copy the two shim modules beside it. Safe to run
    again over a partial run (the build resumes at a failed step): a passage already patched, or a hook already
    appended, is left as it is.

    Raises :class:`MtpRemoteError` naming the file when a passage is found neither as shipped nor as patched."""
    for rel, old, new, count in PATCHES:
        path = site / rel
        text = path.read_text()
        if text.count(old) == 0 and text.count(new) == count:
            continue  # patched by an earlier run of this step
        if text.count(old) != count:
            raise MtpRemoteError(f"SGLang changed: {rel} holds {text.count(old)} (not {count}) copies of the "
                                 f"passage to patch", evidence=old)
        path.write_text(text.replace(old, new))
    for rel, tail in APPENDS:
        path = site / rel
        text = path.read_text()
        if tail not in text:
            path.write_text(text + tail)
    for name in ("mtp_cpu_gdn_ops.py", "mtp_real_faults.py"):
        shutil.copy(SHIMS / name, site / name)


def install_state_faults(site: Path) -> None:
    """Copy ``mtp_real_faults.py`` (with the state faults) into the venv's site-packages again and append the
    prefill record of ``rewind`` to the hybrid backend (:data:`STATE_FAULT_APPEND`) once. Safe to run again."""
    shutil.copy(SHIMS / "mtp_real_faults.py", site / "mtp_real_faults.py")
    rel, tail = STATE_FAULT_APPEND
    path = site / rel
    text = path.read_text()
    if tail not in text:
        path.write_text(text + tail)
