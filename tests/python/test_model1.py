"""DeepSeek-V4 "MODEL1" sparse MLA (FlashMLA @9241ae3, spec v4 §9) through the capture kit and the CLI, against the
independent numpy model of reference/mla.py (model1_*), written from FlashMLA's tests/quant.py semantics: the 584-byte
layout (per block, 576-byte token records of 448 e4m3 NoPE codes + 64 bf16 RoPE values, then 8-byte records of 7 e8m0
tile scales + a pad byte), pow2 tile scales 2^ceil(log2(max(amax/448, 1e-4))), and the sparse decode over a main and
an extra KV scope in one softmax (keys = values = 512 dims), topk_length / extra_topk_length, sinks
(out * 1/(1 + e^(sink - lse)), lse sink-exclusive), lonely rows out 0 / lse +inf. The model must pass; the model with a
bug (extra scope dropped, extra_topk_length ignored, cache read as AoS records) must fail."""
import subprocess

import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import mla as ref

BF16 = ml_dtypes.bfloat16
NOPE, TOK, REC = ref.NOPE, ref.TOK, ref.REC


def rows(rng, b, s_q, topk, cap, invalid=0.15):
    idx = np.stack([rng.permutation(cap)[:topk] for _ in range(b * s_q)]).reshape(b, s_q, topk).astype(np.int32)
    idx[rng.random(idx.shape) < invalid] = -1
    return idx


def case(seed=3):
    rng = np.random.default_rng(seed)
    b, s_q, h, topk, xtopk, nb, bs, xnb, xbs = 2, 2, 64, 64, 64, 2, 64, 8, 16
    k = (rng.standard_normal((nb, bs, 512)) * np.repeat(2.0 ** rng.integers(-3, 3, (nb, bs, 8)), 64, axis=-1)).astype(BF16)
    xk = rng.standard_normal((xnb, xbs, 512)).astype(BF16)
    q = rng.standard_normal((b, s_q, h, 512)).astype(BF16)
    idx, xidx = rows(rng, b, s_q, topk, nb * bs), rows(rng, b, s_q, xtopk, xnb * xbs)
    idx[1, 1, :] = -1
    xidx[1, 1, :] = -1  # a lonely row
    sink = (rng.standard_normal(h) * 2).astype(np.float32)
    sink[5] = np.inf  # FlashMLA: attn_sink = +inf gives output 0 (lse unchanged)
    tl, xtl = np.array([topk, 40], np.int32), np.array([17, xtopk], np.int32)
    return dict(q=q, k=k, xk=xk, idx=idx, xidx=xidx, sink=sink, tl=tl, xtl=xtl, scale=512 ** -0.5)


def capture_decode(c, out, lse, path):
    cache, xcache = ref.model1_quantize(c["k"]), ref.model1_quantize(c["xk"])
    dsa_dump.capture_flash_mla_with_kvcache(
        c["q"], cache, c["idx"], (out, lse), softmax_scale=c["scale"], attn_sink=c["sink"], topk_length=c["tl"],
        extra_k_cache=cache_view(xcache), extra_page_size=c["xk"].shape[1], extra_indices_in_kvcache=c["xidx"], extra_topk_length=c["xtl"], out=str(path))


def cache_view(cache):
    """FlashMLA's own storage of a MODEL1 cache: blocks padded to a multiple of 576 bytes ([nb, padded] uint8)."""
    nb, bs = cache.shape[0], cache.shape[1]
    padded = (bs * REC + 575) // 576 * 576
    raw = np.full((nb, padded), 0xAB, np.uint8)
    raw[:, : bs * REC] = cache.reshape(nb, -1)
    return raw


