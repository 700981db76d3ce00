"""The MLA stages (DeepSeek-V3.2 sparse MLA and the V4 "MODEL1" cache), modelled in float64 numpy from their
definitions, never from the C++ reference or the capture kit.

V3.2, the 656-byte fp8 token record (vLLM "fp8_ds_mla", FlashMLA sparse decode):
  tile_scales, kcache_records, kcache_store   mla.kcache_store: the cache writer (vLLM concat_and_cache_mla, sglang NSA
                                              quantize_k_cache, FlashMLA's test writer)
  kcache_dequant                              the keys the sparse decode reads back from that cache
  sparse_mla_prefill                          attn.sparse_mla_prefill: FlashMLA flash_mla_sparse_fwd
  sparse_mla_decode                           attn.sparse_mla_decode: FlashMLA flash_mla_with_kvcache, sparse fp8

V4 MODEL1, the 584-byte layout (FlashMLA @9241ae3, spec v4 §9; FlashMLA tests/quant.py):
  model1_quantize, model1_store               mla.kcache_store with layout MODEL1
  model1_dequant, model1_decode               attn.sparse_mla_decode over a main and an extra KV scope

Outputs are rounded once to their stored dtype (bf16 / fp32), so a correct kernel's outputs pass `dsa-check check`
against these models' inputs, and these models' outputs pass it too.
"""
import numpy as np

from . import numerics as num

LOG2E = 1.0 / np.log(2.0)
BF16, E4M3 = num.BF16, num.E4M3

# ---- V3.2: the 656-byte token record -----------------------------------------------------------------------------
# [0, 512)    512 fp8 e4m3 codes of the latent c = kv_c, in 4 tiles of 128, each code e4m3(clip(c / s_tile, +-448))
# [512, 528)  the 4 tile scales s_tile, fp32 little-endian
# [528, 656)  the 64 bf16 values of the RoPE part k_pe, as they are


def tile_scales(kv_c, fmt, amax_eps=1e-4, eps_on="rule"):
    """[T, 4] fp32 tile scales of kv_c [T, 512] bf16, per 128-value tile with amax = max |c| (fp32), by the named
    scale rule (numerics.SCALE_FMTS), e.g.

        pow2     2^ceil(log2(max(fl32(amax / 448), 1e-4)))
        ue8m0    2^ceil(log2(fl32(max(amax, 1e-4) * fl32(1/448))))
        fp32_mul fl32(max(amax, eps) * fl32(1/448))      (torch on CUDA)
        bf16_mul bf16(fl32(max(amax, eps) * fl32(1/448)))
        amax448  fl32(amax / 448)  (not a power of two)"""
    x = kv_c.astype(np.float32).reshape(-1, 4, 128)
    return num.block_scale(np.abs(x).max(-1), fmt, amax_eps, eps_on)


def kcache_records(kv_c, k_pe, fmt, amax_eps=1e-4, eps_on="rule", scale_apply="div"):
    """[T, 656] uint8 token records of kv_c [T, 512] bf16 and k_pe [T, 64] (or [T, 1, 64]) bf16: 512 e4m3 codes of
    c / s or fl32(c * fl32(1/s)) (scale_apply mul_inv), clamped to +-448 (0/0 = NaN -> code 0x7F), 4 fp32 LE scales
    (tile_scales with scale_fmt fmt), 64 bf16 k_pe."""
    T = kv_c.shape[0]
    s = tile_scales(kv_c, fmt, amax_eps, eps_on)
    x = kv_c.astype(np.float32).reshape(T, 4, 128)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = x / s[..., None] if scale_apply == "div" else x * (np.float32(1.0) / s)[..., None]
        q = np.where(np.isnan(q), np.float32(np.nan), q.astype(np.float32))  # 0/0: the positive NaN code 0x7F
        codes = np.clip(q, -448.0, 448.0).astype(E4M3).reshape(T, 512)
    rec = np.empty((T, 656), np.uint8)
    rec[:, :512] = codes.view(np.uint8)
    rec[:, 512:528] = s.astype("<f4").view(np.uint8).reshape(T, 16)
    rec[:, 528:] = k_pe.view("<u2").view(np.uint8).reshape(T, 128)
    return rec


def kcache_store(kv_c, k_pe, slot_mapping, cache_in, fmt, amax_eps=1e-4, eps_on="rule", scale_apply="div"):
    """mla.kcache_store: cache_in [P, page_size, 1, 656] uint8 with the record (kcache_records) of every token t whose
    slot_mapping[t] is not -1 written at that flat slot; every other byte kept. Returns the new cache (a copy)."""
    cache = cache_in.copy()
    flat = cache.reshape(-1, 656)
    rec = kcache_records(kv_c, k_pe, fmt, amax_eps, eps_on, scale_apply)
    for t, slot in enumerate(np.asarray(slot_mapping).tolist()):
        if slot != -1:
            flat[slot] = rec[t]
    return cache


