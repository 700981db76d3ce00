#!/usr/bin/env python3
"""Sparse MLA attention on a GPU (FlashMLA, or a torch emulation of its arithmetic), captured with dsa_dump at
DeepSeek-V3.2 shapes and judged by `dsa-check check`.

    python scripts/examples/h200_flashmla_sparse.py --out /tmp/mla --bin build/dsa-check

Cases written to OUT/h200_flashmla_sparse.h5:
  1. mla.kcache_store         a torch pow2 writer of the 656-byte fp8 MLA cache (512 e4m3 codes, 4 fp32 tile scales
                              2^ceil(log2(max(amax/448, 1e-4))), 64 bf16 RoPE values) filling the paged cache of 8
                              requests (64-token pages, scattered block tables)
  2. attn.sparse_mla_prefill  flash_mla_sparse_fwd: s_q 64, h_q 128, d_qk 576, topk 2048 (causal top-k with -1 padding
                              for the early rows), sm_scale = the V3.2 MLA scale
  3. attn.sparse_mla_decode   flash_mla_with_kvcache on the fp8 cache: b 8, s_q 2 (MTP), h_q 128, topk 2048, indices
                              page * 64 + offset through the block table (-1 padding for short requests)

Without the flash_mla package the attention runs in torch, mimicking FlashMLA's arithmetic: bf16 inputs, QK^T as
an fp32 matmul (TF32 off), an exp2-domain online softmax over blocks of 64 keys with P rounded to bf16 for the PV
product (fp32 accumulation), out = bf16(O / L); the decode dequantizes the cache as the SM90 kernel does,
bf16(bf16(fp8) * bf16(scale)). Exit code: dsa-check's (0 pass, 1 fail, 2 error); 2 when a step failed here; 0 after
writing the file when no --bin is given (nothing judged).
"""
import argparse
import math
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dsa_dump"))

MLA_SCALE = 0.1352337788608801  # V3.2: 192^-0.5 * mscale^2 (YaRN mscale 0.1 * ln(40) + 1)
LOG2E = 1.4426950408889634
BLOCK = 64  # keys per online-softmax step (FlashMLA's block of the top-k list)


def log(msg):
    print(f"[flashmla-sparse {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- the 656-byte fp8 MLA cache ----
def mla_quant_pow2(kv_c, k_pe):
    """[T, 656] uint8 records of kv_c [T, 512] bf16 and k_pe [T, 64] bf16 with pow2 tile scales."""
    import torch

    T = kv_c.shape[0]
    x = kv_c.float().reshape(T, 4, 128)
    amax = x.abs().amax(dim=-1)
    t = torch.clamp_min(amax / 448.0, 1e-4)  # fl32(amax / 448) (IEEE fp32 division), then the 1e-4 floor
    bits = t.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)  # ceil(log2 t), exactly
    s = ((e + 127) << 23).view(torch.float32)  # 2^e
    codes = (x / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).reshape(T, 512)
    return torch.cat([codes.view(torch.uint8), s.contiguous().view(torch.uint8).reshape(T, 16),
                      k_pe.contiguous().view(torch.uint8).reshape(T, 128)], dim=1)


def mla_store(kv_c, k_pe, slot_mapping, kv_cache):
    """In place: the records of tokens with slot != -1 into kv_cache [num_blocks, page_size, 1, 656] uint8."""
    rec = mla_quant_pow2(kv_c, k_pe)
    keep = slot_mapping != -1
    kv_cache.view(-1, 656)[slot_mapping[keep].long()] = rec[keep]


def mla_dequant(records):
    """[..., 656] uint8 -> [..., 576] bf16 keys: bf16(bf16(fp8) * bf16(scale)) for the 512 latent dims (FlashMLA SM90
    decode), the 64 RoPE values as stored."""
    import torch

    shp = records.shape[:-1]
    r = records.reshape(-1, 656)
    codes = r[:, :512].contiguous().view(torch.float8_e4m3fn).to(torch.bfloat16).reshape(-1, 4, 128)
    scale = r[:, 512:528].contiguous().view(torch.float32).to(torch.bfloat16).reshape(-1, 4, 1)
    nope = (codes * scale).reshape(-1, 512)  # bf16 x bf16 -> bf16 (one rounding of the exact product)
    rope = r[:, 528:].contiguous().view(torch.bfloat16)
    return torch.cat([nope, rope], dim=1).reshape(*shp, 576)


