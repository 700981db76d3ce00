"""Number formats and roundings, written from their definitions (numpy + ml_dtypes only).

What the stage models in this package build on, and what tests/python/test_numerics_exhaustive.py holds the C++
conversions (src/numerics/formats.*) against:

  encode(x, fmt) / decode(fmt, code)   one round-to-nearest-even of an exact double into bf16 / fp16 / fp8 e5m2 /
                                       fp8 e4m3fn, in rational arithmetic (the oracle), and the value of a code from its
                                       fields
  to_bf16, bf16_rne                    float64 -> bf16 with ONE rounding (ml_dtypes casts float64 through float32:
                                       two roundings)
  bf16_half_away                       fp32 -> bf16 rounding half away from zero (AscendC CAST_ROUND)
  ceil_pow2_f32                        2^ceil(log2 t) from the bits: the ue8m0 / pow2 block-scale rule
  ue8m0_decode                         e8m0 scale codes -> fp32 2^(e - 127), code 255 = NaN
  as_f32, E4M3_VALUES                  stored bits (bf16 / fp16 / e4m3 codes) -> values
  hadamard_matrix                      the Sylvester Hadamard matrix H[i, j] = (-1)^popcount(i & j)

Every function here is exact on the bits; none of them may be "improved": the tests compare the models built on
them with the C++ reference bit for bit.
"""
import fractions
import math

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2

# The float64 value of each of the 256 fp8 e4m3fn codes (index = code; 0x7F / 0xFF are NaN).
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float64)


def f64(a):
    """Any array (bf16, fp8, fp32, ...) as float64 values (exact: every format here is a subset of float64)."""
    return np.asarray(a).astype(np.float64)


# ---- the exact oracle: one rounding of a double into a small format ----------------------------------------------
FORMATS = {  # ebits, mbits, has_inf, canonical positive NaN
    "bf16": (8, 7, True, 0x7FC0),
    "fp16": (5, 10, True, 0x7E00),
    "e5m2": (5, 2, True, 0x7E),
    "e4m3": (4, 3, False, 0x7F),
}


