#!/usr/bin/env python3
"""A Triton peer of vLLM's CUDA DeepSeek-V4 compressor step (v4.compressor_cache), written here from spec v4 §10 (not
vLLM's code): torch saves the state rows (a copy and one fp32 add), then one Triton program per emitting token
gathers the window rows through the block table, tl.softmax over rows per channel, sum, tl.rsqrt RMSNorm, GPT-J RoPE
in fp32, bf16, the ue8m0 block scale through tl.log2 / tl.ceil / tl.exp2 and the fp8 cast (D 512: 7 nope blocks of
64 + bf16 rope dims in MODEL1 584-byte records; D 128: one block over all 128 dims, fp32 scale, 132-byte records).
Its bytes come from Triton's own approximate exp, divide and rsqrt: the real-engine case of the candidate bytes.

  on a GPU machine:   python3 bench/triton_peer_v4_compressor.py run OUTDIR     (3 steps: D 128 C4, D 512 C4, D 512 C128)
  then, anywhere:     python3 bench/triton_peer_v4_compressor.py check OUTDIR   (dumps via the kit, dsa-check check)

H200, 2026-12-04 (Triton 3.6.0, torch 2.11): all three pass; 3 of 137280, 2 of 158848 and 1 of 28032 KV-cache bytes
are at an accepted candidate (a bf16 rounding flipped by the approximations), every other byte bit-exact; the numpy
float32 model (reference/v4.py compressor_vllm) differs from Triton at exactly those bytes.
"""
import os
import subprocess
import sys

import numpy as np

try:  # the run half needs a GPU with torch + Triton
    import torch
    import triton
    import triton.language as tl
except ImportError:  # check half only
    torch = triton = tl = None