# ---- attention (torch emulation of FlashMLA's arithmetic) ----
def sparse_attention(q, keys, valid, sm_scale, attn_sink=None):
    """q [R, h, d] bf16, keys [R, topk, d] bf16 (the selected keys of each row; values = keys[..., :512]),
    valid [R, topk] bool. Online softmax in the exp2 domain over blocks of 64 keys. Returns (out bf16 [R, h, 512],
    max_logits fp32 [R, h] natural, lse fp32 [R, h] natural: +inf and -inf max for rows without a valid key)."""
    import torch

    R, h, d = q.shape
    topk = keys.shape[1]
    qf = q.float()
    c = sm_scale * LOG2E
    m = torch.full((R, h), -math.inf, device=q.device)  # running max of the raw scores q.k
    L = torch.zeros((R, h), device=q.device)
    O = torch.zeros((R, h, 512), device=q.device)
    for k0 in range(0, topk, BLOCK):
        kb = keys[:, k0:k0 + BLOCK]
        s = torch.bmm(qf, kb.float().transpose(1, 2))  # [R, h, B] fp32
        s = s.masked_fill(~valid[:, None, k0:k0 + BLOCK], -math.inf)
        m_new = torch.maximum(m, s.amax(dim=-1))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp2((m - m_safe) * c)
        p = torch.exp2(s * c - (m_safe * c).unsqueeze(-1))
        L = L * alpha + p.sum(dim=-1)
        O = O * alpha.unsqueeze(-1) + torch.bmm(p.to(torch.bfloat16).float(), kb[..., :512].float())
        m = m_new
    empty = L == 0
    denom = L
    if attn_sink is not None:  # the sink joins the denominator: out * e^lse / (e^lse + e^sink)
        denom = L + torch.exp2(attn_sink.float().unsqueeze(0) * LOG2E - torch.where(empty, 0.0, m) * c)
    out = torch.where(empty.unsqueeze(-1), torch.zeros_like(O), O / denom.clamp_min(1e-30).unsqueeze(-1))
    max_logits = m * sm_scale
    lse = torch.where(empty, torch.full_like(L, math.inf), max_logits + torch.log(L.clamp_min(1e-30)))
    return out.to(torch.bfloat16), max_logits, lse


def emulated_sparse_fwd(q, kv, indices, sm_scale, attn_sink=None):
    """flash_mla_sparse_fwd: q [s_q, h, d], kv [s_kv, 1, d], indices [s_q, 1, topk] (invalid: < 0 or >= s_kv)."""
    import torch

    s_kv = kv.shape[0]
    idx = indices[:, 0].long()
    valid = (idx >= 0) & (idx < s_kv)
    keys = kv[:, 0][torch.where(valid, idx, torch.zeros_like(idx))]  # [s_q, topk, d]
    return sparse_attention(q, keys, valid, sm_scale, attn_sink)


def emulated_with_kvcache(q, k_cache, indices, softmax_scale, attn_sink=None):
    """flash_mla_with_kvcache, sparse fp8: q [b, s_q, h, 576], k_cache [nb, ps, 1, 656] uint8, indices [b, s_q, topk]
    (-1 invalid). Returns (out [b, s_q, h, 512], lse [b, h, s_q])."""
    import torch

    b, s_q, h, d = q.shape
    idx = indices.reshape(b * s_q, -1).long()
    valid = idx != -1
    rec = k_cache.reshape(-1, 656)[torch.where(valid, idx, torch.zeros_like(idx))]  # [b*s_q, topk, 656]
    out, _, lse = sparse_attention(q.reshape(b * s_q, h, d), mla_dequant(rec), valid, softmax_scale, attn_sink)
    return out.reshape(b, s_q, h, 512), lse.reshape(b, s_q, h).transpose(1, 2).contiguous()


