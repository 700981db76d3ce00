"""The V4.1 codecs of the C++ reference (src/numerics/fp4_core.hpp, run through dsa_numerics_tables fp4) against the
independent numpy model (reference/fp4_codecs.py), bit for bit: e2m1 over every bf16 value and every option, and the
MXFP8 / NVFP4 / MXFP4 block quantizers over every producer option on blocks built to hit the hard cases -- exact ties
at 0.25 / 0.75 / 1.75 / 3.5 of a power-of-two or e4m3 scale, sub-floor blocks, amax at scale boundaries, NaN and inf,
and random bf16 data."""
import subprocess

import numpy as np
import pytest

from reference import fp4_codecs as ref

E2M1_TIES = ("rne", "half_down")
ZERO = ("keep", "clear")


@pytest.fixture(scope="module")
def tables(build_dir, tmp_path_factory):
    exe = build_dir / "dsa_numerics_tables"
    if not exe.exists():
        pytest.skip(f"{exe} not built")
    d = tmp_path_factory.mktemp("fp4")

    def run(*args, x):
        src, dst = d / "in.bin", d / "out.bin"
        np.ascontiguousarray(x, dtype="<f4").tofile(src)
        subprocess.run([str(exe), "fp4", *map(str, args), str(src), str(dst)], check=True, timeout=120)
        return np.fromfile(dst, dtype=np.uint8)

    return run


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


@pytest.mark.parametrize("rule", ("ref", "vllm", "flashmla"))
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


@pytest.mark.parametrize("rule", ("ref",))  # `nearest` is not sglang's fp32-log2 rounding yet (fp4_core.hpp)
@pytest.mark.parametrize("tie", E2M1_TIES)
@pytest.mark.parametrize("zero", ZERO)
def test_mxfp4_blocks(tables, rule, tie, zero):
    x = hard_blocks(32, np.random.default_rng(3))
    packed, scales = split(tables("mxfp4", rule, tie, zero, x=x), 16)
    rp, rs = ref.mxfp4_quant(x.reshape(-1, 32), variant={"ref": "ref", "nearest": "sglang"}[rule], tie=tie, zero_sign=zero)
    rp, rs = np.asarray(rp, np.uint8).reshape(-1, 16), np.asarray(rs, np.uint8).reshape(-1)
    bad = np.nonzero((packed != rp).any(axis=1) | (scales != rs))[0]
    assert bad.size == 0, (f"{bad.size} of {len(rs)} blocks differ; first block {bad[0]}: amax "
                           f"{np.nanmax(np.abs(x.reshape(-1, 32)[bad[0]]))}, scale C++ {scales[bad[0]]} numpy {rs[bad[0]]}")
