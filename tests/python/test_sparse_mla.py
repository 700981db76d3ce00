"""The MLA stages end to end through the capture kit and the CLI: mla.kcache_store (the 656-byte fp8 cache writer),
attn.sparse_mla_prefill (FlashMLA flash_mla_sparse_fwd) and attn.sparse_mla_decode (flash_mla_with_kvcache, sparse
fp8).

Expected values come from the independent float64 numpy models of reference/mla.py, written from the stage
definitions (softmax over the selected keys, invalid-index and topk_length masks, sinks, lse bases, the 656-byte token
record), never from the C++ reference or the kit. Outputs are rounded once to their stored dtype (bf16 / fp32), so
a correct reference passes `dsa-check check` (exit 0); seeded bugs must fail (exit 1); an index the kernel would read
out of bounds is an input error (exit 2). Skips cleanly when the binary does not have these stages yet."""
import json
import os
import subprocess

import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import mla as ref
from reference import numerics as num

CLI_STAGES = ("mla.kcache_store", "attn.sparse_mla_prefill", "attn.sparse_mla_decode")  # else `cli` skips the module
MLA_SCALE = 0.1352337788608801  # V3.2: 192^-0.5 * mscale^2
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


def check(cli, path, tmp_path):
    """(exit code, console text, JSON results) of `dsa-check check path`."""
    js = tmp_path / (os.path.basename(str(path)) + ".json")
    p = run(cli, "check", path, "--json", js)
    results = json.loads(js.read_text())["results"] if js.exists() else []
    return p.returncode, p.stdout + p.stderr, results


def rand_bf16(rng, shape, scale=1.0):
    return num.to_bf16(rng.standard_normal(shape) * scale)


