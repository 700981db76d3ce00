"""The V4.1 FlashMLA KV records of the C++ reference (layouts::v41_store_token, run through
`dsa_numerics_tables fp4 record`) against the independent numpy model (reference/v41_records.py), byte for byte:
both kinds (528-B MXFP8, 288-B NVFP4) x both orders (page_segregated, token_interleaved) x two page sizes, with a
partial last page, on tokens built to hit the hard cases (bf16 N(0,1) * 2^k, exact e4m3 / e2m1 ties, zero, NaN, inf).
Also: decoding the C++ bytes with the model's `load` gives the model's dequant (NaN-aware), and the bytes no token
writes (the partial last page's tail) stay 0xA5 in both."""
import subprocess
import zlib

import numpy as np
import pytest

from reference import fp4_codecs
from reference import v41_records as rec

CASES = [(kind, order, P)
         for kind, sizes in (("v41_mxfp8_528", (32, 64)), ("v41_nvfp4_288", (16, 64)))
         for order in rec.ORDERS
         for P in sizes]
IDS = [f"{k.split('_')[1]}-{o}-P{P}" for k, o, P in CASES]


@pytest.fixture(scope="module")
def record_tool(build_dir, tmp_path_factory):
    exe = build_dir / "dsa_numerics_tables"
    if not exe.exists():
        pytest.skip(f"{exe} not built")
    d = tmp_path_factory.mktemp("v41rec")

    def run(kind, order, P, x):
        src, dst = d / "in.bin", d / "out.bin"
        np.ascontiguousarray(x, dtype="<f4").tofile(src)
        return subprocess.run([str(exe), "fp4", "record", kind, order, str(P), str(src), str(dst)],
                              capture_output=True, text=True, timeout=120), dst

    p, _ = run("v41_mxfp8_528", "page_segregated", 32, np.zeros((1, 512), np.float32))
    if p.returncode != 0 and "usage" in p.stderr:
        pytest.skip(f"{exe} has no `fp4 record` mode yet (rebuild)")

    def cache(kind, order, P, x):
        p, dst = run(kind, order, P, x)
        assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
        return np.fromfile(dst, dtype=np.uint8)

    return cache


def bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


def signs(rng, n):
    return np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)


def e4m3_tie_token(rng, j):
    """Each 32-block: amax 256 * 2^j (MXFP8 e = j exactly), the rest exact midpoints of adjacent e4m3 values (normal
    and subnormal) times 2^j: every code is an RNE tie."""
    pos = fp4_codecs.e4m3_decode(np.arange(0x00, 0x7F, dtype=np.uint8))  # 0 .. 448, ascending
    mids = (pos[:-1] + pos[1:]) / 2
    mids = mids[mids < 256]
    x = rng.choice(mids, 512).astype(np.float32) * signs(rng, 512)
    x[0::32] = 256
    return (x * np.float32(2.0 ** j)).astype(np.float32)


def e2m1_tie_token(rng, j):
    """Each 16-block: amax 6 * s with s = an e4m3 value m * 2^j (the NVFP4 scale is exactly s), the rest e2m1
    midpoints (and grid points) times s: exact ties of x / s."""
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0, 6.0], np.float32)
    x = np.empty(512, np.float32)
    for b in range(32):
        s = np.float32(rng.choice([1.0, 1.125, 1.25, 1.5, 1.75]) * 2.0 ** j)
        blk = rng.choice(ties, 16).astype(np.float32) * signs(rng, 16)
        blk[rng.integers(16)] = 6
        x[16 * b:16 * b + 16] = blk * s
    return x


def hard_tokens(n, rng):
    """n tokens: mostly bf16 N(0,1) * 2^k (k per token), with tie tokens, zeros, NaN and inf spread over the pages."""
    x = np.empty((n, 512), np.float32)
    for s in range(n):
        k = int(rng.integers(-24, 17))
        x[s] = bf16(rng.standard_normal(512).astype(np.float32) * np.float32(2.0 ** k))
    specials = {
        1: np.zeros(512, np.float32),
        2: -np.zeros(512, np.float32),
        3: e4m3_tie_token(rng, 0),
        4: e4m3_tie_token(rng, -12),
        5: e2m1_tie_token(rng, 0),
        6: e2m1_tie_token(rng, -6),  # s = m * 2^-6: still normal e4m3, ties exact
        12: e2m1_tie_token(rng, -8),  # subnormal e4m3 scales near the ref floor (amax >= 6 * 2^-9): some s round
        n - 1: e2m1_tie_token(rng, 5),  # the last slot, in the partial last page
        n - 2: e4m3_tie_token(rng, 9),
    }
    for s, v in specials.items():
        x[s] = v
    for s in (0, 7, 11):  # k = 0: finite outside the planted NaN (NVFP4 ref has no upper clamp: amax > 2784 -> NaN scale)
        x[s] = bf16(rng.standard_normal(512).astype(np.float32))
    x[7, 100] = np.nan            # one NaN: its block only
    x[8, 3] = np.inf              # +inf: MXFP8 byte 255 (decodes NaN), NVFP4 scale NaN
    x[9, 511] = -np.inf
    x[10, :] = np.float32(1e-30)  # sub-floor everywhere
    x[11, 0:16] = 0               # one zero block in a normal token
    x[11, 32:64] = np.nan         # a whole NaN block
    return x


