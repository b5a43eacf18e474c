"""A planted out-of-bounds store in a Triton kernel, for the sanitizer teeth
(scripts/gpu_sanitize.sh runs it under memcheck with
``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, so each tensor is its own allocation and
one element past the end is outside every allocation)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _store_one_past(out, n, BLOCK: tl.constexpr) -> None:
    lanes = tl.arange(0, BLOCK)
    tl.store(out + lanes, lanes, mask=lanes <= n)  # planted: lane n is past the end


if __name__ == "__main__":
    buffer = torch.zeros(100, dtype=torch.int32, device="cuda")
    _store_one_past[(1,)](buffer, buffer.numel(), BLOCK=128)
    torch.cuda.synchronize()
    print("planted Triton store launched")
