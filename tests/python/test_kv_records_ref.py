"""reference/kv_records.py (six FP4 / FP8 KV-cache records, spec v41_fp4.md §2 and docs/research_fp4_records.md):
sizes, offsets worked out by hand in both orders, the 352-B scale permutation, store's footprint, load against the
codecs' own dequant, and whole records whose bytes are worked out by hand in the comments (e2m1 ties, zero and
sub-floor blocks per preset). No dsa-check binary needed."""
import ml_dtypes
import numpy as np
import pytest

from reference import fp4_codecs as fc
from reference import kv_records as kr

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SIZES = {"v41_mxfp8_528": 528, "v41_nvfp4_288": 288, "sglang_mxfp4_368": 368, "flashmla_nvfp4_352": 352,
         "nvfp4_384": 384, "nvfp4_432": 432, "v41_idx_mxfp4_68": 68, "v41_idx_fp8_132": 132, "nvfp4_432_v4": 432}
DIMS = {"v41_mxfp8_528": (448, 64), "v41_nvfp4_288": (448, 64), "sglang_mxfp4_368": (448, 64),
        "flashmla_nvfp4_352": (512, 64), "nvfp4_384": (448, 64), "nvfp4_432": (512, 64), "v41_idx_mxfp4_68": (64, 64),
        "v41_idx_fp8_132": (64, 64), "nvfp4_432_v4": (448, 64)}


def test_sizes_and_parts():
    assert set(kr.RECORDS) == set(SIZES)
    for n, b in SIZES.items():
        assert kr.record_bytes(n) == b and kr.dims(n) == DIMS[n]
        assert kr.page_bytes(n, "page_segregated", 64) == kr.page_bytes(n, "token_interleaved", 64) == 64 * b
        assert sum(w for p in kr.parts(n) for _, w in p) == b
    assert kr.parts("nvfp4_384") == ((("codes", 224), ("rope", 128)), (("scales", 28), ("pad", 4)))
    assert kr.record_written("sglang_mxfp4_368").sum() == 366
    assert not kr.record_written("sglang_mxfp4_368")[238:240].any()
    for n in ("nvfp4_384", "nvfp4_432", "v41_mxfp8_528"):
        assert kr.record_written(n).all()
    with pytest.raises(ValueError):
        kr.record_bytes("nvfp4_380")
    with pytest.raises(ValueError):
        kr.page_bytes("nvfp4_384", "token_major", 4)
    with pytest.raises(ValueError):
        kr.encode(np.zeros(512, np.float32), "nvfp4_384", rope_cast="e4m3")
    with pytest.raises(ValueError):
        kr.encode(np.zeros(512, np.float32), "nvfp4_384", rule="ref")


def test_offsets_by_hand():
    TI, PS = "token_interleaved", "page_segregated"
    # token_interleaved: slot s at s * record_bytes, regions at their offsets inside the record
    assert kr.region_offsets("v41_mxfp8_528", TI, 4, 3) == {"codes": 1584, "scales": 2096}
    assert kr.region_offsets("sglang_mxfp4_368", TI, 4, 2) == {"codes": 736, "scales": 960, "pad": 974, "rope": 976}
    assert kr.region_offsets("flashmla_nvfp4_352", TI, 4, 1) == {"codes": 352, "rope": 608, "scales": 672}
    assert kr.region_offsets("nvfp4_384", TI, 4, 5) == {"codes": 1920, "rope": 2144, "scales": 2272, "pad": 2300}
    assert kr.region_offsets("nvfp4_432", TI, 4, 1) == {"codes": 432, "scales": 688, "pad": 720, "rope": 736}
    # page_segregated, P = 4, slot 5 = page 1, token 1
    # 528: page at 4 * 528 = 2112; codes at 2112 + 512 = 2624; scales after 4 data rows: 2112 + 2048 + 16 = 4176
    assert kr.region_offsets("v41_mxfp8_528", PS, 4, 5) == {"codes": 2624, "scales": 4176}
    # 288: page at 1152; codes 1152 + 256 = 1408; scales 1152 + 1024 + 32 = 2208
    assert kr.region_offsets("v41_nvfp4_288", PS, 4, 5) == {"codes": 1408, "scales": 2208}
    # 384 (two parts, [codes 224, rope 128] = 352 B and [scales 28, pad 4] = 32 B): page at 4 * 384 = 1536;
    # token 1's data row at 1536 + 352 = 1888, its rope at 1888 + 224 = 2112; the scale rows start after the 4 data
    # rows at 1536 + 1408 = 2944, token 1's at 2976, its pad at 2976 + 28 = 3004
    assert kr.region_offsets("nvfp4_384", PS, 4, 5) == {"codes": 1888, "rope": 2112, "scales": 2976, "pad": 3004}
    # slot 7 (page 1, token 3, the page's last): data 1536 + 3 * 352 = 2592; scales 2944 + 96 = 3040, pad 3068
    assert kr.region_offsets("nvfp4_384", PS, 4, 7) == {"codes": 2592, "rope": 2816, "scales": 3040, "pad": 3068}
    # one-part records: page_segregated is token_interleaved
    for n in ("sglang_mxfp4_368", "flashmla_nvfp4_352", "nvfp4_432"):
        for s in (0, 5, 13):
            assert kr.region_offsets(n, PS, 4, s) == kr.region_offsets(n, TI, 4, s)
    # the V4.1 records: data rows then scale rows per page (page_segregated), or whole records
    for s in (0, 31, 32, 77):
        page, t = divmod(s, 32)
        assert kr.region_offsets("v41_mxfp8_528", PS, 32, s) == {"codes": page * 528 * 32 + t * 512,
                                                                 "scales": page * 528 * 32 + 512 * 32 + t * 16}
        assert kr.region_offsets("v41_nvfp4_288", TI, 32, s) == {"codes": s * 288, "scales": s * 288 + 256}