# ---- inputs ----
def prefill_inputs(seed, s_q=24, h=64, d=576, s_kv=300, topk=128, lonely=True, dups=True):
    """q, kv, indices [s_q, 1, topk] int32 with -1 padding, other invalid values (-7, s_kv, s_kv + 100),
    duplicates and (lonely) rows with no valid index."""
    rng = np.random.default_rng(seed)
    q = rand_bf16(rng, (s_q, h, d), 0.5)
    kv = rand_bf16(rng, (s_kv, 1, d))
    idx = np.stack([rng.permutation(s_kv)[:topk] for _ in range(s_q)]).astype(np.int32)
    idx[1, 100:] = -1                      # -1 padding at the end
    idx[2, :30] = -1                       # leading -1
    idx[3, 5:9] = [-7, s_kv, s_kv + 100, -1]  # other invalid values
    if dups:
        idx[4, 10:20] = idx[4, 0]          # one key 11 times
        idx[5, topk // 2:] = idx[5, :topk // 2]  # every key twice
    if lonely:
        idx[6, :] = -1                     # no valid index at all
        idx[7, :] = s_kv + np.arange(topk)  # only out-of-range indices
    return q, kv, idx.reshape(s_q, 1, topk)


def sinks_near_lse(lse_nat, rng):
    """Per-head sinks near the typical lse, so that the sink factor 1/(1 + e^(sink - lse)) is far from 1."""
    fin = np.where(np.isfinite(lse_nat), lse_nat, np.nan)
    return (np.nanmedian(fin, axis=0) + rng.standard_normal(fin.shape[1]) * 0.5).astype(np.float32)


def decode_inputs(seed, b=3, s_q=2, h=32, topk=128, pages=8, ps=64, fmt="pow2"):
    """q [b, s_q, h, 576], a fully written cache [pages, ps, 1, 656] (numpy writer, scale_fmt fmt) and indices
    [b, s_q, topk] (page * ps + offset, -1 padding: trailing, leading, interleaved and a row of only -1)."""
    rng = np.random.default_rng(seed)
    q = rand_bf16(rng, (b, s_q, h, 576), 0.5)
    N = pages * ps
    kv_c = rand_bf16(rng, (N, 512))
    k_pe = rand_bf16(rng, (N, 64))
    slots = rng.permutation(N)  # token t lands in slot slots[t]: every slot written, in scattered order
    cache = ref.kcache_store(kv_c, k_pe, slots, rng.integers(0, 256, (pages, ps, 1, 656), dtype=np.uint8), fmt)
    idx = np.stack([[rng.permutation(np.arange(1, N))[:topk] for _ in range(s_q)] for _ in range(b)]).astype(np.int32)
    idx[0, 0, topk * 3 // 4:] = -1         # trailing -1
    idx[0, -1, :topk // 3] = -1            # leading -1
    idx[1, 0, ::3] = -1                    # interleaved -1
    idx[1, -1, :] = -1                     # a lonely row
    idx[-1, 0, 7] = 0                      # slot 0 is a real token once
    return q, cache, idx


# ---------------------------------------------------------------------------------------------------------------
# (1) a correct reference passes
def test_sparse_mla_prefill_reference_passes_base_e_sinks_topk_length_lonely_dups(cli, tmp_path):
    rng = np.random.default_rng(11)
    q, kv, idx = prefill_inputs(1)
    s_q = q.shape[0]
    tl = np.full(s_q, idx.shape[-1], np.int32)
    tl[8], tl[9], tl[10] = 0, 1, 77        # empty (lonely), one key, a prefix
    _, _, lse0 = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, topk_length=tl)
    sink = sinks_near_lse(lse0.astype(np.float64), rng)
    sink[3] = -np.inf                      # -inf: no effect
    path = tmp_path / "prefill_e.h5"
    with dsa_dump.DumpWriter(str(path)) as w:
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, attn_sink=sink, topk_length=tl)
        assert np.isinf(ls[6]).all() and (ls[6] > 0).all() and not num.f64(o[6]).any()
        dsa_dump.capture_flash_mla_sparse_fwd(q, kv, idx, MLA_SCALE, o, m, ls, attn_sink=sink, topk_length=tl,
                                              out=w, name="sinks_topk_length")
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE)
        dsa_dump.capture_flash_mla_sparse_fwd(q, kv[:, 0, :], idx[:, 0, :], MLA_SCALE, o, m, ls, out=w,
                                              name="plain_2d_views")  # kv [s_kv, d], indices [s_q, topk]
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, attn_sink=sink, lse_includes_sink=True)
        dsa_dump.capture_flash_mla_sparse_fwd(q, kv, idx, MLA_SCALE, o, m, ls, attn_sink=sink, lse_includes_sink=True,
                                              out=w, name="lse_includes_sink")
        q5, kv5, idx5 = prefill_inputs(2, s_q=16, h=16, d=512, s_kv=400, topk=256)
        o, m, ls = ref.sparse_mla_prefill(q5, kv5, idx5, MLA_SCALE)
        dsa_dump.capture_flash_mla_sparse_fwd(q5, kv5, idx5.astype(np.int64), MLA_SCALE, o, m, ls, out=w,
                                              name="d_qk_512")
    c = {x.name: x for x in dsa_dump.read_dump(str(path))}
    assert c["plain_2d_views"].inputs["kv"].shape == kv.shape
    assert c["plain_2d_views"].inputs["indices"].shape == idx.shape
    assert c["d_qk_512"].dtypes["inputs/indices"] == "int64"  # the schema takes int64 indices as they are
    assert c["sinks_topk_length"].attrs["softmax_scale"] == MLA_SCALE
    rc, text, res = check(cli, path, tmp_path)
    assert rc == 0, text
    assert {(r["case"], r["tensor"]) for r in res if r["pass"]} >= {
        (n, t) for n in c for t in ("out", "max_logits", "lse")}


def test_sparse_mla_prefill_reference_passes_lse_base_2(cli, tmp_path):
    q, kv, idx = prefill_inputs(3)
    tl = np.full(q.shape[0], idx.shape[-1], np.int32)
    tl[9] = 0
    o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, topk_length=tl, lse_base="2")
    assert np.isneginf(ls[6]).all() and np.isneginf(m[6]).all()
    path = tmp_path / "prefill_2.h5"
    dsa_dump.capture_flash_mla_sparse_fwd(q, kv, idx, MLA_SCALE, o, m, ls, topk_length=tl, lse_base="2", out=path)
    rc, text, _ = check(cli, path, tmp_path)
    assert rc == 0, text


