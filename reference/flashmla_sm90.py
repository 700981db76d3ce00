"""FlashMLA's sm90 sparse prefill kernel (flash_mla_sparse_fwd; deepseek-ai/FlashMLA @9241ae3
csrc/sm90/prefill/sparse/phase1.cuh, built with --use_fast_math), modelled operation by operation to reproduce its
output bits (issue #39, the `flashmla-sm90` profile). Each piece was measured on an H100 / H200 on its own:

* wgmma_chunk -- the bf16 WGMMA with fp32 accumulation (m64nNk16: one instruction adds 16 products to the
  accumulator). Products are exact; the alignment exponent e is the largest ea + eb over the chunk's non-zero
  products (ea, eb the factors' exponents floor(log2|x|): the product's significand in [1, 4) is not renormalized)
  and the accumulator's own exponent; every product and the accumulator are truncated toward zero to a multiple of
  2^(e - 25); the exact sum is truncated toward zero to 24 significant bits (the fp32 accumulator). Measured on the
  kernel's max_logits (the row maximum of q.k times two fp32 scalings) and, composed with the rest, on every output
  bit of the 17 captured prefill cases (8,912,896 out, 17,408 max_logits, 17,408 lse: 100 %; V3.2 d_qk 576 and
  MODEL1 512; docs/research_flashmla_sm90.md). (DeepGEMM's fp8 WGMMA keeps 13 bits in 32-product chunks: ../shared/specs/sm90_fp8_wgmma.md.)
* ex2_approx -- ex2.approx.ftz.f32 (exp2f under --use_fast_math): measured exhaustively on the H200 over every
  fp32 x in [-126, 0]: y(x) = T[k] 2^c with c = ceil(x), k = trunc(-(x - c) 2^23) (the fraction in 23-bit fixed
  point, truncated: 0 of 1,065,353,217 inputs in [-1, 0] differ from their truncated grid point) and the table T of
  2^23 + 1 values (table sm90_ex2_approx; within -2..+1 ulps of the correctly rounded 2^(-k 2^-23)); 0 of 58,720,256
  inputs in [-126, -1) break the 2^c scaling, 0 in [-150, -126) with the flush of subnormal results (.ftz). For x > 0
  the rule is close, not exact (mismatches grow with x: 1 of 8,388,608 in [2^-23, 2^-22), half in [1/2, 1)); the
  kernel's positive arguments are the rounding error of max * scale (tiny) and a sink above the row max.
* rcp_approx -- rcp.approx.ftz.f32 (1.0f / x under --use_fast_math): rcp(m 2^e) = R[m] 2^-e (0 of 243,269,632
  scaled inputs differ), R over the 2^23 significands (table sm90_rcp_approx (-1..+1 ulps from 1/m correctly
  rounded)).
* lg2_approx -- lg2.approx.ftz.f32 (logf = lg2 * ln2 fused into lse): on [1, 2) its own table
  (sm90_lg2_approx_1_2); on [2^e, 2^(e+1)), e >= 1, e + K[m] 2^-23 truncated toward zero to fp32, K the 23-bit
  fraction table (sm90_lg2_approx_frac): 0 mismatches over every fp32 in [1, 2^16) (H100).
The tables were dumped on an H200 and checked on an H100 (identical checksums), stored as differences of consecutive
values in src/profiles/flashmla_sm90/sm90_mufu.bin (558 KB; see _table).

The kernel's order (phase1.cuh): query rows and 64-head blocks are independent CTAs. Keys go in blocks of 64 in
index order, pairs (2j, 2j+1) per iteration: warpgroup 0 scores block 2j (QK dims in 64-dim tiles 0..8), warpgroup
1 block 2j+1 (tiles 4..8 then 0..3). Scores are masked (-inf), the block max times scale = sm_scale * 1.44269504f
(fp32) gives new_max = max(old, block max) (old: -1e30 at first; warpgroup 1 takes warpgroup 0's new max as old);
the accumulator and the row sum are rescaled by ex2(old - new); p = ex2(fma(s, scale, -new)); P = bf16(p); each
thread's sum over its 16 keys (pairs (8m+2c, 8m+2c+1), m = 0..7: sum + (p_a + p_b)) enters L = fma(L, factor, sum).
O (dims 0..255 in warpgroup 0, 256..511 in warpgroup 1) accumulates P V by the WGMMA model, 16 keys per chunk:
warpgroup 0: its own P over V[:, :256], then (after warpgroup 1's max) P0 rescaled as bf16(p0 * ex2(new0 - new1)),
O0 and L0 times that factor, then P1 over V[:, :256]; warpgroup 1: its own P1 over V[:, 256:], then the rescaled P0.
End: L = quad sums ((L0+L1)+(L2+L3)) of both warpgroups added; out = bf16(O * rcp(L + ex2(sink log2e - max))) (0
when L = 0); max_logits = max * ln2; lse = fma(lg2(L), ln2, max * ln2); lonely rows -inf / +inf. A row sum in (0, 1) (one
dominant key whose p rounds below 1) needs lg2.approx below 1, which is not measured: the models accept the value
only where every lg2 within 2^-22 of log2(L) gives the same bits (_lg2_then), and refuse the call otherwise.

The sparse fp8 decode (flash_mla_with_kvcache; csrc/smxx/decode/get_decoding_sched_meta, csrc/sm90/decode/sparse_fp8/
splitkv_mla.cuh, csrc/smxx/decode/combine): sparse_decode. Keys are dequantized in the kernel as bf16(bf16(e4m3) *
bf16(scale)) (dequant_v32_656 / dequant_model1_584). The scheduler gives each request max(topk_length, 1) keys
rounded up to 64-key blocks (+ ceil64(extra_topk_length) for the extra scope) plus 5 blocks of overhead and cuts the
total into num_sm_parts = max(num_sms / s_q / (h_q/64), 1) equal payloads; a CTA runs one payload's blocks of one
query token and 64 heads: per block the QK WGMMA over all d_qk dims (k-steps 0..d_qk/16 in order), masked keys -inf,
new = max(old, block max * scale) (old -1e30 at first), O and each thread's row sum rescaled by ex2(old - new),
p = ex2(fma(s, scale, -new)), each thread's 16 keys (8m+2c, 8m+2c+1, m = 0..7) summed one by one from 0 into
L = fma(L, factor, sum), O += bf16(p) V by the WGMMA model (V = the first 512 dims). End: L = the quad sum; a CTA
holding a whole request writes out = bf16(O rcp(L + ex2(sink log2e - max))) (0 when L = 0) and lse = fma(lg2(L),
ln2, max * ln2) (+inf when L = 0; sink-exclusive); a split writes o_accum = O rcp(L) and lse_accum = lg2(L) + max
(-inf). The combine (requests with several splits; MAX_SPLITS the next of 32, 64, 96, 128, 160 above num_sm_parts):
per head, m = the max of lse_accum (0 if -inf), each lane's sum of ex2(lse_accum - m) over splits lane, lane + 32,
... then the xor butterfly (16, 8, 4, 2, 1); g = lg2(sum) + m (+inf if 0); lse = g * ln2; with a sink g += lg2(1 +
ex2(fma(sink, log2e, -g))) (g = +inf: sink log2e, or +inf for a -inf sink); out = bf16(sum over splits in order of
fma(ex2(lse_accum - g), o_accum, acc)). Reproduces 100 % of out, lse, o_accum and lse_accum of the 24 captured decode
cases (V3.2 h64/h128, MODEL1 with topk_length and the extra scope, sinks, lonely and all-invalid requests).
"""
import os
import struct
import zlib

