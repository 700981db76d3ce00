"""FP4 / FP8 KV-cache records in circulation (spec v41_fp4.md §2, docs/research_fp4_records.md, which wins where the
two differ): six one-token records, their page orders, a writer (store) and an exact reader (load), as byte arrays.

Written from the spec and the research note, independent of the C++ writer (src/layouts/kv_records.*), so the two
can be compared byte for byte (tests/python/test_kv_records.py). The codecs are reference/fp4_codecs.py's.

A token's input is `dim` fp32 values: the NoPE dims, then the RoPE dims. The record is one or more *parts*, each a run
of *regions* (at most one region of each kind per record):

| name               | dims   | parts (regions in order)                 | codec preset (default)     | rope | pad     |
|--------------------|--------|------------------------------------------|----------------------------|------|---------|
| v41_mxfp8_528      | 448+64 | [codes 512] [scales 16]                  | mxfp8 "ref", byte_max 255  | q    | -       |
| v41_nvfp4_288      | 448+64 | [codes 256] [scales 32]                  | nvfp4 "ref"                | q    | -       |
| sglang_mxfp4_368   | 448+64 | [codes 224, scales 14, pad 2, rope 128]  | mxfp4 "sglang", half_even  | bf16 | NOT wr. |
| flashmla_nvfp4_352 | 512+64 | [codes 256, rope 64, scales 32]          | nvfp4 flashmla352 lt_zero  | e4m3 | -       |
| nvfp4_384          | 448+64 | [codes 224, rope 128] [scales 28, pad 4] | nvfp4 "flashinfer384"      | bf16 | 0       |
| nvfp4_432          | 512+64 | [codes 256, scales 32, pad 16, rope 128] | nvfp4 "lil432"             | bf16 | 0       |
| nvfp4_432_v4       | 448+64 | [codes 256, scales 32, pad 16, rope 128] | nvfp4 "lil432"             | both | 0       |
| v41_idx_mxfp4_68   | 64+64  | [codes 64] [scales 4]                    | mxfp4 "ref"                | q    | -       |
| v41_idx_fp8_132    | 64+64  | [codes 128] [scales 4]                   | fp8 (mxfp8 "ref", 128 dims)| q    | -       |
(dims = nope+rope; rope q = quantized with the codes; both = quantized with the codes (quant covers all 512 dims) and
a bf16 copy in the rope region, which load() returns; pad 0 = written as zeros, NOT wr. = never written.)

* The codec row covers the quantized dims: all 512 for the V4.1 records (RoPE quantized with the NoPE), else the
  NoPE dims only. Codes: MXFP8 one e4m3 byte per dim; FP4 two nibbles per byte, dim 2i in the low nibble. Scales: one
  byte per block (mxfp8 / mxfp4: 32 dims, ue8m0; nvfp4: 16 dims, e4m3), in natural order, except flashmla_nvfp4_352
  where block s's scale sits at scale-region byte 8 * (s & 3) + (s >> 2) (FlashMLA PR #18 `_nvfp4_permute_sf`).
* fp8 (the V4.1 indexer's FP8 option, spec §5 "[P x 128 e4m3 | P x 4 B fp32 2^e]"): the MXFP8 "ref" exponent rule
  over one block of all 128 dims, codes e4m3(clamp(x * 2^-e, +-448)), the scale stored as the little-endian fp32
  2^e; a block with a NaN: NaN (codes 0x7F); with inf but no NaN: +inf (e = 128, what exp2(ceil(log2(inf))) gives).
* RoPE "bf16": the little-endian bits of bf16(x) (one RNE; a bit copy for bf16 input). RoPE "e4m3" (352 only): the
  unscaled e4m3 code of x, non-saturating (`rope_cast="e4m3"`, the FlashMLA test's torch cast: |x| > 464 -> NaN) or
  saturating (`rope_cast="e4m3_sat"`, vLLM's writer for the vllm352 producer).
* Pad "written 0": the writer stores zeros there. "NOT written" (sglang 368: the scale store is masked to 14 slots,
  the pool is zero-allocated): store() leaves those cache bytes as they were; encode() returns 0 there and
  record_written() says which bytes are written.
* Not modelled: the 380-B and b12x 368-B records, sglang's group_size 64 / 128, per-page padding or a page stride larger than a page.

Orders (slot s = page * P + t):
  "token_interleaved"  slot s's record (parts concatenated) at s * record_bytes.
  "page_segregated"    the page at page * P * record_bytes holds part 0 of every token (token t at t * bytes(part 0)),
                       then part 1 of every token, ... (FlashMLA V41 / V41_FP4: data rows then scale rows; the 384-B
                       FlashInfer page: P x 352 data, then P x 32 scale rows). A one-part record is the same in both
                       orders. page_bytes = P * record_bytes in both (no rounding to a TMA row: the C++ readers and
                       writers refuse page sizes whose pages are not a multiple of the kernels' TMA row).

Codec options (**opts of encode / store / build_cache; defaults = the table): `variant` (the quantizer's variant;
for mxfp8 an alias of `rule`), `tie`, `zero_sign`, `nan`, `amax_floor` (fp4 formats), `sglang_round` (mxfp4),
`rule` and `byte_max` (mxfp8), `rope_cast` ("e4m3" | "e4m3_sat", 352 only). E.g. the vLLM producer of the 352-B
record: encode(x, "flashmla_nvfp4_352", variant="vllm352", rope_cast="e4m3_sat"). An nvfp4 `variant` override without
`zero_sign` takes that variant's own zero-sign rule (fp4_codecs.NVFP4_ZERO_SIGN), not the record's default.

  RECORDS, ORDERS
  record_bytes(name), parts(name) -> ((region, bytes), ...) per part, dims(name) -> (nope, rope)
  page_bytes(name, order, P)
  region_offsets(name, order, P, slot) -> {region: cache offset}
  record_written(name) -> bool [record_bytes]     which record bytes the writer stores
  encode(x, name, **opts) -> uint8 [record_bytes]  one record, parts concatenated (unwritten pad as 0)
  store(cache_u8, name, order, P, slot, x, **opts)   writes exactly the written bytes
  build_cache(x [slots, dim], name, order, P, fill=0xA5, **opts)   ceil(slots / P) pages
  written_mask(slots, name, order, P)
  read_regions(cache, name, order, P, slot) -> {region: uint8 bytes}
  load(cache, name, order, P, slot) -> fp32 [dim]  exact: code * scale on the quantized dims, RoPE as stored
  locate(offset, name, order, P) -> dict(page, token, slot, part, region, byte, dims)
"""
import numpy as np

