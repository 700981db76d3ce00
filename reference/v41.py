"""DeepSeek-V4.1 stages (spec v41), modelled in numpy from the spec's definitions, never from the C++ reference.

  select              v41.select (§5): the indexer's top-k of compressed positions (ascending, + window, -1) and the
                      two-level candidate blocks (publish; consumers choose inside the published blocks)
  compressor          v4.compressor with model v41 (§4): ratios 1 / 2, no overlap, no APE, ratio 1 without a gate;
                      the pooled value rounded to bf16 before the norm (the reference; ratio 1's bf16 Linear), then
                      the producer's NVFP4 (§3): ref from the bf16 RoPE result, vllm-cuda from the unrounded fp32 one;
                      ascend-a3 (compressor_v2) one bf16 cast. State rows through a block table, continuous or a ring
                      of `ring_rows` rows (row p mod ring_rows).
  indexer_k           v41.indexer_k (§5): vLLM's K store, emulated in float32 as its Triton kernel computes (sum of
                      squares, 1 / sqrt, bf16 after the norm and after RoPE at the group start), then the 68-byte
                      MXFP4 or 132-byte FP8 record (reference/kv_records.py) into the paged cache
  fp4_logits          v41.logits (§5): DeepGEMM's fp8_fp4_mqa_logits (ragged) and fp8_fp4_paged_sparse_mqa_logits
                      (column c = blocks[c // sbk] * sbk + c % sbk) on MXFP4 q and k, in float64
  indexer_q_mxfp4     v4.indexer_prolog kernel vllm-cuda q_format mxfp4 (§5): vLLM's V4.1 MXFP4 indexer q path in
                      float32 (GPT-J RoPE at the token's position, bf16, MXFP4 "ref" per 32 dims; weights * ss * hs)

Inputs are numpy arrays of values (bf16 tensors as float32 values), the case's tensor names.
"""
import numpy as np

from . import fp4_codecs as fp4
from . import kv_records
from . import numerics as num


def _bf16(x):
    return num.bf16_rne(x)  # float64 -> bf16 in one rounding