import numpy as np

F32 = np.float32
_BLOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "profiles", "flashmla_sm90", "sm90_mufu.bin")
_T = {}


def read_tables(path=_BLOB):
    """The measured tables of a MUFU blob, in file order: [(name, int64 values)]. Format: "DSAMUFU1", u32 count, then
    per table: name (24 bytes), u32 width (8 / 32), u64 count n, i32 first value, u64 length z, z bytes of zlib
    holding the n - 1 differences of consecutive values (int8 / int32, little-endian)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"DSAMUFU1":
        raise ValueError(f"{path}: not a DSAMUFU1 table blob")
    (count,), pos, out = struct.unpack_from("<I", b, 8), 12, []
    for _ in range(count):
        tname = b[pos:pos + 24].rstrip(b"\0").decode()
        width, n, first, zlen = struct.unpack_from("<IQiQ", b, pos + 24)
        pos += 24 + struct.calcsize("<IQiQ")
        deltas = np.frombuffer(zlib.decompress(b[pos:pos + zlen]), {8: np.int8, 32: np.int32}[width]).astype(np.int64)
        pos += zlen
        if len(deltas) != n - 1:
            raise ValueError(f"{path}: table {tname}: {len(deltas)} differences, expected {n - 1}")
        out.append((tname, np.concatenate([[first], first + np.cumsum(deltas)]).astype(np.int64)))
    return out


def _table(name):
    """A measured table of the blob src/profiles/flashmla_sm90/sm90_mufu.bin (the C++ profile embeds the same file;
    read_tables gives its format), as int32."""
    if not _T:
        _T.update((n, v.astype(np.int32)) for n, v in read_tables())
    return _T[name]


def ex2_table():
    """T[k] = ex2.approx(-k 2^-23), k = 0 .. 2^23 (fp32)."""
    return _table("sm90_ex2_approx").view(np.float32)


def rcp_table():
    """R[i] = rcp.approx(1 + i 2^-23), i < 2^23 (fp32)."""
    return _table("sm90_rcp_approx").view(np.float32)


def ftz(x):
    x = np.asarray(x, np.float32)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x) < F32(2.0 ** -126), F32(0) * x, x).astype(np.float32)


def ex2_approx(x):
    """ex2.approx.ftz.f32: T[trunc((ceil x - x) 2^23)] 2^ceil(x) (exact for x <= 0, close for x > 0)."""
    x = ftz(x)
    xd = x.astype(np.float64)
    fin = np.isfinite(xd)
    xf = np.where(fin, xd, 0.0)
    c = np.ceil(xf)
    k = np.trunc((c - xf) * 2.0 ** 23).astype(np.int64)  # 2^x ~ 2^c T[k], k in [0, 2^23]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y = np.ldexp(ex2_table()[k].astype(np.float64), c.astype(np.int64)).astype(np.float32)
    y = np.where(np.isnan(xd), F32(np.nan), np.where(xd == -np.inf, F32(0), np.where(xd == np.inf, F32(np.inf), y)))
    return ftz(y)


def rcp_approx(x):
    """rcp.approx.ftz.f32 for positive x: R[significand] 2^-e; +inf -> +0 (an infinite sink: out 0)."""
    x = ftz(x)
    if np.any(~(x > 0)):
        raise ValueError("rcp_approx: measured for positive x only")
    inf = np.isinf(x)
    x = np.where(inf, F32(1), x)
    m, e = np.frexp(x.astype(np.float64))
    mi = (np.asarray(m * 2, np.float32).view(np.uint32) & 0x7FFFFF).astype(np.int64)
    with np.errstate(over="ignore", under="ignore"):
        y = np.ldexp(rcp_table()[mi].astype(np.float64), -(e.astype(np.int64) - 1)).astype(np.float32)
    return ftz(np.where(inf, F32(0), y))


def lg2_approx(x):
    """lg2.approx.ftz.f32 for x >= 1 (the kernel's row sums): x = (1 + i 2^-23) 2^e; e = 0: Y[i] (its own table:
    near 1 the unit keeps relative precision); e >= 1: e + K[i] 2^-23 (K the 23-bit fixed-point fraction the unit
    computes) truncated toward zero to fp32 -- measured exhaustively for e = 0 .. 15."""
    x = np.asarray(x, np.float32)
    if np.any(~(x >= 1)) or np.any(np.isinf(x)):
        raise ValueError("lg2_approx: measured for finite x >= 1 only")
    bits = x.view(np.uint32).astype(np.int64)
    i, e = bits & 0x7FFFFF, (bits >> 23) - 127
    v = e + _table("sm90_lg2_approx_frac")[i].astype(np.float64) * 2.0 ** -23
    q = np.ldexp(1.0, np.floor(np.log2(np.where(e > 0, v, 1.0))).astype(np.int64) - 23)
    return np.where(e == 0, _table("sm90_lg2_approx_1_2")[i].view(np.float32), (np.trunc(v / q) * q).astype(np.float32))


def _ilog2(x):
    with np.errstate(divide="ignore"):
        return np.where(x != 0, np.floor(np.log2(np.abs(np.where(x != 0, x, 1.0)))), -np.inf)


def wgmma_chunk(acc, a, b):
    """One bf16 WGMMA k-step: acc [...] (fp32 values as float64) + sum over the last axis of a * b ([..., 16] bf16
    values as float64), per the measured model (module docstring). Exact in float64."""
    prods = a * b
    ea = np.where(prods != 0, _ilog2(a) + _ilog2(b), -np.inf)
    e = np.maximum(ea.max(axis=-1), _ilog2(acc))
    ok = np.isfinite(e)
    q = np.ldexp(1.0, np.where(ok, e, 0).astype(np.int64) - 25)
    t = (np.trunc(prods / q[..., None]) * q[..., None]).sum(axis=-1) + np.trunc(acc / q) * q
    qq = np.ldexp(1.0, np.where(t != 0, _ilog2(t), 0).astype(np.int64) - 23)
    return np.where(ok, np.trunc(t / qq) * qq, acc)


def _bf16(x):
    """RNE fp32 -> bf16, as fp32 values."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32)
    r = np.where(np.isnan(x), 0x7FC0, r)
    return (r << 16).astype(np.uint32).view(np.float32)