def test_sparse_mla_decode_reference_passes_pow2_and_non_pow2_scales(cli, tmp_path):
    rng = np.random.default_rng(21)
    path = tmp_path / "decode.h5"
    with dsa_dump.DumpWriter(str(path)) as w:
        for fmt, dequant in (("pow2", "bf16_scale"), ("pow2", "f32_scale"), ("amax448", "bf16_scale"),
                             ("amax448", "f32_scale")):
            q, cache, idx = decode_inputs(5 if fmt == "pow2" else 6, fmt=fmt)
            b = q.shape[0]
            tl = np.array([idx.shape[-1], 100, 64][:b], np.int32)
            _, lse0 = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE, dequant=dequant)
            sink = sinks_near_lse(np.moveaxis(lse0.astype(np.float64), 1, 2).reshape(-1, q.shape[2]), rng)
            o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE, attn_sink=sink, topk_length=tl, dequant=dequant)
            assert np.isposinf(ls[1, :, 1]).all() and not num.f64(o[1, 1]).any()  # the lonely row
            # engines hand the cache as float8 [num_blocks, page_size, 656] and may flatten indices to [b*s_q, topk]
            cache_view = cache.reshape(cache.shape[0], cache.shape[1], 656).view(E4M3)
            dsa_dump.capture_flash_mla_with_kvcache(
                q, cache_view, idx.reshape(-1, idx.shape[-1]).astype(np.int64), o, ls, softmax_scale=MLA_SCALE,
                block_table=np.arange(8, dtype=np.int32).reshape(1, 8).repeat(b, 0),
                cache_seqlens=np.full(b, 512, np.int32), attn_sink=sink, topk_length=tl, dequant=dequant, out=w,
                name=f"{fmt}_{dequant}_sinks")
            o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE, dequant=dequant)
            dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, dequant=dequant,
                                                    out=w, name=f"{fmt}_{dequant}_plain")
            if dequant == "bf16_scale":
                o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE, attn_sink=sink, dequant=dequant,
                                              lse_includes_sink=True)
                assert (ls[1, :, 1] == sink).all()  # the lonely row: log(0 + e^sink)
                dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, attn_sink=sink,
                                                        dequant=dequant, lse_includes_sink=True, out=w,
                                                        name=f"{fmt}_{dequant}_lse_includes_sink")
        q1, cache1, idx1 = decode_inputs(7, b=2, s_q=1, h=16, topk=64)
        o, ls = ref.sparse_mla_decode(q1, cache1, idx1, 576 ** -0.5)  # FlashMLA's default scale, q handed as [b, h, 576]
        dsa_dump.capture_flash_mla_with_kvcache(q1[:, 0], cache1, idx1, o[:, 0], ls[:, :, 0], out=w,
                                                name="s_q1_default")
    c = {x.name: x for x in dsa_dump.read_dump(str(path))}
    x = c["pow2_bf16_scale_sinks"]
    assert x.inputs["k_cache"].shape == (8, 64, 1, 656) and x.dtypes["inputs/k_cache"] == "uint8"
    assert x.inputs["indices"].shape == (3, 2, 128) and x.dtypes["inputs/indices"] == "int64"
    assert c["s_q1_default"].attrs["softmax_scale"] == 576 ** -0.5
    assert c["s_q1_default"].inputs["q"].shape == (2, 1, 16, 576)
    rc, text, res = check(cli, path, tmp_path)
    assert rc == 0, text
    assert {(r["case"], r["tensor"]) for r in res if r["pass"]} >= {(n, t) for n in c for t in ("out", "lse")}


# (2) seeded bugs fail
def _prefill_bug_case(bug, path):
    rng = np.random.default_rng(31)
    q, kv, idx = prefill_inputs(8, s_q=16, lonely=False)
    sink = None
    if bug == "sink_ignored":
        _, _, lse0 = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE)
        sink = sinks_near_lse(lse0.astype(np.float64), rng)
    kw = dict(attn_sink=sink)
    if bug == "wrong_lse_base":   # log2 units reported as natural
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, lse_base="2")
    elif bug == "sm_scale_576":   # FlashMLA's default 1/sqrt(576) instead of the MLA scale the engine passed
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, 576 ** -0.5)
    else:
        o, m, ls = ref.sparse_mla_prefill(q, kv, idx, MLA_SCALE, bug=bug, **kw)
    dsa_dump.capture_flash_mla_sparse_fwd(q, kv, idx, MLA_SCALE, o, m, ls, out=path, **kw)


@pytest.mark.parametrize("bug", ["wrong_lse_base", "sm_scale_576", "rope_dropped", "sink_ignored", "unnormalized"])
def test_sparse_mla_prefill_seeded_bug_fails(cli, tmp_path, bug):
    path = tmp_path / f"prefill_{bug}.h5"
    _prefill_bug_case(bug, path)
    rc, text, res = check(cli, path, tmp_path)
    assert rc == 1, text
    failed = {r["tensor"] for r in res if not r["pass"]}
    want = {"wrong_lse_base": {"max_logits", "lse"}, "sm_scale_576": {"out", "max_logits", "lse"},
            "rope_dropped": {"out", "max_logits", "lse"}, "sink_ignored": {"out"}, "unnormalized": {"out"}}[bug]
    assert failed == want, text