def kcache_dequant(cache, dequant):
    """The keys the sparse decode reads from a 656-byte cache: K [N, 576] float64 (bf16 values) for each of the
    N = P * page_size slots, V = K[:, :512].

        dequant="bf16_scale"  nope = bf16(bf16(code) * bf16(scale))   (FlashMLA: the product of two bf16 is exact)
        otherwise             nope = bf16(fl32(code * scale))
        rope  = the stored bf16 k_pe"""
    flat = cache.reshape(-1, 656)
    N = flat.shape[0]
    codes = np.ascontiguousarray(flat[:, :512]).view(E4M3).astype(np.float64)
    scales = np.ascontiguousarray(flat[:, 512:528]).view("<f4").reshape(N, 4)
    rope = np.ascontiguousarray(flat[:, 528:]).view("<u2").view(BF16).astype(np.float64)
    if dequant == "bf16_scale":  # bf16(bf16(fp8) * bf16(scale)): the product of two bf16 values is exact in fp64
        s = np.repeat(scales.astype(BF16).astype(np.float64), 128, axis=1)
        nope = num.to_bf16(codes * s).astype(np.float64)
    else:  # bf16(fl32(fp8 * scale))
        s = np.repeat(scales, 128, axis=1)
        nope = num.f64((codes.astype(np.float32) * s).astype(np.float32))
        nope = num.to_bf16(nope).astype(np.float64)
    return np.concatenate([nope, rope], axis=1)


# ---- V3.2: the sparse attention math -----------------------------------------------------------------------------
def attend(qrow, K, scale, d_score, sink, bug):
    """Attention of one query row over its selected keys, float64. qrow [h, d], K [n, d] (n >= 1, duplicates kept:
    a key selected twice counts twice):

        z   = scale * q[:, :d_score] . K[:, :d_score]^T     [h, n]
        lse = log sum_j e^z_j                                (natural)
        out = softmax(z) . K[:, :512]                        (values = the first 512 dims of the keys)
        out = out / (1 + e^(sink - lse))                     (when a sink is given: it only adds to the denominator)

    Returns (out [h, 512], max logit [h], natural lse [h], sink-exclusive)."""
    # einsum (no BLAS): a multi-threaded BLAS spins badly on a loaded 2-core machine for these small products
    z = scale * np.einsum("hd,nd->hn", qrow[:, :d_score], K[:, :d_score])  # [h, n]
    m = z.max(axis=1)
    e = np.exp(z - m[:, None])
    l = e.sum(axis=1)
    lse = m + np.log(l)
    p = e if bug == "unnormalized" else e / l[:, None]
    o = np.einsum("hn,nd->hd", p, K[:, :512])
    if sink is not None and bug != "sink_ignored":
        o = o / (1.0 + np.exp(sink - lse))[:, None]
    return o, m, lse


def sparse_mla_prefill(q, kv, indices, sm_scale, attn_sink=None, topk_length=None, lse_base="e",
                       lse_includes_sink=False, bug=None):
    """attn.sparse_mla_prefill: FlashMLA flash_mla_sparse_fwd from its definition (attend per query row).

    q [s_q, h, d] bf16 (d = 576, or 512 without RoPE), kv [s_kv, 1, d] bf16, indices [s_q, 1, topk] int; the keys of
    row i are indices[i, :topk_length[i]] that lie in [0, s_kv) (others -- -1 padding, negative, past s_kv -- are
    skipped), attn_sink [h] fp32 optional. A row with no valid key ("lonely"): out 0, max_logits -inf, lse +inf
    (lse_includes_sink: log(0 + e^sink) = sink). lse_base="2": max_logits and lse in log2 units, and a lonely row's
    lse -inf (the 2025 release).

    Returns (out bf16 [s_q, h, 512], max_logits fp32 [s_q, h], lse fp32 [s_q, h]).
    bug (seeded bugs): "rope_dropped" (scores over the first 512 dims), "sink_ignored", "unnormalized"."""
    s_q, h, d = q.shape
    s_kv = kv.shape[0]
    qf, kvf = num.f64(q), num.f64(kv).reshape(s_kv, d)
    sink = None if attn_sink is None else num.f64(attn_sink)
    out = np.zeros((s_q, h, 512))
    ml = np.full((s_q, h), -np.inf)
    lse = np.full((s_q, h), np.inf)
    d_score = 512 if bug == "rope_dropped" else d
    for i in range(s_q):
        L = indices.shape[-1] if topk_length is None else int(topk_length[i])
        idx = indices[i].reshape(-1)[:L].astype(np.int64)
        sel = idx[(idx >= 0) & (idx < s_kv)]
        if sel.size == 0:  # lonely row: out 0, max_logits -inf, lse +inf (natural) ...
            if lse_includes_sink and sink is not None:
                lse[i] = sink  # ... but a sink-inclusive lse is log(0 + e^sink) = sink
            continue
        o, m, ls = attend(qf[i], kvf[sel], sm_scale, d_score, sink, bug)
        out[i], ml[i], lse[i] = o, m, (np.logaddexp(ls, sink) if (lse_includes_sink and sink is not None) else ls)
    if lse_base == "2":
        ml = ml * LOG2E
        lse = np.where(np.isinf(lse), -np.inf, lse * LOG2E)  # lonely rows: -inf in the 2025 release
    return num.to_bf16(out), ml.astype(np.float32), lse.astype(np.float32)