def compressor(ins, ratio, variant="ascend-a3", ring_rows=None, cache_mode=1, eps=1e-6, rope=64, pooled_bf16=None,
               bug=None):
    """v4.compressor, model v41, closed form in float64. Per request b (tokens cu_seqlens[b] .. cu_seqlens[b+1],
    positions p = start_pos[b] + i):

        kv_p = fl32(x_p . wkv^T) (or kv_proj), score_p = fl32(x_p . wgate^T) (or score_proj; 0 without a gate)
        state row of p = [kv_p | score_p] at table[b][q // bs], offset q % bs, q = p (continuous) or p mod ring_rows;
            block 0 = not written
        entry j when (p + 1) % ratio == 0: rows jr .. jr + r - 1 (before start_pos: the state cache's rows);
            c = sum_rows softmax_rows(score) kv per channel (float64);
            pooled_bf16 (default: ref, or ratio 1): c = bf16(c);
            y = c / sqrt(mean c^2 + eps) * gamma; ref: y = bf16(y);
            interleaved RoPE of the last `rope` dims with the case's row (cos / sin per output row);
            ascend-a3: bf16(y); ref: NVFP4 "ref" of bf16(y), dequantized; vllm-cuda: NVFP4 "vllm" of fl32(y).

    bug (seeded): "ape" (a V4 position-in-group embedding 0.5 * (-1)^(p + c) added to the scores of ratio 2).

    Returns (cmp_kv float64 values [R, D] with NaN in padding rows, state_cache float32 after the step)."""
    ref, vllm = variant == "ref", variant == "vllm-cuda"
    if pooled_bf16 is None:
        pooled_bf16 = ref or ratio == 1
    gamma = np.asarray(ins["norm_weight"], np.float64)
    D = gamma.shape[0]
    cu = np.asarray(ins["cu_seqlens"]).astype(np.int64)
    sp = np.asarray(ins["start_pos"]).astype(np.int64)
    tab = np.asarray(ins["state_block_table"]).astype(np.int64)
    st_in = np.asarray(ins["state_cache_in"], np.float32)
    nblk, bs, W = st_in.shape
    C2 = W // 2
    if "x" in ins:
        x = np.asarray(ins["x"], np.float64)
        kv = (x @ np.asarray(ins["wkv"], np.float64).T).astype(np.float32)
        sc = (x @ np.asarray(ins["wgate"], np.float64).T).astype(np.float32) if "wgate" in ins else np.zeros_like(kv)
    else:
        kv = np.asarray(ins["kv_proj"], np.float32)
        sc = np.asarray(ins["score_proj"], np.float32) if "score_proj" in ins else np.zeros_like(kv)
    ring = ring_rows or ratio
    if bug == "ape":
        pos = np.concatenate([sp[b] + np.arange(cu[b + 1] - cu[b]) for b in range(len(sp))])
        sc = (sc + 0.5 * (-1.0) ** ((pos[:, None] + np.arange(C2)[None, :]) % 2)).astype(np.float32)

    def slot(b, p):
        q = p % ring if cache_mode == 2 else p
        return tab[b, q // bs], q % bs

    after = st_in.copy()
    for b in range(len(sp)):
        for t in range(cu[b], cu[b + 1]):
            blk, off = slot(b, sp[b] + t - cu[b])
            if blk > 0:
                after[blk, off, :C2], after[blk, off, C2:] = kv[t], sc[t]
    cos, sin = np.asarray(ins["rope_cos"], np.float64), np.asarray(ins["rope_sin"], np.float64)
    R = cos.shape[0]
    out = np.full((R, D), np.nan)
    row = 0
    for b in range(len(sp)):
        s0, n = sp[b], cu[b + 1] - cu[b]
        for j in range(s0 // ratio, (s0 + n) // ratio):
            kvw, scw = [], []
            for p in range(j * ratio, j * ratio + ratio):
                if p >= s0:
                    t = cu[b] + p - s0
                    kvw.append(kv[t]), scw.append(sc[t])
                else:
                    blk, off = slot(b, p)
                    kvw.append(st_in[blk, off, :C2]), scw.append(st_in[blk, off, C2:])
            kvw, scw = np.array(kvw, np.float64), np.array(scw, np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                w = np.exp(scw - scw.max(axis=0))
                w /= w.sum(axis=0)
                c = (w * kvw).sum(axis=0)
                if pooled_bf16:
                    c = _bf16(c)
                y = c / np.sqrt((c * c).sum() / D + eps) * gamma
                if ref:
                    y = _bf16(y)
                a, e = y[D - rope::2].copy(), y[D - rope + 1::2].copy()
                cs, sn = cos[row], sin[row]
                y[D - rope::2] = a * cs[0::2] - e * sn[0::2]
                y[D - rope + 1::2] = e * cs[1::2] + a * sn[1::2]
            if ref or vllm:
                src = _bf16(y).astype(np.float32) if ref else y.astype(np.float32)
                packed, scales = fp4.nvfp4_quant(src.reshape(1, D), variant="ref" if ref else "vllm")
                out[row] = fp4.dequant_nvfp4(packed, scales).reshape(D)
            else:
                out[row] = _bf16(y)
            row += 1
    return out, after


def select(scores, positions, k=512, window=128, ratio=1, block_size=8, topk_blocks=2048, publish=False,
           candidate_blocks=None, short_rows="pad"):
    """v41.select (spec v41 §5), from the definitions: row r (token position p = positions[r], p < 0 a padding row)
    reaches the compressed positions j < (p + 1) // ratio. A consumer (candidate_blocks [S, M], -1 padded) keeps only
    the positions whose block j // block_size is listed; the candidates are the kept positions with score > -inf. It
    selects the top min(k, reach) by score (any tie choice; here: numpy's stable argsort on -score, so the lower
    position wins a tie) and emits them ascending, + window, -1 after; short_rows "ref" (the REF quirk) fills a short
    row up to min(k, reach) with the lowest reachable non-candidate positions.
    publish: the blocks of the reachable positions (ceil(reach / block_size)), block score = max over its reachable
    positions (NaN wins), the newest block pinned at +inf, -inf blocks dropped; the top min(topk_blocks, nblocks),
    ascending, -1 after.
    Returns (indices int32 [S, k], published int32 [S, topk_blocks] or None)."""
    sc = np.asarray(scores, np.float64)
    S = sc.shape[0]
    out = np.full((S, k), -1, np.int32)
    pub = np.full((S, topk_blocks), -1, np.int32) if publish else None

    def top(vals, n):  # indices of the n largest (NaN first), stable
        key = np.where(np.isnan(vals), -np.inf, -vals)
        order = np.argsort(key, kind="stable")
        nan_first = np.concatenate([order[np.isnan(vals[order])], order[~np.isnan(vals[order])]])
        return nan_first[:n]

    for r in range(S):
        p = int(positions[r])
        n = (p + 1) // ratio if p >= 0 else 0
        row = sc[r, :n]
        keep = np.ones(n, bool)
        if candidate_blocks is not None:
            blocks = {int(b) for b in candidate_blocks[r] if b >= 0}
            keep = np.array([j // block_size in blocks for j in range(n)], bool)
        keep &= ~(row == -np.inf)
        cand = np.nonzero(keep)[0]
        want = min(k, n)
        sel = cand[top(row[cand], want)]
        sel = np.sort(sel)
        if short_rows == "ref" and len(sel) < want:
            fill = [j for j in range(n) if not keep[j]][:want - len(sel)]
            sel = np.sort(np.concatenate([sel, np.array(fill, np.int64)]))
        out[r, :len(sel)] = sel + window
        if publish and n:
            nb = (n + block_size - 1) // block_size
            bsc = np.array([np.max(row[b * block_size:(b + 1) * block_size]) for b in range(nb)])
            bsc[nb - 1] = np.inf
            ids = np.nonzero(~(bsc == -np.inf))[0]
            chosen = np.sort(ids[top(bsc[ids], min(topk_blocks, len(ids)))])
            pub[r, :len(chosen)] = chosen
    return out, pub


def indexer_k(ins, ratio=2, eps=1e-6, layout=None, rope="interleaved", group_rope=True, rstd_scale=1.0):
    """v41.indexer_k: vLLM's indexer_k_norm_rope_store in float32 (numpy's own summation order and a correctly
    rounded 1 / sqrt, where the kernel has Triton's tree sum and approximate rsqrt: a few fp32 ulps apart, within the
    stage's bound). For token t with slot s >= 0 and (p + 1) % ratio == 0:

        k = bf16(fl32(fl32(k_pre * fl32(1 / sqrt(fl32(sum k_pre^2 / 128 + eps)))) * w))
        dims 64..127, pair i = (64 + 2i, 65 + 2i) (rope="halves": (64 + i, 96 + i), a seeded bug), at g = (p // r) r
        (group_rope=False: at p, a seeded bug): e' = fl32(e c - o s), o' = fl32(o c + e s), then bf16
        record v41_idx_mxfp4_68 (layout None and a 68-byte cache) or v41_idx_fp8_132 at slot s, page_segregated.

    rstd_scale: the 1 / sqrt multiplied by it (an approximate rsqrt a few ulps off, as the kernel's may be).
    Returns the cache (uint8, the shape of k_cache_in)."""
    kp = np.asarray(ins["k_pre"], np.float32)
    pos = np.asarray(ins["positions"]).astype(np.int64)
    cs = np.asarray(ins["cos_sin_cache"], np.float32)
    w = np.asarray(ins["norm_weight"], np.float32)
    km = np.asarray(ins["kv_slot_mapping"]).astype(np.int64)
    cache = np.array(ins["k_cache_in"], np.uint8, copy=True)
    nblk, P, rec = cache.shape
    name = layout or ("v41_idx_fp8_132" if rec == 132 else "v41_idx_mxfp4_68")
    flat = cache.reshape(-1)
    f32 = np.float32
    for t in range(kp.shape[0]):
        p, s = int(pos[t]), int(km[t])
        if s < 0 or (p + 1) % ratio:
            continue
        x = kp[t]
        with np.errstate(all="ignore"):
            var = f32(np.sum(x * x, dtype=f32) / f32(128))
            r = f32(f32(f32(1) / np.sqrt(f32(var + f32(eps)))) * f32(rstd_scale))
            k = fp4.round_bf16(((x * r).astype(f32) * w).astype(f32))
            g = (p // ratio) * ratio if group_rope else p
            c, sn = cs[g, :32], cs[g, 32:]
            idx_e = 64 + 2 * np.arange(32) if rope == "interleaved" else 64 + np.arange(32)
            idx_o = idx_e + 1 if rope == "interleaved" else 96 + np.arange(32)
            e, o = k[idx_e].copy(), k[idx_o].copy()
            k[idx_e] = fp4.round_bf16(((e * c).astype(f32) - (o * sn).astype(f32)).astype(f32))
            k[idx_o] = fp4.round_bf16(((o * c).astype(f32) + (e * sn).astype(f32)).astype(f32))
        kv_records.store(flat, name, "page_segregated", P, s, k)
    return cache


def _mx4_rows(codes_u8, sf_i32):
    """MXFP4 rows [..., D/2] bytes + int32 [...] of packed ue8m0 bytes -> float64 [..., D] (fp4_codecs' dequant)."""
    codes = np.asarray(codes_u8, np.uint8)
    D = 2 * codes.shape[-1]
    sf = np.asarray(sf_i32).astype(np.int64) & 0xFFFFFFFF
    sbytes = np.stack([(sf >> (8 * k)) & 0xFF for k in range(D // 32)], axis=-1).astype(np.uint8)
    return fp4.dequant_mxfp4(codes, sbytes).astype(np.float64)


def fp4_logits(ins, clean_logits=True, sparse_block_kv=8, bf16=False):
    """v41.logits: logit[r, col] = sum_h w[r, h] relu(q[r, h] . k[key]) in float64 (exact products, float64 sums).
    Ragged (kv_fp4): key = col, defined in [ks[r], ke[r]). Paged sparse (kv_cache [pages, P, 1, 68], the
    v41_idx_mxfp4_68 records page_segregated): position = blocks[r, col // sbk] * sbk + col % sbk, key = the slot
    block_table[r, pos // P] * P + pos % P; a -1 block or a position >= context_lens[r] is undefined. Undefined
    columns: -inf with clean_logits, else NaN (not compared). Returns float64 [R, cols] (bf16: rounded RNE)."""
    q = _mx4_rows(ins["q_fp4"], ins["q_sf"])                      # [R, H, D]
    w = np.asarray(ins["weights"], np.float64)                    # [R, H]
    R, H, D = q.shape
    fill = -np.inf if clean_logits else np.nan
    if "kv_fp4" in ins:
        k = _mx4_rows(ins["kv_fp4"], ins["kv_sf"])                # [N, D]
        N = k.shape[0]
        with np.errstate(all="ignore"):
            s = np.einsum("rhd,nd->rhn", q, k)
            out = np.einsum("rh,rhn->rn", w, np.where(s < 0, 0.0, s))
        cols = np.arange(N)
        ok = (cols[None, :] >= np.asarray(ins["ks"])[:, None]) & (cols[None, :] < np.asarray(ins["ke"])[:, None])
        out = np.where(ok, out, fill)
    else:
        cache = np.asarray(ins["kv_cache"], np.uint8)
        pages, P = cache.shape[0], cache.shape[1]
        flat = cache.reshape(-1)
        bt = np.asarray(ins["block_table"]).astype(np.int64)
        sb = np.asarray(ins["sparse_blocks"]).astype(np.int64)
        cl = np.asarray(ins["context_lens"]).astype(np.int64)
        nsb = sb.shape[1]
        out = np.full((R, nsb * sparse_block_kv), fill)
        for r in range(R):
            for col in range(nsb * sparse_block_kv):
                b = sb[r, col // sparse_block_kv]
                pos = b * sparse_block_kv + col % sparse_block_kv
                if b < 0 or pos >= cl[r]:
                    continue
                slot = bt[r, pos // P] * P + pos % P
                regs = kv_records.read_regions(flat, "v41_idx_mxfp4_68", "page_segregated", P, int(slot))
                k = fp4.dequant_mxfp4(regs["codes"], regs["scales"]).astype(np.float64)
                with np.errstate(all="ignore"):
                    s = q[r] @ k
                    out[r, col] = np.dot(w[r], np.where(s < 0, 0.0, s))
    if bf16:
        with np.errstate(all="ignore"):
            out = np.where(np.isfinite(out), num.bf16_rne(np.where(np.isfinite(out), out, 0.0)), out)
    return out


def indexer_q_mxfp4(ins, softmax_scale=None, head_scale=None):
    """vLLM fused_indexer_q_rope_quant(use_fp4=True) in float32: index_q [T, H, 128]; dims 64..127 as pairs
    (64 + 2i, 65 + 2i) rotated at the token's position (e' = fl32(e c - o s), o' = fl32(o c + e s), then bf16),
    the nope dims as given; each 32-block MXFP4 "ref" (fp4_codecs). weights_out = fl32(fl32(w * ss) * hs), ss =
    128^-0.5 and hs = H^-0.5 by default (2^-6 for V4.1's 32 heads). Returns (q_fp4 uint8 [T, H, 64], q_fp4_scale
    uint8 [T, H, 4], weights_out float32 [T, H])."""
    q = np.array(ins["index_q"], np.float32, copy=True)
    T, H, D = q.shape
    pos = np.asarray(ins["positions"]).astype(np.int64)
    cs = np.asarray(ins["cos_sin_cache"], np.float32)
    ss = np.float32(D ** -0.5 if softmax_scale is None else softmax_scale)
    hs = np.float32(H ** -0.5 if head_scale is None else head_scale)
    f32 = np.float32
    c = cs[pos, :32][:, None, :]
    sn = cs[pos, 32:][:, None, :]
    e, o = q[:, :, 64::2].copy(), q[:, :, 65::2].copy()
    with np.errstate(all="ignore"):
        q[:, :, 64::2] = fp4.round_bf16(((e * c).astype(f32) - (o * sn).astype(f32)).astype(f32))
        q[:, :, 65::2] = fp4.round_bf16(((o * c).astype(f32) + (e * sn).astype(f32)).astype(f32))
    codes, scales = fp4.mxfp4_quant(q.reshape(T * H, D), "ref")
    w = np.asarray(ins["index_weights"], np.float32)
    wo = ((w * ss).astype(f32) * hs).astype(f32)
    return (np.asarray(codes, np.uint8).reshape(T, H, D // 2), np.asarray(scales, np.uint8).reshape(T, H, D // 32), wo)
