"""ROCm aiter indexer K-cache layouts (#18 item 1), checked against aiter's own readers independently of our C++
layout code (ROCm/aiter e4048607a535ace3a2b51ded31b1c8c2d45c0879):
  aiter_preshuffle   the gfx1250 Gluon reader of _gluon_deepgemm_fp8_paged_mqa_logits_preshuffle views a page's
                     values as (page_size//16, D//32, 2, 16, 16) and permutes (0, 3, 1, 2, 4) to [page_size, D];
                     scales: page_size fp32 after the values (aiter/ops/triton/attention/pa_mqa_logits.py)
  aiter_rowmajor_p1  page_size 1: 128 codes then the fp32 scale (132-byte records)
(reference.indexer.page_tokens) and the paged logits goldens in those layouts recomputed in numpy
(reference.indexer.paged_logits: fp64 from the codes, compared with the fp32 goldens)."""
import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import indexer as ref


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]},
                {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()})


@pytest.mark.parametrize("name", ["kcache_aiter_preshuffle", "kcache_aiter_rowmajor_p1"])
def test_store_puts_every_token_where_aiter_reads_it(repo_root, name):
    ins, exp, attrs = load(repo_root / "golden" / f"{name}.h5")
    cache = exp["kv_cache"]
    ps = cache.shape[1]
    assert attrs["layout"] in ("aiter_preshuffle", "aiter_rowmajor_p1") and ps == (64 if "preshuffle" in name else 1)
    written = 0
    for i, s in enumerate(ins["slot_mapping"]):
        if s < 0:
            continue
        codes, sc = ref.page_tokens(cache[s // ps], attrs["layout"])
        assert np.array_equal(codes[s % ps], ins["k_fp8"][i]), (name, i)
        assert sc[s % ps].tobytes() == ins["k_scale"][i].tobytes()
        written += 1
    assert written > 30
    # Slots nobody stores into keep the input bytes.
    touched = {int(s) for s in ins["slot_mapping"] if s >= 0}
    for s in range(cache.shape[0] * ps):
        if s not in touched:
            a, sa = ref.page_tokens(cache[s // ps], attrs["layout"])
            b, sb = ref.page_tokens(ins["kv_cache_in"][s // ps], attrs["layout"])
            assert np.array_equal(a[s % ps], b[s % ps]) and sa[s % ps].tobytes() == sb[s % ps].tobytes()


@pytest.mark.parametrize("name", ["paged_aiter_preshuffle", "paged_aiter_rowmajor_p1", "paged_cutedsl_target_verify"])
def test_paged_logits_read_the_layout(repo_root, name):
    ins, exp, attrs = load(repo_root / "golden" / f"{name}.h5")
    lg = exp["logits"]
    checked = 0
    for r, row in enumerate(ref.paged_logits(ins, attrs.get("layout", "indexer_kcache_planar"))):
        for j, v in enumerate(row):
            assert np.isclose(lg[r, j], v, rtol=1e-6, atol=1e-30), (name, r, j, lg[r, j], v)
            checked += 1
    assert checked >= 70


# ---- the kit's helpers for these call sites (scripts/dsa_dump): captured from golden data, then `dsa-check check` ----
def fp8(a):
    return a.view(ml_dtypes.float8_e4m3fn)


def check_ok(run_cli, path):
    p = run_cli("check", path)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_cutedsl_helper_cuts_padding_and_de_expands_the_table(repo_root, run_cli, tmp_path):
    ins, exp, attrs = load(repo_root / "golden" / "paged_cutedsl_target_verify.h5")
    q, bt, lg = ins["q"], ins["block_table"], exp["logits"]
    B, NN, H, D = q.shape
    rng = np.random.default_rng(1)
    pad = 3  # MAX_LEN padding rows past q_offset: never compared
    q_flat = np.concatenate([q.reshape(B * NN, H, D), rng.integers(0, 0x70, (pad, H, D), dtype=np.uint8)])
    w = np.concatenate([ins["weights"], rng.random((pad, H), dtype=np.float32)])
    logits = np.concatenate([lg, np.full((pad, lg.shape[1]), 7.0, np.float32)])
    path = tmp_path / "cute.h5"
    c = dsa_dump.capture_cutedsl_paged_mqa_logits(fp8(q_flat), ins["kv_cache"], w, ins["context_lens"], np.repeat(bt, NN, axis=0),
                                                  int(attrs["max_context_len"]), logits, q_offset=B * NN, B=B, next_n=NN,
                                                  dsl_expand_factor=2, dsl_atom=2, out=path)
    assert c.attrs["dsl_expand_factor"] == 2 and c.attrs["clean_logits"] is False
    assert "BITEXACT" in check_ok(run_cli, path)
    # A kernel that used row 0's table for every row of a request would fail: the table rows must be per request.
    logits2 = logits.copy()
    logits2[1, 5] += 1.0
    dsa_dump.capture_cutedsl_paged_mqa_logits(fp8(q_flat), ins["kv_cache"], w, ins["context_lens"], np.repeat(bt, NN, axis=0),
                                              int(attrs["max_context_len"]), logits2, q_offset=B * NN, B=B, next_n=NN, out=path)
    assert run_cli("check", path).returncode == 1


@pytest.mark.parametrize("name,preshuffle", [("paged_aiter_preshuffle", True), ("paged_aiter_rowmajor_p1", False)])
def test_aiter_paged_helper(repo_root, run_cli, tmp_path, name, preshuffle):
    ins, exp, attrs = load(repo_root / "golden" / f"{name}.h5")
    q = ins["q"]
    B, NN, H, D = q.shape
    path = tmp_path / "aiter.h5"
    c = dsa_dump.capture_aiter_paged_mqa_logits(fp8(q.reshape(B * NN, H, D)), ins["kv_cache"], ins["weights"], ins["context_lens"],
                                                ins["block_table"], int(attrs["max_context_len"]), exp["logits"],
                                                preshuffle=preshuffle, kv_block_size=ins["kv_cache"].shape[1], out=path)
    assert c.attrs["layout"] == ("aiter_preshuffle" if preshuffle else "aiter_rowmajor_p1")
    assert "BITEXACT" in check_ok(run_cli, path)


def test_aiter_kcache_helper(repo_root, run_cli, tmp_path):
    ins, exp, _ = load(repo_root / "golden" / "kcache_aiter_preshuffle.h5")
    path = tmp_path / "kc.h5"
    cache3 = exp["kv_cache"].reshape(exp["kv_cache"].shape[0], 64, 132)  # sglang's [P, page_size, 132] view
    dsa_dump.capture_aiter_kcache_store(fp8(ins["k_fp8"]), ins["k_scale"], ins["slot_mapping"], ins["kv_cache_in"].reshape(-1, 64, 132),
                                        cache3, preshuffle=True, out=path)
    assert "BITEXACT" in check_ok(run_cli, path)
    # The same bytes declared token-major (a preshuffle=True cache captured as the planar layout) fail.
    dsa_dump.capture_kcache_store(fp8(ins["k_fp8"]), ins["k_scale"], ins["slot_mapping"], ins["kv_cache_in"], exp["kv_cache"],
                                  out=path)
    assert run_cli("check", path).returncode == 1


@pytest.mark.parametrize("layout,words", [("aiter_rowmajor_p1", "page_size 1"), ("aiter_tiles", "aiter_preshuffle")])
def test_a_layout_the_cache_cannot_have_or_an_unknown_one_is_an_input_error(repo_root, run_cli, tmp_path, layout, words):
    path = tmp_path / "bad.h5"
    with h5py.File(repo_root / "golden" / "kcache_aiter_preshuffle.h5", "r") as src, h5py.File(path, "w") as dst:
        src.copy(src[next(iter(src))], dst, name="c")
        dst["c"].attrs["layout"] = layout
    p = run_cli("check", path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "attr layout" in p.stderr and words in p.stderr, p.stderr


def test_a_wrong_byte_is_named_in_the_preshuffled_layout(repo_root, run_cli, tmp_path):
    """The message decodes the byte offset through the layout: (page 1, token 17, dim 37) sits at
    (17//16)*2048 + (37//16)*256 + (17%16)*16 + 37%16 inside the page (aiter's writer formula)."""
    path = tmp_path / "wrong.h5"
    off = 1 * 64 * 132 + (17 // 16) * 2048 + (37 // 16) * 256 + (17 % 16) * 16 + 37 % 16
    with h5py.File(repo_root / "golden" / "kcache_aiter_preshuffle.h5", "r") as src, h5py.File(path, "w") as dst:
        src.copy(src[next(iter(src))], dst, name="c")
        out = dst["c/expected/kv_cache"][()]
        out.reshape(-1)[off] ^= 0x01
        del dst["c/expected"]
        dst.create_dataset("c/outputs/kv_cache", data=out)
    p = run_cli("check", path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "page 1 token 17 dim 37" in p.stdout, p.stdout


@pytest.mark.parametrize("name,preshuffle", [("kcache_aiter_preshuffle", True), ("kcache_aiter_rowmajor_p1", False)])
def test_read_back_recovers_what_the_fused_aiter_op_stored(repo_root, run_cli, tmp_path, name, preshuffle):
    """aiter quantizes and stores in one op: the codes and scales read back from the cache (torch-free numpy here)
    equal the golden's k_fp8 / k_scale, so the store case can be captured from the cache alone."""
    ins, exp, _ = load(repo_root / "golden" / f"{name}.h5")
    codes, scales = dsa_dump.aiter_kcache_read_back(exp["kv_cache"], ins["slot_mapping"], preshuffle=preshuffle)
    ok = ins["slot_mapping"] >= 0
    assert np.array_equal(codes[ok], ins["k_fp8"][ok]) and scales[ok].tobytes() == ins["k_scale"][ok].tobytes()
    path = tmp_path / "rb.h5"
    dsa_dump.capture_aiter_kcache_store(fp8(codes), scales, ins["slot_mapping"], ins["kv_cache_in"], exp["kv_cache"],
                                        preshuffle=preshuffle, out=path)
    assert "BITEXACT" in check_ok(run_cli, path)
