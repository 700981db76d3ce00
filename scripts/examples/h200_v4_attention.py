#!/usr/bin/env python3
"""The DeepSeek-V4 attention stages computed on a GPU with torch, the way engines' torch paths compute them, and
judged by `dsa-check check` (the outputs go into copies of dsa-check goldens, whose inputs they are computed from).

    python scripts/examples/h200_v4_attention.py --bin build/dsa-check --goldens DIR --out OUT

DIR holds the goldens (`dsa-check golden --case ... --out DIR`): v4sa_c4_flash_full (V4-Flash decode batch, 64 heads,
512 dims, K 512), v4sa_c128_prefill, v4out_flash (V4-Flash o-projection dims), mla_decode_model1_extra. Kernels:
  attn.v4_sparse  per row: the window + compressed keys gathered on the GPU; scores by cuBLAS (fp32 GEMM, TF32 off, or
                  bf16 operands with fp32 output), an online softmax over 64-key tiles in fp32 (torch.exp), P rounded
                  to bf16 for PV (fp32 accumulation), out = bf16(acc / l); the sink either as the Ascend kernel (running
                  max from the sink, sum from 1) or at the end (FlashMLA: 1 / (1 + e^(sink - lse)))
  attn.v4_out     inverse RoPE in fp32, then cuBLAS bf16 GEMMs as torch.bmm / F.linear compute them (bf16 in/out,
                  reduced-precision split-K allowed as torch's default, or disallowed)
  attn.sparse_mla_decode (MODEL1)  the 584-byte cache dequantized on the GPU, main + extra scope, fp32 scores, P bf16
Exit code: 0 when every check passed, 1 when one failed, 2 on an error.
"""
import argparse
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch

BLOCK = 64
DEV = os.environ.get("DSA_DEVICE", "cuda")  # cpu: a dry run of the script without a GPU


def tensors(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        t = {}
        for k in g["inputs"]:
            d = g["inputs"][k]
            v = d[()]
            t[k] = torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) if d.attrs.get("dtype") == "bf16" else torch.from_numpy(v)
        return dict(g.attrs), t


def write(src, dst, outs):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        if "expected" in g:
            del g["expected"]
        for k, v in outs.items():
            g.create_dataset("outputs/" + k, data=v.cpu().view(torch.int16).numpy().view(np.uint16)).attrs["dtype"] = "bf16"


def online(q, K, scale, sink, a3, gemm):
    """q [N, D], K [n, D] bf16 on the GPU -> out [N, D] bf16; 64-key tiles, P bf16, fp32 accumulation."""
    N, D = q.shape
    dev = q.device
    if a3 and sink is not None:
        m, l = sink.clone(), torch.ones(N, device=dev)
    else:
        m, l = torch.full((N,), -float("inf"), device=dev), torch.zeros(N, device=dev)
    acc = torch.zeros(N, D, device=dev)
    for s0 in range(0, K.shape[0], BLOCK):
        Kt = K[s0:s0 + BLOCK]
        z = gemm(q, Kt) * scale
        m2 = torch.maximum(m, z.max(dim=1).values)
        alpha = torch.where(m == m2, torch.ones_like(m), torch.exp(m - m2))
        P = torch.exp(z - m2[:, None])
        l = l * alpha + P.sum(dim=1)
        acc = acc * alpha[:, None] + P.bfloat16().float() @ Kt.float()
        m = m2
    o = acc / l[:, None]
    if sink is not None and not a3 and K.shape[0] > 0:
        o = o * (1.0 / (1.0 + torch.exp(sink - (m + torch.log(l)))))[:, None]
    if K.shape[0] == 0:
        o = torch.zeros_like(o)
    return o.bfloat16()


def gemm_fp32(q, K):
    return q.float() @ K.float().T


def gemm_bf16_fp32out(q, K):
    try:
        return torch.mm(q, K.T, out_dtype=torch.float32)
    except TypeError:  # older torch: the same GEMM through cuBLAS with an fp32 result
        return torch.matmul(q.float(), K.float().T)


