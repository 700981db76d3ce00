"""DeepSeek-V4.1 block codecs (spec v41_fp4.md §2-§3, §9): MXFP8, NVFP4, MXFP4 write side and their exact dequant.

Written from the spec alone (issue #37 item 1; the producer variants and MXFP4 sglang from the research note
docs/research_fp4_records.md, which wins where it contradicts the spec), independent of the C++ codecs, so the two
can be compared bit for bit.
Every float step is fp32 (np.float32 arrays; constants are fp32 values, e.g. fl32(1/6) = f32(1) / f32(6)); the
exponent steps are integer. Vectorized over leading axes; blocks run along the last axis.

  e2m1_encode / e2m1_decode      fp32 -> e2m1 nibble (8*sign + index into {0, .5, 1, 1.5, 2, 3, 4, 6}) and back
  pack_nibbles / unpack_nibbles  byte i = dim 2i (low nibble) | dim 2i+1 (high nibble)
  e4m3_encode / e4m3_decode      fp32 -> fp8 e4m3fn code (one RNE, ml_dtypes as reference/indexer.py does) and back
  e4m3_encode_sat                the saturating sibling (CUDA __nv_fp8_e4m3 / cvt.rn.satfinite: +-448, NaN -> 0x7F)
  round_bf16                     fp32 -> bf16 -> fp32 (the "bf16" rounding source, applied by the caller)
  ue8m0_encode / ue8m0_decode    exponent e -> byte clamp(e + 127, 0, byte_max), NaN -> 255; byte -> 2^(byte - 127)
  ceil_log2_f32                  ceil(log2 t) of fp32 t, exactly from the bits
  mxfp8_quant   rule "ref" | "flashmla"                 (V41 window rows: e4m3 codes, ue8m0 per 32)
  nvfp4_quant   variant "ref" | "vllm" | "flashmla"      (V41_FP4 rows: e2m1 codes, e4m3 scale per 16)
                + producer variants "flashmla352" | "vllm352" | "flashinfer384" | "lil432" (the 352 / 384 / 432-B
                records, docs/research_fp4_records.md §2-§4)
  mxfp4_quant   variant "ref" | "sglang"                 (indexer K/Q and the 368-B record: e2m1, ue8m0 per 32)
  dequant_mxfp8 / dequant_nvfp4 / dequant_mxfp4          the exact (bf16-representable) values, as fp32

Non-finite inputs (the spec is silent except for FlashMLA's NVFP4 test; decisions follow the repo's ue8m0 rule,
src/numerics/formats.hpp: NaN amax -> NaN scale, inf amax -> e = 128):
  * amax is a NaN-propagating max: any NaN in a block makes amax NaN (except NVFP4 vllm352 / flashinfer384 /
    lil432, whose producers reduce with fmaxf and ignore NaN elements; see nvfp4_quant).
  * a NaN scale is stored as the format's NaN (ue8m0 0xFF whatever byte_max is, e4m3 0x7F) and every code of that
    block is the encoding of +NaN (e4m3 0x7F; e2m1 per the `nan` policy: 0x0 or 0x7).
  * inf amax (no NaN) follows the formulas literally: MXFP8 e = 128 (byte 255, or byte_max), codes x * 2^-128;
    MXFP4 e = 128 clamped to 127 (byte 254), codes x * 2^-127 (sglang too: unverified); NVFP4 ref / flashmla /
    flashmla352: e4m3(inf) = NaN scale (0x7F); NVFP4 vllm: the clamp gives s = 448 (0x7E), codes of x / 448 (inf ->
    +-6); vllm352 / flashinfer384 / lil432: the saturating cast gives 0x7E, codes x * fl32(1/448).

Other choices where spec §3 is silent or loose:
  * every quantizer reads fp32 values; the rounding source (REF's bf16 vs vLLM's fp32) is the caller's round_bf16.
  * "tile" in FlashMLA's NVFP4 NaN rule = the 16-value scale block.
  * MXFP8 codes use the unclamped e (byte_max only clamps the stored byte; they differ only at e = 128).
  * e4m3 codes keep the sign of zero (0x80), as IEEE / PTX cvt / ml_dtypes do; zero_sign applies to e2m1 only.
  * MXFP4 sglang follows the research note §1 (sglang's mxfp4_k_cache.py), not spec §3: log2 of amax (floored at
    fl32(1e-40)) minus fl32(log2 6), a byte clamp [0, 255] and codes of the exact quotient; see mxfp4_quant.
  * codes are fl32(x * 2^-e) for the ue8m0 formats (the spec's "x * 2^-e"; 2^-e is exact in fp32 for -127 <= e <= 149) and
    fl32(x / s) for NVFP4 ref / vllm / flashmla / flashmla352 (div_rn), fl32(x * fl32(1 / s)) for vllm352 /
    flashinfer384 / lil432; every conversion RNE, e2m1 per `tie`.
  * two lil432 steps are PTX rcp.approx.ftz.f32, ASSUMED here to equal the correctly rounded fl32(1/6) and fl32(1/s)
    (measured on an H200, sm_90: research note §6).
"""
import math

