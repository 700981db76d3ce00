"""DeepSeek-V4 stages (spec v4), modelled in numpy from their definitions, never from the C++ reference.

  compressor                        v4.compressor: the Ascend `compressor` op, closed form in float64 (§2)
  indexer_prolog, dyn_quant         v4.indexer_prolog: the A3 kernels' int8 dynamic quant, head weights and k8 / scale
                                    scatter (§3.2-3.4)
  indexer_prolog_qpath              v4.indexer_prolog's query path from q_pre: RoPE + Hadamard, fp32 kernels
  vllm_indexer_q                    v4.indexer_prolog, kernel vllm-cuda: fused_indexer_q_rope_quant FP8 (spec v4 §10), fp32
  indexer_a3, indexer_float         v4.indexer: Ascend npu_vllm_quant_lightning_indexer (A3 int8 pipeline, §3.5), and
                                    the vllm-cuda / ref-bf16 variants
  sparse_attn, sparse_attn_fp32     attn.v4_sparse: Ascend npu_sparse_attn_sharedkv (§4.2-4.3), float64 rounded once,
                                    and the A3 / FlashMLA-style fp32 online-softmax kernels
  attn_out                          attn.v4_out: inplace_partial_rotary_mul + the grouped wo_a / wo_b (§4.4), fp32

Several of these are models of a kernel's own fp32 / fp16 arithmetic (the order of its sums, where it rounds), not
float64 ideals: a kernel-faithful model must pass dsa-check's bound as the kernels do. Each docstring says which.
"""
import ml_dtypes
import numpy as np

from . import numerics as num

BF16 = ml_dtypes.bfloat16