def test_model1_store_numpy_writer_is_bitexact(cli, tmp_path):
    rng = np.random.default_rng(7)
    T, nb, bs = 50, 2, 32
    kv = (rng.standard_normal((T, 512)) * 2.0 ** rng.integers(-4, 4, (T, 1))).astype(BF16)
    kv[3, 64:128] = 0  # a zero tile: scale 2^-13
    slots = rng.permutation(nb * bs)[:T].astype(np.int64)
    slots[::9] = -1
    before = rng.integers(0, 256, (nb, bs, 1, REC), dtype=np.uint8)
    after = ref.model1_store(kv, slots, before)
    f = tmp_path / "store.h5"
    dsa_dump.capture_mla_kcache_store(kv[:, :NOPE], kv[:, NOPE:], slots, before, after, scale_fmt="pow2", out=str(f))
    p = subprocess.run([cli, "check", str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "BITEXACT" in p.stdout
    bad = after.reshape(nb, bs * REC).copy()
    bad[0, bs * TOK + 8 * 5 + 2] ^= 1  # one scale byte of page 0 token 5
    f2 = tmp_path / "bad.h5"
    dsa_dump.capture_mla_kcache_store(kv[:, :NOPE], kv[:, NOPE:], slots, before, bad.reshape(nb, bs, 1, REC), out=str(f2))
    p = subprocess.run([cli, "check", str(f2)], capture_output=True, text=True)
    assert p.returncode == 1 and "page 0 token 5 scale tile 2 (e8m0)" in p.stdout, p.stdout


def test_model1_decode_with_extra_scope_passes(cli, tmp_path):
    c = case()
    cache, xcache = ref.model1_quantize(c["k"]), ref.model1_quantize(c["xk"])
    out, lse = ref.model1_decode(c["q"], cache, c["idx"], xcache, c["xidx"], c["scale"], c["sink"], c["tl"], c["xtl"])
    f = tmp_path / "d.h5"
    capture_decode(c, out, lse, f)
    p = subprocess.run([cli, "check", str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("bug", ["no_extra", "no_xtl", "aos"])
def test_model1_decode_bugs_fail(cli, tmp_path, bug):
    c = case()
    cache, xcache = ref.model1_quantize(c["k"]), ref.model1_quantize(c["xk"])
    out, lse = ref.model1_decode(c["q"], cache, c["idx"], xcache, c["xidx"], c["scale"], c["sink"], c["tl"], c["xtl"], bug)
    f = tmp_path / "d.h5"
    capture_decode(c, out, lse, f)
    p = subprocess.run([cli, "check", str(f)], capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr


@pytest.mark.parametrize("edit,needle", [
    ("layout_v32", "inputs/k_cache: expected 656-byte records"),
    ("extra_alone", "inputs/extra_indices_in_kvcache: expected present"),
    ("extra_past_cache", "inputs/extra_indices_in_kvcache"),
    ("extra_len_too_long", "inputs/extra_topk_length")])
def test_model1_bad_inputs_are_exit_2(cli, tmp_path, edit, needle):
    import h5py

    c = case()
    cache, xcache = ref.model1_quantize(c["k"]), ref.model1_quantize(c["xk"])
    out, lse = ref.model1_decode(c["q"], cache, c["idx"], xcache, c["xidx"], c["scale"], c["sink"], c["tl"], c["xtl"])
    f = tmp_path / "d.h5"
    capture_decode(c, out, lse, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        if edit == "layout_v32":
            g.attrs["layout"] = "mla_fp8_656"
        elif edit == "extra_alone":
            del g["inputs/extra_indices_in_kvcache"], g["inputs/extra_topk_length"]
        elif edit == "extra_past_cache":
            v = g["inputs/extra_indices_in_kvcache"][()]
            v[0, 0, 0] = xcache.shape[0] * xcache.shape[1]
            g["inputs/extra_indices_in_kvcache"][...] = v
        else:
            g["inputs/extra_topk_length"][...] = np.array([65, 1], np.int32)
    p = subprocess.run([cli, "check", str(f)], capture_output=True, text=True)
    assert p.returncode == 2 and needle in p.stderr, p.stdout + p.stderr