def sparse_mla_decode(q, cache, indices, softmax_scale, attn_sink=None, topk_length=None, dequant="bf16_scale",
                      lse_includes_sink=False, bug=None):
    """attn.sparse_mla_decode: FlashMLA flash_mla_with_kvcache (sparse, fp8 656-byte cache) from its definition.

    q [b, s_q, h, 576] bf16, cache [num_blocks, page_size, 1, 656] uint8 (keys: kcache_dequant), indices
    [b, s_q, topk] flat slots (page * page_size + offset; only -1 is invalid), topk_length [b] optional, attn_sink [h].
    A lonely row: out 0, lse +inf (lse_includes_sink: sink).

    Returns (out bf16 [b, s_q, h, 512], lse fp32 [b, h, s_q]).
    bug (seeded bugs): "minus1_as_token0" (-1 read as slot 0), "unnormalized", "rope_dropped"."""
    b, s_q, h, d = q.shape
    K = kcache_dequant(cache, dequant)
    qf = num.f64(q)
    sink = None if attn_sink is None else num.f64(attn_sink)
    out = np.zeros((b, s_q, h, 512))
    lse = np.full((b, h, s_q), np.inf)
    for bi in range(b):
        L = indices.shape[-1] if topk_length is None else int(topk_length[bi])
        for si in range(s_q):
            idx = indices[bi, si, :L].astype(np.int64)
            sel = np.where(idx == -1, 0, idx) if bug == "minus1_as_token0" else idx[idx != -1]
            if sel.size == 0:  # lonely row: out 0, lse +inf (sink-inclusive: log(0 + e^sink) = sink)
                if lse_includes_sink and sink is not None:
                    lse[bi, :, si] = sink
                continue
            o, _, ls = attend(qf[bi, si], K[sel], softmax_scale, 512 if bug == "rope_dropped" else d, sink, bug)
            out[bi, si] = o
            lse[bi, :, si] = np.logaddexp(ls, sink) if (lse_includes_sink and sink is not None) else ls
    return num.to_bf16(out), lse.astype(np.float32)


# ---- V4 MODEL1: the 584-byte layout --------------------------------------------------------------------------------
# Per block of bs tokens: bs token records of 576 bytes (448 e4m3 NoPE codes, then 64 bf16 RoPE values), then bs
# scale records of 8 bytes (7 e8m0 tile scales, one per 64 NoPE values, then a pad byte 0).
NOPE, ROPE, TILE, TILES, TOK, REC = 448, 64, 64, 7, 576, 584


def model1_quantize(k):
    """k [nb, bs, 512] bf16 (448 NoPE + 64 RoPE) -> the MODEL1 cache bytes [nb, bs, 1, 584] (FlashMLA
    quantize_k_cache): per 64-value tile, s = 2^ceil(log2(max(fl32(amax / 448), 1e-4))), codes e4m3(fl32(x / s)),
    scale byte e + 127; pad byte 0."""
    nb, bs, _ = k.shape
    out = np.zeros((nb, bs * REC), np.uint8)
    kf = k.astype(np.float32)
    tok = out[:, : bs * TOK].reshape(nb, bs, TOK)
    sc = out[:, bs * TOK:].reshape(nb, bs, 8)
    tok[:, :, NOPE:] = k[:, :, NOPE:].view(np.uint8).reshape(nb, bs, 2 * ROPE)
    for j in range(TILES):
        x = kf[:, :, j * TILE:(j + 1) * TILE]
        s = np.maximum(np.abs(x).max(axis=-1) / np.float32(448.0), np.float32(1e-4)).astype(np.float32)
        e = np.ceil(np.log2(s.astype(np.float64))).astype(np.int64)
        scale = np.ldexp(np.float32(1.0), e).astype(np.float32)
        tok[:, :, j * TILE:(j + 1) * TILE] = (x / scale[..., None]).astype(E4M3).view(np.uint8)
        sc[:, :, j] = (e + 127).astype(np.uint8)
    return out.reshape(nb, bs, 1, REC)