# ---- FlashMLA itself, when installed ----
def flashmla_with_kvcache(fm, q, k_cache, indices, softmax_scale, block_table, cache_seqlens):
    """Calls the installed flash_mla (scheduler metadata API of 2026, or the 2025 one)."""
    try:
        meta, _ = fm.get_mla_metadata()
        return fm.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, 512, meta, None,
                                         softmax_scale=softmax_scale, is_fp8_kvcache=True, indices=indices)
    except TypeError:
        b, s_q, h, _ = q.shape
        meta, splits = fm.get_mla_metadata(cache_seqlens, s_q * h, 1, h, True, indices.shape[-1])
        return fm.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, 512, meta, splits,
                                         softmax_scale=softmax_scale, is_fp8_kvcache=True, indices=indices)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="h200_flashmla_sparse", help="output directory")
    ap.add_argument("--bin", default=os.environ.get("DSA_CHECK_BIN"), help="dsa-check binary (without it: write only)")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lse-base", default="e", choices=["e", "2"],
                    help="unit of the installed flash_mla's prefill lse / max_logits (2 for the 2025 release)")
    ap.add_argument("--emulate", action="store_true", help="use the torch emulation even if flash_mla imports")
    a = ap.parse_args()

    try:
        import torch
        import dsa_dump
    except ImportError as e:
        log(f"error: {e} (needs torch, numpy, h5py)")
        return 2
    fm = None
    if not a.emulate:
        try:
            import flash_mla as fm  # noqa: F811
        except ImportError:
            fm = None
    if a.device == "auto":
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(a.device)
    try:  # fp32 QK^T must be fp32, not TF32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    except Exception:  # noqa: BLE001
        pass
    gpu = f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""
    impl = f"flash_mla {getattr(fm, '__version__', '?')}" if fm else "flash_mla not installed: torch emulation"
    log(f"torch {torch.__version__}, device {dev}{gpu}, {impl}")
    if a.bin:
        try:
            dsa_dump.load_schema(a.bin, source="cli")
            os.environ["DSA_CHECK_BIN"] = a.bin  # the kit validates what it writes with this binary
        except Exception as e:  # noqa: BLE001
            log(f"warning: cannot read the schema from {a.bin} ({e}); using the shipped copy")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "h200_flashmla_sparse.h5")
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    cases, failed = [], []
    h_q, topk, d_qk, ps = 128, 2048, 576, 64

    # 1. the fp8 MLA cache of 8 requests, written by the torch pow2 writer
    b, s_q_dec = 8, 2
    ctx = [4000, 2600, 2048, 1500, 3100, 700, 2200, 3500]  # tokens per request (some shorter than topk)
    k_cache = block_table = None
    try:
        pages = [(n + ps - 1) // ps for n in ctx]
        nb = sum(pages) + 3
        order = torch.randperm(nb, generator=g)  # pages scattered over the pool
        block_table = torch.full((b, max(pages)), -1, dtype=torch.int32)
        at = 0
        for r, p in enumerate(pages):
            block_table[r, :p] = order[at:at + p].to(torch.int32)
            at += p
        slots = torch.cat([block_table[r, torch.arange(n) // ps].long() * ps + torch.arange(n) % ps
                           for r, n in enumerate(ctx)])
        T = slots.numel()
        kv_c = torch.randn(T, 512, generator=g).to(torch.bfloat16).to(dev)
        k_pe = torch.randn(T, 64, generator=g).to(torch.bfloat16).to(dev)
        slots = slots.to(dev)
        k_cache = torch.zeros(nb, ps, 1, 656, dtype=torch.uint8, device=dev)
        before = k_cache.clone()
        log(f"step 1: mla.kcache_store — {T} tokens of {b} requests into {nb} pages of {ps} (pow2 scales)")
        mla_store(kv_c, k_pe, slots, k_cache)
        cases.append(dsa_dump.capture_mla_kcache_store(kv_c, k_pe, slots, before, k_cache, scale_fmt="pow2",
                                                       name="kcache_store_pow2"))
        del before
    except Exception:  # noqa: BLE001
        failed.append("mla.kcache_store")
        log("step 1 failed:\n" + traceback.format_exc())

    # 2. sparse prefill
    try:
        s_q, s_kv = 64, 2560
        q = (torch.randn(s_q, h_q, d_qk, generator=g) * 0.5).to(torch.bfloat16).to(dev)
        kv = torch.randn(s_kv, 1, d_qk, generator=g).to(torch.bfloat16).to(dev)
        pos = torch.linspace(300, s_kv - 1, s_q).long()  # causal positions: the early rows see < topk keys
        score = torch.rand(s_q, s_kv, generator=g)
        score = score.masked_fill(torch.arange(s_kv)[None, :] > pos[:, None], -1.0)
        val, idx = torch.topk(score, topk, dim=-1)
        indices = torch.where(val < 0, torch.full_like(idx, -1), idx).to(torch.int32).reshape(s_q, 1, topk).to(dev)
        log(f"step 2: attn.sparse_mla_prefill — s_q {s_q}, s_kv {s_kv}, h_q {h_q}, d_qk {d_qk}, topk {topk} "
            f"({(indices < 0).sum().item()} padded slots)")
        t0 = time.time()
        if fm is not None:
            res = fm.flash_mla_sparse_fwd(q, kv, indices, MLA_SCALE, 512)
            out, max_logits, lse = res[0], res[1], res[2]
            lse_base = a.lse_base
        else:
            out, max_logits, lse = emulated_sparse_fwd(q, kv, indices, MLA_SCALE)
            lse_base = "e"
        if dev.type == "cuda":
            torch.cuda.synchronize()
        log(f"  out {tuple(out.shape)} in {time.time() - t0:.3f} s; "
            f"lse in [{lse.min().item():.4g}, {lse.max().item():.4g}]")
        cases.append(dsa_dump.capture_flash_mla_sparse_fwd(q, kv, indices, MLA_SCALE, out, max_logits, lse,
                                                           lse_base=lse_base, name="sparse_prefill"))
    except Exception:  # noqa: BLE001
        failed.append("attn.sparse_mla_prefill")
        log("step 2 failed:\n" + traceback.format_exc())

    # 3. sparse fp8 decode over the cache of step 1 (MTP: 2 query tokens per request)
    if k_cache is not None:
        try:
            qd = (torch.randn(b, s_q_dec, h_q, d_qk, generator=g) * 0.5).to(torch.bfloat16).to(dev)
            ind = torch.full((b, s_q_dec, topk), -1, dtype=torch.int64)
            for r, n in enumerate(ctx):
                for s in range(s_q_dec):
                    visible = n - s_q_dec + 1 + s  # causal: token s of the request sees positions < visible
                    p = torch.randperm(visible, generator=g)[:topk]
                    ind[r, s, :p.numel()] = block_table[r, p // ps].long() * ps + p % ps
            ind = ind.to(torch.int32).to(dev)
            seqlens = torch.tensor(ctx, dtype=torch.int32)
            log(f"step 3: attn.sparse_mla_decode — b {b}, s_q {s_q_dec}, h_q {h_q}, topk {topk}, "
                f"{(ind < 0).sum().item()} padded slots")
            t0 = time.time()
            if fm is not None:
                out_d, lse_d = flashmla_with_kvcache(fm, qd, k_cache.view(torch.float8_e4m3fn), ind, MLA_SCALE,
                                                     block_table.to(dev), seqlens.to(dev))
            else:
                out_d, lse_d = emulated_with_kvcache(qd, k_cache, ind, MLA_SCALE)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            log(f"  out {tuple(out_d.shape)} in {time.time() - t0:.3f} s; lse {tuple(lse_d.shape)}")
            cases.append(dsa_dump.capture_flash_mla_with_kvcache(qd, k_cache, ind, out_d, lse_d,
                                                                 softmax_scale=MLA_SCALE, block_table=block_table,
                                                                 cache_seqlens=seqlens, dequant="bf16_scale",
                                                                 name="sparse_decode_mtp"))
        except Exception:  # noqa: BLE001
            failed.append("attn.sparse_mla_decode")
            log("step 3 failed:\n" + traceback.format_exc())

    if not cases:
        log("error: no stage produced a case")
        return 2
    try:
        with dsa_dump.DumpWriter(path) as w:
            for c in cases:
                w.add(c)
        log(f"wrote {path} ({os.path.getsize(path) / 2 ** 20:.1f} MiB): "
            + ", ".join(f"{c.name} ({c.stage})" for c in cases))
    except Exception:  # noqa: BLE001
        log("writing the dump failed:\n" + traceback.format_exc())
        return 2

    rc = 0
    if a.bin:
        cmd = [a.bin, "check", path, "--json", os.path.join(a.out, "report.json")]
        log("$ " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except Exception as e:  # noqa: BLE001
            log(f"cannot run {a.bin}: {e}")
            return 2
        sys.stdout.write(p.stdout)
        sys.stdout.write(p.stderr)
        log(f"exit code {p.returncode}")
        rc = p.returncode
    else:
        log(f"no --bin given: run `dsa-check check {path}` yourself")
    if failed:
        log("steps that failed here: " + ", ".join(failed))
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
