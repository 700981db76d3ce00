"""reference/fp4_codecs.py (the V4.1 MXFP8 / NVFP4 / MXFP4 codecs, spec v41_fp4.md §3) against independent checks:
a brute-force nearest-value e2m1 search with explicit tie rules over every bf16 bit pattern and around every
midpoint, ml_dtypes' float4_e2m1fn, the rational e4m3 oracle (reference.numerics.encode), and blocks whose codes and
scales are worked out by hand in the comments. No dsa-check binary needed."""
import fractions
import math

import ml_dtypes
import numpy as np
import pytest

from reference import fp4_codecs as fc
from reference import numerics as num

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
F32 = np.float32
MAGS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
TIES = ("rne", "half_down")
ZS = ("keep", "clear")
NANS = ("zero", "max")


def brute_e2m1(v, tie, zero_sign, nan):
    """One value (a Python float) -> nibble by searching the 8 magnitudes for the nearest, in exact rationals.
    zero_sign "lt_zero": the sign bit is (v < 0) (-0.0 -> 0x0)."""
    neg = math.copysign(1.0, v) < 0
    if math.isnan(v):
        return (7 | (8 if neg else 0)) if nan == "max" else 0
    a = 6.0 if math.isinf(v) else abs(v)
    fa = fractions.Fraction(a)
    d = [abs(fa - fractions.Fraction(m)) for m in MAGS]
    best = min(d)
    cands = [i for i in range(8) if d[i] == best]
    if len(cands) == 1:
        i = cands[0]
    else:  # an exact midpoint: two candidates
        i = [c for c in cands if c % 2 == 0][0] if tie == "rne" else min(cands)
    if i == 0 and zero_sign == "clear":
        return 0
    if zero_sign == "lt_zero":
        neg = v < 0
    return i | (8 if neg else 0)


def bf16_all_as_f32():
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def brute_table(vals, tie, zs, nan):
    # the nibble depends only on (sign, |v|): brute-force each distinct magnitude once
    out = np.empty(vals.shape, np.uint8)
    cache = {}
    for j, v in enumerate(vals.tolist()):
        key = (math.copysign(1.0, v) < 0, abs(v)) if not math.isnan(v) else ("nan", math.copysign(1.0, v) < 0)
        if key not in cache:
            cache[key] = brute_e2m1(v, tie, zs, nan)
        out[j] = cache[key]
    return out


# ---- e2m1 --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("zs", ZS)
@pytest.mark.parametrize("nan", NANS)
def test_e2m1_every_bf16_pattern(tie, zs, nan):
    x = bf16_all_as_f32()
    got = fc.e2m1_encode(x, tie=tie, zero_sign=zs, nan=nan)
    want = brute_table(x, tie, zs, nan)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(hex(int(x.view(np.uint32)[i])), int(got[i]), int(want[i])) for i in bad[:8]]


def test_e2m1_matches_ml_dtypes_float4():
    # ml_dtypes' float4_e2m1fn: RNE, satfinite, sign kept -> our rne / keep on every finite bf16 value
    x = bf16_all_as_f32()
    x = x[np.isfinite(x)]
    want = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    np.testing.assert_array_equal(fc.e2m1_encode(x, tie="rne", zero_sign="keep"), want)


@pytest.mark.parametrize("tie", TIES)
def test_e2m1_lt_zero_every_bf16_pattern(tie):
    x = bf16_all_as_f32()
    for nan in NANS:
        got = fc.e2m1_encode(x, tie=tie, zero_sign="lt_zero", nan=nan)
        want = brute_table(x, tie, "lt_zero", nan)
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, [(hex(int(x.view(np.uint32)[i])), int(got[i]), int(want[i])) for i in bad[:8]]


def midpoint_sweep():
    vals = []
    for m in [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]:
        v = F32(m)
        up, dn = v, v
        vals.append(v)
        for _ in range(4):
            up = np.nextafter(up, F32(np.inf))
            dn = np.nextafter(dn, F32(0))
            vals += [up, dn]
    vals += [F32(0), np.nextafter(F32(0), F32(1)), F32(2.0 ** -126), F32(7.0), F32(8.0), F32(3.4e38), F32(np.inf)]
    v = np.array(vals, np.float32)
    return np.concatenate([v, -v])


@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("zs", ZS + ("lt_zero",))
def test_e2m1_midpoint_sweep(tie, zs):
    x = midpoint_sweep()
    got = fc.e2m1_encode(x, tie=tie, zero_sign=zs)
    want = np.array([brute_e2m1(float(v), tie, zs, "zero") for v in x], np.uint8)
    np.testing.assert_array_equal(got, want)


def test_e2m1_ties_by_hand():
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], np.float32)
    # RNE: to the even index: 0.25->0 (0), 0.75->1.0 (2), 1.25->1.0 (2), 1.75->2.0 (4), 2.5->2.0 (4), 3.5->4.0 (6), 5->4.0 (6)
    np.testing.assert_array_equal(fc.e2m1_encode(mids, "rne"), [0, 2, 2, 4, 4, 6, 6])
    # half-down: always the smaller magnitude, index k of midpoint k (B50: 0.75->0.5, 1.75->1.5, 3.5->3)
    np.testing.assert_array_equal(fc.e2m1_encode(mids, "half_down"), [0, 1, 2, 3, 4, 5, 6])
    # negatives: same index with the sign bit; -0.25 rounds to magnitude 0: 0x8 kept, 0x0 cleared
    np.testing.assert_array_equal(fc.e2m1_encode(-mids, "rne"), [8, 10, 10, 12, 12, 14, 14])
    np.testing.assert_array_equal(fc.e2m1_encode(-mids, "rne", zero_sign="clear"), [0, 10, 10, 12, 12, 14, 14])
    # saturation: 6.5, 1e30, inf -> 6 (index 7); -inf -> 0xF
    np.testing.assert_array_equal(fc.e2m1_encode(np.array([6.5, 1e30, np.inf, -np.inf], np.float32)), [7, 7, 7, 15])
    # zeros: -0.0 follows the zero-sign rule; tiny negatives too
    z = np.array([0.0, -0.0, -1e-45, -0.2], np.float32)
    np.testing.assert_array_equal(fc.e2m1_encode(z, zero_sign="keep"), [0, 8, 8, 8])
    np.testing.assert_array_equal(fc.e2m1_encode(z, zero_sign="clear"), [0, 0, 0, 0])
    # lt_zero (FlashMLA PR #18 test, sign = x < 0): -0.0 -> 0x0, negatives rounding to 0 -> 0x8
    np.testing.assert_array_equal(fc.e2m1_encode(z, zero_sign="lt_zero"), [0, 0, 8, 8])
    np.testing.assert_array_equal(fc.e2m1_encode(-mids, "rne", zero_sign="lt_zero"), [8, 10, 10, 12, 12, 14, 14])
    # NaN: "zero" -> 0; "max" -> 0x7 with the NaN's sign bit
    n = np.array([np.nan, -np.nan], np.float32)
    n[1] = -abs(n[1])
    np.testing.assert_array_equal(fc.e2m1_encode(n, nan="zero"), [0, 0])
    np.testing.assert_array_equal(fc.e2m1_encode(n, nan="max"), [7, 15])


