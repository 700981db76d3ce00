"""dsa-check's conversions (src/numerics/formats.*) against ml_dtypes / numpy, bit for bit.

Every table is generated at test time: input bit patterns are built here, run through the C++ conversions by
the `dsa_numerics_tables` tool (tests/tools/numerics_tables.cpp, which also checks that its f32 and exact-double
routes agree) and compared with ml_dtypes (bf16, float8) or numpy (float16). Where a reference rounds twice
(ml_dtypes/numpy cast float64 through float32) the expected bits come from an exact rational oracle instead
(reference.numerics.encode).
"""
import math
import subprocess
import warnings

import ml_dtypes
import numpy as np
import pytest

from reference import numerics as num

# Casting NaN/inf/out-of-range values is the point of these tests: numpy's cast warnings are expected.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
NP_TYPE = {"bf16": BF16, "fp16": np.float16, "e4m3": E4M3, "e5m2": E5M2, "f32": np.float32, "f64": np.float64}


def cxx(tool, tmp_path, src, dst, values):
    """Runs the C++ conversion SRC -> DST over `values` (an array of SRC) and returns DST raw bits."""
    a = np.ascontiguousarray(values)
    inp, out = tmp_path / f"in_{src}_{dst}.bin", tmp_path / f"out_{src}_{dst}.bin"
    a.view(BITS[a.itemsize]).astype(np.dtype(BITS[a.itemsize]).newbyteorder("<")).tofile(inp)
    p = subprocess.run([str(tool), src, dst, str(inp), str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"dsa_numerics_tables {src} {dst} failed (rc {p.returncode}): {p.stderr}"
    width = np.dtype(NP_TYPE[dst]).itemsize
    return np.fromfile(out, dtype=np.dtype(BITS[width]).newbyteorder("<")).astype(BITS[width])


def ref(values, dst):
    """ml_dtypes / numpy cast of `values` to DST, as raw bits."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = np.asarray(values).astype(NP_TYPE[dst])
    return r.view(BITS[r.itemsize])


def assert_bits_equal(got, want, inputs, what):
    bad = np.nonzero(got != want)[0]
    if bad.size:
        iv = np.asarray(inputs).view(BITS[np.asarray(inputs).itemsize])
        rows = [f"  in 0x{int(iv[i]):x} ({float(np.asarray(inputs)[i].astype(np.float64))!r}): C++ 0x{int(got[i]):x}, "
                f"reference 0x{int(want[i]):x}" for i in bad[:12]]
        pytest.fail(f"{what}: {bad.size} of {len(got)} differ\n" + "\n".join(rows))


# ---- the exact oracle (rational arithmetic, independent of both C++ and ml_dtypes): reference.numerics.encode ----
def test_oracle_self_check():
    # Hand-derived codes: 448 = 1.75*2^8 (0x7E), 464 ties to 448, 465 -> NaN; e5m2 61440 ties to inf;
    # smallest e4m3 subnormal 2^-9 (0x01), 1.5*2^-9 ties to 2*2^-9 (0x02); bf16 1 + 2^-8 + 2^-40 rounds up.
    oracle = num.encode
    assert oracle(448.0, "e4m3") == 0x7E and oracle(464.0, "e4m3") == 0x7E and oracle(465.0, "e4m3") == 0x7F
    assert oracle(-480.0, "e4m3") == 0xFF and oracle(61440.0, "e5m2") == 0x7C and oracle(57344.0, "e5m2") == 0x7B
    assert oracle(2.0**-9, "e4m3") == 0x01 and oracle(1.5 * 2.0**-9, "e4m3") == 0x02 and oracle(2.0**-10, "e4m3") == 0
    assert oracle(1 + 2.0**-8 + 2.0**-40, "bf16") == 0x3F81 and oracle(-0.0, "fp16") == 0x8000
    assert oracle(65520.0, "fp16") == 0x7C00 and oracle(65519.0, "fp16") == 0x7BFF


# ---- all 65 536 bf16 bit patterns ----
ALL_BF16 = np.arange(1 << 16, dtype=np.uint16).view(BF16)


@pytest.mark.parametrize("dst", ["e4m3", "e5m2", "fp16", "f32"])
def test_all_bf16_to(dst, numerics_tables_bin, tmp_path):
    got = cxx(numerics_tables_bin, tmp_path, "bf16", dst, ALL_BF16)
    assert_bits_equal(got, ref(ALL_BF16, dst), ALL_BF16, f"bf16 -> {dst}")
    # ... and each result back to f32.
    res = got.view(NP_TYPE[dst])
    back = cxx(numerics_tables_bin, tmp_path, dst, "f32", res)
    assert_bits_equal(back, ref(res, "f32"), res, f"{dst} -> f32 (results of bf16 -> {dst})")


def test_bf16_to_e4m3_matches_measured_torch_cuda_rules(numerics_tables_bin, tmp_path):
    # toolchain.md (torch 2.11 CUDA casts on an H200): 448 < |x| <= 464 -> +-448, |x| > 464, inf, NaN -> NaN, sign kept.
    got = cxx(numerics_tables_bin, tmp_path, "bf16", "e4m3", ALL_BF16)
    x = ALL_BF16.astype(np.float64)
    neg = (ALL_BF16.view(np.uint16) & 0x8000) != 0
    a = np.abs(x)
    sel = (a > 448) & (a <= 464)
    assert sel.sum() == 2 * 8  # bf16 spacing in [256, 512) is 2: 450, 452, ..., 464 of each sign
    assert np.all(got[sel] == np.where(neg[sel], 0xFE, 0x7E))
    big = ~(a <= 464)  # includes inf and NaN
    assert np.all(got[big] == np.where(neg[big], 0xFF, 0x7F))


def test_all_fp16_to_f32(numerics_tables_bin, tmp_path):
    allh = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    got = cxx(numerics_tables_bin, tmp_path, "fp16", "f32", allh)
    want = ref(allh, "f32")
    nan = np.isnan(allh)
    # numpy keeps NaN payloads; dsa-check decodes every NaN to the canonical quiet NaN with the sign kept.
    assert_bits_equal(got[~nan], want[~nan], allh[~nan], "fp16 -> f32 (non-NaN)")
    assert np.all(got[nan] == np.where((allh.view(np.uint16)[nan] & 0x8000) != 0, 0xFFC00000, 0x7FC00000))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_all_fp8_codes_to_f32(fmt, numerics_tables_bin, tmp_path):
    codes = np.arange(256, dtype=np.uint8).view(NP_TYPE[fmt])
    got = cxx(numerics_tables_bin, tmp_path, fmt, "f32", codes)
    assert_bits_equal(got, ref(codes, "f32"), codes, f"all {fmt} codes -> f32")
    got64 = cxx(numerics_tables_bin, tmp_path, fmt, "f64", codes)
    assert_bits_equal(got64, ref(codes, "f64"), codes, f"all {fmt} codes -> f64")
    # Every finite code re-encodes to itself (except -0 stays -0 and NaN codes canonicalise).
    again = cxx(numerics_tables_bin, tmp_path, "f32", fmt, got.view(np.float32))
    finite = np.isfinite(codes.astype(np.float32))
    assert np.all(again[finite] == codes.view(np.uint8)[finite])


# ---- f32 -> bf16 on a large deterministic sample ----
def f32_sample(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    hi = rng.integers(0, 1 << 16, size=1 << 16, dtype=np.uint64).astype(np.uint32) << 16
    special = []
    for low in (0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000):
        special.append(hi | low)  # exact, ties (both parities of the kept lsb), just above/below ties
    fixed = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x00008000,
                      0x00018000, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0xFF7F8000, 0x7F800000,
                      0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF,
                      0xFFFFFFFF, 0x7FA00000, 0x3F808000, 0x3F818000, 0x3F80FFFF], dtype=np.uint32)
    return np.concatenate([rand, *special, fixed]).view(np.float32)


def test_f32_to_bf16_large_sample(numerics_tables_bin, tmp_path):
    x = f32_sample(20261129, 1 << 20)
    got = cxx(numerics_tables_bin, tmp_path, "f32", "bf16", x)
    # Includes NaN with payloads and both signs: ml_dtypes and dsa-check give 0x7FC0 | sign.
    assert_bits_equal(got, ref(x, "bf16"), x, "f32 -> bf16")


@pytest.mark.parametrize("dst", ["e4m3", "e5m2", "fp16"])
def test_f32_to_low_precision_sample(dst, numerics_tables_bin, tmp_path):
    # Random f32 concentrated on each format's range (exponent field 100..160 covers subnormals to overflow).
    rng = np.random.default_rng(7 + len(dst))
    n = 1 << 18
    bits = (rng.integers(0, 1 << 23, size=n, dtype=np.uint64) | (rng.integers(90, 160, size=n, dtype=np.uint64) << 23)
            | (rng.integers(0, 2, size=n, dtype=np.uint64) << 31)).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), f32_sample(3, 1 << 14)])
    got = cxx(numerics_tables_bin, tmp_path, "f32", dst, x)
    want = ref(x, dst)
    nan = np.isnan(x)
    assert_bits_equal(got[~nan], want[~nan], x[~nan], f"f32 -> {dst} (non-NaN)")
    sign = (x.view(np.uint32)[nan] >> 31).astype(np.uint64)
    canon = num.FORMATS[dst][3] | (sign << (num.FORMATS[dst][0] + num.FORMATS[dst][1]))
    assert np.all(got[nan] == canon), f"f32 NaN -> {dst}: canonical quiet NaN with the sign kept"


def boundary_values(fmt: str):
    """Representable values of `fmt` near the ends of its range, the midpoints between neighbours (ties) and
    the nearest floats on either side of each midpoint."""
    ebits, mbits, has_inf, _ = num.FORMATS[fmt]
    n = 1 << (ebits + mbits)
    if n <= 256:
        codes = range(n)
    else:  # subnormals, the subnormal/normal boundary, around 1.0 and the top of the range
        bias = (1 << (ebits - 1)) - 1
        one = bias << mbits
        top = ((1 << ebits) - 1) << mbits
        codes = [*range(0, 40), *range((1 << mbits) - 20, (1 << mbits) + 20), *range(one - 20, one + 20),
                 *range(top - 40, top)]
    vals = sorted({float(num.decode(fmt, int(c))) for c in codes} - {math.nan})
    vals = [v for v in vals if math.isfinite(v)]
    out = set()
    for lo, hi in zip(vals, vals[1:]):
        mid = (lo + hi) / 2
        out.update({lo, mid, float(np.nextafter(np.float32(mid), np.float32(-1))),
                    float(np.nextafter(np.float32(mid), np.float32(np.inf)))})
    top = vals[-1]
    step = top - vals[-2]
    for v in (top + step / 2, top + step, top + step * 1.5, top * 2):
        out.update({v, float(np.nextafter(np.float32(v), np.float32(-1))), float(np.nextafter(np.float32(v), np.float32(np.inf)))})
    out.update({464.0, 448.0, 465.0, 480.0, 449.0, 463.99996948242188, 464.00003051757812})
    pos = np.array(sorted(x for x in out if np.isfinite(np.float32(x))), dtype=np.float32)
    return np.concatenate([pos, -pos])


@pytest.mark.parametrize("dst", ["e4m3", "e5m2", "fp16", "bf16"])
def test_f32_ties_and_boundaries(dst, numerics_tables_bin, tmp_path):
    x = boundary_values(dst if dst != "bf16" else "e4m3")  # bf16: reuse the fp8 grid (all exact in f32)
    if dst == "bf16":
        x = np.concatenate([x, boundary_values("fp16")])
    got = cxx(numerics_tables_bin, tmp_path, "f32", dst, x)
    assert_bits_equal(got, ref(x, dst), x, f"f32 ties/boundaries -> {dst} vs ml_dtypes/numpy")
    assert_bits_equal(got, np.array([num.encode(float(v), dst) for v in x], dtype=got.dtype), x,
                      f"f32 ties/boundaries -> {dst} vs exact oracle")


@pytest.mark.parametrize("dst", ["e4m3", "e5m2", "fp16", "bf16"])
def test_f64_rounds_once(dst, numerics_tables_bin, tmp_path):
    # ml_dtypes and numpy cast float64 through float32 (two roundings); dsa-check rounds the exact double once.
    # Expected bits: the exact oracle. Values straddle ties by less than an f32 ulp so that double rounding shows.
    base = boundary_values(dst).astype(np.float64)
    x = np.concatenate([base, base * (1 + 2.0**-40), base * (1 - 2.0**-40), np.array([1 + 2.0**-8 + 2.0**-40,
                        464 + 2.0**-30, 464 - 2.0**-30, 61440 - 2.0**-20, 65520 - 2.0**-20, 2.0**-10 + 2.0**-60,
                        1e-300, -1e-300, 1e300, -1e300, 5e-324, math.inf, -math.inf, math.nan, -math.nan])])
    got = cxx(numerics_tables_bin, tmp_path, "f64", dst, x)
    assert_bits_equal(got, np.array([num.encode(float(v), dst) for v in x], dtype=got.dtype), x,
                      f"f64 -> {dst} vs exact oracle")
    # The case that tells one rounding from two: ml_dtypes < 0.7 casts f64 -> bf16 through f32 (0x3F80), 0.7+ rounds
    # once like us (0x3F81); either way the oracle, not ml_dtypes, is the reference here.
    if dst == "bf16":
        assert int(ref(np.array([1 + 2.0**-8 + 2.0**-40]), "bf16")[0]) in (0x3F80, 0x3F81)
        assert int(cxx(numerics_tables_bin, tmp_path, "f64", "bf16", np.array([1 + 2.0**-8 + 2.0**-40]))[0]) == 0x3F81
