"""DeepSeek-V4.1 FlashMLA KV records (spec v41_fp4.md §2.1-§2.3): the 528-B MXFP8 window record and the 288-B NVFP4
compressed record, in the two page orders, as byte arrays.

Written from the spec alone, independent of the C++ writer (src/layouts/v41_records.*), so the two can be compared
byte for byte. The codecs are reference/fp4_codecs.py's, with the default options:

  kind "v41_mxfp8_528"  (FlashMLA ModelType::V41, §2.1): data = 512 e4m3fn codes, dims in order; scales = 16 ue8m0
                        bytes, scale i covers dims 32i..32i+31.  = fp4_codecs.mxfp8_quant(x, rule="ref", byte_max=255)
  kind "v41_nvfp4_288"  (FlashMLA ModelType::V41_FP4, §2.2): data = 256 bytes of e2m1, byte i = dim 2i (low nibble) |
                        dim 2i+1 (high nibble); scales = 32 e4m3fn bytes in natural order, scale j covers dims
                        16j..16j+15.  = fp4_codecs.nvfp4_quant(x, variant="ref", tie="rne", zero_sign="keep")

Slot s = page * P + t (t the token's row in its page of P tokens). Two orders (§2.3):

  "page_segregated"    (FlashMLA kv_cache_format.h, vLLM, sglang): a page holds the P data rows, then the P scale rows:
                       token t's data at page_start + t * data_bytes, its scales at page_start + P * data_bytes +
                       t * scale_bytes; page_start = page * page_bytes.
  "token_interleaved"  (a later FlashMLA release per a third-party study, unverified): slot s's record
                       [data | scales] at s * record_bytes.

page_bytes = P * record_bytes in both orders. Spec §2.1 says a V41 page is 528 * P rounded up to 512 (the TMA row
stride), which is the same number whenever P is a multiple of 32; the spec gives no rounding for the 288-B record
(256-B TMA stride: no pad when P is a multiple of 8). Rather than guess a pad, page_bytes refuses a page_segregated
page whose P * record_bytes is not a multiple of the data row (P % 32 for mxfp8, P % 8 for nvfp4).

  record_bytes(kind)                                   528 | 288
  data_bytes(kind) / scale_bytes(kind)                 512, 16 | 256, 32
  page_bytes(kind, order, page_size)                   bytes of one page
  offsets(kind, order, page_size, slot)                (data offset, scale offset) of a slot's two regions
  encode(x512, kind)                                   (data bytes, scale bytes) of one token
  store(cache_u8, kind, order, page_size, slot, x512)  writes that token's record bytes only
  build_cache(x [slots, 512], kind, order, page_size, fill=0xA5)   ceil(slots / P) pages of `fill`, every slot stored
  written_mask(slots, kind, order, page_size)          bool mask of the bytes build_cache's stores write
  load(cache, kind, order, page_size, slot)            the token's 512 dequantized values (fp32, exact)
  locate(offset, kind, order, page_size)               which page / token / region / byte a cache offset is
"""
import numpy as np

from . import fp4_codecs

D = 512
KINDS = ("v41_mxfp8_528", "v41_nvfp4_288")
ORDERS = ("page_segregated", "token_interleaved")

_SIZES = {"v41_mxfp8_528": (512, 16), "v41_nvfp4_288": (256, 32)}  # (data bytes, scale bytes) per token


def _check(kind, order=None):
    if kind not in _SIZES:
        raise ValueError(f"unknown V4.1 record kind {kind!r} (want one of {KINDS})")
    if order is not None and order not in ORDERS:
        raise ValueError(f"unknown record order {order!r} (want one of {ORDERS})")


def data_bytes(kind):
    _check(kind)
    return _SIZES[kind][0]


def scale_bytes(kind):
    _check(kind)
    return _SIZES[kind][1]


def record_bytes(kind):
    """Bytes per token: 528 (v41_mxfp8_528) or 288 (v41_nvfp4_288)."""
    return data_bytes(kind) + scale_bytes(kind)


def page_bytes(kind, order, page_size):
    """Bytes of one page of page_size tokens: page_size * record_bytes (see the module docstring on padding)."""
    _check(kind, order)
    P = int(page_size)
    if P <= 0:
        raise ValueError(f"page_size {P} must be positive")
    n = P * record_bytes(kind)
    if order == "page_segregated" and n % data_bytes(kind):
        raise ValueError(f"{kind} page_segregated with page_size {P}: {n} B is not a multiple of the "
                         f"{data_bytes(kind)}-B TMA row; the spec's page padding is not modelled")
    return n


def offsets(kind, order, page_size, slot):
    """(data_offset, scale_offset): where slot's data region (data_bytes) and scale region (scale_bytes) start."""
    P = int(page_size)
    pb = page_bytes(kind, order, P)
    s = int(slot)
    if s < 0:
        raise ValueError(f"slot {s} < 0")
    if order == "token_interleaved":
        base = s * record_bytes(kind)
        return base, base + data_bytes(kind)
    page, t = divmod(s, P)
    start = page * pb
    return start + t * data_bytes(kind), start + P * data_bytes(kind) + t * scale_bytes(kind)


