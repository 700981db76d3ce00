#!/usr/bin/env python3
"""Which scale rule (dsa-check's ScaleRule: round x op x floor) does each real fp8 writer compute? Measured on a GPU.

    python scripts/examples/h200_scale_rules.py [--out DIR]

For every positive finite bf16 amax and 2^20 random positive fp32 amaxes, computes the scale the way each producer
writes it and counts how often it differs from each candidate rule computed here in numpy (IEEE fp32 arithmetic):
  torch-cuda-fp32   `amax.float() / 448.0` on a CUDA tensor (FlashMLA tests/quant.py, vLLM torch references)
  torch-cuda-bf16   `amax_bf16 / 448.0` on a CUDA bf16 tensor (sglang `_quantize_k_cache_slow`: the max of a bf16
                    tensor is bf16)
  torch-cpu-fp32    `amax.float() / 448.0` on the CPU
  triton-div        `tl.max(tl.abs(y)) / 448.0` in a Triton kernel (sglang `_quantize_k_cache_fast_kernel`), and its
                    `1.0 / y_s` (the reciprocal the codes are multiplied by) against fl32(1/s)
Prints one line per producer: the rules it matches bit for bit (0 differences) and the difference counts; writes
OUT/scale_rules.json. Needs torch with CUDA; the Triton rows need triton.
"""
import argparse
import json
import os
import sys

import numpy as np


def candidates(a):
    """The fp32 and bf16 rules of dsa-check's scale_fmt vocabulary (no floor: eps 0), in numpy fp32."""
    import ml_dtypes
    a = a.astype(np.float32)
    inv = np.float32(1.0) / np.float32(448.0)
    div = (a / np.float32(448.0)).astype(np.float32)
    mul = (a * inv).astype(np.float32)
    bf = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32)
    return {"fp32_div": div, "fp32_mul": mul, "bf16_div": bf(div), "bf16_mul": bf(mul)}


def compare(name, got, cands, out):
    got = np.asarray(got, dtype=np.float32)
    diffs = {k: int(np.count_nonzero(got.view(np.uint32) != v.view(np.uint32))) for k, v in cands.items()}
    match = [k for k, v in diffs.items() if v == 0]
    print(f"{name:18s} matches {match or 'none'}; differences {diffs}")
    out[name] = {"matches": match, "differences": diffs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import ml_dtypes
    import torch
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    bits = np.arange(1, 0x7F80, dtype=np.uint16)
    a_bf = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    rng = np.random.default_rng(5)
    r = rng.integers(0x00800000, 0x7F000000, size=1 << 20, dtype=np.uint32).view(np.float32)
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    amax = np.concatenate([a_bf, r]).astype(np.float32)
    c_all, c_bf = candidates(amax), candidates(a_bf)
    t = torch.from_numpy(amax)
    compare("torch-cuda-fp32", (t.cuda() / 448.0).cpu().numpy(), c_all, out)
    compare("torch-cpu-fp32", (t / 448.0).numpy(), c_all, out)
    tb = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16).cuda()
    compare("torch-cuda-bf16", (tb / 448.0).float().cpu().numpy(), c_bf, out)
    try:
        import triton
        import triton.language as tl
    except ImportError:
        print("skipped: triton not installed (triton-div rows)")
        triton = None
    if triton is not None:
        @triton.jit
        def scale_kernel(a_ptr, s_ptr, inv_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            a = tl.load(a_ptr + offs, mask=m, other=1.0)
            s = a / 448.0
            tl.store(s_ptr + offs, s, mask=m)
            tl.store(inv_ptr + offs, 1.0 / s, mask=m)
        ta = t.cuda()
        s = torch.empty_like(ta)
        inv = torch.empty_like(ta)
        scale_kernel[(triton.cdiv(ta.numel(), 1024),)](ta, s, inv, ta.numel(), BLOCK=1024)
        s_np, inv_np = s.cpu().numpy(), inv.cpu().numpy()
        compare("triton-div", s_np, c_all, out)
        exact_inv = (np.float32(1.0) / s_np).astype(np.float32)
        d = np.count_nonzero(inv_np.view(np.uint32) != exact_inv.view(np.uint32))
        ulps = np.abs(inv_np.view(np.int32).astype(np.int64) - exact_inv.view(np.int32).astype(np.int64))
        print(f"triton 1.0/s       differs from fl32(1/s) on {d} of {s_np.size} (max {int(ulps.max())} ulp)")
        out["triton-recip"] = {"differences": int(d), "max_ulp": int(ulps.max()), "n": int(s_np.size)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scale_rules.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