import ml_dtypes
import numpy as np

F32 = np.float32
E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16

E2M1_MAGS = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)
# nibble -> value (0x8 is -0.0)
E2M1_VALUES = np.concatenate([E2M1_MAGS, -E2M1_MAGS]).astype(np.float32)
# midpoint k lies between index k and k + 1; RNE sends a tie to the even index: up for k = 1, 3, 5 (0.75, 1.75, 3.5)
E2M1_MIDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)

INV6 = F32(1) / F32(6)        # fl32(1/6)   = 0x3E2AAAAB
INV448 = F32(1) / F32(448)    # fl32(1/448) = 0x3B124925
NVFP4_FLOOR = F32(6.0 * 2.0 ** -9)     # 6 * 2^-9 (exact in fp32), on amax
MXFP4_FLOOR = F32(6.0 * 2.0 ** -126)   # 6 * 2^-126 (exact, normal), on amax
MXFP8_EPS = F32(1e-4)                  # 0x38D1B717


def _f32(x):
    return np.asarray(x, dtype=np.float32)


# ---- e2m1 --------------------------------------------------------------------------------------------------------
def e2m1_encode(x_f32, tie="rne", zero_sign="keep", nan="zero"):
    """fp32 -> e2m1 nibbles (uint8 0..15), nibble = 8*sign + index into {0, .5, 1, 1.5, 2, 3, 4, 6}.

    |x| > 6 and +-inf saturate to +-6 (satfinite). tie "rne": an exact midpoint goes to the even index (PTX
    cvt.rn.satfinite.e2m1x2.f32: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4); "half_down": to the smaller
    magnitude (DeepGEMM utils/math.py counts ax > boundary). zero_sign "keep": a negative value (or -0.0) whose
    magnitude rounds to 0 gives 0x8; "clear": 0x0; "lt_zero": the sign bit is (x < 0), so -0.0 gives 0x0 while a
    negative value rounding to magnitude 0 gives 0x8 (FlashMLA PR #18 tests/quant.py `_cast_to_e2m1_codes`, applied to
    the scaled value it encodes). nan "zero": 0x0; "max": 0x7 | (the NaN's sign bit << 3) (every zero_sign)."""
    if tie not in ("rne", "half_down") or zero_sign not in ("keep", "clear", "lt_zero") or nan not in ("zero", "max"):
        raise ValueError(f"e2m1_encode: bad option tie={tie} zero_sign={zero_sign} nan={nan}")
    x = _f32(x_f32)
    a = np.abs(x)
    idx = np.zeros(x.shape, np.uint8)
    for k, m in enumerate(E2M1_MIDS):
        idx += (a > m)
        if tie == "rne" and k % 2 == 1:
            idx += (a == m)
    sign = (x < 0) if zero_sign == "lt_zero" else np.signbit(x)
    if zero_sign == "clear":
        sign = sign & (idx != 0)
    out = (idx | (sign.astype(np.uint8) << 3)).astype(np.uint8)
    isnan = np.isnan(x)
    if isnan.any():
        nan_code = (np.uint8(7) | (np.signbit(x).astype(np.uint8) << 3)) if nan == "max" else np.uint8(0)
        out = np.where(isnan, nan_code, out).astype(np.uint8)
    return out