if triton is not None:
    @triton.jit
    def _store(state, s0, s1, req_ptr, pos_ptr, slot_ptr, bt_ptr, bts, sbs, gamma_ptr, eps, cs_ptr, css, kc_ptr, kslot_ptr,
               kbs, kbstride, D: tl.constexpr, NROWS: tl.constexpr, R: tl.constexpr, COFF: tl.constexpr,
               ROPE: tl.constexpr, C2: tl.constexpr, MAIN: tl.constexpr):
        t = tl.program_id(0)
        slot = tl.load(slot_ptr + t)
        p = tl.load(pos_ptr + t)
        ks = tl.load(kslot_ptr + t)
        if slot < 0:
            return
        if (p + 1) % R != 0:
            return
        if ks < 0:
            return
        b = tl.load(req_ptr + t)
        i = tl.arange(0, NROWS)
        q = p - NROWS + 1 + i
        valid = q >= 0
        qq = tl.where(valid, q, 0)
        blk = tl.load(bt_ptr + b * bts + qq // sbs, mask=valid, other=0)
        base = blk.to(tl.int64) * s0 + (qq % sbs) * s1
        if COFF == 2:
            base = base + tl.where(i >= R, D, 0)
        ch = tl.arange(0, D)
        sc = tl.load(state + base[:, None] + C2 + ch[None, :], mask=valid[:, None], other=float("-inf"))
        kv = tl.load(state + base[:, None] + ch[None, :], mask=valid[:, None], other=0.0)
        w = tl.softmax(sc, dim=0)
        c = tl.sum(kv * w, axis=0)
        var = tl.sum(c * c, axis=0) / D
        rr = tl.rsqrt(var + eps)
        g = tl.load(gamma_ptr + ch).to(tl.float32)
        y = c * rr * g
        ev, od = tl.split(tl.reshape(y, (D // 2, 2)))
        rp = tl.arange(0, D // 2) - (D - ROPE) // 2
        isr = rp >= 0
        cpos = (p // R) * R
        co = tl.load(cs_ptr + cpos * css + tl.maximum(rp, 0), mask=isr, other=1.0)
        si = tl.load(cs_ptr + cpos * css + ROPE // 2 + tl.maximum(rp, 0), mask=isr, other=0.0)
        rot = tl.interleave(ev * co - od * si, od * co + ev * si)
        kblk = ks // kbs
        koff = ks % kbs
        cb = kc_ptr + kblk.to(tl.int64) * kbstride
        if MAIN:
            q2 = tl.reshape(y.to(tl.bfloat16).to(tl.float32), (D // 64, 64))
            am = tl.maximum(tl.max(tl.abs(q2), axis=1), 1e-4)
            e = tl.ceil(tl.log2(am * (1.0 / 448.0)))
            codes = tl.clamp(q2 * tl.reshape(tl.exp2(-e), (D // 64, 1)), -448.0, 448.0).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
            codes = tl.reshape(codes, (D,))
            tok = cb + koff * 576
            tl.store(tok + ch, codes, mask=ch < 448)
            sidx = tl.arange(0, D // 64)
            enc = tl.minimum(tl.maximum(e + 127.0, 0.0), 255.0).to(tl.uint8)
            tl.store(cb + kbs * 576 + koff * 8 + sidx, tl.where(sidx < 7, enc, 0).to(tl.uint8))
            tl.store((tok + 448).to(tl.pointer_type(tl.bfloat16)) + (ch - 448), rot.to(tl.bfloat16), mask=ch >= 448)
        else:
            v = rot.to(tl.bfloat16).to(tl.float32)
            am = tl.maximum(tl.max(tl.abs(v), axis=0), 1e-4)
            e = tl.ceil(tl.log2(am * (1.0 / 448.0)))
            codes = tl.clamp(v * tl.exp2(-e), -448.0, 448.0).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
            tl.store(cb + koff * D + ch, codes)
            tl.store((cb + kbs * D + koff * 4).to(tl.pointer_type(tl.float32)), tl.exp2(e))


def run(out, D, r, B, L, seed):
    torch.manual_seed(seed)
    dev = "cuda"
    coff = 2 if r == 4 else 1; C2 = coff * D; W = 2 * C2; sbs = 4 if r == 4 else 8; kbs = 16
    T = B * L + 2
    ks = torch.randn(T, W, device=dev); ape = 0.5 * torch.randn(r, C2, device=dev)
    gamma = (1 + 0.1 * torch.randn(D, device=dev)).to(torch.bfloat16)
    per = -(-L // sbs); kper = -(-(-(-L // r)) // kbs)
    bt = (1 + torch.arange(B * per, device=dev, dtype=torch.int32)).view(B, per)
    kt = (1 + torch.arange(B * kper, device=dev, dtype=torch.int64)).view(B, kper)
    p = torch.arange(L, device=dev).repeat(B); b = torch.arange(B, device=dev).repeat_interleave(L)
    pos = torch.cat([p, torch.zeros(2, dtype=torch.int64, device=dev)])
    req = torch.cat([b, torch.zeros(2, dtype=torch.int64, device=dev)]).to(torch.int32)
    sm = torch.cat([bt[b, p // sbs].long() * sbs + p % sbs, torch.full((2,), -1, device=dev)])
    km = torch.cat([kt[b, (p // r) // kbs] * kbs + (p // r) % kbs, torch.full((2,), -1, device=dev)])
    st0 = torch.full((1 + B * per, sbs, W), float("nan"), device=dev)
    kc0 = torch.randint(0, 256, (1 + B * kper, kbs, 584 if D == 512 else D + 4), dtype=torch.uint8, device=dev)
    ang = torch.arange(L, device=dev, dtype=torch.float64)[:, None] * (1e4 ** (-torch.arange(32, device=dev) / 32.0))[None]
    cs = torch.cat([ang.cos(), ang.sin()], 1).float()
    st = st0.clone(); ok = sm >= 0
    st.view(-1, W)[sm[ok]] = torch.cat([ks[:, :C2], ks[:, C2:] + ape[pos % r]], 1)[ok]
    kc = kc0.clone()
    _store[(T,)](st, st.stride(0), st.stride(1), req, pos, sm, bt, bt.stride(0), sbs, gamma, 1e-6, cs, 64, kc, km,
                 kbs, kc.stride(0), D=D, NROWS=coff * r, R=r, COFF=coff, ROPE=64, C2=C2, MAIN=(D == 512),
                 num_warps=8 if r == 128 else 4)
    torch.cuda.synchronize()
    n = lambda x: x.cpu().numpy()
    np.savez_compressed(os.path.join(out, f"t{D}_{r}.npz"), ratio=r, kv_score=n(ks), ape=n(ape),
             norm_weight=n(gamma.view(torch.int16)), cos_sin_cache=n(cs), positions=n(pos), token_to_req_indices=n(req),
             slot_mapping=n(sm), block_table=n(bt), kv_slot_mapping=n(km), state_cache_in=n(st0), kv_cache_in=n(kc0),
             state_cache=n(st), kv_cache=n(kc))


def check(out):
    sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "scripts", "dsa_dump")]
    import ml_dtypes
    import dsa_dump
    cli = os.environ.get("DSA_CHECK_BIN", "dsa-check")
    rc = 0
    for k in ["t128_4", "t512_4", "t512_128"]:
        z = dict(np.load(os.path.join(out, f"{k}.npz")))
        path = os.path.join(out, f"{k}.h5")
        dsa_dump.capture_vllm_v4_compressor(
            z["kv_score"], z["ape"], z["norm_weight"].view(np.uint16).view(ml_dtypes.bfloat16), z["cos_sin_cache"],
            z["positions"], z["token_to_req_indices"], z["slot_mapping"], z["block_table"], z["kv_slot_mapping"],
            z["state_cache_in"], z["kv_cache_in"], z["state_cache"], z["kv_cache"], compress_ratio=int(z["ratio"]), out=path)
        p = subprocess.run([cli, "check", path], capture_output=True, text=True)
        print(k, "exit", p.returncode, "\n" + p.stdout)
        rc = max(rc, p.returncode)
    return rc


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("run", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    os.makedirs(sys.argv[2], exist_ok=True)
    run(sys.argv[2], 128, 4, 8, 512, 1)
    run(sys.argv[2], 512, 4, 4, 256, 2)
    run(sys.argv[2], 512, 128, 2, 1024, 3)