def test_e2m1_decode_roundtrip():
    vals = np.array(MAGS + [-m for m in MAGS], np.float32)
    codes = fc.e2m1_encode(vals)
    np.testing.assert_array_equal(codes, np.arange(16))
    back = fc.e2m1_decode(codes)
    np.testing.assert_array_equal(back.view(np.uint32), vals.view(np.uint32))  # -0.0 included, bit for bit
    np.testing.assert_array_equal(fc.e2m1_encode(fc.e2m1_decode(np.arange(16))), np.arange(16))


def test_pack_order():
    # dims 0..3 = 1.0 (2), -0.5 (9), 6 (7), -6 (15): byte 0 = 2 | 9 << 4 = 0x92, byte 1 = 7 | 15 << 4 = 0xF7
    nib = fc.e2m1_encode(np.array([1.0, -0.5, 6.0, -6.0], np.float32))
    np.testing.assert_array_equal(fc.pack_nibbles(nib), [0x92, 0xF7])
    np.testing.assert_array_equal(fc.unpack_nibbles(np.array([0x92, 0xF7], np.uint8)), nib)


# ---- helpers -----------------------------------------------------------------------------------------------------
def test_ue8m0_decode_and_ceil_log2():
    b = np.arange(256, dtype=np.uint8)
    got = fc.ue8m0_decode(b).astype(np.float64)
    want = np.array([math.ldexp(1.0, i - 127) for i in range(255)] + [math.nan])
    np.testing.assert_array_equal(got, want)
    # ceil(log2 t) against the rational definition on normal, subnormal and power-of-two fp32 values
    rng = np.random.default_rng(1)
    t = np.concatenate([rng.integers(1, 0x7F800000, 4000, dtype=np.uint32),
                        np.array([1, 2, 3, 0x7FFFFF, 0x800000, 0x800001, 0x3F800000, 0x3F800001, 0x7F7FFFFF], np.uint32)]
                       ).view(np.float32)
    got = fc.ceil_log2_f32(t)
    for ti, gi in zip(t.tolist(), got.tolist()):
        f = fractions.Fraction(ti)
        e = math.frexp(ti)[1]  # 2^(e-1) <= t < 2^e
        want = e - 1 if f == fractions.Fraction(2) ** (e - 1) else e
        assert gi == want, (ti, gi, want)


def test_e4m3_encode_matches_rational_oracle():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(3000) * 50, rng.standard_normal(1000) * 2.0 ** -8,
                        [448, 460, 464, np.nextafter(F32(464), F32(500)), 480, -464, 2.0 ** -10, 3 * 2.0 ** -10, -0.0]]
                       ).astype(np.float32)
    want = [num.encode(float(v), "e4m3") for v in x]
    np.testing.assert_array_equal(fc.e4m3_encode(x), want)


def test_e4m3_encode_sat():
    # by hand: 448 = 0x7E; 464 (tie of 448 / 480) -> 448; above -> saturate to 448; inf too; NaN -> 0x7F whatever
    # its sign; -0.0 -> 0x80; 1 -> 0x38; 2^-10 (tie of 0 / 2^-9) -> 0
    n = np.array([np.nan, np.nan], np.float32)
    n[1] = -abs(n[1])
    x = np.array([448, 464, 465, 500, 1e30, np.inf, -500, -np.inf, -0.0, 1.0, 2.0 ** -10, 3 * 2.0 ** -10], np.float32)
    np.testing.assert_array_equal(fc.e4m3_encode_sat(x),
                                  [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE, 0x80, 0x38, 0x00, 0x02])
    np.testing.assert_array_equal(fc.e4m3_encode_sat(n), [0x7F, 0x7F])
    # against the rational oracle of the clamped value
    rng = np.random.default_rng(5)
    y = (rng.standard_normal(3000) * 300).astype(np.float32)
    want = [num.encode(min(max(float(v), -448.0), 448.0), "e4m3") for v in y]
    np.testing.assert_array_equal(fc.e4m3_encode_sat(y), want)


# ---- MXFP4 -------------------------------------------------------------------------------------------------------
def mx_tie_block(k):
    """32 values: 6 * 2^k (sets amax) and the e2m1 midpoints 0.25, 0.75, 1.75, 3.5 and their negatives times 2^k,
    the rest 1.0 * 2^k."""
    v = np.full(32, 1.0)
    v[:9] = [6, .25, .75, 1.75, 3.5, -.25, -.75, -1.75, -3.5]
    return (v * 2.0 ** k).astype(np.float32)


@pytest.mark.parametrize("k", [-126, -20, 0, 5, 120])
def test_mxfp4_ties(k):
    x = mx_tie_block(k)
    # amax = 6 * 2^k; fl32(1/6) = 11184811 * 2^-26, 6 * fl32(1/6) = 1 + 2^-25, under half an ulp of 1 -> t = 2^k
    # exactly, e = k, byte k + 127; x * 2^-k = the multipliers exactly
    rne_nib = [7, 0, 2, 4, 6, 8, 10, 12, 14] + [2] * 23   # 6->7, .25->0, .75->1.0, 1.75->2.0, 3.5->4.0 (even)
    hd_nib = [7, 0, 1, 3, 5, 8, 9, 11, 13] + [2] * 23     # ties down: .5 (1), 1.5 (3), 3 (5)
    for tie, nib in (("rne", rne_nib), ("half_down", hd_nib)):
        p, s = fc.mxfp4_quant(x[None], tie=tie)
        np.testing.assert_array_equal(s, [[k + 127]])
        np.testing.assert_array_equal(fc.unpack_nibbles(p)[0], nib)
        # dequant: the decoded magnitudes times 2^k, exactly
        np.testing.assert_array_equal(fc.dequant_mxfp4(p, s)[0], (fc.E2M1_VALUES[nib] * 2.0 ** k).astype(np.float32))
    # -0.25 * 2^k rounds to magnitude 0: nibble 0x8 kept, 0x0 cleared
    p, _ = fc.mxfp4_quant(x[None], zero_sign="clear")
    assert fc.unpack_nibbles(p)[0][5] == 0