from . import fp4_codecs as fc

ORDERS = ("page_segregated", "token_interleaved")

# fmt: the codec family; quant: dims the codec row covers; rope: None (quantized with the codes) | "bf16" | "e4m3";
# pad: None | "zero" | "not_written"; codec: the default options
_SPEC = {
    "v41_mxfp8_528": dict(nope=448, rope_dims=64, fmt="mxfp8", quant=512, rope=None, pad=None,
                          parts=((("codes", 512),), (("scales", 16),)), codec=dict(rule="ref", byte_max=255)),
    "v41_nvfp4_288": dict(nope=448, rope_dims=64, fmt="nvfp4", quant=512, rope=None, pad=None,
                          parts=((("codes", 256),), (("scales", 32),)), codec=dict(variant="ref", zero_sign="keep")),
    "sglang_mxfp4_368": dict(nope=448, rope_dims=64, fmt="mxfp4", quant=448, rope="bf16", pad="not_written",
                             parts=((("codes", 224), ("scales", 14), ("pad", 2), ("rope", 128)),),
                             codec=dict(variant="sglang", sglang_round="half_even", zero_sign="keep")),
    "flashmla_nvfp4_352": dict(nope=512, rope_dims=64, fmt="nvfp4", quant=512, rope="e4m3", pad=None,
                               parts=((("codes", 256), ("rope", 64), ("scales", 32)),),
                               codec=dict(variant="flashmla352", zero_sign="lt_zero", rope_cast="e4m3")),
    "nvfp4_384": dict(nope=448, rope_dims=64, fmt="nvfp4", quant=448, rope="bf16", pad="zero",
                      parts=((("codes", 224), ("rope", 128)), (("scales", 28), ("pad", 4))),
                      codec=dict(variant="flashinfer384", zero_sign="keep")),
    "v41_idx_mxfp4_68": dict(nope=64, rope_dims=64, fmt="mxfp4", quant=128, rope=None, pad=None,
                             parts=((("codes", 64),), (("scales", 4),)), codec=dict(variant="ref", zero_sign="keep")),
    "v41_idx_fp8_132": dict(nope=64, rope_dims=64, fmt="fp8", quant=128, rope=None, pad=None,
                            parts=((("codes", 128),), (("scales", 4),)), codec=dict(rule="ref")),
    "nvfp4_432": dict(nope=512, rope_dims=64, fmt="nvfp4", quant=512, rope="bf16", pad="zero",
                      parts=((("codes", 256), ("scales", 32), ("pad", 16), ("rope", 128)),),
                      codec=dict(variant="lil432", zero_sign="keep")),
    "nvfp4_432_v4": dict(nope=448, rope_dims=64, fmt="nvfp4", quant=512, rope="bf16", pad="zero",
                         parts=((("codes", 256), ("scales", 32), ("pad", 16), ("rope", 128)),),
                         codec=dict(variant="lil432", zero_sign="keep")),
}
RECORDS = tuple(_SPEC)
_BLOCK = {"mxfp8": 32, "nvfp4": 16, "mxfp4": 32, "fp8": 128}
_SCALE_BYTES = {"fp8": 4}
_OPTS = {"mxfp8": ("rule", "variant", "byte_max"),
         "fp8": ("rule", "variant"),
         "nvfp4": ("variant", "tie", "zero_sign", "nan", "amax_floor"),
         "mxfp4": ("variant", "tie", "zero_sign", "nan", "amax_floor", "sglang_round")}