def v4_sparse(attrs, t, a3, gemm):
    dev = DEV
    ratio, wl, wr = int(attrs.get("cmp_ratio", 1)), int(attrs.get("ori_win_left", 127)), int(attrs.get("ori_win_right", 0))
    scale = float(attrs.get("softmax_scale", 512 ** -0.5))
    q = t["q"].to(dev)
    ori = t["ori_kv"][:, :, 0, :].to(dev)
    obt = t["ori_block_table"].long()
    cu, kvl = t["cu_seqlens_q"].long(), t["seqused_kv"].long()
    sink = t["sinks"].to(dev) if "sinks" in t else None
    cmp = t["cmp_kv"][:, :, 0, :].to(dev) if "cmp_kv" in t else None
    cbt = t["cmp_block_table"].long() if "cmp_block_table" in t else None
    idx = t.get("cmp_sparse_indices")
    out = torch.zeros_like(q)
    bs_o = ori.shape[1]
    for b in range(len(kvl)):
        ql, kv = int(cu[b + 1] - cu[b]), int(kvl[b])
        for i in range(ql):
            row, p = int(cu[b]) + i, kv - ql + i
            keys = []
            if p >= 0:
                s = torch.arange(max(0, p - wl), min(p + wr, kv - 1) + 1)
                keys.append(ori[obt[b, s // bs_o], s % bs_o])
                if ratio > 1:
                    lim = (p + 1) // ratio
                    if idx is None:
                        j = torch.arange(lim)
                    else:
                        lst = idx[row, 0, :min(idx.shape[2], lim)].long()
                        stop = (lst == -1).nonzero()
                        j = lst[: int(stop[0]) if len(stop) else len(lst)]
                    bs_c = cmp.shape[1]
                    keys.append(cmp[cbt[b, j // bs_c], j % bs_c])
            K = torch.cat(keys) if keys else q.new_zeros((0, q.shape[2]))
            out[row] = online(q[row], K, scale, sink, a3, gemm)
    return {"out": out}


def v4_out(attrs, t, reduced):
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = reduced
    dev = DEV
    o = t["o"].to(dev)
    T, N, D = o.shape
    G = int(attrs.get("o_groups", 8))
    cos, sin = t["cos"].reshape(T, -1).to(dev), t["sin"].reshape(T, -1).to(dev)
    x = o[:, :, D - 64:].float()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, 0::2], -sin[:, None, 0::2]
    y = torch.empty_like(x)
    y[..., 0::2] = x0 * c - x1 * s
    y[..., 1::2] = x1 * c + x0 * s
    rot = o.clone()
    rot[:, :, D - 64:] = y.bfloat16()
    wa, wb = t["wo_a"].to(dev), t["wo_b"].to(dev)
    R = wa.shape[0] // G
    lora = torch.bmm(rot.reshape(T, G, -1).transpose(0, 1), wa.reshape(G, R, -1).transpose(1, 2)).transpose(0, 1)  # [T, G, R]
    y = torch.nn.functional.linear(lora.reshape(T, -1), wb)
    return {"o_rot": rot, "o_lora": lora.contiguous(), "output": y}


def model1_decode(attrs, t):
    dev = DEV
    scale = float(attrs["softmax_scale"])

    def dequant(cache):
        nb, bs = cache.shape[0], cache.shape[1]
        flat = cache.reshape(nb, -1).to(dev)
        tok = flat[:, : bs * 576].reshape(nb, bs, 576)
        sc = flat[:, bs * 576:].reshape(nb, bs, 8)[:, :, :7]
        codes = tok[:, :, :448].contiguous().view(torch.float8_e4m3fn).float()
        scale_f = torch.where(sc == 255, torch.full_like(sc, 0, dtype=torch.float32) * float("nan"),
                              torch.pow(2.0, sc.float() - 127))
        nope = (codes.bfloat16() * scale_f.repeat_interleave(64, dim=-1).bfloat16())
        rope = tok[:, :, 448:].contiguous().view(torch.bfloat16)
        return torch.cat([nope, rope], dim=-1).reshape(nb * bs, 512)

    K, XK = dequant(t["k_cache"]), dequant(t["extra_k_cache"])
    q = t["q"].to(dev)
    b, s_q, h, _ = q.shape
    idx, xidx = t["indices"].long(), t["extra_indices_in_kvcache"].long()
    tl = t.get("topk_length", torch.full((b,), idx.shape[2])).long()
    xtl = t.get("extra_topk_length", torch.full((b,), xidx.shape[2])).long()
    sink = t["attn_sink"].to(dev) if "attn_sink" in t else None
    out = torch.zeros(b, s_q, h, 512, dtype=torch.bfloat16, device=dev)
    lse = torch.full((b, h, s_q), float("inf"), device=dev)
    for i in range(b):
        for s in range(s_q):
            a = idx[i, s, : tl[i]]
            xa = xidx[i, s, : xtl[i]]
            keys = torch.cat([K[a[a != -1].to(dev)], XK[xa[xa != -1].to(dev)]])
            if keys.shape[0] == 0:
                continue
            z = (q[i, s].float() @ keys.float().T) * scale
            m = z.max(dim=1).values
            P = torch.exp(z - m[:, None])
            L = P.sum(dim=1)
            o = (P.bfloat16().float() @ keys.float()) / L[:, None]
            l_ = m + torch.log(L)
            if sink is not None:
                o = o / (1.0 + torch.exp(sink - l_))[:, None]
            out[i, s] = o.bfloat16()
            lse[i, :, s] = l_
    return out, lse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--goldens", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    rc = 0
    runs = []
    for name in ("v4sa_c4_flash_full", "v4sa_c128_prefill"):
        src = os.path.join(a.goldens, name + ".h5")
        attrs, t = tensors(src)
        for label, a3, gemm in (("a3_fp32gemm", True, gemm_fp32), ("flashmla_bf16gemm", False, gemm_bf16_fp32out)):
            dst = os.path.join(a.out, f"{name}_{label}.h5")
            write(src, dst, v4_sparse(attrs, t, a3, gemm))
            if not a3:
                with h5py.File(dst, "r+") as f:
                    f[next(iter(f))].attrs["variant"] = "flashmla-sm90"
            runs.append(dst)
    src = os.path.join(a.goldens, "v4out_flash.h5")
    attrs, t = tensors(src)
    for reduced in (True, False):
        dst = os.path.join(a.out, f"v4out_flash_cublas_{'reduced' if reduced else 'fp32'}.h5")
        write(src, dst, v4_out(attrs, t, reduced))
        runs.append(dst)
    src = os.path.join(a.goldens, "mla_decode_model1_extra.h5")
    attrs, t = tensors(src)
    out, lse = model1_decode(attrs, t)
    dst = os.path.join(a.out, "mla_decode_model1_extra_torch.h5")
    write(src, dst, {"out": out})
    with h5py.File(dst, "r+") as f:
        f[next(iter(f))].create_dataset("outputs/lse", data=lse.cpu().numpy())
    runs.append(dst)
    for r in runs:
        p = subprocess.run([a.bin, "check", r], capture_output=True, text=True)
        print(f"== {os.path.basename(r)}: exit {p.returncode}")
        print("\n".join(line[:260] for line in p.stdout.splitlines() if "/outputs/" in line or "passed" in line))
        if p.stderr:
            print(p.stderr[-2000:])
        rc = max(rc, min(p.returncode, 2))
    return rc


if __name__ == "__main__":
    sys.exit(main())