def encode(x512_f32, kind):
    """One token's (data uint8 [data_bytes], scales uint8 [scale_bytes]) from 512 fp32 values."""
    _check(kind)
    x = np.asarray(x512_f32, dtype=np.float32).reshape(D)
    if kind == "v41_mxfp8_528":
        data, sc = fp4_codecs.mxfp8_quant(x, rule="ref", byte_max=255)
    else:
        data, sc = fp4_codecs.nvfp4_quant(x, variant="ref", tie="rne", zero_sign="keep")
    data = np.asarray(data, np.uint8).reshape(-1)
    sc = np.asarray(sc, np.uint8).reshape(-1)
    assert data.size == data_bytes(kind) and sc.size == scale_bytes(kind)
    return data, sc


def store(cache_u8, kind, order, page_size, slot, x512_f32):
    """Quantize one token and write its record into cache_u8 (a flat uint8 array, modified in place); no other byte
    is touched. Returns cache_u8."""
    if not isinstance(cache_u8, np.ndarray) or cache_u8.dtype != np.uint8 or not cache_u8.flags.c_contiguous:
        raise TypeError("cache_u8 must be a C-contiguous uint8 numpy array")
    c = cache_u8.reshape(-1)  # a view: writes land in cache_u8
    do, so = offsets(kind, order, page_size, slot)
    data, sc = encode(x512_f32, kind)
    if max(do + data.size, so + sc.size) > c.size:
        raise ValueError(f"slot {slot} does not fit a cache of {c.size} B")
    c[do:do + data.size] = data
    c[so:so + sc.size] = sc
    return cache_u8


def n_pages(slots, page_size):
    return -(-int(slots) // int(page_size))


def build_cache(x, kind, order, page_size, fill=0xA5):
    """x [slots, 512] fp32 -> the whole cache (uint8, ceil(slots / P) pages), bytes no token writes = fill."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, D)
    cache = np.full(n_pages(x.shape[0], page_size) * page_bytes(kind, order, page_size), fill, np.uint8)
    for s in range(x.shape[0]):
        store(cache, kind, order, page_size, s, x[s])
    return cache


def written_mask(slots, kind, order, page_size):
    """Boolean mask over build_cache's bytes: True where some slot 0..slots-1 writes."""
    m = np.zeros(n_pages(slots, page_size) * page_bytes(kind, order, page_size), bool)
    for s in range(int(slots)):
        do, so = offsets(kind, order, page_size, s)
        m[do:do + data_bytes(kind)] = True
        m[so:so + scale_bytes(kind)] = True
    return m


def read(cache, kind, order, page_size, slot):
    """The slot's raw (data, scales) bytes."""
    c = np.asarray(cache).reshape(-1).view(np.uint8)
    do, so = offsets(kind, order, page_size, slot)
    return c[do:do + data_bytes(kind)].copy(), c[so:so + scale_bytes(kind)].copy()


def load(cache, kind, order, page_size, slot):
    """The slot's 512 dequantized values (fp32, exact): mxfp8 e4m3(code) * 2^(byte - 127) (byte 255 -> NaN);
    nvfp4 e2m1(nibble) * e4m3(scale) (a NaN scale -> NaN for its 16 dims)."""
    data, sc = read(cache, kind, order, page_size, slot)
    if kind == "v41_mxfp8_528":
        return fp4_codecs.dequant_mxfp8(data, sc)
    return fp4_codecs.dequant_nvfp4(data, sc)


def locate(offset, kind, order, page_size):
    """Describe a cache byte offset: dict(page, token, slot, region 'data' | 'scales' | 'pad', byte, dims)."""
    P = int(page_size)
    off = int(offset)
    db, sb, rb = data_bytes(kind), scale_bytes(kind), record_bytes(kind)
    pb = page_bytes(kind, order, P)
    page, r = divmod(off, pb)
    if order == "token_interleaved":
        t, b = divmod(r, rb)
        region = "data" if b < db else "scales"
        if region == "scales":
            b -= db
    elif r < P * db:
        t, b = divmod(r, db)
        region = "data"
    elif r < P * (db + sb):
        t, b = divmod(r - P * db, sb)
        region = "scales"
    else:
        return dict(page=page, token=None, slot=None, region="pad", byte=r - P * (db + sb), dims=None)
    if region == "data":
        dims = (b,) if kind == "v41_mxfp8_528" else (2 * b, 2 * b + 1)
    else:
        blk = 32 if kind == "v41_mxfp8_528" else 16
        dims = (blk * b, blk * b + blk - 1)
    return dict(page=page, token=t, slot=page * P + t, region=region, byte=b, dims=dims)