def _spec(name, order=None):
    if name not in _SPEC:
        raise ValueError(f"unknown KV record {name!r} (want one of {RECORDS})")
    if order is not None and order not in ORDERS:
        raise ValueError(f"unknown record order {order!r} (want one of {ORDERS})")
    return _SPEC[name]


def parts(name):
    """The record's parts, each a tuple of (region, bytes) in order."""
    return _spec(name)["parts"]


def dims(name):
    """(nope, rope) dims of the record's input row."""
    sp = _spec(name)
    return sp["nope"], sp["rope_dims"]


def record_bytes(name):
    return sum(w for p in parts(name) for _, w in p)


def _part_bytes(name):
    return [sum(w for _, w in p) for p in parts(name)]


def _layout(name):
    """{region: (part index, offset in the part, offset in the concatenated record, width)}."""
    out, rec = {}, 0
    for pi, p in enumerate(parts(name)):
        off = 0
        for r, w in p:
            out[r] = (pi, off, rec, w)
            off += w
            rec += w
    return out


def page_bytes(name, order, page_size):
    """Bytes of one page of page_size tokens: page_size * record_bytes (both orders)."""
    _spec(name, order)
    P = int(page_size)
    if P <= 0:
        raise ValueError(f"page_size {P} must be positive")
    return P * record_bytes(name)


def region_offsets(name, order, page_size, slot):
    """{region: cache offset of its first byte} for one slot."""
    P = int(page_size)
    pb = page_bytes(name, order, P)
    s = int(slot)
    if s < 0:
        raise ValueError(f"slot {s} < 0")
    lay = _layout(name)
    if order == "token_interleaved":
        base = s * record_bytes(name)
        return {r: base + rec for r, (_, _, rec, _) in lay.items()}
    page, t = divmod(s, P)
    pbytes = _part_bytes(name)
    starts = np.concatenate([[0], np.cumsum(pbytes)[:-1]]) * P + page * pb
    return {r: int(starts[pi]) + t * pbytes[pi] + off for r, (pi, off, _, _) in lay.items()}


def record_written(name):
    """bool [record_bytes]: True where the writer stores the byte (False only on sglang_mxfp4_368's pad)."""
    m = np.ones(record_bytes(name), bool)
    if _spec(name)["pad"] == "not_written":
        _, _, rec, w = _layout(name)["pad"]
        m[rec:rec + w] = False
    return m


def _codec_opts(name, opts):
    sp = _spec(name)
    fmt = sp["fmt"]
    o = dict(sp["codec"])
    o.pop("rope_cast", None)
    rope_cast = sp["codec"].get("rope_cast")
    for k, v in opts.items():
        if k == "rope_cast":
            if sp["rope"] != "e4m3" or v not in ("e4m3", "e4m3_sat"):
                raise ValueError(f"{name}: rope_cast={v!r} (only flashmla_nvfp4_352 takes 'e4m3' | 'e4m3_sat')")
            rope_cast = v
        elif k in _OPTS[fmt]:
            o["rule" if (fmt in ("mxfp8", "fp8") and k == "variant") else k] = v
        else:
            raise ValueError(f"{name}: unknown codec option {k!r} (want {_OPTS[fmt] + ('rope_cast',)})")
    if fmt == "nvfp4" and "variant" in opts and "zero_sign" not in opts:
        o["zero_sign"] = None  # the overriding variant's own producer rule (fp4_codecs.NVFP4_ZERO_SIGN)
    return fmt, o, rope_cast