def test_mxfp4_scale_steps_and_floor():
    # amax = nextafter(6) = 6 (1 + 2^-22): t = fl32(amax * fl32(1/6)) = 1 + 2^-22 (+ rounding) > 1 -> e = 1, byte 128;
    # then 6 -> 3 (5), 0.75 -> 0.375: between 0 and .5 above the .25 midpoint -> 0.5 (1)
    x = np.zeros(32, np.float32)
    x[0], x[1] = np.nextafter(F32(6), F32(7)), 0.75
    p, s = fc.mxfp4_quant(x[None])
    assert s[0, 0] == 128 and list(fc.unpack_nibbles(p)[0][:3]) == [5, 1, 0]
    # all zeros: amax floored to 6 * 2^-126; 6 * 2^-126 * fl32(1/6) = (1 + 2^-25) 2^-126 -> 2^-126, e = -126, byte 1
    z = np.zeros((1, 32), np.float32)
    z[0, 3] = -0.0
    p, s = fc.mxfp4_quant(z)
    assert s[0, 0] == 1
    nib = fc.unpack_nibbles(p)[0]
    assert nib[3] == 8 and (np.delete(nib, 3) == 0).all()
    # amax below the floor, in fp32 subnormals: 0.75 * 2^-126 (= 1.5 * 2^-127, subnormal) and 2^-130;
    # e = -126, x * 2^126 = 0.75 (tie -> 1.0, nibble 2) and 2^-4 (-> 0)
    y = np.zeros((1, 32), np.float32)
    y[0, 0], y[0, 1] = 0.75 * 2.0 ** -126, 2.0 ** -130
    p, s = fc.mxfp4_quant(y)
    assert s[0, 0] == 1 and list(fc.unpack_nibbles(p)[0][:2]) == [2, 0]
    # the vLLM #41015 floor 1e-4 (B54): zeros give e = ceil(log2(fl32(1e-4 * fl32(1/6)))) = ceil(log2 1.67e-5) = -15
    p, s = fc.mxfp4_quant(np.zeros((1, 32), np.float32), amax_floor=1e-4)
    assert s[0, 0] == 127 - 15


def test_mxfp4_largest_and_nonfinite():
    # amax = 1.5 * 2^127 (finite): t = 2^125 (1 + 2^-25) -> 2^125, e = 125, byte 252; amax itself -> 6 (7)
    x = np.full((1, 32), 2.0 ** 120, np.float32)
    x[0, 0] = 1.5 * 2.0 ** 127
    p, s = fc.mxfp4_quant(x)
    assert s[0, 0] == 252 and fc.unpack_nibbles(p)[0][0] == 7 and fc.unpack_nibbles(p)[0][1] == 0
    # inf: e = 128 clamped to 127 -> byte 254; inf -> 6 (7), -2 -> -2 * 2^-127 -> -0 (8)
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = np.inf, -2
    p, s = fc.mxfp4_quant(x)
    assert s[0, 0] == 254 and list(fc.unpack_nibbles(p)[0][:2]) == [7, 8]
    # NaN: byte 255, every code e2m1(+NaN): 0 ("zero") or 7 ("max")
    x[0, 0] = np.nan
    for nan, c in (("zero", 0), ("max", 7)):
        p, s = fc.mxfp4_quant(x, nan=nan)
        assert s[0, 0] == 255 and (fc.unpack_nibbles(p) == c).all()
    assert np.isnan(fc.dequant_mxfp4(p, s)).all()


def test_mxfp4_sglang_round_to_nearest():
    # sglang (research note §1): e = round(fl32(fl32(log2 max(amax, fl32(1e-40))) - fl32(log2 6))), byte clip(e + 127)
    # amax = 8: log2 8 - 2.585 = 0.415 -> e = 0 (byte 127), 8 saturates to 6 (7), 3.5 stays a tie (-> 4.0, 6);
    # ref: t = fl32(8 * fl32(1/6)) = 1.333 -> e = 1, 8 -> 4 (6), 3.5 -> 1.75 -> 2.0 (4)
    x = np.full((1, 32), 1.0, np.float32)
    x[0, 0], x[0, 1] = 8.0, 3.5
    p, s = fc.mxfp4_quant(x, "sglang")
    assert s[0, 0] == 127 and list(fc.unpack_nibbles(p)[0][:3]) == [7, 6, 2]
    p, s = fc.mxfp4_quant(x, "ref")
    assert s[0, 0] == 128 and list(fc.unpack_nibbles(p)[0][:3]) == [6, 4, 1]  # 1.0 -> 0.5 (1)
    # amax 9: log2 9 - log2 6 = log2 1.5 = 0.585 -> e = 1 (byte 128)
    x[0, 0] = 9.0
    assert fc.mxfp4_quant(x, "sglang")[1][0, 0] == 128


def sglang_tie_amax(bits, want_l2, want_L):
    """An fp32 amax whose sglang L is exactly a half-integer in fp32, checked step by step with numpy fp32 ops."""
    amax = np.array([bits], np.uint32).view(np.float32)[0]
    l2 = F32(math.log2(float(amax)))          # fp32 log2 (correctly rounded: the double log2 rounded once)
    assert float(l2) == want_l2
    C = F32(2.584962500721156)                # fp32 constant 0x40257007
    assert C.view(np.uint32) == 0x40257007
    L = F32(l2 - C)
    assert float(L) == want_L
    return amax


def test_mxfp4_sglang_half_even_vs_half_up():
    # amax 8897460 (0x4B07C3B4): exact log2(amax / 6) = 20.4999996 (nearest 20), but fl32(log2 amax) = 23.08496284...
    # (0x41B8AE01) and that minus fl32(log2 6) = 20.50000024 rounds (ulp 2^-19) to 20.5 exactly: half-even -> 20
    # (byte 147), floor(20.5 + 0.5) = 21 (byte 148)
    amax = sglang_tie_amax(0x4B07C3B4, float.fromhex("0x1.715c02p+4"), 20.5)
    x = np.ones((1, 32), np.float32)
    x[0, 0] = amax
    assert fc.mxfp4_quant(x, "sglang")[1][0, 0] == 147
    assert fc.mxfp4_quant(x, "sglang", sglang_round="half_up")[1][0, 0] == 148
    # a negative tie: amax 0x3F07C3B7 (0.53033): L = -3.5 exactly: half-even -> -4 (byte 123), floor(-3.0) -> -3 (124)
    amax = sglang_tie_amax(0x3F07C3B7, -float.fromhex("0x1.d47fc8p-1"), -3.5)
    x = np.full((1, 32), 0.0, np.float32)
    x[0, 0] = amax
    assert fc.mxfp4_quant(x, "sglang")[1][0, 0] == 123
    assert fc.mxfp4_quant(x, "sglang", sglang_round="half_up")[1][0, 0] == 124