def _mul(a, b):
    return ftz(np.multiply(a, b, dtype=np.float32))


def _add(a, b):
    return ftz(np.add(a, b, dtype=np.float32))


def _fma(a, b, c):  # a * b exact in float64 for fp32 a, b: one rounding
    return ftz((np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32))


def _scores(q, K, d_qk, wg1):
    """[H, 64] fp32 q.k of one 64-key block in the warpgroup's tile order."""
    nt = d_qk // 64
    tiles = list(range(4, nt)) + list(range(4)) if wg1 else list(range(nt))
    acc = np.zeros((q.shape[0], K.shape[0]))
    qd, kd = q.astype(np.float64), K.astype(np.float64)
    for t in tiles:
        for c in range(4):
            d0 = t * 64 + 16 * c
            acc = wgmma_chunk(acc, qd[:, None, d0:d0 + 16], kd[None, :, d0:d0 + 16])
    return acc.astype(np.float32)


def _pv(O, P, V):
    """O [H, dv] += P [H, 64] (bf16) V [64, dv] by the WGMMA model, 16 keys per k-step."""
    a = O.astype(np.float64)
    pd, vt = P.astype(np.float64), V.astype(np.float64).T
    for c in range(4):
        a = wgmma_chunk(a, pd[:, None, 16 * c:16 * c + 16], vt[None, :, 16 * c:16 * c + 16])
    return a.astype(np.float32)