def encode(x: float, fmt: str) -> int:
    """The code of `fmt` nearest to the exact value of the double x: one round-to-nearest-even (OCP / IEEE rules).

    Rational arithmetic (fractions.Fraction), independent of both the C++ code and ml_dtypes. Overflow: inf where the
    format has one (bf16, fp16, e5m2), NaN for e4m3fn (no inf; max finite 448, so 464 still rounds to 448 and 465
    gives NaN). NaN gives the canonical quiet NaN with the sign kept; -0 stays -0."""
    ebits, mbits, has_inf, qnan = FORMATS[fmt]
    sign = (1 << (ebits + mbits)) if math.copysign(1.0, x) < 0 else 0
    inf = sign | (((1 << ebits) - 1) << mbits)
    if math.isnan(x):
        return sign | qnan
    if math.isinf(x):
        return inf if has_inf else sign | qnan
    a = fractions.Fraction(abs(x))
    if a == 0:
        return sign
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    e = emin  # the binade: 2^e <= a < 2^(e+1), or emin for subnormals
    while fractions.Fraction(2) ** (e + 1) <= a:
        e += 1
    q = fractions.Fraction(2) ** (e - mbits)
    r = a / q
    n = math.floor(r)
    rem = r - n
    if rem > fractions.Fraction(1, 2) or (rem == fractions.Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = n * q
    if has_inf:
        max_finite = (2 - fractions.Fraction(2) ** -mbits) * fractions.Fraction(2) ** ((1 << ebits) - 2 - bias)
    else:
        max_finite = (2 - fractions.Fraction(2) ** (1 - mbits)) * fractions.Fraction(2) ** ((1 << ebits) - 1 - bias)
    if v > max_finite:
        return inf if has_inf else sign | qnan
    if v < fractions.Fraction(2) ** emin:
        return sign | int(n)
    eb = e if n < (2 << mbits) else e + 1
    mant = int(v / fractions.Fraction(2) ** (eb - mbits)) - (1 << mbits)
    return sign | ((eb + bias) << mbits) | mant


def decode(fmt: str, code: int) -> float:
    """The value of a code of `fmt` from its fields: subnormal m * 2^(1 - bias - mbits), normal
    (2^mbits + m) * 2^(e - bias - mbits); NaN codes (and inf codes, for the formats that have them) give nan."""
    ebits, mbits, has_inf, _ = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    if has_inf and e == (1 << ebits) - 1:
        return math.nan
    if not has_inf and e == (1 << ebits) - 1 and m == (1 << mbits) - 1:
        return math.nan
    return math.ldexp(m, 1 - bias - mbits) if e == 0 else math.ldexp(m + (1 << mbits), e - bias - mbits)


# ---- roundings to bf16 --------------------------------------------------------------------------------------------
def to_bf16(x):
    """float64 -> bf16 (ml_dtypes array) with a single round-to-nearest-even: 8 significant bits kept by frexp/rint
    (exact for normal values; the values the models produce are normal). Non-finite values pass through."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        m, e = np.frexp(x)
        r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)
    r = np.where(np.isfinite(x), r, x)
    return r.astype(np.float32).astype(BF16)  # exact: r has at most 8 significant bits


def bf16_rne(x):
    """float64 -> the bf16 value (RNE) as float64, exactly (no double rounding through float32). For finite normal
    values; 0 stays 0."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)
    scale = np.ldexp(1.0, e - 8)
    return np.where(x == 0, x, np.round(x / scale) * scale)


def bf16_half_away(x):
    """fp32 -> bf16 rounding half away from zero (AscendC CAST_ROUND), exact on the bits; returned as fp32 values.
    Non-finite values pass through."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x8000) & 0xFFFF0000).astype(np.uint32)
    fin = np.isfinite(x)
    return np.where(fin, r.view(np.float32), x.astype(np.float32)).astype(np.float32)


# ---- block scales ------------------------------------------------------------------------------------------------
def ceil_pow2_f32(t):
    """2^ceil(log2 t) for positive normal float32 t, from the bits (exact): the exponent field, plus one when the
    mantissa is not zero. The ue8m0 scale rule s = 2^ceil(log2(fl32(amax * fl32(1/448)))) is ceil_pow2_f32 of t."""
    bits = np.asarray(t, dtype=np.float32).view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int64) - 127 + ((bits & 0x7FFFFF) != 0)
    return np.ldexp(np.float32(1.0), e).astype(np.float32)


# The scale rules of fp8 writers (dsa-check's quant::ScaleRule; attr scale_fmt, amax_eps, eps_on), in numpy fp32:
#   a = max(amax, eps) (floor on amax) | amax;  t = fl32(a / 448) (div) | fl32(a * fl32(1/448)) (mul)
#   t = max(t, eps) (floor on the scale);  s = t | bf16(t) (RNE) | 2^ceil(log2 t)
SCALE_FMTS = {  # name: (round, op, floor place, fixed floor or None = the amax_eps attr)
    "ue8m0": ("pow2", "mul", "amax", None), "pow2": ("pow2", "div", "scale", None),
    "fp32_div": ("fp32", "div", "amax", None), "fp32_mul": ("fp32", "mul", "amax", None),
    "bf16_div": ("bf16", "div", "amax", None), "bf16_mul": ("bf16", "mul", "amax", None),
    "amax448": ("fp32", "div", "amax", 0.0), "amax448_eps": ("fp32", "div", "amax", None),
    "flt_min": ("fp32", "div", "scale", float(np.finfo(np.float32).tiny)),
}


def block_scale(amax, scale_fmt, amax_eps=1e-4, eps_on="rule"):
    """fp32 scales of fp32 amaxes under a named rule (SCALE_FMTS); NaN amax -> NaN scale."""
    rnd, op, place, fixed = SCALE_FMTS[scale_fmt]
    eps = np.float32(fixed if fixed is not None else amax_eps)
    if fixed is None and eps_on != "rule":
        place = eps_on
    a = np.asarray(amax, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        x = np.where(np.isnan(a), a, np.maximum(a, eps)) if place == "amax" else a
        t = (x / np.float32(448.0)) if op == "div" else (x * (np.float32(1.0) / np.float32(448.0)))
        t = t.astype(np.float32)
        if place == "scale":
            t = np.where(np.isnan(t), t, np.maximum(t, eps)).astype(np.float32)
        if rnd == "bf16":
            return t.astype(BF16).astype(np.float32)
        if rnd == "pow2":
            pos = t > 0
            return np.where(pos, ceil_pow2_f32(np.where(pos, t, np.float32(1.0))), t).astype(np.float32)
    return t


def ue8m0_decode(codes):
    """e8m0 scale codes (uint8) -> fp32 scales 2^(code - 127); code 255 is NaN."""
    with np.errstate(all="ignore"):
        return np.where(codes == 255, np.nan, np.ldexp(1.0, codes.astype(np.int64) - 127)).astype(np.float32)


# ---- stored bits -> values ---------------------------------------------------------------------------------------
def as_f32(a, dtype_attr):
    """A dump's raw tensor -> fp32 values: bf16 bits (uint16, dtype attr "bf16") widened exactly, fp16 bits decoded,
    anything else cast."""
    if dtype_attr in ("bf16", "bfloat16"):
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dtype_attr in ("fp16", "float16"):
        return a.view(np.float16).astype(np.float32)
    return a.astype(np.float32)


def hadamard_matrix(n):
    """The n x n Sylvester Hadamard matrix (n a power of two), H[i, j] = (-1)^popcount(i & j), unnormalized, fp32."""
    i = np.arange(n)
    return np.where(np.bitwise_count(i[:, None] & i[None, :]) % 2 == 1, -1.0, 1.0).astype(np.float32) \
        if hasattr(np, "bitwise_count") else \
        np.array([[(-1.0) ** bin(a & b).count("1") for b in range(n)] for a in range(n)], np.float32)