def test_mxfp4_sglang_zero_tiny_huge_blocks():
    # all zeros (one -0.0): max(0, fl32(1e-40)) -> log2 = -132.877 - 2.585 = -135.46 -> e = -135, byte clip(-8) = 0
    # (ref: byte 1); codes 0, -0.0 keeps its sign bit (0x8, "keep")
    z = np.zeros((1, 32), np.float32)
    z[0, 3] = -0.0
    p, s = fc.mxfp4_quant(z, "sglang")
    nib = fc.unpack_nibbles(p)[0]
    assert s[0, 0] == 0 and nib[3] == 8 and (np.delete(nib, 3) == 0).all()
    assert fc.mxfp4_quant(z, "ref")[1][0, 0] == 1
    # amax 1.5 * 2^-126: log2 = -125.415, minus 2.585 = -128.0 -> byte clip(-1) = 0, scale 2^-127 (no e clamp to
    # -127 first: same byte here); codes = x * 2^127: 1.5 * 2^-126 -> 3.0 (5), 0.75 * 2^-127 -> 0.75 -> 1.0 (2),
    # -2^-130 -> -0.125 -> 0x8
    y = np.zeros((1, 32), np.float32)
    y[0, :3] = [1.5 * 2.0 ** -126, 0.75 * 2.0 ** -127, -(2.0 ** -130)]
    p, s = fc.mxfp4_quant(y, "sglang")
    assert s[0, 0] == 0 and list(fc.unpack_nibbles(p)[0][:4]) == [5, 2, 8, 0]
    # amax 2^-130 alone: L = -132.585 -> e = -133 -> byte 0; 2^-130 * 2^127 = 0.125 -> 0
    y = np.zeros((1, 32), np.float32)
    y[0, 0] = 2.0 ** -130
    p, s = fc.mxfp4_quant(y, "sglang")
    assert s[0, 0] == 0 and (fc.unpack_nibbles(p) == 0).all()
    # largest finite: 1.5 * 2^127: log2 = 127.585 -> 125 -> byte 252; amax -> 6 (7); 2^120 * 2^-125 -> 2^-5 -> 0
    x = np.full((1, 32), 2.0 ** 120, np.float32)
    x[0, 0] = 1.5 * 2.0 ** 127
    p, s = fc.mxfp4_quant(x, "sglang")
    assert s[0, 0] == 252 and list(fc.unpack_nibbles(p)[0][:2]) == [7, 0]
    # non-finite (unverified, the module's rule): inf -> byte 254, inf -> 6, -2 * 2^-127 -> -0 (8); NaN -> 255
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = np.inf, -2
    p, s = fc.mxfp4_quant(x, "sglang")
    assert s[0, 0] == 254 and list(fc.unpack_nibbles(p)[0][:2]) == [7, 8]
    x[0, 0] = np.nan
    p, s = fc.mxfp4_quant(x, "sglang", nan="max")
    assert s[0, 0] == 255 and (fc.unpack_nibbles(p) == 7).all()


def test_mxfp4_sglang_every_bf16_amax():
    """Every positive finite bf16 amax (0x0001..0x7F7F: 2^15 - 2^7 - 1 values), one block [amax, 0, ..., 0]:
    half-even == half-up == the exact nearest integer k of log2(amax / 6) (clamped to a byte), and the distance of
    log2(amax) - log2(6) from every half-integer is >= 2^-9, so any log2 with abs error < 2^-9 (plus the two fp32
    roundings of L, each <= 2^-17 here, and fl32(log2 6)'s 1.06e-7) gives the same byte. Reports the margin."""
    bits = np.arange(1, 0x7F80, dtype=np.uint32)
    amax = (bits << 16).view(np.float32)
    assert amax.size == 2 ** 15 - 2 ** 7 - 1 and np.isfinite(amax).all()
    x = np.zeros((amax.size, 32), np.float32)
    x[:, 0] = amax
    p_even, s_even = fc.mxfp4_quant(x, "sglang", sglang_round="half_even")
    p_up, s_up = fc.mxfp4_quant(x, "sglang", sglang_round="half_up")
    np.testing.assert_array_equal(s_even, s_up)
    np.testing.assert_array_equal(p_even, p_up)
    # the exact nearest integer, in rationals: k with 2^(2k-1) < (a/6)^2 < 2^(2k+1) (never equal: the square of a
    # rational is never an odd power of two)
    want = np.empty(amax.size, np.int64)
    margins = np.empty(amax.size)
    for i, a in enumerate(amax.tolist()):
        r2 = (fractions.Fraction(a) / 6) ** 2
        k = round(math.log2(a) - math.log2(6))
        for _ in range(3):
            lo, hi = fractions.Fraction(2) ** (2 * k - 1), fractions.Fraction(2) ** (2 * k + 1)
            assert r2 != lo and r2 != hi
            if r2 < lo:
                k -= 1
            elif r2 > hi:
                k += 1
            else:
                break
        assert fractions.Fraction(2) ** (2 * k - 1) < r2 < fractions.Fraction(2) ** (2 * k + 1)
        want[i] = min(max(k + 127, 0), 255)
        L = math.log2(a) - math.log2(6)           # float64: error < 1e-13, far below the margins found
        margins[i] = abs(L - (math.floor(L) + 0.5))
    np.testing.assert_array_equal(s_even[:, 0], want)
    # codes: element 0 = RNE e2m1 of amax / 2^(byte - 127) (exact rational), saturating; the zeros give 0
    nib = fc.unpack_nibbles(p_even)
    assert (nib[:, 1:] == 0).all()
    for i in range(0, amax.size, 7):
        q = float(amax[i]) * 2.0 ** -(int(want[i]) - 127)
        assert nib[i, 0] == brute_e2m1(q, "rne", "keep", "zero")
    m = margins.min()
    i = int(margins.argmin())
    print(f"sglang bf16 amax margin: min |log2(amax) - log2 6 - (k + 1/2)| = {m:.10f} = 2^{math.log2(m):.4f} "
          f"at amax {amax[i]!r} (bf16 0x{int(bits[i]):04X}); normal amax: {margins[amax >= 2.0 ** -126].min():.10f}")
    assert m >= 2.0 ** -9 + 2.0 ** -15


# ---- NVFP4 -------------------------------------------------------------------------------------------------------
def nv_block(scale, mults):
    v = np.ones(16) * scale
    v[:len(mults)] = np.array(mults) * scale
    return v.astype(np.float32)