@pytest.mark.parametrize("bug", ["minus1_as_token0", "unnormalized", "rope_dropped"])
def test_sparse_mla_decode_seeded_bug_fails(cli, tmp_path, bug):
    q, cache, idx = decode_inputs(9)
    o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE, bug=bug)
    path = tmp_path / f"decode_{bug}.h5"
    dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, out=path)
    rc, text, res = check(cli, path, tmp_path)
    assert rc == 1, text
    assert "out" in {r["tensor"] for r in res if not r["pass"]}, text


# (3) an index the decode would read out of bounds is an input error
@pytest.mark.parametrize("bad", ["one_past_the_cache", "minus_two"])
def test_sparse_mla_decode_out_of_range_index_is_an_input_error(cli, tmp_path, bad):
    q, cache, idx = decode_inputs(10, b=2, h=16, topk=64)
    o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE)
    cap = cache.shape[0] * cache.shape[1]
    idx = idx.copy()
    idx[1, 0, 5] = cap if bad == "one_past_the_cache" else -2
    path = tmp_path / f"decode_{bad}.h5"
    with pytest.raises(dsa_dump.SchemaError) as e:  # the kit refuses to write it (the CLI's own validate)
        dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, out=path)
    assert "inputs/indices" in str(e.value) and not path.exists()
    with dsa_dump.DumpWriter(str(path), validate=False) as w:
        dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, out=w)
    p = run(cli, "check", path)
    assert p.returncode == 2, p.stdout + p.stderr
    line = next(x for x in p.stderr.splitlines() if "inputs/indices" in x)
    assert line.startswith("error: ") and str(cap if bad == "one_past_the_cache" else -2) in line, p.stderr