def e2m1_decode(nibbles):
    """e2m1 nibbles (only the low 4 bits are read) -> fp32 values (0x8 -> -0.0)."""
    return E2M1_VALUES[np.asarray(nibbles).astype(np.uint8) & 0xF]


def pack_nibbles(nibbles):
    """[..., D] nibbles -> [..., D // 2] bytes: dim 2i in the low nibble, dim 2i + 1 in the high nibble."""
    n = np.asarray(nibbles).astype(np.uint8) & 0xF
    return (n[..., 0::2] | (n[..., 1::2] << 4)).astype(np.uint8)


def unpack_nibbles(packed):
    """[..., D // 2] bytes -> [..., D] nibbles (inverse of pack_nibbles)."""
    p = np.asarray(packed).astype(np.uint8)
    out = np.empty(p.shape[:-1] + (2 * p.shape[-1],), np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out


# ---- e4m3 and ue8m0 ----------------------------------------------------------------------------------------------
def e4m3_encode(x_f32):
    """fp32 -> fp8 e4m3fn codes (uint8): one RNE, as the repo's act_quant_ue8m0 does (ml_dtypes, float32 source).
    No saturation: |x| > 464 and +-inf give NaN, 0x7F / 0xFF by sign (464, the midpoint of 448 and 480, rounds to
    the even 448); -0.0 and negatives rounding to 0 give 0x80 (the sign of zero is kept)."""
    with np.errstate(all="ignore"):
        return _f32(x_f32).astype(E4M3).view(np.uint8)


def e4m3_encode_sat(x_f32):
    """fp32 -> fp8 e4m3fn codes (uint8), saturating (CUDA __nv_fp8_e4m3(float) = cvt.rn.satfinite.e4m3x2.f32):
    finite |x| > 448 and +-inf give +-448 (0x7E / 0xFE), NaN gives 0x7F (whatever its sign), everything else is
    e4m3_encode's single RNE (|x| <= 464 already rounds to <= 448 there, so only the overflow branch differs)."""
    x = _f32(x_f32)
    with np.errstate(all="ignore"):
        out = e4m3_encode(np.clip(x, F32(-448), F32(448)))  # clip keeps NaN, maps +-inf to +-448
    return np.where(np.isnan(x), np.uint8(0x7F), out).astype(np.uint8)


def round_bf16(x_f32):
    """fp32 -> bf16 (one RNE, ml_dtypes) -> fp32: the spec's rounding source "bf16" (REF quantizes bf16 values;
    vLLM's V4.1 writers quantize the unrounded fp32, B49). Apply before a quantizer to model REF."""
    with np.errstate(all="ignore"):
        return _f32(x_f32).astype(BF16).astype(np.float32)


def e4m3_decode(codes):
    """fp8 e4m3fn codes (uint8) -> fp32 values (0x7F / 0xFF -> NaN)."""
    return np.asarray(codes).astype(np.uint8).view(E4M3).astype(np.float32)


def ceil_log2_f32(t):
    """ceil(log2 t) of fp32 t >= 0, exact, as float64 (integers, or NaN / -inf): normal or inf t from the bits,
    exponent field - 127 + (mantissa != 0) (inf -> 128); subnormal t from frexp; 0 -> -inf; NaN -> NaN."""
    t = _f32(t)
    bits = t.view(np.uint32)
    ef = ((bits >> 23) & 0xFF).astype(np.int64)
    mant = (bits & 0x7FFFFF) != 0
    e = (ef - 127 + mant).astype(np.float64)
    m, fe = np.frexp(t.astype(np.float64))  # subnormal: t = m * 2^fe, m in [0.5, 1)
    e = np.where(ef == 0, np.where(m == 0.5, fe - 1, fe).astype(np.float64), e)
    e = np.where(t == 0, -np.inf, e)
    return np.where(np.isnan(t), np.nan, e)


def ue8m0_encode(e, byte_max=255):
    """Integer exponent e (float64 array, may be +-inf / NaN) -> ue8m0 byte clamp(e + 127, 0, byte_max); NaN -> 255."""
    e = np.asarray(e, dtype=np.float64)
    b = np.clip(np.where(np.isnan(e), 0, e) + 127, 0, byte_max)
    return np.where(np.isnan(e), 255, b).astype(np.uint8)


def ue8m0_decode(byte):
    """ue8m0 bytes -> fp32 2^(byte - 127) (byte 0 -> 2^-127, an fp32 subnormal, exact); 255 -> NaN."""
    b = np.asarray(byte).astype(np.int64)
    return np.where(b == 255, np.float32(np.nan), np.ldexp(F32(1), np.minimum(b, 254) - 127)).astype(np.float32)


def _pow2_f32(k):
    """2^k as fp32 for integer k (float64 array) in [-149, 127]; entries where k is not finite give 1 (masked later)."""
    k = np.where(np.isfinite(k), k, 0).astype(np.int64)
    return np.ldexp(F32(1), k).astype(np.float32)


def _blocks(x, block):
    x = _f32(x)
    D = x.shape[-1]
    if D % block:
        raise ValueError(f"last dim {D} is not a multiple of the block {block}")
    return x.reshape(x.shape[:-1] + (D // block, block))


def _amax(xb):
    """NaN-propagating max |x| over the last axis, fp32."""
    return np.max(np.abs(xb), axis=-1).astype(np.float32)


# ---- MXFP8 (V41 window rows) ---------------------------------------------------------------------------------
def mxfp8_quant(x_f32, rule="ref", byte_max=255, block=32):
    """MXFP8, block 32 (spec §3): returns (codes uint8 e4m3fn [..., D], scales uint8 ue8m0 [..., D // 32]).
    block=128: the same rule over 128-dim blocks (the V4.1 indexer's FP8 K cache option, spec §5).

    rule "ref" (REF / vLLM): e = ceil(log2(fl32(max(amax, 1e-4) * fl32(1/448)))).
    rule "flashmla" (FlashMLA tests/quant.py, the floor on the scale): e = ceil(log2(max(fl32(amax / 448), 1e-4))).
    code = e4m3(clamp(fl32(x * 2^-e), +-448)); byte = clamp(e + 127, 0, byte_max) (byte_max 254 on gfx950).
    Non-finite: see the module docstring (NaN block: byte 0xFF, codes 0x7F; inf: e = 128)."""
    if rule not in ("ref", "flashmla"):
        raise ValueError(f"mxfp8_quant: bad rule {rule}")
    xb = _blocks(x_f32, block)
    amax = _amax(xb)
    with np.errstate(all="ignore"):
        if rule == "ref":
            t = (np.maximum(amax, MXFP8_EPS) * INV448).astype(np.float32)
        else:
            t = np.maximum((amax / F32(448)).astype(np.float32), MXFP8_EPS).astype(np.float32)
        e = ceil_log2_f32(t)
        y = (xb * _pow2_f32(-e)[..., None]).astype(np.float32)
        codes = e4m3_encode(np.clip(y, F32(-448), F32(448)))
    bad = np.isnan(e)
    codes = np.where(bad[..., None], np.uint8(0x7F), codes).astype(np.uint8)
    return codes.reshape(_f32(x_f32).shape), ue8m0_encode(e, byte_max)


def dequant_mxfp8(codes, scales):
    """bf16(code) * 2^(byte - 127) as fp32 ([..., D] codes, [..., D // 32] bytes); exact (one fp32 pow2 scaling of an
    e4m3 value; bf16-representable for the exponents the quantizers produce). Byte 255 or a NaN code -> NaN."""
    v = e4m3_decode(codes)
    v = v.reshape(v.shape[:-1] + (v.shape[-1] // 32, 32))
    return _scale_pow2(v, scales).reshape(np.shape(codes))


def _scale_pow2(v, scales):
    b = np.asarray(scales).astype(np.int64)
    with np.errstate(all="ignore"):
        out = np.ldexp(v, (np.minimum(b, 254) - 127)[..., None]).astype(np.float32)
    return np.where((b == 255)[..., None], np.float32(np.nan), out).astype(np.float32)


# ---- NVFP4 (V41_FP4 compressed rows; the 352 / 384 / 432-B producers) -----------------------------------------
NVFP4_VARIANTS = ("ref", "vllm", "flashmla", "flashmla352", "vllm352", "flashinfer384", "lil432")
# the zero_sign each variant's producer uses (nvfp4_quant's zero_sign=None): PTX cvt keeps the sign bit; FlashMLA
# PR #18's test ORs in (q < 0)
NVFP4_ZERO_SIGN = {"ref": "keep", "vllm": "keep", "flashmla": "keep", "flashmla352": "lt_zero", "vllm352": "keep",
                   "flashinfer384": "keep", "lil432": "keep"}
E4M3_MIN_SCALE = F32(2.0 ** -9)     # smallest positive e4m3 (subnormal 0x01), the 352 writers' floor on the scale
# lil432: rcp.approx.ftz.f32(6.0) = fl32(1/6) = 0x3E2AAAAB (measured on an H200, sm_90: research note §6)
LIL_R6 = INV6


def _amax_fmax(xb):
    """max |x| over the last axis ignoring NaN elements (CUDA fmaxf reduction from 0): an all-NaN block gives 0."""
    return np.fmax.reduce(np.abs(xb), axis=-1, initial=F32(0)).astype(np.float32)


def _e4m3_ceil(t, b):
    """The 352-B writers' "ceil to e4m3": b = e4m3(t) (RNE, either cast); if b is not NaN, decode(b) < t and
    b < 0x7E, then b + 1 (t > 0 here, so b is a positive code and b + 1 the next e4m3 value; never past 448)."""
    b = np.asarray(b).astype(np.uint8)
    with np.errstate(all="ignore"):
        bump = (b != 0x7F) & (e4m3_decode(b) < t) & (b < 0x7E)
    return np.where(bump, b + np.uint8(1), b).astype(np.uint8)


def _recip_or_zero(s):
    """fl32(1 / s), 0 where s == 0 (the 384 / 432 writers' guard). lil432's rcp.approx.ftz(s) is ASSUMED correctly
    rounded (= fl32(1 / s)) for every e4m3 s (measured on an H200, sm_90: research note §6)."""
    with np.errstate(all="ignore"):
        inv = (F32(1) / s).astype(np.float32)
    return np.where(s == 0, F32(0), inv).astype(np.float32)


def nvfp4_quant(x_f32, variant="ref", tie="rne", zero_sign=None, nan="zero", amax_floor=None):
    """NVFP4, block 16 (spec §3; producers per docs/research_fp4_records.md §2-§4): returns
    (packed uint8 [..., D // 2], scales uint8 e4m3fn [..., D // 16]).

    variant "ref": a = max(amax, 6 * 2^-9); s = e4m3(fl32(a / 6)) (no upper clamp: a / 6 > 464 gives the NaN code 0x7F).
    variant "vllm": s = e4m3(clamp(fl32(amax * fl32(1/6)), 2^-9, 448)).
    variant "flashmla": s = e4m3(clamp(fl32(amax / 6), 2^-9, 448)); NaN or inf anywhere in the block -> scale 0x7F.
      These three: codes = e2m1(clamp(fl32(x / s_dec), +-6)), s_dec the decoded e4m3 scale, fp32 division (div_rn).
    variant "flashmla352" (vLLM FlashMLA PR #18 tests/quant.py, 352-B record): amax NaN-propagating;
      t = max(fl32(amax / 6), 2^-9); b = e4m3(t) (non-saturating: t > 464, inf included, gives 0x7F); then the ceil
      bump (b + 1 if b is not NaN, decode(b) < t and b < 0x7E); codes = e2m1(clamp(fl32(x / S), +-6)), S = decode(b).
      Natural zero_sign "lt_zero".
    variant "vllm352" (vLLM nvfp4_ds_mla_cache_kernels.cu, 352-B record): amax ignores NaN elements (fmaxf; an
      all-NaN block has amax 0); t = max(fl32(amax / 6), 2^-9); b = e4m3sat(t) (inf -> 0x7E); the same ceil bump;
      codes = e2m1(clamp(fl32(x * fl32(1 / S)), +-6)) (reciprocal, then multiply). A NaN element gives q = NaN,
      coded per `nan` (PTX cvt of NaN unverified).
    variant "flashinfer384" (FlashInfer sparse-MLA nvfp4 / sglang SM120, 384-B record): amax ignores NaN;
      t = fl32(amax / 6), no floor; b = e4m3sat(t) (t <= 2^-10 gives 0x00); S = decode(b); inv = 0 if S == 0 else
      fl32(1 / S); codes = e2m1(clamp(fl32(x * inv), +-6)): S == 0 makes every code e2m1(x * 0) = +-0 (0x0, or 0x8
      for negative x under "keep"; a NaN element stays NaN).
    variant "lil432" (local-inference-lab vLLM cvt_warp_fp16_to_fp4, 432-B record): as flashinfer384 but
      t = fl32(amax * R6), R6 = rcp.approx.ftz(6) ASSUMED = fl32(1/6), and inv = rcp.approx.ftz(S) ASSUMED = fl32(1/S)
      (both measured equal to the IEEE reciprocals on an H200; the writer's amax is an __hmax over bf16/fp16, whose NaN handling is unverified: modelled as
      ignoring NaN). The 384 / 432 writers read bf16: pass bf16-representable x (round_bf16) to model them.
    zero_sign None: the variant's producer rule (NVFP4_ZERO_SIGN: "lt_zero" for flashmla352, else "keep").
    A NaN scale (0x7F) makes every code of its block e2m1(+NaN) (policy `nan`; FlashMLA's V41 test: 0; PR #18's
    torch.bucketize(NaN, right=True) probably gives index 7, i.e. "max"). amax_floor overrides the ref variant's floor
    on amax (e.g. 0 to model its absence)."""
    if variant not in NVFP4_VARIANTS:
        raise ValueError(f"nvfp4_quant: bad variant {variant}")
    if zero_sign is None:
        zero_sign = NVFP4_ZERO_SIGN[variant]
    x = _f32(x_f32)
    xb = _blocks(x, 16)
    with np.errstate(all="ignore"):
        if variant in ("ref", "vllm", "flashmla"):
            amax = _amax(xb)
            if variant == "ref":
                floor = NVFP4_FLOOR if amax_floor is None else F32(amax_floor)
                t = (np.maximum(amax, floor) / F32(6)).astype(np.float32)
            elif variant == "vllm":
                t = np.clip((amax * INV6).astype(np.float32), F32(2.0 ** -9), F32(448))
            else:
                t = np.clip((amax / F32(6)).astype(np.float32), F32(2.0 ** -9), F32(448))
            sbytes = e4m3_encode(t)
            if variant == "flashmla":
                sbytes = np.where(np.isfinite(xb).all(axis=-1), sbytes, np.uint8(0x7F)).astype(np.uint8)
            s = e4m3_decode(sbytes)
            q = np.clip((xb / s[..., None]).astype(np.float32), F32(-6), F32(6))
        elif variant in ("flashmla352", "vllm352"):
            amax = _amax(xb) if variant == "flashmla352" else _amax_fmax(xb)
            t = np.maximum((amax / F32(6)).astype(np.float32), E4M3_MIN_SCALE)  # np.maximum keeps a NaN amax
            sbytes = _e4m3_ceil(t, e4m3_encode(t) if variant == "flashmla352" else e4m3_encode_sat(t))
            s = e4m3_decode(sbytes)
            if variant == "flashmla352":
                q = (xb / s[..., None]).astype(np.float32)
            else:
                q = (xb * (F32(1) / s).astype(np.float32)[..., None]).astype(np.float32)
            q = np.clip(q, F32(-6), F32(6))
        else:  # flashinfer384, lil432
            amax = _amax_fmax(xb)
            t = (amax / F32(6)) if variant == "flashinfer384" else (amax * LIL_R6)
            sbytes = e4m3_encode_sat(t.astype(np.float32))
            s = e4m3_decode(sbytes)
            q = np.clip((xb * _recip_or_zero(s)[..., None]).astype(np.float32), F32(-6), F32(6))
    q = np.where(np.isnan(s)[..., None], F32(np.nan), q)  # canonical +NaN for every code of a NaN-scale block
    nib = e2m1_encode(q, tie=tie, zero_sign=zero_sign, nan=nan).reshape(x.shape)
    return pack_nibbles(nib), sbytes.astype(np.uint8)


def dequant_nvfp4(packed, scales):
    """e2m1 * e4m3 as fp32 ([..., D // 2] bytes, [..., D // 16] e4m3 codes): exact (<= 6 significant bits, bf16-exact);
    a NaN scale gives NaN for its 16 values."""
    v = e2m1_decode(unpack_nibbles(packed))
    v = v.reshape(v.shape[:-1] + (v.shape[-1] // 16, 16))
    return (v * e4m3_decode(scales)[..., None]).astype(np.float32).reshape(v.shape[:-2] + (-1,))


# ---- MXFP4 (indexer K / Q; sglang 368-B record) ------------------------------------------------------------------
SGLANG_LOG2_6 = F32(2.584962500721156)   # sglang's constant, as the fp32 value Triton / torch use (0x40257007)
SGLANG_AMAX_MIN = F32(1e-40)             # sglang's floor on amax, an fp32 subnormal (~9.99995e-41)


def _round_int(v, rounding):
    if rounding == "half_even":
        return np.rint(v)
    if rounding == "half_up":
        return np.floor(v + 0.5)
    raise ValueError(f"bad sglang rounding {rounding}")


def sglang_exponent(amax_f32, sglang_round="half_even", amax_floor=None):
    """sglang's 368-B exponent L-rounding (research note §1): e = round(fl32(fl32(log2(max(amax, fl32(1e-40))))
    - fl32(2.584962500721156))), log2 the correctly rounded fp32 log2 (float64 log2 rounded once; whether Triton's
    tl.math.log2 is exact is unverified), round half-even (torch .round()) or floor(L + 0.5) (Triton). float64
    integers; +inf for an inf amax, NaN for a NaN amax (np.maximum propagates it), -inf only with amax_floor=0 and
    amax 0. amax_floor overrides the 1e-40 floor."""
    floor = SGLANG_AMAX_MIN if amax_floor is None else F32(amax_floor)
    with np.errstate(all="ignore"):
        a = np.maximum(_f32(amax_f32), floor).astype(np.float32)
        l2 = np.log2(a.astype(np.float64)).astype(np.float32)
        L = (l2 - SGLANG_LOG2_6).astype(np.float32)
    return _round_int(L.astype(np.float64), sglang_round)


def mxfp4_quant(x_f32, variant="ref", tie="rne", zero_sign="keep", nan="zero", amax_floor=None,
                sglang_round="half_even"):
    """MXFP4, block 32: returns (packed uint8 [..., D // 2], scales uint8 ue8m0 [..., D // 32]).

    variant "ref" (spec §3): a = max(amax, amax_floor) (default 6 * 2^-126; vLLM #41015 used 1e-4);
      e = ceil(log2(fl32(a * fl32(1/6)))), exact from the bits, clamped to [-127, 127]; codes = e2m1(fl32(x * 2^-e))
      (2^-e exact in fp32, 2^-127 subnormal); byte = e + 127.
    variant "sglang" (the 368-B record; research note §1, sglang mxfp4_k_cache.py, which the spec's §3 line
      mis-states): e = sglang_exponent(amax) = round(fl32(fl32(log2(max(amax, fl32(1e-40)))) - fl32(log2 6))),
      half-even (torch reference) or sglang_round="half_up" (Triton floor(L + 0.5)); byte = clip(e + 127, 0, 255)
      (no clamp of e itself, no 6 * 2^-126 floor: an all-zero block gives byte 0, scale 2^-127); codes = RNE e2m1 of
      the exact quotient x / 2^(byte - 127), saturating at 6 (|x| / 2^e reaches ~8.5). The quotient is formed in
      float64 (exact) and handed to e2m1_encode as fp32: exact whenever |q| >= 2^-126, and a smaller q codes to +-0
      with its sign either way. This equals sglang's threshold counting |x| > 0.25 s, >= 0.75 s, ... (s a power of
      two). Natural zero_sign "keep" (sglang takes x's fp32 sign bit). amax_floor overrides the 1e-40 floor.
      Not modelled: sglang's group_size 64 / 128; Triton flushing 1e-40 or exp2(-127) to zero (unverified).
      Non-finite amax, UNVERIFIED (kept from this module's earlier rule; sglang's float-to-int of inf / NaN is
      platform behaviour, the research note expects byte 0): inf amax gives e = 127 (byte 254) and codes x * 2^-127
      (inf -> 6); NaN is handled below.
    NaN in a block (both variants): byte 0xFF and every code e2m1(+NaN) (policy `nan`)."""
    if variant not in ("ref", "sglang"):
        raise ValueError(f"mxfp4_quant: bad variant {variant}")
    x = _f32(x_f32)
    xb = _blocks(x, 32)
    amax = _amax(xb)
    if variant == "sglang":
        e = sglang_exponent(amax, sglang_round, amax_floor)
        e = np.where(np.isposinf(e), 127, e)                # inf amax: unverified, see the docstring
        e = np.where(np.isnan(e), np.nan, np.clip(e + 127, 0, 255) - 127)   # the byte clamp, as an exponent
        k = np.where(np.isnan(e), 0, e).astype(np.int64)
        with np.errstate(all="ignore"):
            q = np.ldexp(xb.astype(np.float64), -k[..., None]).astype(np.float32)
    else:
        floor = MXFP4_FLOOR if amax_floor is None else F32(amax_floor)
        with np.errstate(all="ignore"):
            a = np.maximum(amax, floor).astype(np.float32)
            e = ceil_log2_f32((a * INV6).astype(np.float32))
            e = np.clip(e, -127, 127)  # NaN stays NaN
            q = (xb * _pow2_f32(-e)[..., None]).astype(np.float32)
    q = np.where(np.isnan(e)[..., None], F32(np.nan), q)
    nib = e2m1_encode(q, tie=tie, zero_sign=zero_sign, nan=nan).reshape(x.shape)
    return pack_nibbles(nib), ue8m0_encode(e, 255)


def dequant_mxfp4(packed, scales):
    """e2m1 * 2^(byte - 127) as fp32 ([..., D // 2] bytes, [..., D // 32] ue8m0): exact while the product is in fp32
    range (bf16-exact for the exponents the quantizers produce); byte 255 -> NaN."""
    v = e2m1_decode(unpack_nibbles(packed))
    v = v.reshape(v.shape[:-1] + (v.shape[-1] // 32, 32))
    return _scale_pow2(v, scales).reshape(v.shape[:-2] + (-1,))