# ---- v4.compressor -----------------------------------------------------------------------------------------------
def rope_row(pos):
    """The V4 compressed-layer RoPE table row at position pos (YaRN: base 160000, factor 16, original context 65536,
    beta_fast 32, beta_slow 1, 64 rotary dims), interleave-duplicated: (cos [64], sin [64]) fp32."""
    base, dim = 160000.0, 64
    f = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    low = max(np.floor(dim * np.log(65536 / (32 * 2 * np.pi)) / (2 * np.log(base))), 0)
    high = min(np.ceil(dim * np.log(65536 / (1 * 2 * np.pi)) / (2 * np.log(base))), dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    f = f / 16 * ramp + f * (1 - ramp)
    ang = pos * f
    return np.repeat(np.cos(ang), 2).astype(np.float32), np.repeat(np.sin(ang), 2).astype(np.float32)


def compressor(xs, wkv, wgate, ape, gamma, starts, lens, ratio=4, coff=2, block_size=8, blocks_per_request=8,
               bug=None):
    """v4.compressor: the Ascend `compressor` op (cmp_ratio = ratio = R, coff = 2, overlapping windows), closed form
    from spec v4 §2. For each request b, from its whole history xs[b] [start + len, H] (bf16 values as float64):

        kv_p    = fl32(x_p . wkv^T)                          [2D]  (the state cache's first half)
        score_p = fl32(fl32(x_p . wgate^T) + ape[p mod R])   [2D]  (its second half)

    Entry j (complete once positions jR .. jR + R - 1 exist) for each j in [start // R, (start + len) // R): a window
    of 2R rows, the previous group's channels [0, D) (rows p < 0: kv 0, score -inf) then the current group's channels
    [D, 2D); per channel a softmax over the 2R rows (float64); c = sum softmax(score) * kv; RMSNorm
    y = c / sqrt(mean(c^2) + 1e-6) * gamma; interleaved RoPE of y's last 64 dims at position jR (rope_row);
    cmp_kv = bf16(y), one rounding.

    wkv, wgate [2D, H] and gamma [D] as bf16 values (float64), ape [R, 2D] fp32, starts / lens: per request the
    tokens already in the state cache and the tokens of this call. The state cache is paged: request b's position p
    sits at block state_block_table[b, p // block_size], offset p % block_size (block 0 unused, unwritten rows NaN).

    Returns the op's tensors as the kit's capture_ascend_compressor takes them: x (the new tokens, bf16), wkv, wgate,
    state_cache (before), ape, norm_weight, rope_sin, rope_cos, output (cmp_kv bf16 [rows, D], zero rows after the
    entries; rows = max(#entries, min(T, T // R + B))), state_cache_after, state_block_table, cu_seqlens, start_pos.
    bug (seeded bugs): "halves" (the window's halves swapped), "rope_pos" (RoPE at the group's last position)."""
    R_, COFF, BS, NB = ratio, coff, block_size, blocks_per_request
    C2 = wkv.shape[0]
    D = C2 // COFF
    B = len(starts)
    kv = [x @ wkv.T for x in xs]                                   # float64: the exact projections
    sc = [(x @ wgate.T).astype(np.float32) + ape[np.arange(len(x)) % R_] for x in xs]
    kv = [k.astype(np.float32) for k in kv]
    table = np.zeros((B, NB), np.int32)
    for b in range(B):
        table[b] = 1 + b * NB + np.arange(NB)
    state = np.full((1 + B * NB, BS, 2 * C2), np.nan, np.float32)
    after = state.copy()
    for b, (s, n) in enumerate(zip(starts, lens)):
        for p in range(s + n):
            blk, off = table[b][p // BS], p % BS
            row = np.concatenate([kv[b][p], sc[b][p]])
            if p < s:
                state[blk, off] = row
            after[blk, off] = row
    rows, cos, sin = [], [], []
    for b, (s, n) in enumerate(zip(starts, lens)):
        for j in range(s // R_, (s + n) // R_):
            prev = [(j * R_ - R_ + i, slice(0, D)) for i in range(R_)]
            cur = [(j * R_ + i, slice(D, 2 * D)) for i in range(R_)]
            if bug == "halves":
                prev = [(p, slice(D, 2 * D)) for p, _ in prev]
                cur = [(p, slice(0, D)) for p, _ in cur]
            kvw = np.array([kv[b][p][h] if p >= 0 else np.zeros(D) for p, h in prev + cur], np.float64)
            scw = np.array([sc[b][p][h] if p >= 0 else np.full(D, -np.inf) for p, h in prev + cur], np.float64)
            w = np.exp(scw - scw.max(axis=0))
            w /= w.sum(axis=0)
            c = (w * kvw).sum(axis=0)
            y = c / np.sqrt((c * c).sum() / D + 1e-6) * gamma
            pos = j * R_ + (R_ - 1 if bug == "rope_pos" else 0)
            cs, sn = rope_row(pos)
            a, e = y[D - 64::2].copy(), y[D - 63::2].copy()
            y[D - 64::2] = a * cs[0::2] - e * sn[0::2]
            y[D - 63::2] = e * cs[1::2] + a * sn[1::2]
            rows.append(num.bf16_rne(y))
            c0, s0 = rope_row(j * R_)
            cos.append(c0)
            sin.append(s0)
    T = sum(lens)
    Rr = max(len(rows), min(T, T // R_ + B))
    out = np.zeros((Rr, D))
    cos_t = np.ones((Rr, 64), np.float32)
    sin_t = np.zeros((Rr, 64), np.float32)
    if rows:
        out[:len(rows)] = rows
        cos_t[:len(rows)] = cos
        sin_t[:len(rows)] = sin
    x = np.concatenate([x[s:] for x, s in zip(xs, starts)])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return dict(x=x.astype(BF16), wkv=wkv.astype(BF16), wgate=wgate.astype(BF16), state_cache=state, ape=ape,
                norm_weight=gamma.astype(BF16), rope_sin=sin_t, rope_cos=cos_t, output=out.astype(BF16),
                state_cache_after=after, state_block_table=table, cu_seqlens=cu,
                start_pos=np.array(starts, np.int32))


# ---- v4.indexer_prolog -------------------------------------------------------------------------------------------
def dyn_quant(x_bits, amax_zero):
    """The A3 kernels' dynamic_quant_int8 per row of x (bf16 bits, uint16 [..., D]):

        amax  = max |x|                      scale = fl32(amax * fl32(1/127))  -> fp16
        inv   = fl32(127 / amax)             codes = clip(rint(fl32(x * inv)), -127, 127)  int8

    A row with amax 0: codes 0, scale 1 (amax_zero="scale1") or 0; a row with a NaN: codes 0, scale the CUDA-canonical
    fp16 NaN 0x7FFF; an inf in the row (inv 0): inf * 0 codes 0. Returns (codes int8, scale fp16)."""
    x = x_bits.view(ml_dtypes.bfloat16).astype(np.float32)
    with np.errstate(all="ignore"):
        amax = np.max(np.abs(x), axis=-1)
        nan = np.isnan(x).any(axis=-1)
        scale = (amax * np.float32(1.0 / 127.0)).astype(np.float32)
        inv = (np.float32(127.0) / amax).astype(np.float32)
        codes = np.rint((x * inv[..., None]).astype(np.float32))
    zero = amax == 0
    codes[zero | nan] = 0
    codes[np.isnan(codes)] = 0  # inf * 0 (an inf in the row: inv = 0)
    scale[zero] = 1.0 if amax_zero == "scale1" else 0.0
    scale[nan] = np.nan
    s16 = scale.astype(np.float16).view(np.uint16).copy()
    s16[np.isnan(scale)] = 0x7FFF  # the CUDA-canonical NaN the reference writes
    return np.clip(codes, -127, 127).astype(np.int8), s16.view(np.float16)


def indexer_prolog(inputs, attrs, pad_written=False):
    """v4.indexer_prolog (the A3 kernels, spec v4 §3.2-3.4), from the dump's raw inputs (bf16 as uint16 bits):

        q_int8, q_scale   = dyn_quant(q)
        weights_fp16      = fp16(bf16(fl32(w * 0.011048543456039806)))      (the A3 head weights: 128^-0.5 * 64^-0.5)
        k8, k_scale       = dyn_quant(k), scattered into k_cache / k_scale_cache: slot_mapping [T, 2] = (block,
                            offset) pairs (a negative block is padding, skipped) or [T] flat slots (-1 skipped)

    attrs: the case attrs (amax_zero). Returns the five outputs as stored (fp16 tensors as uint16 bits):
    q_int8, q_scale, weights_fp16, k_cache, k_scale_cache. pad_written (a seeded bug): padding rows written to
    block 0."""
    az = attrs.get("amax_zero", b"scale1")
    az = az.decode() if isinstance(az, bytes) else str(az)
    out = {}
    q8, qs = dyn_quant(inputs["q"], az)
    out["q_int8"], out["q_scale"] = q8, qs.view(np.uint16)
    w = inputs["weights"].view(ml_dtypes.bfloat16).astype(np.float32)
    out["weights_fp16"] = (w * np.float32(0.011048543456039806)).astype(ml_dtypes.bfloat16).astype(np.float16).view(np.uint16)
    k8, ks = dyn_quant(inputs["k"], az)
    kc = inputs["k_cache_in"].copy()
    ksc = inputs["k_scale_cache_in"].copy()
    nblk, bs = kc.shape[0], kc.shape[1]
    kc2 = kc.reshape(nblk * bs, -1)
    ksc2 = ksc.reshape(nblk * bs)
    sm = inputs["slot_mapping"]
    for r in range(k8.shape[0]):
        if sm.ndim == 2:
            blk, off = int(sm[r, 0]), int(sm[r, 1])
            if blk < 0:
                if not pad_written:
                    continue
                blk = 0
            slot = blk * bs + off
        else:
            slot = int(sm[r])
            if slot < 0:
                continue
        kc2[slot] = k8[r]
        ksc2[slot] = ks.view(np.uint16)[r]
    out["k_cache"], out["k_scale_cache"] = kc, ksc
    return out


def indexer_prolog_qpath(inputs, kind, fma=False, neox=False):
    """The query path of v4.indexer_prolog from q_pre, a model of the fp32 kernels: q_rot (bf16 bits [T, H, D]).

    RoPE on the last 64 dims of q_pre (bf16), interleaved pairs (2i, 2i + 1) -- or neox halves (a seeded bug):
        x' = fl32(fl32(x * c) - fl32(y * s)),  y' = fl32(fl32(y * c) + fl32(x * s))   -> bf16
        (fma=True: one rounding of x * c - fl32(y * s), as a fused multiply-add kernel)
    Hadamard, then the scale 128^-0.5:
        kind="ascend"  bf16(r @ H^T) with numpy's fp32 matmul, then bf16(fl32(h * fl32(128^-0.5)))
        kind="fwht"    the fp32 butterflies (a + b, a - b) for h = 1, 2, ..., 64, then the same scale

    inputs: the dump's raw inputs (q_pre bf16 bits, rope_cos / rope_sin fp32 [T, 64] interleave-duplicated)."""
    bf = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    x = inputs["q_pre"].view(ml_dtypes.bfloat16).astype(np.float32)
    T, H, D = x.shape
    c = inputs["rope_cos"][:, 0::2][:, None, :].astype(np.float32)
    s = inputs["rope_sin"][:, 0::2][:, None, :].astype(np.float32)
    r = x.copy()
    base = D - 64
    ia = base + (np.arange(32) if neox else 2 * np.arange(32))
    ib = ia + (32 if neox else 1)
    a, b = x[..., ia], x[..., ib]
    if fma:
        ra = (a.astype(np.float64) * c - (b * s).astype(np.float32)).astype(np.float32)
        rb = (b.astype(np.float64) * c + (a * s).astype(np.float32)).astype(np.float32)
    else:
        ra = ((a * c).astype(np.float32) - (b * s).astype(np.float32)).astype(np.float32)
        rb = ((b * c).astype(np.float32) + (a * s).astype(np.float32)).astype(np.float32)
    r[..., ia], r[..., ib] = bf(ra), bf(rb)
    s32 = np.float32(128 ** -0.5)
    if kind == "ascend":
        h = bf((r.reshape(-1, D) @ num.hadamard_matrix(D).T).astype(np.float32)).reshape(T, H, D)
    else:
        h = r.reshape(-1, D).copy()
        w = 1
        while w < D:
            v = h.reshape(-1, D // (2 * w), 2, w)
            lo, hi = v[:, :, 0, :].copy(), v[:, :, 1, :].copy()
            v[:, :, 0, :], v[:, :, 1, :] = (lo + hi).astype(np.float32), (lo - hi).astype(np.float32)
            h = v.reshape(-1, D)
            w *= 2
        h = h.reshape(T, H, D)
    return (h * s32).astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def vllm_indexer_q(inputs, attrs=None, fma=False, bug=None):
    """v4.indexer_prolog with kernel vllm-cuda: vLLM's fused_indexer_q_rope_quant, FP8 branch (spec v4 §10 "Indexer
    q"), a numpy fp32 model of the Triton kernel for each (token t, head h):

        cos, sin = cos_sin_cache[positions[t], :32], [32:64] (fp32)
        even, odd = x[64 + 2i], x[64 + 2i + 1] (bf16 -> fp32)
        r_even = fl32(fl32(even * cos) - fl32(odd * sin)); r_odd = fl32(fl32(odd * cos) + fl32(even * sin))
            (fma=True: fma(even, cos, -fl32(odd * sin)) etc., ROCm's explicit FMA / a contracting compile)
        r = bf16(r) (GPT-J interleaved pairs on dims 64..127; dims 0..63 unchanged)
        amax = max |dims 0..63 raw, dims 64..127 rounded|
        s = 2^ceil(log2(fl32(max(amax, 1e-4) / 448)))        (IEEE divide, exact power of two)
        q_fp8 = e4m3(fl32(v / s))                              (RNE, no clamp: |v / s| <= 448)
        weights_out = fl32(fl32(fl32(w * s) * softmax_scale) * head_scale)   (scale folded, not stored)

    inputs: index_q [T, H, 128] bf16 bits (uint16), positions [T], cos_sin_cache [P, 64] fp32, index_weights [T, H]
    (bf16 bits or fp32). attrs: softmax_scale (128^-0.5), head_scale (64^-0.5). bug: "no_rope", "hadamard" (planted
    errors). Returns {"q_fp8": uint8 codes [T, H, 128], "weights_out": fp32 [T, H]}."""
    attrs = attrs or {}
    sm = np.float32(attrs.get("softmax_scale", 128 ** -0.5))
    hs = np.float32(attrs.get("head_scale", 64 ** -0.5))
    x = np.asarray(inputs["index_q"]).view(BF16).astype(np.float32)
    T, H, D = x.shape
    cache = np.asarray(inputs["cos_sin_cache"])
    cache = cache.view(BF16).astype(np.float32) if cache.dtype == np.uint16 else cache.astype(np.float32)
    pos = np.asarray(inputs["positions"]).astype(np.int64)
    w = np.asarray(inputs["index_weights"])
    w = w.view(BF16).astype(np.float32) if w.dtype == np.uint16 else w.astype(np.float32)
    cos = cache[pos, :32][:, None, :]
    sin = cache[pos, 32:64][:, None, :]
    v = x.copy()
    if bug != "no_rope":
        ev, od = x[:, :, 64::2], x[:, :, 65::2]
        if fma:
            re = (ev.astype(np.float64) * cos - (od * sin).astype(np.float32)).astype(np.float32)
            ro = (od.astype(np.float64) * cos + (ev * sin).astype(np.float32)).astype(np.float32)
        else:
            re = ((ev * cos).astype(np.float32) - (od * sin).astype(np.float32)).astype(np.float32)
            ro = ((od * cos).astype(np.float32) + (ev * sin).astype(np.float32)).astype(np.float32)
        v[:, :, 64::2] = re.astype(BF16).astype(np.float32)
        v[:, :, 65::2] = ro.astype(BF16).astype(np.float32)
    if bug == "hadamard":
        Hm = num.hadamard_matrix(D)
        v = ((v.astype(np.float64) @ Hm.T).astype(np.float32) * np.float32(D ** -0.5)).astype(BF16).astype(np.float32)
    amax = np.abs(v).max(-1)
    t = (np.maximum(amax, np.float32(1e-4)) / np.float32(448)).astype(np.float32)
    m, e = np.frexp(t.astype(np.float64))
    s = np.ldexp(1.0, np.where(m == 0.5, e - 1, e)).astype(np.float32)  # 2^ceil(log2 t)
    q = (v / s[..., None]).astype(np.float32).astype(num.E4M3)
    wo = (((w * s).astype(np.float32) * sm).astype(np.float32) * hs).astype(np.float32)
    return {"q_fp8": q.view(np.uint8), "weights_out": wo}


# ---- v4.indexer --------------------------------------------------------------------------------------------------
def indexer_a3(t, k, order="forward", bug=None, values=False):
    """v4.indexer: Ascend npu_vllm_quant_lightning_indexer, a model of the A3 int8 pipeline (spec v4 §3.5). Per query
    row at position p (rows in requests: actual_seq_lengths_query cumulative, kv keys actual_seq_lengths_key[b],
    p = kv - qlen + i), over the nvis = (p + 1) // 4 visible compressed keys j (paged through block_table):

        wq[h]   = fp16(w16[h] * qs16[h])                     (an exact product, one RNE)
        I[h, j] = q8[h] . k8_j                               (int32)
        s[h, j] = fp16(max(I, 0) * 2^-10)
        L[j]    = sum_h fl32(wq[h] * s[h, j])                 (fp32 sums, heads in `order`: "forward" or "backward";
                                                              the cube's order is unknown, both must pass)
        score   = fl32(L * ks16_j)
        indices = top k of score, descending, ties to the lower index, NaN first, -1 padded; nvis <= 0: all -1

    t: the dump's raw inputs (query [T, H, D] int8, key [blocks, bs, 1, D] int8, fp16 tensors as uint16 bits:
    query_dequant_scale [T, H], weights [T, H], key_dequant_scale; block_table, actual_seq_lengths_query/_key).
    Returns sparse_indices [T, 1, k] int32, and with values=True also the fp32 scores at them (-inf where -1).
    bug (seeded bugs): "visibility" (one key too many), "relu_after", "no_key_scale", "values_doubled"."""
    with np.errstate(all="ignore"):  # inf * 0 in the nonfinite golden: NaN, as on the device
        idx, val = _indexer_a3(t, k, order, bug)
    return (idx, val) if values else idx


def _indexer_a3(t, k, order, bug):
    q = t["query"].astype(np.int32)                      # [T, H, D]
    qs = t["query_dequant_scale"].view(np.float16)       # [T, H]
    w = t["weights"].view(np.float16)
    key = t["key"].reshape(t["key"].shape[0] * t["key"].shape[1], -1).astype(np.int32)
    ks = t["key_dequant_scale"].reshape(-1).view(np.float16)
    bt = t["block_table"]
    aq = t["actual_seq_lengths_query"].astype(np.int64)
    ak = t["actual_seq_lengths_key"].astype(np.int64)
    bs = t["key"].shape[1]
    T, H, _ = q.shape
    out = np.full((T, 1, k), -1, np.int32)
    vals = np.full((T, 1, k), -np.inf, np.float32)
    start = 0
    for b in range(len(aq)):
        qlen = int(aq[b]) - start
        kv = int(ak[b]) + (1 if bug == "visibility" else 0)
        for i in range(qlen):
            row = start + i
            pos = kv - qlen + i
            nvis = (pos + 1) // 4 if pos + 1 > 0 else 0
            if nvis <= 0:
                continue
            j = np.arange(nvis)
            slots = bt[b, j // bs].astype(np.int64) * bs + j % bs
            wq = (w[row].astype(np.float32) * qs[row].astype(np.float32)).astype(np.float16)  # exact product, one RNE
            I = q[row] @ key[slots].T                                                          # [H, nvis] int32
            if bug == "relu_after":
                s = (I.astype(np.float64) * 2.0**-10).astype(np.float16)
                prods = np.maximum(wq.astype(np.float32)[:, None] * s.astype(np.float32), 0)
            else:
                s = (np.maximum(I, 0).astype(np.float64) * 2.0**-10).astype(np.float16)
                prods = wq.astype(np.float32)[:, None] * s.astype(np.float32)              # exact in fp32
            hs = range(H) if order == "forward" else range(H - 1, -1, -1)
            L = np.zeros(nvis, np.float32)
            for h in hs:
                L = (L + prods[h]).astype(np.float32)
            scale = np.ones(nvis, np.float32) if bug == "no_key_scale" else ks[slots].astype(np.float32)
            score = (L * scale).astype(np.float32)
            # descending score, ties -> lower index; NaN first (the tool's documented rule, as torch.topk: the Ascend
            # sort's NaN order is not documented)
            order_idx = np.lexsort((j, -score.astype(np.float64), ~np.isnan(score)))
            sel = order_idx[: min(k, nvis)]
            out[row, 0, : len(sel)] = sel
            vals[row, 0, : len(sel)] = score[sel] * (np.float32(2.0) if bug == "values_doubled" else np.float32(1.0))
        start += qlen
    return out, vals


def indexer_float(t, attrs, bug=None, order="forward", logits="fp32"):
    """v4.indexer, the float variants (attrs["variant"]), models of their fp32 / bf16 arithmetic over the same
    visible keys as indexer_a3:

        vllm-cuda  fp32 dots of the e4m3 codes (numpy's order), ReLU, fl32(w * I), fp32 head sum (in `order`),
                   fl32(L * key scale); the selected set emitted in a shuffled order (an unsorted top-k kernel)
        ref-bf16   torch's bf16 tensors: I = bf16(fp32 dot), ReLU, bf16(w * I), bf16(fp32 sum over the heads); sorted,
                   ties to the lower index

    t: the dump's raw inputs (codes / bf16 bits as stored). Returns sparse_indices [T, 1, sparse_count] int32.
    bug (seeded bugs): "relu_after", "no_key_scale" (vllm-cuda). logits="torch" (vllm-cuda): vLLM's torch fallback
    fp8_mqa_logits_torch where DeepGEMM is absent: I = bf16(fp32 dot), fl32(I * key scale), ReLU, fl32(* w), fp32 head
    sum (no final key-scale multiply)."""
    variant = attrs["variant"]
    k = int(attrs["sparse_count"])
    if variant == "vllm-cuda":
        dec = lambda a: a.view(ml_dtypes.float8_e4m3fn).astype(np.float32)  # noqa: E731
        ks = t["key_dequant_scale"].reshape(-1).astype(np.float32)
        w = t["weights"].astype(np.float32)
    else:
        dec = lambda a: a.view(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
        ks = None
        w = t["weights"].view(ml_dtypes.bfloat16).astype(np.float32)
    bf = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    q = dec(t["query"])
    key = dec(t["key"]).reshape(t["key"].shape[0] * t["key"].shape[1], -1)
    bt = t["block_table"]
    aq, ak = t["actual_seq_lengths_query"].astype(np.int64), t["actual_seq_lengths_key"].astype(np.int64)
    bs = t["key"].shape[1]
    T, H, _ = q.shape
    out = np.full((T, 1, k), -1, np.int32)
    rng = np.random.default_rng(0)
    start = 0
    for b in range(len(aq)):
        qlen = int(aq[b]) - start
        for i in range(qlen):
            row, pos = start + i, int(ak[b]) - qlen + i
            nvis = (pos + 1) // 4 if pos + 1 > 0 else 0
            if nvis <= 0:
                continue
            j = np.arange(nvis)
            slots = bt[b, j // bs].astype(np.int64) * bs + j % bs
            I = (q[row] @ key[slots].T).astype(np.float32)                         # [H, nvis]
            if variant == "ref-bf16":
                I = bf(I)
            torch = variant == "vllm-cuda" and logits == "torch"
            if torch:
                I = (bf(I) * ks[slots][None, :]).astype(np.float32)
            p = (w[row][:, None] * (I if bug == "relu_after" else np.maximum(I, 0))).astype(np.float32)
            if bug == "relu_after":
                p = np.maximum(p, 0)
            if variant == "ref-bf16":
                p = bf(p)
            L = np.zeros(nvis, np.float32)
            for h in (range(H) if order == "forward" else range(H - 1, -1, -1)):
                L = (L + p[h]).astype(np.float32)
            if variant == "ref-bf16":
                L = bf(L)
            elif not torch:
                L = (L * (1.0 if bug == "no_key_scale" else ks[slots])).astype(np.float32)
            sel = np.lexsort((j, -L.astype(np.float64)))[: min(k, nvis)]
            if variant == "vllm-cuda":
                sel = rng.permutation(sel)
            out[row, 0, : len(sel)] = sel
        start += qlen
    return out


# ---- attn.v4_sparse ----------------------------------------------------------------------------------------------
def sparse_attn_keys(t, attrs, bug=None):
    """The visible keys of every query row, in the kernel's order: per row (request b, position p = kv - q_len + i),
    the ORI window [max(0, p - ori_win_left), min(p + ori_win_right, kv - 1)] from the paged ori_kv cache, then (when
    cmp_ratio r > 1) the compressed entries from cmp_kv: the cmp_sparse_indices list prefix before its first -1,
    limited to entries j < (p + 1) // r (C4), or every entry j < (p + 1) // r when no list is given (C128).

    t: the inputs with bf16 decoded to float64 (q, ori_kv [blocks, bs, 1, D], cmp_kv) and the int tensors raw.
    Returns one float64 array [n, D] per row.
    bug (seeded bugs): "window_wide" (one key too many), "no_current" (the row's own position dropped), "no_cmp"."""
    ratio = int(attrs.get("cmp_ratio", 1))
    wl, wr = int(attrs.get("ori_win_left", 127)), int(attrs.get("ori_win_right", 0))
    cu, kvl = t["cu_seqlens_q"].astype(np.int64), t["seqused_kv"].astype(np.int64)
    ori, obt = t["ori_kv"][:, :, 0, :], t["ori_block_table"]
    bs_o = ori.shape[1]
    out = []
    for b in range(len(kvl)):
        q_len, kv = int(cu[b + 1] - cu[b]), int(kvl[b])
        for i in range(q_len):
            p = kv - q_len + i
            keys = []
            if p >= 0:
                lo, hi = max(0, p - wl - (1 if bug == "window_wide" else 0)), min(p + wr, kv - 1)
                if bug == "no_current":
                    hi = min(hi, p - 1)
                keys += [ori[obt[b, s // bs_o], s % bs_o] for s in range(lo, hi + 1)]
            if ratio > 1 and p >= 0 and bug != "no_cmp":
                cmp, cbt = t["cmp_kv"][:, :, 0, :], t["cmp_block_table"]
                bs_c, lim = cmp.shape[1], (p + 1) // ratio
                if "cmp_sparse_indices" in t:
                    lst = []
                    for j in t["cmp_sparse_indices"][int(cu[b]) + i, 0, : min(t["cmp_sparse_indices"].shape[2], lim)]:
                        if j == -1:
                            break
                        lst.append(int(j))
                else:
                    lst = list(range(lim))
                keys += [cmp[cbt[b, j // bs_c], j % bs_c] for j in lst]
            out.append(np.array(keys, np.float64).reshape(len(keys), ori.shape[-1]))
    return out


def sparse_attn(t, attrs, bug=None):
    """attn.v4_sparse: Ascend npu_sparse_attn_sharedkv from its definition (spec v4 §4.2-4.3), float64, rounded once
    to bf16. Per row, over its keys K = sparse_attn_keys (keys = values):

        z   = softmax_scale * q . K^T                                  [N, n]
        out = sum_j e^(z_j - m) K_j / (sum_j e^(z_j - m) + e^(sink - m)),   m = max(max_j z_j, sink)

    (the sink only in the denominator); a row with no key: out 0; NaN / +inf logits or a NaN sink: out NaN.
    t as sparse_attn_keys takes it (plus sinks [N] fp32 optional). Returns out bf16 [T, N, D].
    bug (seeded bugs): those of sparse_attn_keys, and "no_sink"."""
    q = t["q"]
    T, N, D = q.shape
    scale = float(attrs.get("softmax_scale", np.shape(t["q"])[-1] ** -0.5))  # absent: head_dim^-0.5 (512 in V4)
    sinks = t.get("sinks") if bug != "no_sink" else None
    out = np.zeros((T, N, D), np.float64)
    with np.errstate(all="ignore"):
        for r, K in enumerate(sparse_attn_keys(t, attrs, bug)):
            if len(K) == 0:
                continue
            z = scale * (q[r] @ K.T)  # [N, n]
            m = z.max(axis=1, keepdims=True)
            if sinks is not None:
                m = np.maximum(m, sinks.astype(np.float64)[:, None])
            e = np.exp(z - m)
            den = e.sum(axis=1, keepdims=True) + (np.exp(sinks.astype(np.float64)[:, None] - m) if sinks is not None else 0.0)
            o = (e @ K) / den
            nan = np.isnan(z).any(axis=1) | np.isposinf(z).any(axis=1)
            if sinks is not None:
                nan |= np.isnan(sinks)
            o[nan] = np.nan
            out[r] = o
    return out.astype(BF16)


def sparse_attn_fp32(t, attrs, kernel="a3", tile=64):
    """attn.v4_sparse, models of the kernels' fp32 online softmax over tiles of `tile` keys in key order:

        kernel="a3"        the Ascend A3 kernel (scfa_block_vector.h): running max m starts at the sink, the sum l at
                           1; P = e^(z - m) rounded to bf16 half away from zero before P . V; o = acc / l
        kernel="flashmla"  a FlashMLA-style kernel: m from -inf, l from 0, P rounded to bf16 (RNE); the sink factor
                           1 / (1 + e^(sink - lse)) applied at the end

    t as sparse_attn takes it. Returns out bf16 [T, N, D]."""
    f32 = np.float32
    q = t["q"].astype(f32)
    T, N, D = q.shape
    scale = f32(attrs.get("softmax_scale", np.shape(t["q"])[-1] ** -0.5))
    sinks = t.get("sinks")
    out = np.zeros((T, N, D), f32)
    with np.errstate(all="ignore"):
        for r, K in enumerate(sparse_attn_keys(t, attrs)):
            K = K.astype(f32)
            if len(K) == 0:
                continue
            if kernel == "a3" and sinks is not None:
                m, l = sinks.astype(f32).copy(), np.ones(N, f32)
            else:
                m, l = np.full(N, -np.inf, f32), np.zeros(N, f32)
            acc = np.zeros((N, D), f32)
            for s0 in range(0, len(K), tile):
                Kt = K[s0:s0 + tile]
                z = (q[r] @ Kt.T).astype(f32) * scale
                m2 = np.maximum(m, z.max(axis=1))
                alpha = np.where(m == m2, f32(1), np.exp(m - m2)).astype(f32)
                P = np.exp(z - m2[:, None]).astype(f32)
                l = (l * alpha + P.sum(axis=1, dtype=f32)).astype(f32)
                pb = num.bf16_half_away(P) if kernel == "a3" else P.astype(BF16).astype(f32)
                acc = (acc * alpha[:, None] + (pb @ Kt).astype(f32)).astype(f32)
                m = m2
            o = (acc / l[:, None]).astype(f32)
            if kernel != "a3" and sinks is not None:
                lse = m + np.log(l)
                o = (o * (f32(1) / (f32(1) + np.exp(sinks.astype(f32) - lse)))[:, None]).astype(f32)
            out[r] = o
    return out.astype(BF16)


# ---- attn.v4_out -------------------------------------------------------------------------------------------------
def attn_out(t, attrs, bug=None):
    """attn.v4_out: DeepSeek-V4's attention output on Ascend, a model of the kernels' fp32 arithmetic (spec v4 §4.4),
    each output rounded to bf16 and fed to the next:

        o_rot  = bf16(inplace_partial_rotary_mul(o, cos, -sin))   interleaved RoPE on the last rope_head_dim dims:
                 y0 = x0 * c - x1 * s', y1 = x1 * c + x0 * s', s' = -sin
        o_lora = bf16(npu_transpose_batchmatmul(o_rot, wo_a))     per head group g of o_groups: [T, G, N*D/G] x
                 wo_a[g] [r, N*D/G]^T (fp32)
        output = bf16(o_lora [T, G*r] @ wo_b^T)                   (fp32)

    t: the inputs with bf16 decoded to fp32 (o [T, N, D], cos / sin [T, rope], wo_a, wo_b). Returns (o_rot, o_lora,
    output) bf16. bug (seeded bugs): "forward" (rotation by +sin), "groups" (wo_a's groups shifted by one)."""
    f32 = np.float32
    o, cos, sin = t["o"], t["cos"].reshape(t["o"].shape[0], -1).astype(f32), t["sin"].reshape(t["o"].shape[0], -1).astype(f32)
    T, N, D = o.shape
    G, rope = int(attrs.get("o_groups", 8)), int(attrs.get("rope_head_dim", 64))
    with np.errstate(all="ignore"):
        x = o[:, :, D - rope:]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        c, s = cos[:, None, 0::2], (-sin if bug != "forward" else sin)[:, None, 0::2]
        y = np.empty_like(x)
        y[..., 0::2] = x0 * c - x1 * s  # npu_rotary_mul interleave with sin' = -sin
        y[..., 1::2] = x1 * c + x0 * s
        rot = o.copy()
        rot[:, :, D - rope:] = y
        rot = rot.astype(BF16).astype(f32)
        a = rot.reshape(T, G, N * D // G)
        wa = t["wo_a"].reshape(G, -1, N * D // G)
        if bug == "groups":
            wa = np.roll(wa, -1, axis=0)
        lora = np.einsum("tgk,grk->tgr", a, wa, dtype=f32).astype(BF16).astype(f32)
        out = (lora.reshape(T, -1) @ t["wo_b"].T).astype(f32).astype(BF16)
    return rot.astype(BF16), lora.astype(BF16), out


# ---- v4.compressor_cache -----------------------------------------------------------------------------------------
def _e4m3_block(v, rule="ue8m0"):
    """One FP8 block of bf16-valued fp32 v: (codes uint8, scale fp32). ue8m0: s = 2^ceil(log2(fl32(max(amax, 1e-4) *
    fl32(1/448)))); "fp32" (a seeded bug): s = fl32(max(amax, 1e-4) * fl32(1/448)). codes = e4m3(clamp(v / s, +-448))
    by the rational encoder (numerics.encode)."""
    amax = np.float32(max(float(np.abs(v).max()), 1e-4))
    t = np.float32(amax * np.float32(1.0 / 448.0))
    s = num.ceil_pow2_f32(t) if rule == "ue8m0" else t
    codes = np.array([num.encode(float(np.clip(np.float64(x) / np.float64(s), -448.0, 448.0)), "e4m3") for x in v], np.uint8)
    return codes, np.float32(s)


def compressor_vllm(t, ratio=4, rope=64, eps=1e-6, bug=None, approx=0.0):
    """v4.compressor_cache: vLLM's CUDA compressor kernels (spec v4 §10) in numpy float32, from the kernels' definitions:
    save_partial_states, then _fused_kv_compress_norm_rope_insert_{sparse,indexer}_attn. `t` holds the kernels'
    tensors: kv_score [T, 2*coff*D] fp32, ape [r, coff*D], norm_weight [D] (bf16 values), cos_sin_cache [P, rope]
    (cos | sin), positions, token_to_req_indices, slot_mapping (state slots, -1 pad), block_table, kv_slot_mapping,
    state_cache_in [nb, sbs, 2*coff*D], kv_cache_in uint8 [kb, kbs, 584 | 132]. Returns (state_cache, kv_cache).

      state: row slot = [kv | fl32(score + ape[p % r])] for every token with slot >= 0;
      entry per token with slot >= 0, (p + 1) % r == 0, kv slot >= 0: rows p - coff*r + 1 .. p read through the block
      table from the state after the save (a-half [0, D) for the first r rows when coff = 2, else the b-half; rows
      before 0 masked: score -inf, kv 0), fp32 softmax over rows per channel, c = sum w kv, normed = c * (1 /
      sqrt(sum c^2 / D + eps)) * gamma, GPT-J RoPE of the last `rope` dims at (p // r) * r;
      D 512: codes of bf16(normed[:448]) in 7 ue8m0 blocks of 64 (e8m0 bytes, pad 0), bf16 rope dims, the MODEL1 block
      layout (kbs * 576 token bytes, then kbs * 8 scale bytes); D 128: one ue8m0 block over bf16(all 128 RoPE'd dims),
      codes at t*128 in the block, the fp32 scale at kbs*128 + 4t.
    bug (seeded): "hadamard" (D 128: H128 * 128^-0.5 before the cast), "pad_written" (pads save into slot 0),
    "kv_slot_next" (record one slot further), "scale_fp32" (scale not rounded to a power of two), "no_ape".
    approx: a kernel with approximate exp / divide (Triton's): the pooled c of channel ch scaled by
    (1 + approx * (-1)^ch) before the norm, i.e. a relative error of `approx` in every weighted sum."""
    f32 = np.float32
    ks = np.asarray(t["kv_score"], f32)
    pos, req = np.asarray(t["positions"]).astype(np.int64), np.asarray(t["token_to_req_indices"]).astype(np.int64)
    sm, km = np.asarray(t["slot_mapping"]).astype(np.int64), np.asarray(t["kv_slot_mapping"]).astype(np.int64)
    bt, cs, ape = np.asarray(t["block_table"]).astype(np.int64), np.asarray(t["cos_sin_cache"], f32), np.asarray(t["ape"], f32)
    gamma = np.asarray(t["norm_weight"], f32)
    D = gamma.shape[0]
    coff = 2 if ratio == 4 else 1
    C2 = coff * D
    st = np.array(t["state_cache_in"], f32, copy=True)
    nb, sbs, W = st.shape
    flat = st.reshape(-1, W)
    for i in range(len(sm)):
        s = int(sm[i])
        if s < 0:
            if bug != "pad_written":
                continue
            s = 0
        flat[s, :C2] = ks[i, :C2]
        flat[s, C2:] = ks[i, C2:] if bug == "no_ape" else (ks[i, C2:] + ape[pos[i] % ratio]).astype(f32)
    kc = np.array(t["kv_cache_in"], np.uint8, copy=True)
    kb, kbs, rec = kc.shape
    raw = kc.reshape(-1)
    for i in range(len(sm)):
        p, k = int(pos[i]), int(km[i])
        if sm[i] < 0 or (p + 1) % ratio or k < 0:
            continue
        if bug == "kv_slot_next":
            k = (k + 1) % (kb * kbs)
        n = coff * ratio
        score = np.full((n, D), -np.inf, f32)
        kv = np.zeros((n, D), f32)
        for r_ in range(n):
            q = p - n + 1 + r_
            if q < 0:
                continue
            row = flat[bt[req[i], q // sbs] * sbs + q % sbs]
            h = D if (coff == 2 and r_ >= ratio) else 0
            kv[r_], score[r_] = row[h:h + D], row[C2 + h:C2 + h + D]
        e = np.exp((score - score.max(axis=0)).astype(f32)).astype(f32)
        w = (e / e.sum(axis=0, dtype=f32)).astype(f32)
        c = (kv * w).sum(axis=0, dtype=f32)
        if approx:
            c = (c.astype(np.float64) * (1 + approx * np.where(np.arange(D) % 2 == 0, 1.0, -1.0))).astype(f32)
        rr = f32(1.0) / np.sqrt(f32((c * c).sum(dtype=f32) / f32(D)) + f32(eps), dtype=f32)
        normed = (c * rr * gamma).astype(f32)
        cp = p // ratio * ratio
        co, si = cs[cp, :rope // 2], cs[cp, rope // 2:]
        ev, od = normed[D - rope::2].copy(), normed[D - rope + 1::2].copy()
        rot = normed.copy()
        rot[D - rope::2] = ev * co - od * si
        rot[D - rope + 1::2] = od * co + ev * si
        blk, off = k // kbs, k % kbs
        base = blk * kbs * rec
        rule = "fp32" if bug == "scale_fp32" else "ue8m0"
        if D == 512:
            nope = num.to_bf16(normed[:448]).astype(f32)
            tok = base + off * 576
            for j in range(7):
                codes, s = _e4m3_block(nope[64 * j:64 * j + 64], rule)
                raw[tok + 64 * j:tok + 64 * j + 64] = codes
                ex = int(np.frexp(np.float64(s))[1]) - 1
                raw[base + kbs * 576 + off * 8 + j] = min(max(ex + 127, 0), 255)
            raw[base + kbs * 576 + off * 8 + 7] = 0
            raw[tok + 448:tok + 576] = num.to_bf16(rot[448:]).view(np.uint16).astype("<u2").view(np.uint8)
        else:
            if bug == "hadamard":
                rot = (num.hadamard_matrix(D).astype(np.float64) @ rot.astype(np.float64) / np.sqrt(D)).astype(f32)
            codes, s = _e4m3_block(num.to_bf16(rot).astype(f32), rule)
            raw[base + off * D:base + off * D + D] = codes
            raw[base + kbs * D + 4 * off:base + kbs * D + 4 * off + 4] = np.array([s], "<f4").view(np.uint8)
    return st, kc
