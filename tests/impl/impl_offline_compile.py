"""Compile every kernel variant for sm_90 without a GPU (run as a script).

Triton lowers each kernel to a cubin with its bundled ptxas, so this checks
that the compiled CUDA path (not only the interpreter) accepts every
constexpr combination. Prints one line per kernel and the variant count.
Must run with TRITON_INTERPRET unset.
"""

from __future__ import annotations

import itertools
import os

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from replayssm.impl import kernels

TARGET = GPUTarget("cuda", 90, 32)
I64_TABLES = {"block_table_ptrs", "tracker_start_ptrs", "tracker_committed_ptrs", "src_slots_ptrs",
              "dst_slots_ptrs", "block_table_strides"}
SCALARS = {"num_reqs"}


def compile_variant(kernel, constexprs: dict, absent: set[str]) -> None:
    names = list(kernel.arg_names)
    signature, values = {}, {}
    for i, name in enumerate(names):
        if name in constexprs or name in absent:
            signature[name] = "constexpr"
            values[(i,)] = constexprs.get(name)
        elif name in SCALARS:
            signature[name] = "i32"
        elif name == "is_prefilling":
            signature[name] = "*i1"
        else:
            signature[name] = "*i64" if name in I64_TABLES else "*i32"
    triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=values), target=TARGET)


def main() -> None:
    assert os.environ.get("TRITON_INTERPRET") != "1", "unset TRITON_INTERPRET"
    count = 0
    for cum, post, mapping, materialize, live_zero in itertools.product([False, True], repeat=5):
        compile_variant(
            kernels._postprocess_replayssm_kernel,
            dict(MAX_NUM_REQS=5, MAMBA_BLOCK_SIZE=4, LOGICAL_WINDOW=16, RING_BUFFER_LEN=20,
                 PAD_SLOT_ID=0, QUERY_METADATA_IS_CUMULATIVE=cum, NUM_COMPUTED_IS_POST_STEP=post,
                 HAS_IDX_MAPPING=mapping, MATERIALIZE_PREFIXES=materialize,
                 LIVE_COL_IS_ZERO=live_zero),
            absent=({"idx_mapping"} if not mapping else set()) | ({"live_cols"} if live_zero else set()),
        )
        count += 1
    print(f"_postprocess_replayssm_kernel: {count} variants")
    for mapping in (False, True):
        compile_variant(kernels._reset_new_replayssm_slots_kernel,
                        dict(PAD_SLOT_ID=0, HAS_IDX_MAPPING=mapping),
                        absent=set() if mapping else {"idx_mapping"})
        count += 1
    print("_reset_new_replayssm_slots_kernel: 2 variants")
    compile_variant(kernels._compact_replayssm_requests_kernel,
                    dict(MAX_NUM_REQS=5, BLOCK_SIZE=8), absent=set())
    count += 1
    print(f"compiled {count} variants for sm_90")


if __name__ == "__main__":
    main()