@pytest.mark.parametrize("variant", ["ref", "vllm", "flashmla"])
@pytest.mark.parametrize("k", [-9, -3, 0, 8])
def test_nvfp4_ties_pow2_scale(variant, k):
    # amax = 6 * 2^k: a / 6 = 2^k exactly; a * fl32(1/6) = 2^k (1 + 2^-25) -> 2^k; e4m3 2^k: normal (k + 7) << 3
    # (k >= -6), subnormal 2^-9 = 0x01; x / s = the multipliers exactly
    x = nv_block(2.0 ** k, [6, .25, .75, 1.75, 3.5, -.25, -.75, -1.75, -3.5])
    p, s = fc.nvfp4_quant(x[None], variant)
    assert s[0, 0] == ((k + 7) << 3 if k >= -6 else 1 << (k + 9))
    np.testing.assert_array_equal(fc.unpack_nibbles(p)[0], [7, 0, 2, 4, 6, 8, 10, 12, 14] + [2] * 7)
    p, s = fc.nvfp4_quant(x[None], variant, tie="half_down", zero_sign="clear")
    np.testing.assert_array_equal(fc.unpack_nibbles(p)[0], [7, 0, 1, 3, 5, 0, 9, 11, 13] + [2] * 7)
    np.testing.assert_array_equal(fc.dequant_nvfp4(p, s)[0],
                                  (np.array([6, 0, .5, 1.5, 3, 0, -.5, -1.5, -3] + [1] * 7) * 2.0 ** k).astype(np.float32))


def test_nvfp4_non_pow2_and_rounded_scale():
    # amax = 6.75 = 6 * 1.125: s = 1.125 (e4m3 0x39); 0.84375 = 0.75 * 1.125 -> x / s = 0.75 exactly: tie -> 1.0 (2)
    x = nv_block(1.0, [6.75, 0.84375, 1.125])
    p, s = fc.nvfp4_quant(x[None])
    assert s[0, 0] == 0x39
    assert list(fc.unpack_nibbles(p)[0][:3]) == [7, 2, 2]  # 6.75/1.125 = 6; 1.125/1.125 = 1 (2); 1/1.125 = .889 -> 1 (2)
    # amax = 6.375 = 6 * 1.0625: s = e4m3(1.0625), the midpoint of 1.0 and 1.125 -> even mantissa: 1.0 (0x38);
    # codes divide by the stored 1.0 (not 1.0625, B53): 6.375 -> 6 (7), 0.796875 -> 1.0 (2, not a tie any more)
    x = nv_block(1.0, [6.375, 0.796875, 0.75])
    p, s = fc.nvfp4_quant(x[None])
    assert s[0, 0] == 0x38 and list(fc.unpack_nibbles(p)[0][:3]) == [7, 2, 2]


@pytest.mark.parametrize("variant", ["ref", "vllm", "flashmla"])
def test_nvfp4_sub_floor(variant):
    # zeros: ref floors amax to 6 * 2^-9, the others clamp the scale to 2^-9: s = 2^-9 = e4m3 0x01; codes 0 (-0 -> 8)
    x = np.zeros((1, 16), np.float32)
    x[0, 1] = -0.0
    p, s = fc.nvfp4_quant(x, variant)
    assert s[0, 0] == 1 and list(fc.unpack_nibbles(p)[0][:3]) == [0, 8, 0]
    # amax 2^-11 (below 6 * 2^-9): s = 2^-9, x / s = 0.25 -> tie to 0 (RNE) ; 3 * 2^-11 -> 0.75 -> 1.0 (2)
    x[0, 0], x[0, 2] = 2.0 ** -11, 3 * 2.0 ** -11
    p, s = fc.nvfp4_quant(x, variant)
    assert s[0, 0] == 1 and list(fc.unpack_nibbles(p)[0][:3]) == [0, 8, 2]


def test_nvfp4_upper_and_nonfinite():
    x = nv_block(1.0, [3000.0])
    # ref: no upper clamp, 3000 / 6 = 500 >= 464 -> e4m3 NaN (0x7F), codes e2m1(+NaN) -> 0
    p, s = fc.nvfp4_quant(x[None], "ref")
    assert s[0, 0] == 0x7F and (fc.unpack_nibbles(p) == 0).all()
    # vllm / flashmla: clamp to 448 (0x7E); 3000 / 448 = 6.7 -> 6 (7); 1 / 448 -> 0
    for v in ("vllm", "flashmla"):
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == 0x7E and list(fc.unpack_nibbles(p)[0][:2]) == [7, 0]
    # ref: 2760 / 6 = 460 < 464 rounds to 448 (0x7E)
    assert fc.nvfp4_quant(nv_block(1.0, [2760.0])[None], "ref")[1][0, 0] == 0x7E
    # inf in the block: flashmla NaN scale, codes 0; ref: e4m3(inf) = NaN, same; vllm: scale 448, inf -> 6 (7)
    x = nv_block(1.0, [np.inf, -2.0])
    for v in ("ref", "flashmla"):
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == 0x7F and (fc.unpack_nibbles(p) == 0).all()
    p, s = fc.nvfp4_quant(x[None], "vllm")
    assert s[0, 0] == 0x7E and list(fc.unpack_nibbles(p)[0][:2]) == [7, 8]
    # NaN: every variant NaN scale; codes 0 or 7 by policy
    x = nv_block(1.0, [np.nan])
    for v in ("ref", "vllm", "flashmla"):
        p, s = fc.nvfp4_quant(x[None], v, nan="max")
        assert s[0, 0] == 0x7F and (fc.unpack_nibbles(p) == 7).all()
    assert np.isnan(fc.dequant_nvfp4(p, s)).all()


def test_nvfp4_mul_vs_div_scale_every_bf16_amax():
    # spec §3 (derived): x fl32(1/6) and / 6 give the same e4m3 scale for every bf16 amax
    a = bf16_all_as_f32()[1:0x7F80]  # positive finite bf16
    t_div = (a / F32(6)).astype(np.float32)
    t_mul = (a * (F32(1) / F32(6))).astype(np.float32)
    ok = t_div < 448
    np.testing.assert_array_equal(fc.e4m3_encode(t_div[ok]), fc.e4m3_encode(t_mul[ok]))
    # and MXFP4's pow2 from the product equals the one from the quotient
    ok = t_div > 0
    np.testing.assert_array_equal(fc.ceil_log2_f32(t_div[ok]), fc.ceil_log2_f32(t_mul[ok]))


# ---- NVFP4 producer variants (352 / 384 / 432-B records; research note §2-§4) -----------------------------------
PRODUCERS = ("flashmla352", "vllm352", "flashinfer384", "lil432")