def test_locate_by_hand():
    PS, TI = "page_segregated", "token_interleaved"
    # 384 page_segregated P = 4: 2976 + 5 = token 1's scale byte 5 (dims 80..95); 3004 + 2 its pad; 2112 + 3 its rope
    # byte 3 (the high byte of rope value 1 = dim 449)
    assert kr.locate(2981, "nvfp4_384", PS, 4) == dict(page=1, token=1, slot=5, part=1, region="scales", byte=5,
                                                       dims=(80, 95))
    assert kr.locate(3006, "nvfp4_384", PS, 4) == dict(page=1, token=1, slot=5, part=1, region="pad", byte=2,
                                                       dims=None)
    assert kr.locate(2115, "nvfp4_384", PS, 4) == dict(page=1, token=1, slot=5, part=0, region="rope", byte=3,
                                                       dims=(449, 449))
    # 384 token_interleaved: 2 * 384 + 352 + 27 = slot 2's last scale (block 27, dims 432..447)
    assert kr.locate(1147, "nvfp4_384", TI, 4)["dims"] == (432, 447)
    # 352: scale byte 9 = 8 (s & 3) + (s >> 2) with s = 5 -> dims 80..95; rope byte 10 = dim 522 (e4m3, 1 B per dim)
    assert kr.locate(329, "flashmla_nvfp4_352", TI, 4)["dims"] == (80, 95)
    assert kr.locate(266, "flashmla_nvfp4_352", TI, 4)["dims"] == (522, 522)
    # codes: fp4 byte b holds dims 2b, 2b + 1; mxfp8 byte b dim b; 528 page_segregated P = 32: offset 32 * 512 + 16 * 3
    # + 2 = token 3's scale 2 (dims 64..95)
    assert kr.locate(368 + 100, "sglang_mxfp4_368", TI, 4)["dims"] == (200, 201)
    assert kr.locate(16384 + 50, "v41_mxfp8_528", PS, 32) == dict(page=0, token=3, slot=3, part=1, region="scales",
                                                                  byte=2, dims=(64, 95))
    assert kr.locate(238, "sglang_mxfp4_368", TI, 4)["region"] == "pad"
    assert kr.locate(240 + 127, "sglang_mxfp4_368", TI, 4)["dims"] == (511, 511)


def test_locate_inverts_offsets():
    for n in kr.RECORDS:
        for o in kr.ORDERS:
            for s in (0, 3, 6):
                for r, off in kr.region_offsets(n, o, 4, s).items():
                    loc = kr.locate(off, n, o, 4)
                    assert (loc["slot"], loc["region"], loc["byte"]) == (s, r, 0), (n, o, s, r, loc)