# (4) the cache writer is bit-exact
def _kcache_inputs(seed, T=40, pages=3, ps=64):
    rng = np.random.default_rng(seed)
    kv_c = rand_bf16(rng, (T, 512), 3.0)
    kv_c[0, :128] = 0                                  # all-zero tile: the eps decides (pow2 2^-13, ue8m0 2^-22)
    kv_c[1, 128:256] = num.to_bf16(rng.standard_normal(128) * 1e-6)  # tiny tile, e4m3 subnormal codes
    kv_c[2, 256:384] = np.clip(num.f64(kv_c[2, 256:384]), -440, 440)
    kv_c[2, 300] = 448.0                               # amax / 448 = 1 exactly (pow2 s = 1)
    kv_c[3, 384:] = num.to_bf16(num.f64(kv_c[3, 384:]) * 100)  # large values
    kv_c[3, 400] = -448.0 * 4                          # amax = 448 * 2^2
    kv_c[4, :128] = num.to_bf16(rng.standard_normal(128) * 1e-2)
    k_pe = rand_bf16(rng, (T, 1, 64))                  # vLLM hands k_pe as [T, 1, 64]
    slots = rng.permutation(pages * ps)[:T].astype(np.int64)
    slots[[5, T // 2, T - 1]] = -1                      # padded tokens
    cache_in = rng.integers(0, 256, (pages, ps, 656), dtype=np.uint8)  # stale bytes must survive
    return kv_c, k_pe, slots, cache_in


def test_mla_kcache_store_numpy_writer_is_bitexact(cli, tmp_path):
    kv_c, k_pe, slots, cache_in = _kcache_inputs(41)
    s_pow2, s_ue8m0 = ref.tile_scales(kv_c, "pow2"), ref.tile_scales(kv_c, "ue8m0")
    assert s_pow2[0, 0] == 2.0 ** -13 and s_ue8m0[0, 0] == 2.0 ** -22 and s_pow2[2, 2] == 1.0
    assert (s_pow2 != s_ue8m0).any()
    path = tmp_path / "kcache.h5"
    with dsa_dump.DumpWriter(str(path)) as w:
        for fmt in ("pow2", "ue8m0"):
            after = ref.kcache_store(kv_c, k_pe, slots, cache_in.reshape(3, 64, 1, 656), fmt)
            # engine views: the cache as [P, ps, 656] uint8 before, as float8 [P, ps, 656] after
            dsa_dump.capture_mla_kcache_store(kv_c, k_pe, slots, cache_in, after.reshape(3, 64, 656).view(E4M3),
                                              scale_fmt=fmt, out=w, name=fmt)
        # a cache written with pow2 scales, declared ue8m0: the tiles whose scales differ fail
        after = ref.kcache_store(kv_c, k_pe, slots, cache_in.reshape(3, 64, 1, 656), "pow2")
        dsa_dump.capture_mla_kcache_store(kv_c, k_pe, slots, cache_in, after, scale_fmt="ue8m0", out=w,
                                          name="pow2_declared_ue8m0")
    c = {x.name: x for x in dsa_dump.read_dump(str(path))}
    assert c["pow2"].inputs["kv_cache_in"].shape == (3, 64, 1, 656) and c["pow2"].attrs["page_size"] == 64
    assert c["pow2"].inputs["k_pe"].shape == (40, 64) and c["pow2"].dtypes["outputs/kv_cache"] == "uint8"
    rc, text, res = check(cli, path, tmp_path)
    assert rc == 1, text
    verdict = {r["case"]: r["verdict"] for r in res if r["tensor"] == "kv_cache"}
    assert verdict["pow2"] == "BITEXACT" and verdict["ue8m0"] == "BITEXACT", text
    assert verdict["pow2_declared_ue8m0"] not in ("BITEXACT", "WITHIN_BOUND"), text


# the capture wrapper around FlashMLA-shaped kernels: returned tuples are recorded whole
def test_capture_wrapper_records_flash_mla_calls(cli, tmp_path):
    def sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None):
        return ref.sparse_mla_prefill(q, kv, indices, sm_scale, attn_sink=attn_sink, topk_length=topk_length)

    def with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, sched_meta, num_splits=None,
                     softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None, attn_sink=None,
                     topk_length=None):
        return ref.sparse_mla_decode(q, k_cache, indices, softmax_scale, attn_sink=attn_sink, topk_length=topk_length)

    d = tmp_path / "dumps"
    fwd = dsa_dump.capture(sparse_fwd, stage="attn.sparse_mla_prefill", out_dir=str(d),
                           map_args=lambda q, kv, indices, sm_scale, d_v=512, attn_sink=None, topk_length=None,
                           result=None: dict(q=q, kv=kv, indices=indices, sm_scale=sm_scale, output=result,
                                             attn_sink=attn_sink, topk_length=topk_length))
    dec = dsa_dump.capture(with_kvcache, stage="attn.sparse_mla_decode", out_dir=str(d),
                           map_args=lambda q, k_cache, block_table, cache_seqlens, head_dim_v, sched_meta,
                           num_splits=None, result=None, **kw: dict(
                               q=q, k_cache=k_cache, indices=kw["indices"], output=result,
                               softmax_scale=kw["softmax_scale"], block_table=block_table, cache_seqlens=cache_seqlens))
    q, kv, idx = prefill_inputs(12, s_q=8, h=16, lonely=False, dups=False)
    qd, cache, idxd = decode_inputs(13, b=2, h=16, topk=64)
    with dsa_dump.layer_scope(5):
        o, m, ls = fwd(q, kv, idx, MLA_SCALE, 512, topk_length=np.full(8, 100, np.int32))
        od, lsd = dec(qd, cache, None, None, 512, object(), None, softmax_scale=MLA_SCALE, is_fp8_kvcache=True,
                      indices=idxd)
    assert o.shape == (8, 16, 512) and lsd.shape == (2, 16, 2) and not fwd.errors and not dec.errors
    files = sorted(os.listdir(d))
    assert files == ["attn_sparse_mla_decode_L5_00000.h5", "attn_sparse_mla_prefill_L5_00000.h5"]
    for f in files:
        c = dsa_dump.read_dump(str(d / f))[0]
        assert c.attrs["layer"] == 5
        if c.stage == "attn.sparse_mla_prefill":
            assert c.outputs["lse"].tobytes() == ls.tobytes() and c.outputs["max_logits"].tobytes() == m.tobytes()
            assert c.inputs["topk_length"].tolist() == [100] * 8
        else:
            assert c.outputs["lse"].tobytes() == lsd.tobytes() and c.attrs["softmax_scale"] == MLA_SCALE
        rc, text, _ = check(cli, d / f, tmp_path)
        assert rc == 0, text
    with pytest.raises(TypeError, match="pass the attention output tensor as `output`"):
        dsa_dump.capture_flash_mla_sparse_fwd(q, kv, idx, MLA_SCALE, out=o)