@pytest.mark.parametrize("variant", PRODUCERS)
@pytest.mark.parametrize("k", [-9, -6, 0, 8])
def test_nvfp4_producers_pow2_ties(variant, k):
    # amax = 6 * 2^k: amax / 6 = 2^k exactly; lil432 amax * fl32(1/6) = 2^k (1 + 2^-25) -> 2^k; e4m3(2^k) = (k + 7) << 3
    # (k >= -6) or 1 << (k + 9); decode = t: no ceil bump; 1 / 2^k exact: the quotients are the multipliers
    x = nv_block(2.0 ** k, [6, .25, .75, 1.75, 3.5, -.25, -.75, -1.75, -3.5])
    p, s = fc.nvfp4_quant(x[None], variant)
    assert s[0, 0] == ((k + 7) << 3 if k >= -6 else 1 << (k + 9))
    np.testing.assert_array_equal(fc.unpack_nibbles(p)[0], [7, 0, 2, 4, 6, 8, 10, 12, 14] + [2] * 7)


def test_nvfp4_producers_zero_and_sub_floor():
    z = np.zeros((1, 16), np.float32)
    z[0, 1], z[0, 2] = -0.0, -(2.0 ** -12)
    # 352 writers: t = max(0, 2^-9) -> 0x01; codes 0; -0.0 -> 0x0 under lt_zero (flashmla352's own), 0x8 under keep;
    # -2^-12 / 2^-9 = -0.125 -> 0x8 either way
    p, s = fc.nvfp4_quant(z, "flashmla352")
    assert s[0, 0] == 0x01 and list(fc.unpack_nibbles(p)[0][:4]) == [0, 0, 8, 0]
    p, s = fc.nvfp4_quant(z, "vllm352")
    assert s[0, 0] == 0x01 and list(fc.unpack_nibbles(p)[0][:4]) == [0, 8, 8, 0]
    # 384 / 432: no floor, t = 0 -> byte 0, S = 0, inv = 0: codes x * 0 = +-0: 0x0, 0x8 (keep) for -0.0 and -2^-12
    for v in ("flashinfer384", "lil432"):
        p, s = fc.nvfp4_quant(z, v)
        assert s[0, 0] == 0x00 and list(fc.unpack_nibbles(p)[0][:4]) == [0, 8, 8, 0]
        p, s = fc.nvfp4_quant(z, v, zero_sign="lt_zero")
        assert list(fc.unpack_nibbles(p)[0][:4]) == [0, 0, 0, 0]  # -x * 0 = -0.0, not < 0
    # amax 3 * 2^-11 (t = 2^-12 < 2^-9): 352: scale 2^-9 (0x01), 3 * 2^-11 * 2^9 = 0.75 -> 1.0 (2), 2^-11 -> 0.25 -> 0;
    # 384 / 432: t = 2^-12 rounds to e4m3 0 -> all codes 0
    y = np.zeros((1, 16), np.float32)
    y[0, :2] = [3 * 2.0 ** -11, 2.0 ** -11]
    for v in ("flashmla352", "vllm352"):
        p, s = fc.nvfp4_quant(y, v)
        assert s[0, 0] == 0x01 and list(fc.unpack_nibbles(p)[0][:2]) == [2, 0]
    for v in ("flashinfer384", "lil432"):
        p, s = fc.nvfp4_quant(y, v)
        assert s[0, 0] == 0x00 and (fc.unpack_nibbles(p) == 0).all()
    # amax 6 * 2^-10: t = 2^-10, the e4m3 tie between 0 and 2^-9 -> even 0 (384; 432's 2^-10 (1 + 2^-25) rounds to 2^-10
    # in fp32 first); 352: floor 2^-9
    y[0, :2] = [6 * 2.0 ** -10, 0]
    assert [fc.nvfp4_quant(y, v)[1][0, 0] for v in PRODUCERS] == [1, 1, 0, 0]


def test_nvfp4_producers_ceil_bump():
    # amax 6.375: t = 1.0625, e4m3 tie of 1.0 / 1.125 -> 1.0 (0x38); 1.0 < 1.0625 -> 352 writers bump to 0x39 (1.125):
    # 6.375 / 1.125 = 5.67 -> 6 (7), 0.796875 / 1.125 = 0.708 -> 0.5 (1); 384 / 432 keep 0x38 (432: 6.375 * fl32(1/6)
    # = 1.0625 (1 + 2^-25) -> 1.0625 in fp32): 6.375 saturates to 6 (7), 0.796875 -> 1.0 (2)
    x = nv_block(1.0, [6.375, 0.796875])
    for v, sb, nib in (("flashmla352", 0x39, [7, 1]), ("vllm352", 0x39, [7, 1]),
                       ("flashinfer384", 0x38, [7, 2]), ("lil432", 0x38, [7, 2])):
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == sb and list(fc.unpack_nibbles(p)[0][:2]) == nib, v
    # amax 5.3125: t = 0.88542, nearer 0.875 (0x36) than 0.9375 (midpoint 0.90625) -> 0x36 < t -> bump 0x37 (384: 0x36);
    # no bump at 448: amax 2760 -> t = 460 -> 448 (0x7E) < 460 but b = 0x7E
    x = nv_block(1.0, [5.3125])[None]
    assert fc.nvfp4_quant(x, "flashmla352")[1][0, 0] == 0x37 and fc.nvfp4_quant(x, "flashinfer384")[1][0, 0] == 0x36
    for v in ("flashmla352", "vllm352"):
        assert fc.nvfp4_quant(nv_block(1.0, [2760.0])[None], v)[1][0, 0] == 0x7E


def test_nvfp4_producers_mul_vs_div():
    # amax 5.625 = 6 * 0.9375: S = 0.9375 (0x37) for all four, no bump. x = 1.171875 = 1.25 S:
    # flashmla352 divides: x / S = 1.25 exactly, a tie -> 1.0 (2); the others multiply by fl32(1 / S) = 0x3F888889
    # (1.06666672, above 16/15): x * it = 1.25 + 2^-23 (checked below) -> 1.5 (3)
    inv = F32(1) / F32(0.9375)
    assert inv.view(np.uint32) == 0x3F888889 and F32(F32(1.171875) * inv) == np.nextafter(F32(1.25), F32(2))
    x = nv_block(1.0, [5.625, 1.171875])
    for v, nib in (("flashmla352", 2), ("vllm352", 3), ("flashinfer384", 3), ("lil432", 3)):
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == 0x37 and list(fc.unpack_nibbles(p)[0][:2]) == [7, nib], v