def _quant(name, xq, opts):
    """(codes bytes, scale bytes in natural block order) of the quantized dims."""
    fmt, o, _ = _codec_opts(name, opts)
    if fmt == "mxfp8":
        c, s = fc.mxfp8_quant(xq, **o)
    elif fmt == "fp8":
        c, b = fc.mxfp8_quant(xq, block=128, byte_max=255, **o)
        xb = np.asarray(xq, np.float32).reshape(-1, 128)
        with np.errstate(all="ignore"):
            sc = np.ldexp(np.float32(1), np.minimum(b.astype(np.int64), 254) - 127).astype(np.float32)
        sc = np.where(b == 255, np.where(np.isnan(xb).any(axis=1), np.float32(np.nan), np.float32(np.inf)), sc)
        return np.asarray(c, np.uint8).reshape(-1), sc.astype("<f4").view(np.uint8).reshape(-1)
    elif fmt == "nvfp4":
        c, s = fc.nvfp4_quant(xq, **o)
    else:
        c, s = fc.mxfp4_quant(xq, **o)
    return np.asarray(c, np.uint8).reshape(-1), np.asarray(s, np.uint8).reshape(-1)


def _sf_perm(name, n):
    """pos[s] = scale-region position of block s (identity except for the 352-B record); for a record with 4-byte
    scales, n counts bytes."""
    s = np.arange(n)
    return 8 * (s & 3) + (s >> 2) if name == "flashmla_nvfp4_352" else s


def encode(x_f32, name, **opts):
    """One token's record, uint8 [record_bytes], parts concatenated in order; pad bytes 0 (record_written says
    which bytes a store writes)."""
    sp = _spec(name)
    nope, rope = dims(name)
    x = np.asarray(x_f32, dtype=np.float32).reshape(nope + rope)
    _, _, rope_cast = _codec_opts(name, opts)
    codes, sc = _quant(name, x[:sp["quant"]], opts)
    reg = {"codes": codes, "scales": np.empty_like(sc)}
    reg["scales"][_sf_perm(name, sc.size)] = sc
    if sp["rope"] == "bf16":
        reg["rope"] = x[nope:].astype(fc.BF16).view(np.uint16).astype("<u2").view(np.uint8)
    elif sp["rope"] == "e4m3":
        reg["rope"] = (fc.e4m3_encode_sat if rope_cast == "e4m3_sat" else fc.e4m3_encode)(x[nope:])
    out = np.zeros(record_bytes(name), np.uint8)
    for r, (_, _, rec, w) in _layout(name).items():
        if r != "pad":
            assert reg[r].size == w, (name, r, reg[r].size, w)
            out[rec:rec + w] = reg[r]
    return out


def _check_cache(cache_u8):
    if not isinstance(cache_u8, np.ndarray) or cache_u8.dtype != np.uint8 or not cache_u8.flags.c_contiguous:
        raise TypeError("cache_u8 must be a C-contiguous uint8 numpy array")
    return cache_u8.reshape(-1)


def store(cache_u8, name, order, page_size, slot, x_f32, **opts):
    """Quantize one token and write its record into cache_u8 (flat uint8, modified in place): exactly the written
    bytes (record_written), no other. Returns cache_u8."""
    c = _check_cache(cache_u8)
    rec = encode(x_f32, name, **opts)
    offs = region_offsets(name, order, page_size, slot)
    lay = _layout(name)
    if max(offs[r] + lay[r][3] for r in offs) > c.size:
        raise ValueError(f"slot {slot} does not fit a cache of {c.size} B")
    for r, (_, _, ro, w) in lay.items():
        if r == "pad" and _spec(name)["pad"] == "not_written":
            continue
        c[offs[r]:offs[r] + w] = rec[ro:ro + w]
    return cache_u8


