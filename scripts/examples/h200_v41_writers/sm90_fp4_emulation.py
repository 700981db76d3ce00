"""NOT upstream code. Software stand-in for vLLM's `_fp32x2_to_fp4x2`.

vLLM's helper (vllm/models/deepseek_v4/common/ops/fused_indexer_q.py) is
inline PTX `cvt.rn.satfinite.e2m1x2.f32`, which ptxas only accepts for
sm_100a/sm_101a/sm_120a-family targets (PTX ISA 8.6+).  On sm_90 (H100/H200)
the kernels that call it fail to compile.  `install()` swaps the name in the
modules that reference it for this pure-Triton version before first launch.

Semantics emulated: round-to-nearest-even onto the E2M1 grid
{0,0.5,1,1.5,2,3,4,6}, saturate |x|>6 to 6 (satfinite), sign bit copied from
the fp32 sign (so -0.0 and small negatives give nibble 0x8).  Low nibble =
x_lo, high nibble = x_hi, as in the PTX version (`$1`=hi, `$2`=lo).
Unverified vs. hardware: NaN inputs (here: magnitude code 0 + sign bit).
Midpoint ties use the same strict/non-strict pattern as sglang's
`_e2m1_rne_scaled_triton` with denominator 1.
"""

import triton
import triton.language as tl


@triton.jit
def _e2m1_code_sw(x):
    a = tl.abs(x)
    code = (
        (a > 0.25).to(tl.uint8)
        + (a >= 0.75).to(tl.uint8)
        + (a > 1.25).to(tl.uint8)
        + (a >= 1.75).to(tl.uint8)
        + (a > 2.5).to(tl.uint8)
        + (a >= 3.5).to(tl.uint8)
        + (a > 5.0).to(tl.uint8)
    )
    sign = ((x.to(tl.uint32, bitcast=True) >> 31).to(tl.uint8)) << 3
    return (code | sign).to(tl.uint8)


@triton.jit
def _fp32x2_to_fp4x2_sw(x_lo, x_hi):
    return (_e2m1_code_sw(x_lo) | (_e2m1_code_sw(x_hi) << 4)).to(tl.uint8)


def install():
    """Patch before the first launch, in a fresh process."""
    import vllm.models.deepseek_v4.common.ops.fused_indexer_q as fiq
    import vllm.models.deepseek_v41.common.ops as v41ops
    import vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache as fcqc
    import vllm.models.deepseek_v41.common.ops.indexer_k_store as iks

    for mod in (fiq, v41ops, fcqc, iks):
        mod._fp32x2_to_fp4x2 = _fp32x2_to_fp4x2_sw
