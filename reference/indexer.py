"""DeepSeek-V3.2 lightning indexer stages (spec v32), modelled from their definitions in numpy.

  act_quant_ue8m0    indexer.quant: DeepSeek's act_quant (fp8 e4m3 codes + ue8m0 block scales)
  page_tokens        the indexer K-cache page layouts (DeepGEMM planar, ROCm aiter preshuffle / row-major page 1) as
                     their readers see a page: what indexer.kcache_store must have written where
  paged_logits       indexer.logits_paged / indexer.fused: DeepGEMM fp8_paged_mqa_logits, exact in float64
  canonical_order    indexer.topk / indexer.fused: the canonical top-k order (score descending, ties to the lower
                     position)
  mqa_logits_torch   indexer.logits_ragged, kernel vllm-torch: vLLM's fp8_mqa_logits_torch (bf16 head scores) in fp32
  paged_logits_torch indexer.logits_paged, kernel vllm-torch: vLLM's fp8_paged_mqa_logits_torch (decode path, fp32)
  npu_lightning      indexer.npu_lightning: the Ascend A2/A3 npu_lightning_indexer (ops-transformer
                     lightning_indexer), an fp32 model of the kernel's arithmetic, with its context-parallel split

Not modelled here: indexer.prolog, and indexer.logits_ragged / the general indexer.topk, whose numpy models are the
shipped pytest example scripts/examples/pytest_torch_kernel/test_logits_topk_numpy.py (mqa_logits, topk_indices),
kept self-contained for users of the kit.
"""
import numpy as np

from . import numerics as num