def n_pages(slots, page_size):
    return -(-int(slots) // int(page_size))


def build_cache(x, name, order, page_size, fill=0xA5, **opts):
    """x [slots, dim] fp32 -> the whole cache (uint8, ceil(slots / P) pages), bytes no store writes = fill."""
    nope, rope = dims(name)
    x = np.asarray(x, dtype=np.float32).reshape(-1, nope + rope)
    cache = np.full(n_pages(x.shape[0], page_size) * page_bytes(name, order, page_size), fill, np.uint8)
    for s in range(x.shape[0]):
        store(cache, name, order, page_size, s, x[s], **opts)
    return cache


def written_mask(slots, name, order, page_size):
    """bool over build_cache's bytes: True where a store of some slot 0..slots-1 writes."""
    m = np.zeros(n_pages(slots, page_size) * page_bytes(name, order, page_size), bool)
    wr = record_written(name)
    lay = _layout(name)
    for s in range(int(slots)):
        for r, off in region_offsets(name, order, page_size, s).items():
            _, _, ro, w = lay[r]
            m[off:off + w] |= wr[ro:ro + w]
    return m


def read_regions(cache, name, order, page_size, slot):
    """{region: the slot's raw bytes (copies)}."""
    c = np.asarray(cache).reshape(-1).view(np.uint8)
    lay = _layout(name)
    return {r: c[off:off + lay[r][3]].copy() for r, off in region_offsets(name, order, page_size, slot).items()}


def load(cache, name, order, page_size, slot):
    """The slot's dim values, fp32, exact: the codec's dequant of the quantized dims (mxfp8 e4m3 * 2^(byte - 127),
    byte 255 -> NaN; nvfp4 e2m1 * e4m3, a NaN scale -> NaN; mxfp4 e2m1 * 2^(byte - 127), byte 0 -> 2^-127 as the
    codec has it, where sglang's SM90 decode kernel reads 0.0), then the RoPE dims as stored (bf16 or e4m3 decoded)."""
    sp = _spec(name)
    nope, rope = dims(name)
    g = read_regions(cache, name, order, page_size, slot)
    out = np.empty(nope + rope, np.float32)
    if sp["fmt"] == "fp8":
        sc = g["scales"].view("<f4").astype(np.float32)
        with np.errstate(all="ignore"):
            out[:sp["quant"]] = (fc.e4m3_decode(g["codes"]).reshape(-1, 128) * sc[:, None]).reshape(-1)
        return out
    sc = g["scales"][_sf_perm(name, g["scales"].size)]
    deq = {"mxfp8": fc.dequant_mxfp8, "nvfp4": fc.dequant_nvfp4, "mxfp4": fc.dequant_mxfp4}[sp["fmt"]]
    out[:sp["quant"]] = deq(g["codes"], sc)
    if sp["rope"] == "bf16":
        out[nope:] = g["rope"].view("<u2").astype(np.uint16).view(fc.BF16).astype(np.float32)
    elif sp["rope"] == "e4m3":
        out[nope:] = fc.e4m3_decode(g["rope"])
    return out


def locate(offset, name, order, page_size):
    """Describe a cache byte offset: dict(page, token, slot, part, region 'codes' | 'scales' | 'pad' | 'rope', byte
    (within the region), dims (first, last) input dims the byte holds, None for pad)."""
    sp = _spec(name, order)
    P = int(page_size)
    off = int(offset)
    page, r = divmod(off, page_bytes(name, order, P))
    pbytes = _part_bytes(name)
    if order == "token_interleaved":
        t, b = divmod(r, record_bytes(name))
        pi = 0
        while b >= pbytes[pi]:
            b -= pbytes[pi]
            pi += 1
    else:
        pi = 0
        while r >= P * pbytes[pi]:
            r -= P * pbytes[pi]
            pi += 1
        t, b = divmod(r, pbytes[pi])
    for region, w in parts(name)[pi]:
        if b < w:
            break
        b -= w
    nope = sp["nope"]
    if region == "codes":
        d = (b, b) if sp["fmt"] in ("mxfp8", "fp8") else (2 * b, 2 * b + 1)
    elif region == "scales":
        n = sp["quant"] // _BLOCK[sp["fmt"]]
        blk = int(np.nonzero(_sf_perm(name, n) == b // _SCALE_BYTES.get(sp["fmt"], 1))[0][0])
        d = (blk * _BLOCK[sp["fmt"]], (blk + 1) * _BLOCK[sp["fmt"]] - 1)
    elif region == "rope":
        k = b // 2 if sp["rope"] == "bf16" else b
        d = (nope + k, nope + k)
    else:
        d = None
    return dict(page=page, token=t, slot=page * P + t, part=pi, region=region, byte=b, dims=d)