def test_torch_views_are_stored_as_the_numpy_arrays(cli, tmp_path):
    """Torch tensors as engines hold them (the cache as float8_e4m3fn [num_blocks, page_size, 656], k_pe [T, 1, 64],
    int64 slots, bf16 sinks) are stored with the same bytes as the numpy arrays (skips without torch)."""
    torch = pytest.importorskip("torch")

    def tt(a, dtype=None):
        if a.dtype in (BF16, E4M3):
            t = torch.from_numpy(a.view(np.uint16 if a.dtype == BF16 else np.uint8).copy())
            return t.view(torch.int16).view(torch.bfloat16) if a.dtype == BF16 else t.view(torch.float8_e4m3fn)
        return torch.from_numpy(a.copy()) if dtype is None else torch.from_numpy(a.copy()).to(dtype)

    kv_c, k_pe, slots, cache_in = _kcache_inputs(51, T=12, pages=2)
    after = ref.kcache_store(kv_c, k_pe, slots, cache_in.reshape(2, 64, 1, 656), "pow2")
    q, cache, idx = decode_inputs(52, b=2, h=16, topk=64, pages=2)
    o, ls = ref.sparse_mla_decode(q, cache, idx, MLA_SCALE)
    a_np = tmp_path / "np.h5"
    a_t = tmp_path / "torch.h5"
    with dsa_dump.DumpWriter(str(a_np)) as w:
        dsa_dump.capture_mla_kcache_store(kv_c, k_pe, slots, cache_in, after, out=w, name="kc")
        dsa_dump.capture_flash_mla_with_kvcache(q, cache, idx, o, ls, softmax_scale=MLA_SCALE, out=w, name="dec")
    with dsa_dump.DumpWriter(str(a_t)) as w:
        dsa_dump.capture_mla_kcache_store(tt(kv_c), tt(k_pe), tt(slots), tt(cache_in),
                                          tt(after.reshape(2, 64, 656)).view(torch.float8_e4m3fn), out=w, name="kc")
        dsa_dump.capture_flash_mla_with_kvcache(tt(q), tt(cache).view(torch.float8_e4m3fn), tt(idx), (tt(o), tt(ls)),
                                                softmax_scale=MLA_SCALE, out=w, name="dec")
    cn = {c.name: c for c in dsa_dump.read_dump(str(a_np))}
    ct = {c.name: c for c in dsa_dump.read_dump(str(a_t))}
    for n in cn:
        assert cn[n].raw.keys() == ct[n].raw.keys()
        for k in cn[n].raw:
            assert cn[n].dtypes[k] == ct[n].dtypes[k] and cn[n].raw[k].shape == ct[n].raw[k].shape, (n, k)
            assert cn[n].raw[k].tobytes() == ct[n].raw[k].tobytes(), (n, k)
    rc, text, _ = check(cli, a_t, tmp_path)
    assert rc == 0, text


# Every committed 656-byte cache golden, whatever its scale rule, equals the numpy writer (reference/mla.py with the
# rule model of reference/numerics.py): the C++ ScaleRule and the numpy one are independent implementations.
def test_committed_kcache_goldens_equal_the_numpy_writer():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "golden")
    seen = set()
    for f in sorted(os.listdir(root)):
        if not f.startswith("mla_kcache") or not f.endswith(".h5"):
            continue
        for c in dsa_dump.read_dump(os.path.join(root, f)):
            a = c.attrs
            if c.stage != "mla.kcache_store" or a.get("layout", "mla_fp8_656") != "mla_fp8_656":
                continue
            inp = c.inputs
            fmt = a["scale_fmt"]
            got = ref.kcache_store(inp["kv_c"], inp["k_pe"], inp["slot_mapping"], inp["kv_cache_in"], fmt,
                                   amax_eps=a.get("amax_eps", 1e-4), eps_on=a.get("eps_on", "rule"),
                                   scale_apply=a.get("scale_apply", "div"))
            want = np.asarray(c.expected["kv_cache"]).view(np.uint8)
            assert got.shape == want.shape, (f, c.name)
            diff = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
            assert diff.size == 0, (f, c.name, fmt, diff[:8])
            seen.add(fmt)
    assert {"pow2", "ue8m0", "amax448", "flt_min", "fp32_mul", "bf16_mul"} <= seen, seen
