"""attn.v4_sparse (Ascend npu_sparse_attn_sharedkv) against the independent numpy models of reference/v4.py
(sparse_attn, sparse_attn_fp32), written from the spec (v4 §4.2-4.3): the visible set (window [max(0, p-127), p] from
the PA_ND ori cache, C4 list prefix before the first -1 / C128 every entry j < (p+1)//r from the cmp cache), softmax
with the sink in the denominator only, lonely rows 0, bf16 out. Three models: float64 rounded once; the A3 kernel's
fp32 procedure (running max from the sink, sum from 1, ORI tiles then CMP tiles, P rounded to bf16 half away from zero
before PV, o = acc / l); a FlashMLA-style fp32 kernel (sink applied at the end). All must pass `check` on every
committed golden; seeded bugs must fail; lists the kernel cannot define and unmapped blocks are exit 2 naming the
tensor."""
import json
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v4 as ref

GOLDENS = ["v4sa_c4_flash_mtp", "v4sa_c128_prefill", "v4sa_swa_only", "v4sa_nonfinite"]
BF16 = ml_dtypes.bfloat16


def load(path):
    with h5py.File(path, "r") as f:
        name = next(iter(f))
        g = f[name]
        t = {}
        for k in g["inputs"]:
            d = g["inputs"][k]
            v = d[()]
            t[k] = v.view(BF16).astype(np.float64) if d.attrs.get("dtype") == "bf16" else v
        return name, dict(g.attrs), t


def with_output(src, dst, out, attrs=None):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        if "expected" in g:
            del g["expected"]
        d = g.create_dataset("outputs/out", data=out.view(np.uint16))
        d.attrs["dtype"] = "bf16"
        for k, v in (attrs or {}).items():
            g.attrs[k] = v


def verdict(run_cli, path, tmp_path):
    js = tmp_path / "r.json"
    p = run_cli("check", path, "--json", js)
    res = json.loads(js.read_text())["results"] if js.exists() else []
    return p, {r["tensor"]: r for r in res}


