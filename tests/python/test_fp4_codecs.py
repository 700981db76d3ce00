"""The V4.1 codecs of the C++ reference (src/numerics/fp4_core.hpp, run through dsa_numerics_tables fp4) against the
independent numpy model (reference/fp4_codecs.py), bit for bit: e2m1 over every bf16 value and every option, and the
MXFP8 / NVFP4 / MXFP4 block quantizers over every producer option on blocks built to hit the hard cases -- exact ties
at 0.25 / 0.75 / 1.75 / 3.5 of a power-of-two or e4m3 scale, sub-floor blocks, amax at scale boundaries, NaN and inf,
and random bf16 data."""

import numpy as np
import pytest

from reference import fp4_codecs as ref

E2M1_TIES = ("rne", "half_down")
ZERO = ("keep", "clear", "lt_zero")


@pytest.fixture(scope="module")
def tables(fp4_tool):
    return fp4_tool  # dsa_numerics_tables fp4 (conftest.py)


def all_bf16_as_f32():
    return (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)


def hard_blocks(n, rng):
    """Blocks of n elements: ties at k/4 and k/2 of scales 2^j and of e4m3 values, sub-floor and boundary amaxes,
    NaN / inf blocks, zeros, and random bf16 data at many magnitudes."""
    out = []
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.5, 3.0], np.float32)
    for j in range(-20, 12):
        for s in (1.0, 1.25, 1.5, 1.75):  # scales a power of two times an e4m3 mantissa
            b = np.resize(ties, n).astype(np.float32) * np.float32(s * 2.0 ** j)
            b *= np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)
            b[0] = np.float32(6.0 * s * 2.0 ** j)  # amax = 6 * scale: the scale is exact
            out.append(b)
    for amax in (0.0, 1e-30, 6 * 2.0 ** -126, 6 * 2.0 ** -9, 0.001, 0.0448, 0.0447, 1e-4, 448.0, 449.0, 2688.0, 3000.0,
                 6 * 448.0, 1e30):
        b = (rng.standard_normal(n) * amax / 4).astype(np.float32)
        b[n // 2] = np.float32(amax)
        out.append(b)
    for special in (np.nan, np.inf, -np.inf):
        b = rng.standard_normal(n).astype(np.float32)
        b[3] = special
        out.append(b)
    out.append(np.zeros(n, np.float32))
    out.append(-np.zeros(n, np.float32))
    for k in range(200):
        b = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 20)).astype(np.float32)
        out.append((b.view(np.uint32) & 0xFFFF0000).view(np.float32))  # bf16-valued (truncated)
    return np.concatenate(out)


@pytest.mark.parametrize("tie", E2M1_TIES)
@pytest.mark.parametrize("zero", ZERO)
@pytest.mark.parametrize("nan", ("zero", "max"))
def test_e2m1_every_bf16_value(tables, tie, zero, nan):
    x = all_bf16_as_f32()
    got = tables("e2m1", tie, zero, nan, x=x)
    want = np.asarray(ref.e2m1_encode(x, tie=tie, zero_sign=zero, nan=nan), np.uint8)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} differ; first bf16 0x{int(x[bad[0]:bad[0]+1].view(np.uint32)[0]) >> 16:04x}: C++ {got[bad[0]]}, numpy {want[bad[0]]}"


def split(raw, n_codes):
    raw = raw.reshape(-1, n_codes + 1)
    return raw[:, :n_codes], raw[:, n_codes]


@pytest.mark.parametrize("rule", ("ref", "flashmla"))
@pytest.mark.parametrize("byte_max", (255, 254))
def test_mxfp8_blocks(tables, rule, byte_max):
    x = hard_blocks(32, np.random.default_rng(1))
    codes, scales = split(tables("mxfp8", rule, byte_max, x=x), 32)
    rc, rs = ref.mxfp8_quant(x.reshape(-1, 32), rule=rule, byte_max=byte_max)
    rc, rs = np.asarray(rc, np.uint8).reshape(-1, 32), np.asarray(rs, np.uint8).reshape(-1)
    bad = np.nonzero((codes != rc).any(axis=1) | (scales != rs))[0]
    assert bad.size == 0, (f"{bad.size} of {len(rs)} blocks differ; first block {bad[0]}: amax "
                           f"{np.nanmax(np.abs(x.reshape(-1, 32)[bad[0]]))}, scale C++ {scales[bad[0]]} numpy {rs[bad[0]]}")