def test_nvfp4_producers_nonfinite():
    # amax 3000: t = 500. flashmla352: non-saturating e4m3 -> NaN 0x7F, no bump, codes e2m1(+NaN) by policy;
    # the others saturate to 0x7E (448, no bump): 3000 * fl32(1/448) = 6.7 -> 6 (7), 1 / 448 -> 0
    x = nv_block(1.0, [3000.0])
    for nan, c in (("zero", 0), ("max", 7)):
        p, s = fc.nvfp4_quant(x[None], "flashmla352", nan=nan)
        assert s[0, 0] == 0x7F and (fc.unpack_nibbles(p) == c).all()
    for v in PRODUCERS[1:]:
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == 0x7E and list(fc.unpack_nibbles(p)[0][:2]) == [7, 0], v
    # inf: flashmla352 NaN scale; the others 0x7E, inf * inv -> 6 (7), -2 / 448 -> -0 (8)
    x = nv_block(1.0, [np.inf, -2.0])
    assert fc.nvfp4_quant(x[None], "flashmla352")[1][0, 0] == 0x7F
    for v in PRODUCERS[1:]:
        p, s = fc.nvfp4_quant(x[None], v)
        assert s[0, 0] == 0x7E and list(fc.unpack_nibbles(p)[0][:2]) == [7, 8], v
    # a NaN element: flashmla352 (NaN-propagating amax) NaN scale, every code by policy; the fmaxf producers ignore it:
    # amax 3 -> t = 0.5 (0x30), NaN * 2 = NaN -> policy (0 / 7), 3 * 2 = 6 -> 7, 1 * 2 -> 2 (4)
    x = nv_block(1.0, [np.nan, 3.0])
    p, s = fc.nvfp4_quant(x[None], "flashmla352", nan="max")
    assert s[0, 0] == 0x7F and (fc.unpack_nibbles(p) == 7).all()
    for v in PRODUCERS[1:]:
        for nan, c in (("zero", 0), ("max", 7)):
            p, s = fc.nvfp4_quant(x[None], v, nan=nan)
            assert s[0, 0] == 0x30 and list(fc.unpack_nibbles(p)[0][:3]) == [c, 7, 4], v
    # all NaN: fmaxf amax 0 -> 352: 0x01, 384 / 432: 0x00 (NaN * 0 = NaN); codes by policy
    x = np.full((1, 16), np.nan, np.float32)
    assert [fc.nvfp4_quant(x, v)[1][0, 0] for v in PRODUCERS] == [0x7F, 0x01, 0x00, 0x00]
    for v in PRODUCERS:
        assert (fc.unpack_nibbles(fc.nvfp4_quant(x, v, nan="max")[0]) == 7).all()


# ---- MXFP8 -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["ref", "flashmla"])
@pytest.mark.parametrize("k", [-10, 0, 7, 100])
def test_mxfp8_ties(rule, k):
    # amax = 448 * 2^k. ref: fl32(1/448) = 9586981 * 2^-32, 448 * it = 1 + 1.5 * 2^-25 -> rounds to 1, t = 2^k;
    # flashmla: 448 * 2^k / 448 = 2^k exactly (>= 1e-4 for these k). e = k, byte k + 127.
    # x * 2^-k: 448 -> 0x7E; 1 + 1/16 (midpoint of 1 and 1.125) -> 1.0 (0x38, even); 1 + 3/16 -> 1.25 (0x3A, even);
    # -(1 + 1/16) -> 0xB8; 2^-10 (midpoint of 0 and 2^-9) -> 0; 3 * 2^-10 (midpoint of 2^-9, 2^-8) -> 2^-8 (0x02)
    v = np.full(32, 0.5)
    v[:6] = [448, 1.0625, 1.1875, -1.0625, 2.0 ** -10, 3 * 2.0 ** -10]
    x = (v * 2.0 ** k).astype(np.float32)
    c, s = fc.mxfp8_quant(x[None], rule)
    assert s[0, 0] == k + 127
    np.testing.assert_array_equal(c[0], [0x7E, 0x38, 0x3A, 0xB8, 0x00, 0x02] + [0x30] * 26)
    np.testing.assert_array_equal(fc.dequant_mxfp8(c, s)[0],
                                  (np.array([448, 1, 1.25, -1, 0, 2.0 ** -8] + [.5] * 26) * 2.0 ** k).astype(np.float32))


def test_mxfp8_floors_and_nonfinite():
    z = np.zeros((1, 32), np.float32)
    # zeros, ref: t = fl32(1e-4 * fl32(1/448)) = 2.23e-7, log2 = -22.1 -> e = -22, byte 105;
    # flashmla: max(0 / 448, 1e-4) = 1e-4, log2 = -13.3 -> e = -13, byte 114
    assert fc.mxfp8_quant(z, "ref")[1][0, 0] == 105 and fc.mxfp8_quant(z, "flashmla")[1][0, 0] == 114
    # amax 0.01 (< 0.0448): ref 0.01 / 448 = 2.23e-5, log2 = -15.45 -> -15 (byte 112); flashmla floors to 1e-4 -> 114
    z[0, 0] = 0.01
    assert fc.mxfp8_quant(z, "ref")[1][0, 0] == 112 and fc.mxfp8_quant(z, "flashmla")[1][0, 0] == 114
    # inf: e = 128 -> byte 255 (254 with byte_max 254); inf -> 448 (0x7E), -inf -> 0xFE, 1 * 2^-128 -> 0
    x = np.ones((1, 32), np.float32)
    x[0, 0], x[0, 1] = np.inf, -np.inf
    c, s = fc.mxfp8_quant(x)
    assert s[0, 0] == 255 and list(c[0, :3]) == [0x7E, 0xFE, 0]
    assert fc.mxfp8_quant(x, byte_max=254)[1][0, 0] == 254
    # NaN: byte 255, every code 0x7F; the second block is untouched (amax 1: t = fl32(1/448) -> e = -8, 1 -> 256 = 0x78)
    x = np.ones((1, 64), np.float32)
    x[0, 5] = np.nan
    c, s = fc.mxfp8_quant(x, byte_max=254)
    assert list(s[0]) == [255, 119] and (c[0, :32] == 0x7F).all() and (c[0, 32:] == 0x78).all()
    assert np.isnan(fc.dequant_mxfp8(c, s)[0, :32]).all()


# ---- all formats: dequant is exact in bf16 and stays close --------------------------------------------------------
def test_dequant_bf16_exact_random():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 512)) * np.exp2(rng.integers(-20, 8, (8, 1)))).astype(ml_dtypes.bfloat16).astype(np.float32)
    # row scales 2^-20 .. 2^7: amax / 6 < 448, no NVFP4 clamp or NaN scale
    outs = [fc.dequant_mxfp8(*fc.mxfp8_quant(x, r)) for r in ("ref", "flashmla")]
    outs += [fc.dequant_nvfp4(*fc.nvfp4_quant(x, v)) for v in ("ref", "vllm", "flashmla") + PRODUCERS]
    outs += [fc.dequant_mxfp4(*fc.mxfp4_quant(x, v)) for v in ("ref", "sglang")]
    for y in outs:
        assert y.shape == x.shape
        np.testing.assert_array_equal(y.astype(ml_dtypes.bfloat16).astype(np.float32), y)
    amax = np.abs(x).max(-1, keepdims=True)
    assert (np.abs(outs[0] - x) <= amax * 2.0 ** -4).all()   # e4m3: 3 mantissa bits, scale within 2x of amax / 448
    assert (np.abs(outs[2] - x) <= np.maximum(amax / 3, 2.0 ** -10)).all()  # e2m1 step <= 2 at a scale ~amax / 6 (>= 2^-9)
    assert (np.abs(outs[-2] - x) <= amax * 2 / 3).all()      # ue8m0 scale up to 2x coarser