def test_352_scale_permutation():
    pos = [8 * (s & 3) + (s >> 2) for s in range(32)]
    assert sorted(pos) == list(range(32))                  # a bijection of the 32 scale bytes
    assert pos[:9] == [0, 8, 16, 24, 1, 9, 17, 25, 2]
    # block s has amax 6 * v_s, v_s the e4m3 value of code 0x20 + s (normal, so t = v_s exactly: no bump) -> its scale
    # byte is 0x20 + s, stored at 320 + pos[s]
    v = np.arange(0x20, 0x40, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    x = np.zeros(576, np.float32)
    x[0:512:16] = 6 * v
    rec = kr.encode(x, "flashmla_nvfp4_352")
    for s in range(32):
        assert rec[320 + pos[s]] == 0x20 + s
    np.testing.assert_array_equal(kr.load(kr.build_cache(x[None], "flashmla_nvfp4_352", "token_interleaved", 1),
                                          "flashmla_nvfp4_352", "token_interleaved", 1, 0)[0:512:16], 6 * v)


def rows(name, slots, rng):
    nope, rope = kr.dims(name)
    x = rng.standard_normal((slots, nope + rope)) * np.exp2(rng.integers(-8, 6, (slots, 1)))
    x[rng.random(x.shape) < 0.05] = 0.0
    return fc.round_bf16(x.astype(np.float32))


@pytest.mark.parametrize("name", kr.RECORDS)
@pytest.mark.parametrize("order", kr.ORDERS)
def test_store_footprint_is_written_mask(name, order):
    x = rows(name, 6, np.random.default_rng(10))
    m = kr.written_mask(6, name, order, 4)
    a = kr.build_cache(x, name, order, 4, fill=0xA5)
    b = kr.build_cache(x, name, order, 4, fill=0x5A)
    assert a.size == b.size == m.size == 2 * 4 * SIZES[name]
    assert (a[~m] == 0xA5).all() and (b[~m] == 0x5A).all() and (a[m] == b[m]).all()
    assert m.sum() == 6 * kr.record_written(name).sum()
    # one store into a random cache changes bytes only inside that slot's written bytes, and writes all of them
    rng = np.random.default_rng(11)
    c = rng.integers(0, 256, m.size).astype(np.uint8)
    c0 = c.copy()
    kr.store(c, name, order, 4, 5, x[5])
    only5 = kr.written_mask(6, name, order, 4) & ~kr.written_mask(5, name, order, 4)
    assert (c[~only5] == c0[~only5]).all()
    np.testing.assert_array_equal(c[only5], a[only5])
    # the record bytes equal encode()'s at the written positions, part by part
    rec = kr.encode(x[5], name)
    got = kr.read_regions(c, name, order, 4, 5)
    off = 0
    for p in kr.parts(name):
        for r, w in p:
            if r != "pad" or kr.record_written(name)[off]:
                np.testing.assert_array_equal(got[r], rec[off:off + w])
            off += w


@pytest.mark.parametrize("name", kr.RECORDS)
@pytest.mark.parametrize("order", kr.ORDERS)
def test_load_is_the_codec_dequant(name, order):
    x = rows(name, 5, np.random.default_rng(12))
    c = kr.build_cache(x, name, order, 2)
    nope, rope = kr.dims(name)
    quant = 512
    for s in range(5):
        got = kr.load(c, name, order, 2, s)
        if name == "v41_mxfp8_528":
            want = fc.dequant_mxfp8(*fc.mxfp8_quant(x[s]))
        elif name == "sglang_mxfp4_368":
            quant = nope
            want = fc.dequant_mxfp4(*fc.mxfp4_quant(x[s, :nope], "sglang"))
        elif name == "v41_idx_mxfp4_68":
            quant = 128
            want = fc.dequant_mxfp4(*fc.mxfp4_quant(x[s], "ref"))
        elif name == "v41_idx_fp8_132":  # by hand: one scale 2^e, e = ceil(log2(max(amax, 1e-4) * fl32(1/448)))
            quant = 128
            t = np.float32(max(float(np.abs(x[s]).max()), np.float32(1e-4))) * np.float32(1 / 448)
            m, e = np.frexp(np.float64(t))
            e = int(e) - 1 if m == 0.5 else int(e)  # ceil(log2(t)): t = 2^k gives k
            sc = np.float32(2.0 ** e)
            codes = (x[s] / sc).astype(ml_dtypes.float8_e4m3fn)
            want = codes.astype(np.float32) * sc
            so = (s // 2) * 264 + (2 * 128 + 4 * (s % 2) if order == "page_segregated" else 132 * (s % 2) + 128)
            assert np.frombuffer(c[so:so + 4].tobytes(), "<f4")[0] == sc  # pages of 2 tokens: 264 bytes
        elif name == "nvfp4_432_v4":  # all 512 dims coded; load returns the bf16 RoPE copy
            quant = nope
            want = fc.dequant_nvfp4(*fc.nvfp4_quant(x[s], "lil432"))[:nope]
        else:
            v = {"v41_nvfp4_288": "ref", "flashmla_nvfp4_352": "flashmla352", "nvfp4_384": "flashinfer384",
                 "nvfp4_432": "lil432"}[name]
            quant = 512 if name != "nvfp4_384" else 448
            want = fc.dequant_nvfp4(*fc.nvfp4_quant(x[s, :quant], v))
        np.testing.assert_array_equal(got[:quant], want)
        if quant < nope + rope:
            r = x[s, nope:]
            wr = fc.e4m3_decode(fc.e4m3_encode(r)) if name == "flashmla_nvfp4_352" else r  # bf16 input: bf16 is a copy
            np.testing.assert_array_equal(got[nope:], wr)


# ---- whole records by hand -----------------------------------------------------------------------------------
TIES16 = [6, .25, .75, 1.75, 3.5, -.25, -.75, -1.75, -3.5, -0.0, 1, 1, 1, 1, 1, 1]
# e2m1 RNE: 6 -> 7, .25 -> 0 (tie to even 0), .75 -> 1.0 (2), 1.75 -> 2.0 (4), 3.5 -> 4.0 (6), negatives | 8,
# -0.0 -> 8 (keep) or 0 (lt_zero), 1 -> 2. Packed (low nibble first):
TIES16_KEEP = [0x07, 0x42, 0x86, 0xCA, 0x8E, 0x22, 0x22, 0x22]
TIES16_LT = [0x07, 0x42, 0x86, 0xCA, 0x0E, 0x22, 0x22, 0x22]
SUB16 = [3 * 2.0 ** -11, 2.0 ** -11, -3 * 2.0 ** -11] + [0] * 13   # amax / 6 = 2^-12, under the 2^-9 floor
ROPE = [1.0, -2.0, 1 / 3, -0.0]
# bf16: 1.0 = 0x3F80, -2 = 0xC000, fl32(1/3) = 0x3EAAAAAB -> bf16 0x3EAB (low half 0xAAAB > 0x8000: up), -0.0 = 0x8000;
# little-endian bytes
ROPE_BF16 = [0x80, 0x3F, 0x00, 0xC0, 0xAB, 0x3E, 0x00, 0x80]


def token(name, blocks, rope):
    """A token row: the given blocks at the start of the quantized dims, zeros elsewhere, the given RoPE values."""
    nope, r = kr.dims(name)
    x = np.zeros(nope + r, np.float32)
    flat = np.concatenate([np.asarray(b, np.float32) for b in blocks])
    x[:flat.size] = flat
    x[nope:nope + len(rope)] = rope
    return x


def check_record(name, x, want, **opts):
    rec = kr.encode(x, name, **opts)
    bad = np.nonzero(rec != want)[0]
    assert bad.size == 0, [(int(i), kr.locate(int(i), name, "token_interleaved", 1)["region"], hex(rec[i]),
                            hex(want[i])) for i in bad[:8]]
    c = kr.build_cache(x[None], name, "token_interleaved", 1, fill=0xA5, **opts)
    w = kr.record_written(name)
    np.testing.assert_array_equal(c[w], want[w])
    assert (c[~w] == 0xA5).all()


def test_v41_nvfp4_288_by_hand():
    # nvfp4 ref: block 0 amax 6 -> s = 1 (0x38); block 1 amax 3 * 2^-11 floored to 6 * 2^-9 -> s = 2^-9 (0x01): codes
    # x * 2^9 = .75 -> 2, .25 -> 0, -.75 -> 10 -> bytes 0x02, 0x0A; zero blocks: s = 2^-9 (0x01), codes 0
    want = np.zeros(288, np.uint8)
    want[0:8] = TIES16_KEEP
    want[8:10] = [0x02, 0x0A]
    want[256:288] = 0x01
    want[256] = 0x38
    check_record("v41_nvfp4_288", token("v41_nvfp4_288", [TIES16, SUB16], []), want)


def test_v41_mxfp8_528_by_hand():
    # mxfp8 ref: block 0 amax 448 -> t = fl32(448 * fl32(1/448)) = 1 -> e = 0, byte 127; codes 448 -> 0x7E,
    # 1.0625 (tie 1 / 1.125) -> 0x38, 1.1875 (tie 1.125 / 1.25) -> 0x3A, -1.0625 -> 0xB8, 2^-10 (tie 0 / 2^-9) -> 0,
    # 3 * 2^-10 -> 2^-8 (0x02), 0.5 -> 0x30. Block 1 amax fl32(0.01): 0.01 / 448 -> ceil(log2 2.23e-5) = -15, byte 112,
    # fl32(0.01) * 2^15 = 327.68 -> e4m3 320 (0x7A; grid 32 there). Zero blocks: t = fl32(1e-4 * fl32(1/448)) = 2.2e-7
    # -> e = -22, byte 105, codes 0
    b0 = [448, 1.0625, 1.1875, -1.0625, 2.0 ** -10, 3 * 2.0 ** -10] + [0.5] * 26
    want = np.zeros(528, np.uint8)
    want[0:32] = [0x7E, 0x38, 0x3A, 0xB8, 0x00, 0x02] + [0x30] * 26
    want[32] = 0x7A
    want[512:528] = 105
    want[512:514] = [127, 112]
    check_record("v41_mxfp8_528", token("v41_mxfp8_528", [b0, [0.01] + [0] * 31], []), want)


def test_sglang_mxfp4_368_by_hand():
    # block 0 (32 dims: TIES16 then 16 ones): amax 6: fl32(log2 6) = fl32(2.584962500721156), so L = 0 exactly ->
    # byte 127, codes x itself. Block 1 amax 3 * 2^-11: log2 = -9.415, minus 2.585 = -12.0 (to fp32) -> byte 115,
    # codes x * 2^12: 6 -> 7, 2 -> 4, -6 -> 15 -> bytes 0x47, 0x0F. Block 2 amax 1.5 * 2^-126 (no 6 * 2^-126 floor):
    # L = -128 -> byte clip(-1) = 0, code x * 2^127 = 3 (5) -> byte 0x05. Zero blocks: byte 0, codes 0.
    # Pad [238, 240) not written (cache keeps its fill; encode gives 0). RoPE bf16.
    b0 = TIES16 + [1] * 16
    b1 = SUB16 + [0] * 16
    b2 = [1.5 * 2.0 ** -126] + [0] * 31
    want = np.zeros(368, np.uint8)
    want[0:16] = TIES16_KEEP + [0x22] * 8
    want[16:18] = [0x47, 0x0F]
    want[32] = 0x05
    want[224:227] = [127, 115, 0]
    want[240:248] = ROPE_BF16
    check_record("sglang_mxfp4_368", token("sglang_mxfp4_368", [b0, b1, b2], ROPE), want)


def test_flashmla_nvfp4_352_by_hand():
    # flashmla352: block 0 amax 6 -> t = 1 (0x38, exact: no bump); codes with lt_zero: -0.0 -> 0 (byte 4 = 0x0E);
    # block 1 (sub-floor): t = max(2^-12, 2^-9) = 2^-9 (0x01), codes 0x02, 0x0A; block 2 amax 6.375 -> t = 1.0625,
    # e4m3 RNE 1.0 < t -> bump to 0x39 (1.125), 6.375 / 1.125 = 5.67 -> 6 (7); zero blocks 0x01.
    # Scales permuted: block s at 320 + 8 (s & 3) + (s >> 2): block 0 -> 320, 1 -> 328, 2 -> 336, others 0x01.
    # RoPE e4m3 unscaled, non-saturating: 1 -> 0x38, -2 -> 0xC0, 1/3 (grid 2^-5 in [0.25, 0.5): 0.3333 = 0.25 +
    # 2.67 * 2^-5 -> 0.34375 = exponent field 5, mantissa 3 = 0x2B), -0.0 -> 0x80, 500 (> 464) -> NaN 0x7F
    rope = ROPE + [500.0]
    x = token("flashmla_nvfp4_352", [TIES16, SUB16, [6.375] + [0] * 15], rope)
    want = np.zeros(352, np.uint8)
    want[0:8] = TIES16_LT
    want[8:10] = [0x02, 0x0A]
    want[16] = 0x07
    want[256:261] = [0x38, 0xC0, 0x2B, 0x80, 0x7F]
    want[320:352] = 0x01
    want[[320, 328, 336]] = [0x38, 0x01, 0x39]
    check_record("flashmla_nvfp4_352", x, want)
    # the vLLM producer: variant vllm352 (its own zero sign: keep -> -0.0 gives 0x8E) and the saturating RoPE cast
    # (500 -> 448, 0x7E); same scales (t and the bump agree here)
    want[4] = 0x8E
    want[260] = 0x7E
    check_record("flashmla_nvfp4_352", x, want, variant="vllm352", rope_cast="e4m3_sat")


def test_nvfp4_384_by_hand():
    # flashinfer384: block 0 -> 0x38, codes keep (-0.0 -> 0x8E); block 1 (t = 2^-12 -> e4m3 0, S = 0, inv = 0): codes
    # x * 0 = 0, 0, -0 -> bytes 0x00, 0x08; block 2 amax 6.375 -> t = 1.0625 -> RNE 1.0 (0x38), no ceil: 6.375 -> 6 (7);
    # zero blocks: scale 0x00, codes 0. Record: [codes 224 | rope 128] [scales 28 | pad 4 written 0]
    x = token("nvfp4_384", [TIES16, SUB16, [6.375] + [0] * 15], ROPE)
    want = np.zeros(384, np.uint8)
    want[0:8] = TIES16_KEEP
    want[8:10] = [0x00, 0x08]
    want[16] = 0x07
    want[224:232] = ROPE_BF16
    want[352:355] = [0x38, 0x00, 0x38]
    check_record("nvfp4_384", x, want)
    # page_segregated P = 2, slot 1: data row at 352, scale row at 2 * 352 + 32 = 736, its pad [764, 768) = 0
    c = kr.build_cache(np.stack([np.zeros_like(x), x]), "nvfp4_384", "page_segregated", 2, fill=0xA5)
    np.testing.assert_array_equal(c[352:704], want[:352])
    np.testing.assert_array_equal(c[736:768], want[352:])
    assert (c[764:768] == 0).all()


def test_nvfp4_432_by_hand():
    # lil432: block 0 amax 6 -> t = fl32(6 * fl32(1/6)) = fl32(1 + 2^-25) = 1 (0x38), inv 1; block 1: t = 2^-12 ->
    # 0x00, codes 0x00, 0x08; block 2 -> 0x38, 6.375 -> 7; zero blocks 0x00; pad [288, 304) written 0; RoPE bf16 at 304
    x = token("nvfp4_432", [TIES16, SUB16, [6.375] + [0] * 15], ROPE)
    want = np.zeros(432, np.uint8)
    want[0:8] = TIES16_KEEP
    want[8:10] = [0x00, 0x08]
    want[16] = 0x07
    want[256:259] = [0x38, 0x00, 0x38]
    want[304:312] = ROPE_BF16
    check_record("nvfp4_432", x, want)


def test_ties_by_preset_nonpow2_scale():
    # |x| / s exactly 0.25, 0.75, 1.75, 3.5 at a non-power-of-two scale: amax 6 * 1.125 = 6.75 -> t = 1.125 (0x39) for
    # every nvfp4 preset (exact e4m3, so no 352 bump; 432: 6.75 * fl32(1/6) = 1.125 (1 + 2^-25) -> 1.125).
    # Elements m * 1.125 for m = .25, .75, 1.75, 3.5 (all bf16-exact). Division (ref / flashmla352) gives m exactly;
    # the multiplying presets (384, 432) use fl32(1 / 1.125) = 0x3F638E39 (0.88888890, 1.5e-8 above 8/9): each product
    # m * 1.125 * it is m (1 + 1.7e-8), under half an ulp above m, so it rounds back to m (checked with numpy fp32
    # steps below). All presets: ties -> nibbles 0, 2, 4, 6 (RNE)
    inv = np.float32(1) / np.float32(1.125)
    assert inv.view(np.uint32) == 0x3F638E39
    mults = [.25, .75, 1.75, 3.5]
    q = [np.float32(np.float32(m * 1.125) * inv) for m in mults]
    assert [float(v) for v in q] == [0.25, 0.75, 1.75, 3.5]  # the products round back onto the midpoints here
    blk = [6.75] + [m * 1.125 for m in mults] + [0] * 11
    for name, sb in (("v41_nvfp4_288", 0x39), ("flashmla_nvfp4_352", 0x39), ("nvfp4_384", 0x39), ("nvfp4_432", 0x39)):
        x = token(name, [blk], [])
        rec = kr.encode(x, name)
        sc_off = kr.region_offsets(name, "token_interleaved", 1, 0)["scales"]
        assert rec[sc_off] == sb, name
        # 6.75 / 1.125 = 6 -> 7, .25 -> 0, .75 -> 2, 1.75 -> 4, 3.5 -> 6: bytes 0x07, 0x42, 0x06
        np.testing.assert_array_equal(rec[0:3], [0x07, 0x42, 0x06], err_msg=name)