def model1_store(kv, slots, before):
    """mla.kcache_store into a MODEL1 cache: before [nb, bs, 1, 584] uint8 with the token record and the scale record
    of every token t with slots[t] >= 0 (kv [T, 512] bf16, flat slot = block * bs + offset) replaced by
    model1_quantize's bytes; every other byte (other tokens' records, pad bytes of unwritten slots) kept.
    Returns the cache after the store, [nb, bs, 1, 584] uint8."""
    nb, bs = before.shape[0], before.shape[1]
    ref = np.zeros((nb * bs, 512), BF16)
    written = np.zeros(nb * bs, bool)
    for t in range(kv.shape[0]):
        if slots[t] >= 0:
            ref[slots[t]], written[slots[t]] = kv[t], True
    full = model1_quantize(ref.reshape(nb, bs, 512))
    after = before.copy().reshape(nb, bs * REC)
    fb = full.reshape(nb, bs * REC)
    for sl in np.nonzero(written)[0]:
        p, o = divmod(int(sl), bs)
        after[p, o * TOK:(o + 1) * TOK] = fb[p, o * TOK:(o + 1) * TOK]
        after[p, bs * TOK + o * 8: bs * TOK + (o + 1) * 8] = fb[p, bs * TOK + o * 8: bs * TOK + (o + 1) * 8]
    return after.reshape(nb, bs, 1, REC)


def model1_dequant(cache, aos=False):
    """The keys [nb * bs, 512] (float64) a reader sees in a MODEL1 cache [nb, bs, 1, 584]: bf16(fl32(code *
    2^(e - 127))) for the NoPE part (e = 255: NaN), the stored bf16 RoPE. aos=True reads the bytes as 584-byte
    array-of-structs records instead (a seeded bug)."""
    nb, bs = cache.shape[0], cache.shape[1]
    flat = cache.reshape(nb, bs * REC)
    if aos:
        tok, sc = flat.reshape(nb, bs, REC)[:, :, :TOK], flat.reshape(nb, bs, REC)[:, :, TOK:]
    else:
        tok, sc = flat[:, : bs * TOK].reshape(nb, bs, TOK), flat[:, bs * TOK:].reshape(nb, bs, 8)
    codes = np.ascontiguousarray(tok[:, :, :NOPE]).view(E4M3).astype(np.float32)
    with np.errstate(all="ignore"):
        scale = num.ue8m0_decode(sc[:, :, :TILES])
        nope = (codes * np.repeat(scale, TILE, axis=-1)).astype(BF16).astype(np.float64)
    rope = np.ascontiguousarray(tok[:, :, NOPE:]).view(BF16).astype(np.float64)
    return np.concatenate([nope, rope], axis=-1).reshape(nb * bs, 512)


def model1_decode(q, cache, idx, xcache, xidx, scale, sink, tl, xtl, bug=None):
    """attn.sparse_mla_decode with layout MODEL1 and an extra KV scope (FlashMLA @9241ae3): one softmax over the
    main keys idx[i, s, :tl[i]] of cache and the extra keys xidx[i, s, :xtl[i]] of xcache (-1 skipped; keys =
    values = 512 dims, model1_dequant):

        out = softmax(scale * q . K^T) . K / (1 + e^(sink - lse)),   lse = log sum e^z  (sink-exclusive)

    q [b, s_q, h, 512] bf16, sink [h] fp32 (+inf: output 0, lse unchanged). A lonely row: out 0, lse +inf.
    Returns (out bf16 [b, s_q, h, 512], lse fp32 [b, h, s_q]).
    bug (seeded bugs): "no_extra" (extra scope dropped), "no_xtl" (extra_topk_length ignored), "aos" (cache read as
    array-of-structs records)."""
    b, s_q, h, _ = q.shape
    K, XK = model1_dequant(cache, bug == "aos"), model1_dequant(xcache, bug == "aos")
    out = np.zeros((b, s_q, h, 512))
    lse = np.zeros((b, h, s_q))
    with np.errstate(all="ignore"):
        for i in range(b):
            for s in range(s_q):
                sel = [K[t] for t in idx[i, s, : tl[i]] if t != -1]
                if bug != "no_extra":
                    sel += [XK[t] for t in xidx[i, s, : (xidx.shape[2] if bug == "no_xtl" else xtl[i])] if t != -1]
                if not sel:
                    lse[i, :, s] = np.inf
                    continue
                kv = np.array(sel)
                z = scale * (q[i, s].astype(np.float64) @ kv.T)
                m = z.max(axis=1, keepdims=True)
                p = np.exp(z - m)
                l_ = np.log(p.sum(axis=1)) + m[:, 0]
                o = (p @ kv) / p.sum(axis=1, keepdims=True)
                out[i, s] = o / (1.0 + np.exp(sink.astype(np.float64) - l_))[:, None]
                lse[i, :, s] = l_
    return out.astype(BF16), lse.astype(np.float32)