# ---- indexer.quant -----------------------------------------------------------------------------------------------
def act_quant_ue8m0(x_bf16, block=128):
    """indexer.quant with scale_fmt=ue8m0 (spec v32 §2.5; DeepSeek inference/kernel.py act_quant): per block of
    `block` values of a row,

        amax = max(max |x|, 1e-4)                     (fp32)
        s    = 2^ceil(log2(fl32(amax * fl32(1/448))))  (the ue8m0 rule, num.ceil_pow2_f32)
        y    = e4m3(clip(fl32(x / s), -448, 448))      (one RNE into fp8 e4m3fn)

    x_bf16 [T, K] bf16 (or its fp32 values), K a multiple of block. Returns (y [T, K] float8_e4m3fn,
    s [T, K // block] fp32)."""
    T, K = x_bf16.shape
    xf = x_bf16.astype(np.float32).reshape(T, K // block, block)
    amax = np.maximum(np.abs(xf).max(-1), np.float32(1e-4)).astype(np.float32)
    t = (amax * np.float32(1.0 / 448.0)).astype(np.float32)
    s = num.ceil_pow2_f32(t)
    y = np.clip(xf / s[..., None], -448, 448).astype(num.E4M3).reshape(T, K)
    return y, s


# ---- the indexer K-cache page layouts ----------------------------------------------------------------------------
def page_tokens(page, layout, D=128):
    """One page of the indexer K cache, bytes [page_size, 1, D + 4] uint8 -> (codes [page_size, D] uint8,
    scales [page_size] fp32) as the kernels read it: the page's page_size * D fp8 codes first, then page_size fp32
    scales (DeepGEMM's planar page).

    layout "aiter_preshuffle" (ROCm aiter, the gfx1250 Gluon reader of _gluon_deepgemm_fp8_paged_mqa_logits_preshuffle,
    aiter e4048607): the values viewed as (page_size // 16, D // 32, 2, 16, 16) and permuted (0, 3, 1, 2, 4) give
    [page_size, D]; any other layout ("indexer_kcache_planar", "aiter_rowmajor_p1" = page_size 1) is token-major."""
    ps = page.shape[0]
    flat = page.reshape(-1)
    vals, sc = flat[: ps * D], flat[ps * D:].view(np.float32)
    if layout == "aiter_preshuffle":
        codes = vals.reshape(ps // 16, D // 32, 2, 16, 16).transpose(0, 3, 1, 2, 4).reshape(ps, D)
    else:
        codes = vals.reshape(ps, D)
    return codes, sc


# ---- indexer.logits_paged / indexer.fused ------------------------------------------------------------------------
def paged_logits(ins, layout="indexer_kcache_planar"):
    """DeepGEMM fp8_paged_mqa_logits from its definition, exact in float64 (fp8 products and their D-term sums are
    exact there):

        logit[r, j] = (sum_h max(q[b, t, h] . k_j, 0) * w[r, h]) * kscale_j,   r = b * next_n + t,  0 <= j < n_r

    with k_j / kscale_j the codes and scale of key j of request b, read through block_table[b, j // page_size] and
    the layout (page_tokens); n_r = context_lens[b] - next_n + t + 1 (context_lens [B]) or context_lens[b, t]
    (context_lens [B, next_n]).

    ins: the dump's raw inputs as h5py reads them: q [B, next_n, H, D] e4m3 codes (uint8), kv_cache
    [P, page_size, 1, D + 4] uint8, weights [B * next_n, H] fp32, block_table [B, max_pages], context_lens.
    Returns one float64 array [n_r] per row r: the exact logits of the row's valid keys."""
    q, cache, w, bt, cl = ins["q"], ins["kv_cache"], ins["weights"], ins["block_table"], ins["context_lens"]
    B, NN, H, D = q.shape
    ps = cache.shape[1]
    rows = []
    for b in range(B):
        for t in range(NN):
            n = int(cl[b]) - NN + t + 1 if cl.ndim == 1 else int(cl[b, t])
            out = np.empty(max(n, 0))
            for j in range(max(n, 0)):
                codes, sc = page_tokens(cache[bt[b, j // ps]], layout, D)
                s = num.E4M3_VALUES[q[b, t]] @ num.E4M3_VALUES[codes[j % ps]]
                out[j] = float(np.sum(np.maximum(s, 0.0) * w[b * NN + t].astype(np.float64))) * float(sc[j % ps])
            rows.append(out)
    return rows


# ---- vLLM's torch logits fallbacks (kernel profile vllm-torch) -------------------------------------------------
def _head_sum(p, order):
    """fp32 sum over axis 0 of p [H, ...]: "fixed" = h = 0..H-1 in turn from +0; "pairwise" = a balanced tree
    (halves summed recursively, as torch / numpy reduce): two of the orders a torch reduction may take."""
    if order == "fixed":
        s = np.zeros(p.shape[1:], np.float32)
        for h in range(p.shape[0]):
            s = (s + p[h]).astype(np.float32)
        return s
    if p.shape[0] == 1:
        return p[0]
    m = p.shape[0] // 2
    return (_head_sum(p[:m], order) + _head_sum(p[m:], order)).astype(np.float32)


def mqa_logits_torch(q, kv, kv_scale, weights, ks, ke, order="fixed", round_bf16=True, perturb=None):
    """vLLM's fp8_mqa_logits_torch (hw_agnostic/attention/kernels/fp8_logits_torch.py) in numpy fp32:

        score[h, m, n] = bf16(fl32 dot(q[m, h], k[n]))       (einsum of the bf16-cast operands: a bf16 output)
        t = fl32(fl32(score) * kv_scale[n]);  r = relu(t);  p = fl32(r * weights[m, h])
        logit[m, n] = fp32 sum over h of p (order: "fixed" or "pairwise"), -inf outside [ks[m], ke[m])

    q [M, H, D] / kv [N, D] e4m3 codes (uint8), kv_scale [N] fp32, weights [M, H] fp32, ks / ke [M]. The dot is
    summed d = 0..D-1 in fp32 (products of e4m3 values are exact in fp32). round_bf16=False keeps the fp32 score
    (a planted bug of this producer: not caught by the bound, which admits it). perturb(score) may alter the bf16
    scores (tests: one bf16 ulp). Returns fp32 [M, N]."""
    qf = num.E4M3_VALUES[q].astype(np.float32)
    kf = num.E4M3_VALUES[kv].astype(np.float32)
    M, H, D = qf.shape
    N = kf.shape[0]
    dot = np.zeros((H, M, N), np.float32)
    for d in range(D):
        dot = (dot + (qf[:, :, d].T[:, :, None] * kf[None, None, :, d])).astype(np.float32)
    score = dot.astype(num.BF16).astype(np.float32) if round_bf16 else dot
    if perturb is not None:
        score = perturb(score)
    t = (score * kv_scale.astype(np.float32)[None, None, :]).astype(np.float32)
    r = np.where(t < 0, np.float32(0), t)
    p = (r * weights.astype(np.float32).T[:, :, None]).astype(np.float32)
    logits = _head_sum(p, order)
    n = np.arange(N)[None, :]
    mask = (n >= ks[:, None]) & (n < ke[:, None])
    return np.where(mask, logits, np.float32(-np.inf)).astype(np.float32)


def paged_logits_torch(ins, width, layout="indexer_kcache_planar", order="fixed"):
    """vLLM's fp8_paged_mqa_logits_torch, next_n == 1 path, in numpy fp32: per request b and key j < context_lens[b]
    (through block_table and the layout), s_h = fl32 dot(q[b, 0, h], k_j) (d in turn), p_h = fl32(relu(s_h) w[b, h]),
    S = fp32 head sum (order), logit = fl32(S * kscale_j); -inf elsewhere. Returns fp32 [B, width] (width = the
    stage's max_context_len)."""
    q, cache, w, bt, cl = ins["q"], ins["kv_cache"], ins["weights"], ins["block_table"], ins["context_lens"]
    B, NN, H, D = q.shape
    assert NN == 1
    ps = cache.shape[1]
    out = np.full((B, width), -np.inf, np.float32)
    for b in range(B):
        n = int(cl[b])
        if n <= 0:
            continue
        qf = num.E4M3_VALUES[q[b, 0]].astype(np.float32)
        ks = np.empty((n, D), np.float32)
        sc = np.empty(n, np.float32)
        for j in range(n):
            codes, s = page_tokens(cache[bt[b, j // ps]], layout, D)
            ks[j] = num.E4M3_VALUES[codes[j % ps]]
            sc[j] = s[j % ps]
        dot = np.zeros((H, n), np.float32)
        for d in range(D):
            dot = (dot + qf[:, d][:, None] * ks[None, :, d]).astype(np.float32)
        p = (np.where(dot < 0, np.float32(0), dot) * w[b].astype(np.float32)[:, None]).astype(np.float32)
        out[b, :n] = (_head_sum(p, order) * sc).astype(np.float32)
    return out


def canonical_order(row):
    """The canonical top-k order of one row's candidates: positions by score descending, equal scores by ascending
    position. The first k are the canonical top-k set (a kernel may pick any set equal up to exact ties at the k-th
    score; dsa-check judges that). Rows with at most k candidates take the fast path [0, n) instead."""
    return sorted(range(len(row)), key=lambda p: (-row[p], p))


# ---- indexer.npu_lightning (Ascend A2/A3) ------------------------------------------------------------------------
def npu_head_sum(p, tree):
    """The kernel's fp32 head sum of p [H, n] fp32 products: 16 lanes of H/16 heads each (lane r adds heads r, r+16,
    r+32, ...), then a 4-level tree 8/4/2/1 over the lanes (depth H/16 - 1 + 4). tree="a3": the A3 kernel's order
    (lanes summed upward, tree lane r + lane r + half); any other value: another order of the same depth (lanes
    summed downward, neighbours first) -- both must pass, since the cube's exact order is not documented."""
    H = p.shape[0]
    lanes = [p[r].copy() for r in range(16)]
    groups = range(1, H // 16) if tree == "a3" else range(H // 16 - 1, 0, -1)
    if tree != "a3":
        lanes = [p[(H // 16 - 1) * 16 + r].copy() for r in range(16)]
        groups = range(H // 16 - 2, -1, -1)
    for g in groups:
        for r in range(16):
            lanes[r] = (lanes[r] + p[g * 16 + r]).astype(np.float32)
    while len(lanes) > 1:
        half = len(lanes) // 2
        if tree == "a3":
            lanes = [(lanes[r] + lanes[r + half]).astype(np.float32) for r in range(half)]
        else:  # neighbours first: another tree of the same depth
            lanes = [(lanes[2 * r + 1] + lanes[2 * r]).astype(np.float32) for r in range(half)]
    return lanes[0]


def npu_rows(t, cp, use_positions=True, kv_next=None):
    """(request b, position p) of every query row. Rows come in requests: actual_seq_lengths_query (cumulative) splits
    them, and row i of a request with qlen rows and kv keys sits at position kv - qlen + i. cp=True: the
    context-parallel split, two calls (the first (T + 1) // 2 rows with actual_seq_lengths_query/_key, the rest with
    the *_next tensors; kv_next overrides actual_seq_lengths_key_next). use_positions: the dump's `positions` input,
    when present, gives the positions instead."""
    T = t["query"].shape[0]
    calls = [(0, (T + 1) // 2 if cp else T, t["actual_seq_lengths_query"], t["actual_seq_lengths_key"])]
    if cp:
        calls.append(((T + 1) // 2, T - (T + 1) // 2, t["actual_seq_lengths_query_next"],
                      t["actual_seq_lengths_key_next"] if kv_next is None else kv_next))
    rows = [None] * T
    for row0, _, aq, ak in calls:
        start = 0
        for b in range(len(aq)):
            qlen = int(aq[b]) - start
            for i in range(qlen):
                rows[row0 + start + i] = (b, int(ak[b]) - qlen + i)
            start = int(aq[b])
    if use_positions and "positions" in t:
        rows = [(b, int(p)) for (b, _), p in zip(rows, t["positions"])]
    return rows


def npu_lightning(t, attrs, tree="a3", bug=None, use_positions=False, kv_next=None):
    """indexer.npu_lightning: Ascend V3.2 torch_npu.npu_lightning_indexer on A2/A3 (ops-transformer
    lightning_indexer), a model of the kernel's fp32 arithmetic. Per query row at position p, over its visible keys
    j = 0..p (paged through block_table):

        dot[h, j]  = fl32(q[h] . k_j)                 (fp32, numpy's summation order)
        prod[h, j] = fl32(w[h] * max(dot[h, j], 0))
        score[j]   = npu_head_sum(prod, tree)          (fp32, 16 lanes + tree)
        indices    = top sparse_count of score, descending, ties to the lower index, NaN first, -1 padded

    t: the dump's raw inputs (query [T, H, D] and key [blocks, block_size, 1, D] as bf16 / fp16 bits, weights
    [T, H], block_table, actual_seq_lengths_query/_key, the *_next pair for cp_split=prev_next, optional positions);
    attrs: the case attrs (sparse_count, cp_split) plus "_dtype_query" / "_dtype_weights", the inputs' dtype attrs.
    Returns sparse_indices [T, 1, sparse_count] int32.

    bug (seeded bugs the tests must see fail): "visibility" (p + 2 keys), "relu_after" (ReLU after the weighting),
    "weights" (weights ignored)."""
    with np.errstate(all="ignore"):  # inf * 0 and NaN weights in the nonfinite golden, as on the device
        return _npu_lightning(t, attrs, tree, bug, use_positions, kv_next)


def _npu_lightning(t, attrs, tree, bug, use_positions, kv_next):
    dq = attrs.get("_dtype_query", "bf16")
    q = num.as_f32(t["query"], dq)
    key = num.as_f32(t["key"], dq)
    key = key.reshape(key.shape[0] * key.shape[1], -1)
    w = num.as_f32(t["weights"], attrs.get("_dtype_weights", dq))
    bt = t["block_table"].astype(np.int64)
    bs = t["key"].shape[1]
    k = int(attrs["sparse_count"])
    cp = attrs.get("cp_split", "none") == "prev_next"
    T, H, _ = q.shape
    out = np.full((T, 1, k), -1, np.int32)
    for row, (b, pos) in enumerate(npu_rows(t, cp, use_positions, kv_next)):
        nvis = pos + 1 + (1 if bug == "visibility" else 0)
        if nvis <= 0:
            continue
        j = np.arange(nvis)
        kk = key[bt[b, j // bs] * bs + j % bs]
        dots = (q[row] @ kk.T).astype(np.float32)                     # [H, nvis], fp32 (numpy's order)
        wr = np.ones(H, np.float32) if bug == "weights" else w[row]
        if bug == "relu_after":
            p = np.maximum(wr[:, None] * dots, 0).astype(np.float32)
        else:
            p = (wr[:, None] * np.maximum(dots, 0)).astype(np.float32)
        score = npu_head_sum(p, tree)
        # descending, ties -> lower index; NaN first (the tool's documented rule, as torch.topk: the Ascend sort's
        # NaN order is not documented)
        sel = np.lexsort((j, -score.astype(np.float64), ~np.isnan(score)))[: min(k, nvis)]
        out[row, 0, : len(sel)] = sel
    return out