def describe(off, kind, order, P, got, want):
    w = rec.locate(off, kind, order, P)
    return (f"first difference at byte {off} (page {w['page']}, token {w['token']} = slot {w['slot']}, {w['region']} "
            f"byte {w['byte']}, dims {w['dims']}): C++ 0x{int(got[off]):02x}, numpy 0x{int(want[off]):02x}")


def slots_for(P):
    return 2 * P + P // 2  # 2.5 pages: a partial last page


@pytest.mark.parametrize("kind,order,P", CASES, ids=IDS)
def test_cache_bytes_match(record_tool, kind, order, P):
    rng = np.random.default_rng(zlib.crc32(f"{kind} {order} {P}".encode()))
    n = slots_for(P)
    x = hard_tokens(n, rng)
    got = record_tool(kind, order, P, x)
    want = rec.build_cache(x, kind, order, P)
    assert want.size == 3 * P * rec.record_bytes(kind)
    assert got.size == want.size, f"C++ cache {got.size} B, numpy {want.size} B"
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} bytes differ; " + describe(bad[0], kind, order, P, got, want)

    # decoding the C++ bytes with the model = the model's dequant of its own bytes = dequant of the codecs
    for s in range(n):
        a = rec.load(got, kind, order, P, s)
        b = rec.load(want, kind, order, P, s)
        data, sc = rec.encode(x[s], kind)
        c = (fp4_codecs.dequant_mxfp8 if kind == "v41_mxfp8_528" else fp4_codecs.dequant_nvfp4)(data, sc)
        assert a.shape == (512,) and a.dtype == np.float32
        for other in (b, c):
            same = (a.view(np.uint32) == other.view(np.uint32)) | (np.isnan(a) & np.isnan(other))
            assert same.all(), f"slot {s}: dim {int(np.argmin(same))} decodes to {a[~same][0]} vs {other[~same][0]}"
    # NaN where the input had one (the NaN blocks), finite on normal tokens
    assert np.isnan(rec.load(got, kind, order, P, 7)).sum() == (32 if kind == "v41_mxfp8_528" else 16)
    assert np.isnan(rec.load(got, kind, order, P, 11)[32:64]).all()
    assert np.isfinite(rec.load(got, kind, order, P, 0)).all()
    assert (rec.load(got, kind, order, P, 1) == 0).all()


@pytest.mark.parametrize("kind,order,P", CASES, ids=IDS)
def test_untouched_bytes_stay_fill(record_tool, kind, order, P):
    rng = np.random.default_rng(7)
    n = slots_for(P)
    x = bf16(rng.standard_normal((n, 512)).astype(np.float32))
    got = record_tool(kind, order, P, x)
    want = rec.build_cache(x, kind, order, P)
    written = rec.written_mask(n, kind, order, P)
    # exactly the last half page's records are untouched: (P - P // 2) tokens of record_bytes each
    assert (~written).sum() == (P - P // 2) * rec.record_bytes(kind)
    for name, c in (("C++", got), ("numpy", want)):
        assert c.size == written.size, f"{name} cache {c.size} B, expected {written.size}"
        bad = np.nonzero((c != 0xA5) & ~written)[0]
        assert bad.size == 0, f"{name}: untouched byte {bad[0]} is 0x{int(c[bad[0]]):02x}, not 0xA5 " \
                              f"({rec.locate(bad[0], kind, order, P)})"
    # the model's store writes only the written bytes: another fill changes exactly the untouched ones
    other = rec.build_cache(x, kind, order, P, fill=0x00)
    assert np.array_equal(other != want, ~written)


@pytest.mark.parametrize("kind,order,P", CASES, ids=IDS)
def test_model_layout_offsets(kind, order, P):
    """The model's own offset arithmetic, spelled out (no C++): regions tile each full page without overlap."""
    db, sb, rb = rec.data_bytes(kind), rec.scale_bytes(kind), rec.record_bytes(kind)
    assert (db, sb, rb) == ((512, 16, 528) if kind == "v41_mxfp8_528" else (256, 32, 288))
    cover = np.zeros(2 * P * rb, np.int64)
    for s in range(2 * P):
        do, so = rec.offsets(kind, order, P, s)
        page, t = divmod(s, P)
        if order == "page_segregated":
            assert (do, so) == (page * P * rb + t * db, page * P * rb + P * db + t * sb)
        else:
            assert (do, so) == (s * rb, s * rb + db)
        cover[do:do + db] += 1
        cover[so:so + sb] += 1
        assert rec.locate(do, kind, order, P) == dict(page=page, token=t, slot=s, region="data", byte=0,
                                                     dims=(0,) if kind == "v41_mxfp8_528" else (0, 1))
        assert rec.locate(so + 1, kind, order, P)["region"] == "scales"
        assert rec.locate(so + 1, kind, order, P)["slot"] == s
    assert (cover == 1).all()