def _thread_sums(p):
    """[H, 4]: lane c's sum over keys (8m+2c, 8m+2c+1), m = 0..7, as sum + (p_a + p_b)."""
    out = np.zeros((p.shape[0], 4), np.float32)
    for c in range(4):
        s = np.zeros(p.shape[0], np.float32)
        for m in range(8):
            s = _add(s, _add(p[:, 8 * m + 2 * c], p[:, 8 * m + 2 * c + 1]))
        out[:, c] = s
    return out


def _head_block(q, kv, idx, valid, scale, d_qk, sink_l2e):
    H = q.shape[0]
    nb = len(idx) // 64
    rM0 = np.full(H, F32(-1e30), np.float32)
    rM1 = rM0.copy()
    rL0, rL1 = np.zeros((H, 4), np.float32), np.zeros((H, 4), np.float32)
    O0, O1 = np.zeros((H, 256), np.float32), np.zeros((H, 256), np.float32)

    def block(b, wg1):
        if b >= nb:  # the odd block of a topk_length row: every key masked
            ok, K = np.zeros(64, bool), np.zeros((64, kv.shape[1]), np.float32)
        else:
            ok = valid[64 * b:64 * b + 64]
            K = np.where(ok[:, None], kv[np.where(ok, idx[64 * b:64 * b + 64], 0)], F32(0)).astype(np.float32)
        return np.where(ok[None, :], _scores(q, K, d_qk, wg1), F32(-np.inf)), K

    def softmax(s, old, rM, rL):
        new = np.maximum(old, _mul(s.max(axis=1), scale)).astype(np.float32)
        f = ex2_approx(_add(rM, -new))
        p = ex2_approx(_fma(s, np.full_like(s, scale), -new[:, None]))
        return new, f, p, _fma(rL, f[:, None], _thread_sums(p))

    for j in range(0, nb + nb % 2, 2):
        s0, K0 = block(j, False)
        s1, K1 = block(j + 1, True)
        new0, f0, p0, rL0 = softmax(s0, rM0, rM0, rL0)
        O0 = _pv(_mul(O0, f0[:, None]), _bf16(p0), K0[:, :256])
        new1, f1, p1, rL1 = softmax(s1, new0, rM1, rL1)
        rM1 = new1
        P1 = _bf16(p1)
        O1 = _pv(_mul(O1, f1[:, None]), P1, K1[:, 256:512])
        g = ex2_approx(_add(new0, -new1))
        rM0 = new1
        O1 = _pv(O1, _bf16(_mul(p0, g[:, None])), K0[:, 256:512])
        O0, rL0 = _mul(O0, g[:, None]), _mul(rL0, g[:, None])
        O0 = _pv(O0, P1, K1[:, :256])
    quad = lambda L: _add(_add(L[:, 0], L[:, 1]), _add(L[:, 2], L[:, 3]))
    L = _add(quad(rL0), quad(rL1))
    den = _add(L, ex2_approx(_add(sink_l2e, -rM0)))
    inv = np.where(L == 0, F32(0), rcp_approx(np.where(L == 0, F32(1), den))).astype(np.float32)
    out = _bf16(_mul(np.concatenate([O0, O1], axis=1), inv[:, None]))
    LN2 = F32(0.6931471805599453)
    none = not valid.any()
    ml = np.full(H, -np.inf, np.float32) if none else _mul(rM0, LN2)
    with np.errstate(divide="ignore"):
        lse = np.full(H, np.inf, np.float32) if none else _lg2_then(L, lambda y: _fma(y, np.full(H, LN2), _mul(rM0, LN2)))
    return out, ml, lse