# ---- random blocks against a scalar model in Python doubles ------------------------------------------------------
# The same recipes evaluated one element at a time with Python floats (fp32 operands: a product or quotient in double
# rounded once more to fp32 equals the fp32 operation, 53 >= 2 * 24 + 2), ceil(log2) by search over powers of two,
# e4m3 by the rational oracle and e2m1 by brute_e2m1: a check of the vectorized numpy (dtype promotion, broadcasting,
# packing) rather than of the recipes, which the hand-worked tests above pin down.
def f32(v):
    return float(np.float32(v))


def ceil_log2_search(t):
    n = math.floor(math.log2(t))
    while 2.0 ** n < t:
        n += 1
    while 2.0 ** (n - 1) >= t:
        n -= 1
    return n


def scalar_quant(fmt, variant, row, tie, zs):
    INV6, INV448 = f32(np.float32(1) / np.float32(6)), f32(np.float32(1) / np.float32(448))
    bs = 16 if fmt == "nvfp4" else 32
    codes, scales = [], []
    for b in range(0, len(row), bs):
        blk = [float(v) for v in row[b:b + bs]]
        amax = max(abs(v) for v in blk)
        if fmt == "mxfp8":
            t = f32(max(amax, f32(1e-4)) * INV448) if variant == "ref" else max(f32(amax / 448), f32(1e-4))
            e = ceil_log2_search(t)
            scales.append(e + 127)
            codes += [num.encode(min(max(v * 2.0 ** -e, -448.0), 448.0), "e4m3") for v in blk]
        elif fmt == "mxfp4" and variant == "ref":
            e = ceil_log2_search(f32(max(amax, 6 * 2.0 ** -126) * INV6))
            e = min(max(e, -127), 127)
            scales.append(e + 127)
            codes += [brute_e2m1(v * 2.0 ** -e, tie, zs, "zero") for v in blk]
        elif fmt == "mxfp4":  # sglang: L = fl32(fl32(log2 max(amax, 1e-40)) - fl32(log2 6)), half-even, byte clamp
            L = f32(f32(math.log2(max(amax, f32(1e-40)))) - f32(2.584962500721156))
            byte = min(max(round(L) + 127, 0), 255)  # Python round: half-even
            scales.append(byte)
            codes += [brute_e2m1(v * 2.0 ** -(byte - 127), tie, zs, "zero") for v in blk]
        elif variant in PRODUCERS:
            amax = max(abs(v) for v in blk if not math.isnan(v))
            if variant in ("flashmla352", "vllm352"):
                t = max(f32(amax / 6), 2.0 ** -9)
                sb = num.encode(min(t, 448.0), "e4m3")
                if num.decode("e4m3", sb) < t and sb < 0x7E:
                    sb += 1
            else:
                t = f32(amax / 6) if variant == "flashinfer384" else f32(amax * INV6)
                sb = num.encode(min(t, 448.0), "e4m3")
            s = num.decode("e4m3", sb)
            scales.append(sb)
            if variant == "flashmla352":
                q = [f32(v / s) for v in blk]
            else:
                inv = 0.0 if s == 0 else f32(1 / s)
                q = [f32(v * inv) for v in blk]
            codes += [brute_e2m1(min(max(v, -6.0), 6.0), tie, zs, "zero") for v in q]
        else:
            if variant == "ref":
                t = f32(max(amax, 6 * 2.0 ** -9) / 6)
            else:
                t = f32(amax * INV6) if variant == "vllm" else f32(amax / 6)
                t = min(max(t, 2.0 ** -9), 448.0)
            sb = num.encode(t, "e4m3")
            s = num.decode("e4m3", sb)
            scales.append(sb)
            codes += [brute_e2m1(min(max(f32(v / s), -6.0), 6.0), tie, zs, "zero") for v in blk]
    return codes, scales


CASES = [("mxfp8", "ref", "rne", "keep"), ("mxfp8", "flashmla", "rne", "keep")] + [
    (f, v, t, z) for f, v in [("mxfp4", "ref"), ("mxfp4", "sglang"), ("nvfp4", "ref"), ("nvfp4", "vllm"), ("nvfp4", "flashmla")]
    for t, z in [("rne", "keep"), ("half_down", "clear")]] + [
    ("nvfp4", v, t, z) for v in PRODUCERS for t, z in [("rne", "keep"), ("half_down", "lt_zero")]]


def quant_codes(fmt, variant, x, tie="rne", zs="keep"):
    if fmt == "mxfp8":
        return fc.mxfp8_quant(x, variant)
    p, s = (fc.mxfp4_quant if fmt == "mxfp4" else fc.nvfp4_quant)(x, variant, tie=tie, zero_sign=zs)
    return fc.unpack_nibbles(p), s


@pytest.mark.parametrize("fmt,variant,tie,zs", CASES)
def test_quant_matches_scalar_model(fmt, variant, tie, zs):
    rng = np.random.default_rng(4)
    # bf16 Gaussian rows at power-of-two row scales (NVFP4: 2^-6 .. 2^8, above its floor and under its 448 clamp;
    # MX: 2^-30 .. 2^8), a few exact zeros and -0.0
    lo = -6 if fmt == "nvfp4" else -30
    x = rng.standard_normal((24, 128)) * np.exp2(rng.integers(lo, 9, (24, 1)))
    x[rng.random(x.shape) < 0.03] = 0.0
    x[rng.random(x.shape) < 0.03] = -0.0
    x = fc.round_bf16(x.astype(np.float32))
    c, s = quant_codes(fmt, variant, x, tie, zs)
    if fmt != "mxfp8":  # coverage: the data holds exact e2m1 ties, where the rules differ
        assert (c != quant_codes(fmt, variant, x, "half_down", zs)[0]).any() or tie == "half_down"
        assert (c != quant_codes(fmt, variant, x, "rne", zs)[0]).any() or tie == "rne"
    for r in range(x.shape[0]):
        wc, ws = scalar_quant(fmt, variant, x[r], tie, zs)
        np.testing.assert_array_equal(s[r], ws, err_msg=f"scales row {r}")
        np.testing.assert_array_equal(c[r], wc, err_msg=f"codes row {r}")