@pytest.mark.parametrize("rule", ("ref", "vllm", "flashmla", "flashmla352", "vllm352", "flashinfer384", "lil432"))
@pytest.mark.parametrize("tie", E2M1_TIES)
@pytest.mark.parametrize("zero", ZERO)
def test_nvfp4_blocks(tables, rule, tie, zero):
    x = hard_blocks(16, np.random.default_rng(2))
    packed, scales = split(tables("nvfp4", rule, tie, zero, x=x), 8)
    rp, rs = ref.nvfp4_quant(x.reshape(-1, 16), variant=rule, tie=tie, zero_sign=zero)
    rp, rs = np.asarray(rp, np.uint8).reshape(-1, 8), np.asarray(rs, np.uint8).reshape(-1)
    bad = np.nonzero((packed != rp).any(axis=1) | (scales != rs))[0]
    assert bad.size == 0, (f"{bad.size} of {len(rs)} blocks differ; first block {bad[0]}: {x.reshape(-1, 16)[bad[0]]}, "
                           f"scale C++ {scales[bad[0]]:#x} numpy {rs[bad[0]]:#x}, codes C++ {packed[bad[0]]} numpy {rp[bad[0]]}")


@pytest.mark.parametrize("rule", ("ref", "ref_floor_1e4"))
@pytest.mark.parametrize("tie", E2M1_TIES)
@pytest.mark.parametrize("zero", ZERO)
def test_mxfp4_blocks(tables, rule, tie, zero):
    x = hard_blocks(32, np.random.default_rng(3))
    packed, scales = split(tables("mxfp4", rule, tie, zero, x=x), 16)
    rp, rs = ref.mxfp4_quant(x.reshape(-1, 32), variant="ref", tie=tie, zero_sign=zero,
                             amax_floor=1e-4 if rule == "ref_floor_1e4" else None)
    rp, rs = np.asarray(rp, np.uint8).reshape(-1, 16), np.asarray(rs, np.uint8).reshape(-1)
    bad = np.nonzero((packed != rp).any(axis=1) | (scales != rs))[0]
    assert bad.size == 0, (f"{bad.size} of {len(rs)} blocks differ; first block {bad[0]}: amax "
                           f"{np.nanmax(np.abs(x.reshape(-1, 32)[bad[0]]))}, scale C++ {scales[bad[0]]} numpy {rs[bad[0]]}")


def bf16_blocks_every_amax(rng):
    """One 32-block per positive finite bf16 value a: element (a mod 32) is +-a, the rest bf16 values drawn in
    [-a, a] (a quarter of them exact multiples of a / 8, the e2m1 grid of a block whose scale is a / 6 rounded); plus
    the hard blocks rounded to bf16 (NaN, inf and zero blocks included)."""
    a = (np.arange(0x0001, 0x7F80, dtype=np.uint32) << 16).view(np.float32)
    n = a.size
    u = rng.uniform(-1, 1, (n, 32)).astype(np.float32)
    grid = np.round(u * 8) / 8
    u = np.where(rng.random((n, 32)) < 0.25, grid, u).astype(np.float32)
    b = ((u * a[:, None]).view(np.uint32) & 0xFFFF0000).view(np.float32)
    b[np.arange(n), np.arange(n) % 32] = a * np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)
    hard = hard_blocks(32, np.random.default_rng(5))
    hard = np.where(np.isfinite(hard), (hard.view(np.uint32) & 0xFFFF0000).view(np.float32), hard)
    return np.concatenate([b.reshape(-1), hard])


@pytest.mark.parametrize("sglang_round", ("half_even", "half_up"))
def test_mxfp4_nearest_is_sglangs_368_rule_on_bf16(tables, sglang_round):
    """fp4_core's Mx4Rule::nearest (the exact nearest integer of log2(amax / 6)) against the numpy model of sglang's
    368-byte codec (round(fl32(log2 amax) - fl32(log2 6)) in torch's half-even and Triton's floor(x + .5)) on every
    positive bf16 amax: the same bytes (the writer stages take bf16; fp32 amaxes within an fp32 ulp of a rounding
    boundary are where the rules part, test_fp4_codecs_ref.py)."""
    x = bf16_blocks_every_amax(np.random.default_rng(9))
    packed, scales = split(tables("mxfp4", "nearest", "rne", "keep", x=x), 16)
    rp, rs = ref.mxfp4_quant(x.reshape(-1, 32), variant="sglang", tie="rne", zero_sign="keep", sglang_round=sglang_round)
    rp, rs = np.asarray(rp, np.uint8).reshape(-1, 16), np.asarray(rs, np.uint8).reshape(-1)
    bad = np.nonzero((packed != rp).any(axis=1) | (scales != rs))[0]
    assert bad.size == 0, (f"{bad.size} of {len(rs)} blocks differ; first block {bad[0]}: amax "
                           f"{np.nanmax(np.abs(x.reshape(-1, 32)[bad[0]]))}, scale C++ {scales[bad[0]]} numpy {rs[bad[0]]}, "
                           f"codes C++ {packed[bad[0]]} numpy {rp[bad[0]]}")