def sparse_prefill(q, kv, indices, sm_scale, attn_sink=None, topk_length=None):
    """flash_mla_sparse_fwd on sm90 as the kernel computes it. q [s_q, h_q, d_qk] bf16 values (float32), kv
    [s_kv, 1, d_qk], indices [s_q, 1, topk] int, sm_scale (the fp32 argument), attn_sink [h_q] fp32 or None,
    topk_length [s_q] or None. Returns out [s_q, h_q, 512] (bf16 values as float32), max_logits and lse [s_q, h_q]
    """
    q = np.asarray(q, np.float32)
    kv = np.asarray(kv, np.float32)[:, 0, :]
    idx = np.asarray(indices)[:, 0, :].astype(np.int64)
    s_q, h_q, d_qk = q.shape
    if h_q % 64 or d_qk not in (512, 576):
        raise ValueError("sparse_prefill: h_q a multiple of 64, d_qk 512 or 576")
    scale = F32(F32(sm_scale) * F32(1.44269504))
    L2E = F32(1.4426950408889634)
    out = np.zeros((s_q, h_q, 512), np.float32)
    ml = np.zeros((s_q, h_q), np.float32)
    lse = np.zeros((s_q, h_q), np.float32)
    topk = idx.shape[1]
    for i in range(s_q):
        n = topk if topk_length is None else int(topk_length[i])
        nb = topk // 64 if topk_length is None else -(-n // 64)
        ii = np.concatenate([idx[i], np.full(max(0, 64 * nb - topk), -1)])[:64 * nb]
        valid = (ii >= 0) & (ii < kv.shape[0]) & (np.arange(len(ii)) < n)
        for h0 in range(0, h_q, 64):
            sl = _mul(np.asarray(attn_sink, np.float32)[h0:h0 + 64], L2E) if attn_sink is not None else np.full(64, -np.inf, np.float32)
            out[i, h0:h0 + 64], ml[i, h0:h0 + 64], lse[i, h0:h0 + 64] = _head_block(q[i, h0:h0 + 64], kv, ii, valid, scale, d_qk, sl)
    return out, ml, lse


def _bf16_bits_to_f32(b):
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _e4m3(codes):
    """e4m3fn bytes -> float32 (0x7F / 0xFF NaN)."""
    c = np.asarray(codes, np.uint8).astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, np.ldexp(m.astype(np.float64), -9), np.ldexp((8 + m).astype(np.float64), e - 10))
    v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    return np.where(c & 0x80, -v, v).astype(np.float32)


def dequant_v32_656(records):
    """[N, 656] bytes of the V3.2 cache (512 e4m3 | 4 fp32 scales | 64 bf16 RoPE) -> [N, 576] float32 as the sm90
    decode dequantizes: bf16(bf16(e4m3) * bf16(scale)) per 128-dim tile, the RoPE as stored."""
    r = np.ascontiguousarray(np.asarray(records, np.uint8).reshape(-1, 656))
    sc = _bf16(r[:, 512:528].copy().view(np.float32))
    k = np.empty((r.shape[0], 576), np.float32)
    codes = _e4m3(r[:, :512])
    for t in range(4):
        k[:, 128 * t:128 * t + 128] = _bf16(codes[:, 128 * t:128 * t + 128] * sc[:, t:t + 1])
    k[:, 512:] = _bf16_bits_to_f32(r[:, 528:656].copy().view(np.uint16))
    return k


