"""The KV records of the C++ reference (layouts::store_record with each record's producer options, run through
`dsa_numerics_tables fp4 record`) against the independent numpy model (reference/kv_records.py), byte for byte: the
six records x both orders x two page sizes, with a partial last page, on bf16 tokens built to hit the hard cases
(N(0,1) * 2^k, exact e4m3 / e2m1 ties at every scale, zero and -0.0, sub-floor, huge, NaN and inf). Also: decoding
the C++ bytes with the model's `load` gives the model's dequant (NaN-aware), and the bytes no token writes (the
partial last page's tail, the sglang record's pad) keep the fill in both."""
import zlib

import numpy as np
import pytest

from reference import kv_records as rec

CASES = [(name, order, P) for name in rec.RECORDS for order in rec.ORDERS for P in (32, 64)]
IDS = [f"{n}-{o}-P{P}" for n, o, P in CASES]


@pytest.fixture(scope="module")
def record_tool(fp4_tool):
    """dsa_numerics_tables fp4 record NAME ORDER P (conftest.py's fp4_tool): the cache bytes of tokens x."""
    return lambda name, order, P, x: fp4_tool("record", name, order, P, x=x)


def bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def signs(rng, n):
    return np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)


def tie_token(rng, dim, block, top, j):
    """Each block: amax top * s (s = 2^j times an e4m3 mantissa), the rest exact rounding midpoints times s: e2m1
    midpoints for the fp4 codecs (top 6), e4m3 midpoints 1 + 1/16 + i/8 at several octaves for MXFP8 (top 448)."""
    x = np.empty(dim, np.float32)
    for b in range(dim // block):
        s = np.float32(rng.choice([1.0, 1.125, 1.25, 1.5, 1.75]) * 2.0 ** j)
        if top == 6:
            m = rng.choice(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0], np.float32), block)
        else:
            m = ((1 + 1 / 16 + rng.integers(0, 8, block) / 8) * 2.0 ** rng.integers(-6, 8, block)).astype(np.float32)
        blk = m.astype(np.float32) * signs(rng, block)
        blk[rng.integers(block)] = top
        x[block * b:block * b + block] = blk * s
    return bf16(x)


def hard_tokens(name, n, rng):
    nope, rope = rec.dims(name)
    dim = nope + rope
    block, top = {"v41_mxfp8_528": (32, 448), "v41_idx_fp8_132": (128, 448)}.get(
        name, (32 if name in ("sglang_mxfp4_368", "v41_idx_mxfp4_68") else 16, 6))
    x = np.empty((n, dim), np.float32)
    for s in range(n):
        x[s] = bf16(rng.standard_normal(dim).astype(np.float32) * np.float32(2.0 ** int(rng.integers(-24, 17))))
    specials = {1: np.zeros(dim, np.float32), 2: -np.zeros(dim, np.float32), 3: tie_token(rng, dim, block, top, 0),
                4: tie_token(rng, dim, block, top, -6), 5: tie_token(rng, dim, block, top, -8),
                n - 1: tie_token(rng, dim, block, top, 5), n - 2: tie_token(rng, dim, block, top, -12)}
    for s, v in specials.items():
        x[s] = v
    for s in (0, 7, 11):
        x[s] = bf16(rng.standard_normal(dim).astype(np.float32))
    x[6, :] = bf16(rng.standard_normal(dim).astype(np.float32) * np.float32(3000))  # huge: e4m3 scales past 448
    x[7, 100] = np.nan
    x[8, 3] = np.inf
    x[9, dim - 1] = -np.inf   # in the RoPE dims: quantized (V4.1), bf16 or e4m3 stored
    x[10, :] = np.float32(1e-30)
    x[11, 0:16] = 0
    x[11, 32:64] = np.nan
    x[12, 40:48] = -bf16(np.float32(2.0 ** -9))  # small negatives that round to zero codes
    x[13, :] = bf16(rng.standard_normal(dim).astype(np.float32) * np.float32(1e-6))  # between the MXFP4 floors
    return x


def slots_for(P):
    return 2 * P + P // 2  # 2.5 pages: a partial last page


def first_diff(off, name, order, P, got, want):
    w = rec.locate(off, name, order, P)
    return f"first difference at byte {off} ({w}): C++ 0x{int(got[off]):02x}, numpy 0x{int(want[off]):02x}"


@pytest.mark.parametrize("name,order,P", CASES, ids=IDS)
def test_cache_bytes_match(record_tool, name, order, P):
    rng = np.random.default_rng(zlib.crc32(f"{name} {order} {P}".encode()))
    n = slots_for(P)
    x = hard_tokens(name, n, rng)
    got = record_tool(name, order, P, x)
    want = rec.build_cache(x, name, order, P)
    assert want.size == 3 * P * rec.record_bytes(name)
    assert got.size == want.size, f"C++ cache {got.size} B, numpy {want.size} B"
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} bytes differ; " + first_diff(bad[0], name, order, P, got, want)
    for s in range(n):  # the C++ bytes decode (by the model) to the model's own dequant
        a, b = rec.load(got, name, order, P, s), rec.load(want, name, order, P, s)
        same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
        assert same.all(), f"slot {s}: dim {int(np.argmin(same))} decodes to {a[~same][0]} vs {b[~same][0]}"
    assert (rec.load(got, name, order, P, 1) == 0).all()


@pytest.mark.parametrize("name,order,P", CASES, ids=IDS)
def test_unwritten_bytes_keep_the_fill(record_tool, name, order, P):
    rng = np.random.default_rng(7)
    n = slots_for(P)
    nope, rope = rec.dims(name)
    x = bf16(rng.standard_normal((n, nope + rope)).astype(np.float32))
    got = record_tool(name, order, P, x)
    written = rec.written_mask(n, name, order, P)
    unwritten_per_record = int((~rec.record_written(name)).sum())  # the sglang pad: 2 bytes a record
    assert (~written).sum() == (P - P // 2) * rec.record_bytes(name) + n * unwritten_per_record
    bad = np.nonzero((got != 0xA5) & ~written)[0]
    assert bad.size == 0, f"C++: unwritten byte {bad[0]} is 0x{int(got[bad[0]]):02x}, not 0xA5 ({rec.locate(bad[0], name, order, P)})"