@pytest.mark.parametrize("name", GOLDENS)
def test_models_pass_on_every_golden(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    for label, out, extra in [("f64", ref.sparse_attn(t, attrs), None),
                              ("a3", ref.sparse_attn_fp32(t, attrs, "a3", 16), None),
                              ("a3_tile128", ref.sparse_attn_fp32(t, attrs, "a3", 128), None),
                              ("flashmla", ref.sparse_attn_fp32(t, attrs, "flashmla", 64), {"variant": "flashmla-sm90"})]:
        f = tmp_path / f"{label}.h5"
        with_output(src, f, out, extra)
        p, res = verdict(run_cli, f, tmp_path)
        assert p.returncode == 0, f"{label}: {p.stdout}{p.stderr}"
        assert res["out"]["verdict"] in ("BITEXACT", "WITHIN_BOUND"), label


@pytest.mark.parametrize("bug", ["no_current", "window_wide", "no_cmp", "no_sink"])
def test_model_bugs_fail(bug, repo_root, run_cli, tmp_path):
    name = "v4sa_c128_prefill" if bug == "no_cmp" else "v4sa_c4_flash_mtp"
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    f = tmp_path / "bug.h5"
    with_output(src, f, ref.sparse_attn(t, attrs, bug))
    p, res = verdict(run_cli, f, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert res["out"]["verdict"] in ("FAIL", "NONFINITE")


def test_kit_capture_roundtrip(repo_root, run_cli, tmp_path):
    _, attrs, t = load(repo_root / "golden" / "v4sa_c4_flash_mtp.h5")
    out = ref.sparse_attn_fp32(t, attrs, "a3", 16)
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_sparse_attn(
        t["q"].astype(BF16), out, ori_kv=t["ori_kv"][:, :, 0, :].astype(BF16), ori_block_table=t["ori_block_table"],
        cu_seqlens_q=t["cu_seqlens_q"].astype(np.int64), seqused_kv=t["seqused_kv"], sinks=t["sinks"],
        cmp_kv=t["cmp_kv"].astype(BF16), cmp_sparse_indices=t["cmp_sparse_indices"][:, 0, :].astype(np.int64),
        cmp_block_table=t["cmp_block_table"], cmp_ratio=4, cu_seqlens_ori_kv=None, metadata=None, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    with pytest.raises(ValueError):
        dsa_dump.capture_ascend_sparse_attn(t["q"].astype(BF16), out, ori_kv=t["ori_kv"].astype(BF16),
                                            ori_block_table=t["ori_block_table"], cu_seqlens_q=t["cu_seqlens_q"],
                                            seqused_kv=t["seqused_kv"], ori_mask_mode=0)


def _edit(src, dst, tensor, fn):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        v = g["inputs"][tensor][()]
        fn(v)
        g["inputs"][tensor][...] = v


@pytest.mark.parametrize("edit,needle", [
    ("future_entry", "cmp_sparse_indices"), ("duplicate", "repeated"), ("hole", "cmp_sparse_indices"),
    ("unmapped_block", "ori_block_table"), ("cu_not_zero", "cu_seqlens_q")])
def test_undefined_inputs_are_exit_2(edit, needle, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4sa_c4_flash_mtp.h5"
    f = tmp_path / "bad.h5"

    def future(v):  # row 2 (request 1, position 299, limit 75): entry 75 is not complete yet
        v[2, 0, 0] = 75

    def duplicate(v):
        v[0, 0, 1] = v[0, 0, 0]

    def hole(v):  # -2 before the first -1
        v[2, 0, 3] = -2

    def unmapped(v):
        v[0, :] = 10 ** 6

    def cu(v):
        v[0] = 1

    fn = {"future_entry": future, "duplicate": duplicate, "hole": hole, "unmapped_block": unmapped, "cu_not_zero": cu}[edit]
    tensor = {"unmapped_block": "ori_block_table", "cu_not_zero": "cu_seqlens_q"}.get(edit, "cmp_sparse_indices")
    _edit(src, f, tensor, fn)
    p = run_cli("check", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stdout + p.stderr


def _index_cache_file(repo_root, path, rows=slice(0, 6), offset=0, edit=None):
    """One step of two layers: layer 2's v4.indexer case (the golden's expected top-k as its output) and layer 4's
    attn.v4_sparse case reusing it (IndexCache), built here with the indexer's requests and its indices."""
    with h5py.File(repo_root / "golden" / "v4i_flash_decode_mtp.h5", "r") as g0:
        src = g0[next(iter(g0))]
        aq = src["inputs/actual_seq_lengths_query"][()].astype(np.int64)
        kvl = src["inputs/actual_seq_lengths_key"][()].astype(np.int64)
        idx = src["expected/sparse_indices"][()]
    starts = np.concatenate([[0], aq])
    reqs = [b for b in range(len(aq)) if starts[b] >= rows.start and aq[b] <= rows.stop]
    rng = np.random.default_rng(0)
    N, D, bs = 4, 64, 64
    T = rows.stop - rows.start
    nblk_o = [int((kvl[b] + bs - 1) // bs) for b in reqs]
    nblk_c = [int((kvl[b] // 4 + bs - 1) // bs) for b in reqs]
    obt = np.zeros((len(reqs), max(nblk_o)), np.int32)
    cbt = np.zeros((len(reqs), max(nblk_c)), np.int32)
    o = c = 0
    for i, (a, b) in enumerate(zip(nblk_o, nblk_c)):
        obt[i, :a] = np.arange(o, o + a)
        cbt[i, :b] = np.arange(c, c + b)
        o, c = o + a, c + b
    t = {"q": rng.standard_normal((T, N, D)).astype(BF16).astype(np.float64),
         "ori_kv": rng.standard_normal((o, bs, 1, D)).astype(BF16).astype(np.float64),
         "cmp_kv": rng.standard_normal((c, bs, 1, D)).astype(BF16).astype(np.float64),
         "ori_block_table": obt, "cmp_block_table": cbt,
         "cu_seqlens_q": np.concatenate([[0], np.cumsum([aq[b] - starts[b] for b in reqs])]).astype(np.int32),
         "seqused_kv": kvl[reqs].astype(np.int32), "cmp_sparse_indices": idx[rows].copy(),
         "sinks": rng.standard_normal(N).astype(np.float32)}
    if edit:
        edit(t["cmp_sparse_indices"])
    attrs = {"cmp_ratio": 4}
    out = ref.sparse_attn(t, attrs)
    shutil.copy(repo_root / "golden" / "v4i_flash_decode_mtp.h5", path)
    with h5py.File(path, "r+") as f:
        g = f[next(iter(f))]
        g.attrs["layer"], g.attrs["step"] = np.int64(2), np.int64(5)
        g.create_dataset("outputs/sparse_indices", data=idx).attrs["dtype"] = "int32"
        del g["expected"]
        a = f.create_group("layer4_attn")
        for k, v in {"schema_version": np.int64(1), "stage": "attn.v4_sparse", "cmp_ratio": np.int64(4), "layer": np.int64(4),
                     "step": np.int64(5), "topk_source_layer": np.int64(2), "topk_source_offset": np.int64(offset)}.items():
            a.attrs[k] = v
        for k, v in t.items():
            if k in ("q", "ori_kv", "cmp_kv"):
                a.create_dataset("inputs/" + k, data=v.astype(BF16).view(np.uint16)).attrs["dtype"] = "bf16"
            else:
                a.create_dataset("inputs/" + k, data=v)
        a.create_dataset("outputs/out", data=out.view(np.uint16)).attrs["dtype"] = "bf16"


def _consistency(run_cli, path, tmp_path):
    js = tmp_path / "ic.json"
    p = run_cli("check", path, "--json", js)
    res = [r for r in json.loads(js.read_text())["results"] if r["group"] == "consistency"]
    return p, res


def test_index_cache_reused_topk_matches_source_layer(repo_root, run_cli, tmp_path):
    f = tmp_path / "layers.h5"
    _index_cache_file(repo_root, f)
    p, res = _consistency(run_cli, f, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(res) == 1 and res[0]["verdict"] == "BITEXACT" and "layer 2" in res[0]["message"], res
    # the prefill-style segment: the attention call covers rows 2..5 of the buffer
    f2 = tmp_path / "seg.h5"
    _index_cache_file(repo_root, f2, rows=slice(2, 6), offset=2)
    p, res = _consistency(run_cli, f2, tmp_path)
    assert p.returncode == 0 and res[0]["verdict"] == "BITEXACT", p.stdout + p.stderr


def test_index_cache_stale_buffer_fails_naming_both_layers(repo_root, run_cli, tmp_path):
    def stale(ix):  # one row of the buffer left from an earlier step: its entries in another order
        n = int((ix[3, 0] >= 0).sum())
        ix[3, 0, :n] = ix[3, 0, :n][::-1]

    f = tmp_path / "layers.h5"
    _index_cache_file(repo_root, f, edit=stale)
    p, res = _consistency(run_cli, f, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert res[0]["verdict"] == "FAIL"
    m = res[0]["message"]
    assert "row 3 slot 0" in m and "layer 4" in m and "layer 2's indexer" in m, m
    # the wrong offset (the decode segment read where the prefill segment is) is caught the same way
    f2 = tmp_path / "seg.h5"
    _index_cache_file(repo_root, f2, rows=slice(2, 6), offset=0)
    p, res = _consistency(run_cli, f2, tmp_path)
    assert p.returncode == 1 and res[0]["verdict"] == "FAIL", p.stdout + p.stderr