def dequant_model1_584(blocks, page_size):
    """[num_blocks, >= page_size * 584] bytes of the MODEL1 cache (per block: page_size x (448 e4m3 | 64 bf16 RoPE),
    then page_size x 8 e8m0 scales, 7 used) -> [num_blocks * page_size, 512] float32 as the kernel dequantizes."""
    b = np.asarray(blocks, np.uint8)
    nb = b.shape[0]
    b = b.reshape(nb, -1)
    tok = b[:, :page_size * 576].reshape(-1, 576)
    sc = b[:, page_size * 576:page_size * 584].reshape(-1, 8).astype(np.int64)
    with np.errstate(over="ignore"):
        s = np.where(sc == 255, np.nan, np.ldexp(1.0, sc - 127)).astype(np.float32)  # 2^-127: a subnormal, exact in bf16
    codes = _e4m3(tok[:, :448])
    k = np.empty((tok.shape[0], 512), np.float32)
    for t in range(7):
        k[:, 64 * t:64 * t + 64] = _bf16(codes[:, 64 * t:64 * t + 64] * s[:, t:t + 1])
    k[:, 448:] = _bf16_bits_to_f32(tok[:, 448:576].copy().view(np.uint16))
    return k


def decode_schedule(b, topk, topk_length, extra_topk, extra_topk_length, num_sm_parts, fixed=5, block=64):
    """get_decoding_sched_meta: per SM part (begin_req, begin_block, begin_split, first_split, end_req, end_block,
    last_split) and num_splits [b + 1] (cumulative)."""
    cur = []
    for i in range(b):
        c = int(topk_length[i]) if topk_length is not None else topk
        c = max(c, 1)
        if extra_topk:
            c = -(-c // block) * block + (int(extra_topk_length[i]) if extra_topk_length is not None else extra_topk)
        cur.append(c)
    last = [max(c - 1, 0) // block for c in cur]
    nblk = [x + 1 for x in last]
    payload = -(-sum(n + fixed for n in nblk) // num_sm_parts) + fixed
    req = blk = nsp = cum = 0
    ns = [0] * (b + 1)
    parts = []
    for _ in range(num_sm_parts):
        m = dict(begin_req=req, begin_block=blk, begin_split=nsp, first_split=blk != 0)
        rem = payload
        while req < b:
            left = nblk[req] - blk
            if rem >= left + fixed:
                cum += nsp + 1
                ns[req + 1] = cum
                rem -= left + fixed
                req, blk, nsp = req + 1, 0, 0
            else:
                if rem - fixed > 0:
                    blk, nsp, rem = blk + rem - fixed, nsp + 1, 0
                break
        m["end_req"] = req if blk > 0 else req - 1
        m["end_block"] = blk if blk > 0 else (0 if cur[req - 1] == 0 else last[req - 1] + 1)
        m["last_split"] = m["end_block"] != last[m["end_req"]] + 1 and cur[m["end_req"]] != 0
        if m["begin_req"] == m["end_req"]:
            m["first_split"] = m["last_split"] = m["first_split"] or m["last_split"]
        parts.append(m)
    return parts, ns


def _lg2(x):
    """lg2.approx of x >= 1 (measured), +inf of +inf, -inf of 0; NaN where x is in (0, 1) (not measured: _lg2_then)."""
    x = np.asarray(x, np.float32)
    ok = np.isfinite(x) & (x >= 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(ok, lg2_approx(np.where(ok, x, F32(1))), np.log2(np.where(x >= 0, x, np.nan)))
    return np.where((x > 0) & (x < 1), np.nan, r).astype(np.float32)


def lg2_unmeasured_bounds(x):
    """For x in (0, 1), where lg2.approx is not measured: fp32 bounds of every value within 2^-22 of log2(x) (the
    unit's absolute error is below 2^-22.5 everywhere it is measured)."""
    lg = np.log2(np.asarray(x, np.float64))
    lo, hi = (lg - 2.0 ** -22).astype(np.float32), (lg + 2.0 ** -22).astype(np.float32)
    lo = np.where(lo.astype(np.float64) > lg - 2.0 ** -22, np.nextafter(lo, np.float32(-np.inf)), lo)
    hi = np.where(hi.astype(np.float64) < lg + 2.0 ** -22, np.nextafter(hi, np.float32(np.inf)), hi)
    return lo.astype(np.float32), hi.astype(np.float32)


def _lg2_then(x, f):
    """f(lg2.approx(x)) elementwise; where x is in (0, 1) (one dominant key) the value both ends of
    lg2_unmeasured_bounds give -- f is monotone -- else ValueError (the bits depend on the unmeasured unit)."""
    x = np.asarray(x, np.float32)
    low = (x > 0) & (x < 1)
    r = f(_lg2(np.where(low, F32(1), x)))
    if low.any():
        lo, hi = lg2_unmeasured_bounds(np.where(low, x, F32(0.5)))
        a, b = f(lo), f(hi)
        if np.any(low & (a.view(np.uint32) != b.view(np.uint32))):
            raise ValueError("a row sum in (0, 1) whose lse or split partial depends on lg2.approx below 1 (not measured)")
        r = np.where(low, a, r)
    return np.asarray(r, np.float32)


def _decode_cta(q, blocks, scale):
    """One CTA: q [64, d_qk] over blocks [(K [64, d_qk], ok [64])] -> O [64, 512], max, L (module docstring)."""
    H = q.shape[0]
    rM = np.full(H, F32(-1e30), np.float32)
    rL = np.zeros((H, 4), np.float32)
    O = np.zeros((H, 512), np.float32)
    qd = q.astype(np.float64)
    for K, ok in blocks:
        acc = np.zeros((H, 64))
        kd = K.astype(np.float64)
        for d0 in range(0, q.shape[1], 16):
            acc = wgmma_chunk(acc, qd[:, None, d0:d0 + 16], kd[None, :, d0:d0 + 16])
        s = np.where(ok[None, :], acc.astype(np.float32), F32(-np.inf)).astype(np.float32)
        new = np.maximum(_mul(s.max(axis=1), scale), rM).astype(np.float32)
        f = ex2_approx(_add(rM, -new))
        O = _mul(O, f[:, None])
        p = ex2_approx(_fma(s, np.full_like(s, scale), -new[:, None]))
        sums = np.zeros((H, 4), np.float32)
        for c in range(4):
            for m in range(8):
                sums[:, c] = _add(_add(sums[:, c], p[:, 8 * m + 2 * c]), p[:, 8 * m + 2 * c + 1])
        rL = _fma(rL, f[:, None], sums)
        rM = new
        O = _pv(O, _bf16(p), K[:, :512])
    return O, rM, _add(_add(rL[:, 0], rL[:, 1]), _add(rL[:, 2], rL[:, 3]))


def sparse_decode(q, k_main, indices, sm_scale, attn_sink=None, topk_length=None, k_extra=None, extra_indices=None,
                  extra_topk_length=None, num_sms=132, partials=False):
    """flash_mla_with_kvcache's sparse fp8 path on sm90 as the kernels compute it. q [b, s_q, h_q, d_qk] bf16 values
    (float32; d_qk 576 V3.2, 512 MODEL1), k_main [slots, d_qk] the dequantized cache (dequant_v32_656 /
    dequant_model1_584; slot = page * page_size + offset), indices [b, s_q, topk] (-1 invalid), attn_sink [h_q],
    topk_length [b] (MODEL1), k_extra / extra_indices [b, s_q, extra_topk] / extra_topk_length [b] (MODEL1's extra
    scope), num_sms the GPU's SMs. Returns out [b, s_q, h_q, 512] (bf16 values as float32) and lse [b, s_q, h_q]
    (the kernel's buffer, natural log), plus o_accum, lse_accum, num_splits with partials=True."""
    q = np.asarray(q, np.float32)
    idx = np.asarray(indices).astype(np.int64)
    b, s_q, h_q, d_qk = q.shape
    model1 = d_qk == 512
    topk = idx.shape[2]
    if h_q not in (64, 128) or d_qk not in (512, 576) or topk % 64:
        raise ValueError("sparse_decode: h_q 64 / 128, d_qk 512 / 576, topk a multiple of 64")
    if not model1 and (topk_length is not None or extra_indices is not None):
        raise ValueError("sparse_decode: the V3.2 kernel takes no topk_length / extra scope")
    eidx = np.asarray(extra_indices).astype(np.int64) if extra_indices is not None else None
    xtopk = eidx.shape[2] if eidx is not None else 0
    scale = F32(F32(sm_scale) * F32(1.44269504))
    n_parts = max(num_sms // s_q // (h_q // 64), 1)
    parts, ns = decode_schedule(b, topk, topk_length if model1 else None, xtopk, extra_topk_length, n_parts)
    out = np.zeros((b, s_q, h_q, 512), np.float32)
    lse = np.zeros((b, s_q, h_q), np.float32)
    oacc = np.zeros((ns[b], s_q, h_q, 512), np.float32)
    lacc = np.zeros((ns[b], s_q, h_q), np.float32)
    L2E, LN2 = F32(1.4426950408889634), F32(0.6931471805599453)
    sl = _mul(np.asarray(attn_sink, np.float32), L2E) if attn_sink is not None else np.full(h_q, -np.inf, np.float32)

    def req(i):
        if not model1:
            return topk // 64, topk // 64, topk, 0
        n = int(topk_length[i]) if topk_length is not None else topk
        xn = (int(extra_topk_length[i]) if extra_topk_length is not None else xtopk) if eidx is not None else 0
        orig = max(-(-n // 64) * 64, 64)
        return orig // 64, (orig + -(-xn // 64) * 64) // 64, n, xn

    def block(i, s, j, norig, n, xn):
        extra = j >= norig
        src, lim, kc = (eidx[i, s], xn, k_extra) if extra else (idx[i, s], n, k_main)
        pos = 64 * (j - norig if extra else j) + np.arange(64)
        ii = np.where(pos < len(src), src[np.minimum(pos, len(src) - 1)], -1)
        ok = (ii != -1) & (pos < lim)
        return np.where(ok[:, None], kc[np.where(ok, ii, 0)], F32(0)).astype(np.float32), ok

    for m in parts:
        if m["begin_req"] >= b:
            continue
        for i in range(m["begin_req"], m["end_req"] + 1):
            norig, total, n, xn = req(i)
            st = m["begin_block"] if i == m["begin_req"] else 0
            en = m["end_block"] if i == m["end_req"] else total
            whole = (not m["first_split"]) if i == m["begin_req"] else ((not m["last_split"]) if i == m["end_req"] else True)
            sp = ns[i] + (m["begin_split"] if i == m["begin_req"] else 0)
            for s in range(s_q):
                blocks = [block(i, s, j, norig, n, xn) for j in range(st, en)]
                for h0 in range(0, h_q, 64):
                    O, rM, L = _decode_cta(q[i, s, h0:h0 + 64], blocks, scale)
                    none = L == 0
                    if whole:
                        den = _add(L, ex2_approx(_add(sl[h0:h0 + 64], -rM)))
                        inv = np.where(none, F32(0), rcp_approx(np.where(none, F32(1), den))).astype(np.float32)
                        out[i, s, h0:h0 + 64] = _bf16(_mul(O, inv[:, None]))
                        lse[i, s, h0:h0 + 64] = np.where(none, F32(np.inf), _lg2_then(np.where(none, F32(1), L), lambda y: _fma(y, np.full(64, LN2), _mul(rM, LN2))))
                    else:
                        inv = np.where(none, F32(0), rcp_approx(np.where(none, F32(1), L))).astype(np.float32)
                        oacc[sp, s, h0:h0 + 64] = _mul(O, inv[:, None])
                        lacc[sp, s, h0:h0 + 64] = np.where(none, F32(-np.inf), _lg2_then(np.where(none, F32(1), L), lambda y: _add(y, rM)))
    max_splits = next(x for x in (32, 64, 96, 128, 160) if n_parts <= x)
    for i in range(b):
        a, n = ns[i], ns[i + 1] - ns[i]
        if n == 1:
            continue
        for s in range(s_q):
            for h in range(h_q):
                loc = np.full(max_splits, -np.inf, np.float32)
                loc[:n] = lacc[a:a + n, s, h]
                mx = loc.max()
                mx = F32(0) if mx == -np.inf else mx
                e = ex2_approx(_add(loc, -mx))
                lanes = np.zeros(32, np.float32)
                for r in range(max_splits // 32):
                    lanes = _add(lanes, e[32 * r:32 * r + 32])
                for off in (16, 8, 4, 2, 1):
                    lanes = _add(lanes, lanes[np.arange(32) ^ off])
                g = F32(np.inf) if lanes[0] == 0 else _add(_lg2(lanes[0]), mx)
                lse[i, s, h] = _mul(g, LN2)
                if attn_sink is not None:
                    sk = F32(attn_sink[h])
                    if g != np.inf:
                        g = _add(g, _lg2(_add(F32(1), ex2_approx(_fma(sk, L2E, -g)))))
                    else:
                        g = F32(np.inf) if sk == -np.inf else _mul(sk, L2E)
                f = ex2_approx(_add(loc[:n], -g))
                acc = np.zeros(512, np.float32)
                for k in range(n):
                    acc = _fma(np.full(512, f[k]), oacc[a + k, s, h], acc)
                out[i, s, h] = _bf16(acc)
    if partials:
        return out, lse, oacc, lacc, np.array(ns)
    return out, lse
