"""The committed KV record goldens of mla.kcache_store recomputed by the numpy model (reference/kv_records.py), and
the CLI on edited copies of them: the structure errors a wrong record or page gives (exit 2, naming what is wrong),
and the hint a cache written by a writer with a known bug gets (exit 1, the bug named)."""
import shutil

import h5py
import numpy as np
import pytest

from reference import fp4_codecs
from reference import kv_records as rec

GOLDENS = ["kv_v41_mxfp8_528", "kv_v41_mxfp8_528_flashmla_gfx950", "kv_v41_mxfp8_528_fp32_rope", "kv_v41_nvfp4_288",
           "kv_v41_nvfp4_288_vllm_interleaved", "kv_v41_nvfp4_288_flashmla_nan", "kv_v41_nvfp4_288_deepgemm_util",
           "kv_sglang_mxfp4_368", "kv_flashmla_nvfp4_352", "kv_flashmla_nvfp4_352_vllm", "kv_nvfp4_384", "kv_nvfp4_432",
           "kv_v41_idx_mxfp4_68", "kv_v41_idx_mxfp4_68_floor_1e4", "kv_v41_idx_fp8_132", "kv_nvfp4_432_v4"]


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: (g["inputs"][k][()], g["inputs"][k].attrs["dtype"]) for k in g["inputs"]}, g["expected"]["kv_cache"][()],
                {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()})


def f32(bits_or_values, dtype):
    a = np.asarray(bits_or_values)
    if dtype in ("bf16", b"bf16"):
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def model_cache(ins, attrs):
    """The cache the numpy model writes for the golden's inputs and attrs (the attr names of the C++ stage mapped to
    the model's codec options)."""
    name = attrs["layout"]
    order = attrs.get("record_order", "page_segregated")
    cache_in = ins["kv_cache_in"][0]
    P = cache_in.shape[1]
    kv = f32(*ins["kv_c"])
    pe = f32(*ins["k_pe"])
    if attrs.get("quant_source", "bf16") == "bf16":  # the REF's source: RoPE rounded to bf16 first
        pe = fp4_codecs.round_bf16(pe)
    x = np.concatenate([kv, pe], axis=1)
    opts = {}
    if attrs.get("mxfp4_rule") == "ref_floor_1e4":  # the ref exponent with vLLM's old floor on amax
        opts["amax_floor"] = 1e-4
    for attr, opt in (("nvfp4_rule", "variant"), ("mxfp4_rule", None), ("mxfp8_rule", "rule"), ("e2m1_tie", "tie"),
                      ("e2m1_zero", "zero_sign"), ("e2m1_nan", "nan"), ("rope_cast", "rope_cast"),
                      ("scale_byte_max", "byte_max")):
        if attr in attrs and opt:
            opts[opt] = int(attrs[attr]) if opt == "byte_max" else attrs[attr]
    cache = np.ascontiguousarray(cache_in.reshape(-1)).copy()
    for t, s in enumerate(ins["slot_mapping"][0]):
        if s >= 0:
            rec.store(cache, name, order, P, int(s), x[t], **opts)
    return cache.reshape(cache_in.shape)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_cache_is_the_models(repo_root, name):
    ins, want, attrs = load(repo_root / "golden" / f"{name}.h5")
    got = model_cache(ins, attrs)
    bad = np.nonzero(got.reshape(-1) != want.reshape(-1))[0]
    P = want.shape[1]
    order = attrs.get("record_order", "page_segregated")
    assert bad.size == 0, (f"{bad.size} bytes differ; first {bad[0]}: {rec.locate(bad[0], attrs['layout'], order, P)}, "
                           f"numpy 0x{int(got.reshape(-1)[bad[0]]):02x}, golden 0x{int(want.reshape(-1)[bad[0]]):02x}")
    # page 0 (the null page) and every slot no token maps to keep kv_cache_in's bytes
    assert np.array_equal(want[0], ins["kv_cache_in"][0][0])


def edited(repo_root, tmp_path, name, attrs=None, cache_shape=None, outputs=None):
    p = tmp_path / f"{name}.h5"
    shutil.copy(repo_root / "golden" / f"{name}.h5", p)
    with h5py.File(p, "r+") as f:
        g = f[name]
        for k, v in (attrs or {}).items():
            g.attrs[k] = v
        if cache_shape is not None:
            for grp, n in (("inputs", "kv_cache_in"), ("expected", "kv_cache")):
                del g[grp][n]
                d = g[grp].create_dataset(n, data=np.zeros(cache_shape, np.uint8))
                d.attrs["dtype"] = "uint8"
        if outputs is not None:
            o = g.create_group("outputs")
            d = o.create_dataset("kv_cache", data=outputs)
            d.attrs["dtype"] = "uint8"
    return p


def test_structure_errors(repo_root, tmp_path, run_cli):
    n = "kv_v41_mxfp8_528"
    r = run_cli("check", edited(repo_root, tmp_path, n, attrs={"page_size": 16}, cache_shape=(4, 16, 1, 528)))
    assert r.returncode == 2 and "multiple of 512" in r.stdout + r.stderr and "page_size must be a multiple of 32" in r.stdout + r.stderr
    r = run_cli("check", edited(repo_root, tmp_path, n, cache_shape=(2, 32, 1, 584)))
    assert r.returncode == 2 and "B48" in r.stdout + r.stderr and "model1_fp8_584" in r.stdout + r.stderr
    r = run_cli("check", edited(repo_root, tmp_path, n, attrs={"nvfp4_rule": "vllm"}))
    assert r.returncode == 2 and "not an NVFP4 record" in r.stdout + r.stderr
    r = run_cli("check", edited(repo_root, tmp_path, n, attrs={"layout": "v41_mxfp8_529"}))
    assert r.returncode == 2 and "v41_mxfp8_528" in r.stdout + r.stderr and "nvfp4_432" in r.stdout + r.stderr
    r = run_cli("check", edited(repo_root, tmp_path, "kv_v41_nvfp4_288", attrs={"scale_byte_max": 254}))
    assert r.returncode == 2 and "has e4m3 scales, found 254" in r.stdout + r.stderr
    r = run_cli("check", edited(repo_root, tmp_path, "kv_nvfp4_384", attrs={"scale_fmt": "fp32_div"}))
    assert r.returncode == 2 and "scale_fmt" in r.stdout + r.stderr
    # B57: a 448-wide NoPE record's cache laid out with a 512-wide NVFP4 record's geometry (432 B per token)
    r = run_cli("check", edited(repo_root, tmp_path, "kv_nvfp4_384", cache_shape=(2, 32, 1, 432)))
    assert r.returncode == 2 and "B57" in r.stdout + r.stderr and "nvfp4_432" in r.stdout + r.stderr, r.stdout + r.stderr


def test_b57_geometry_is_named_by_the_reader(repo_root, tmp_path, run_cli):
    """attn.sparse_mla_decode on a 384-byte record cache whose tokens are 432 bytes wide: exit 2 naming B57."""
    p = tmp_path / "d.h5"
    shutil.copy(repo_root / "golden" / "mla_decode_nvfp4_384.h5", p)
    with h5py.File(p, "r+") as f:
        g = f["mla_decode_nvfp4_384"]
        del g["inputs"]["k_cache"]
        d = g["inputs"].create_dataset("k_cache", data=np.zeros((2, 64, 1, 432), np.uint8))
        d.attrs["dtype"] = "uint8"
    r = run_cli("check", p)
    assert r.returncode == 2 and "B57" in r.stdout + r.stderr and "inputs/k_cache" in r.stdout + r.stderr, r.stdout + r.stderr


def test_decode_refuses_an_indexer_record_as_its_cache(repo_root, tmp_path, run_cli):
    """attn.sparse_mla_decode with layout v41_idx_mxfp4_68 / v41_idx_fp8_132 (the V4.1 indexer's K cache): exit 2."""
    for lay in ("v41_idx_mxfp4_68", "v41_idx_fp8_132"):
        p = tmp_path / f"{lay}.h5"
        shutil.copy(repo_root / "golden" / "mla_decode_nvfp4_384.h5", p)
        with h5py.File(p, "r+") as f:
            f["mla_decode_nvfp4_384"].attrs["layout"] = lay
        r = run_cli("check", p)
        assert r.returncode == 2 and "indexer's K cache" in r.stdout + r.stderr, r.stdout + r.stderr


def test_swapped_nibbles_are_named(repo_root, tmp_path, run_cli):
    """A cache whose e2m1 code bytes have their nibbles swapped (vLLM #57463), built by the numpy model: FAIL with the
    B52 hint, and the first differing byte decoded."""
    name = "kv_sglang_mxfp4_368"
    ins, want, attrs = load(repo_root / "golden" / f"{name}.h5")
    out = want.copy().reshape(-1)
    P = want.shape[1]
    for s in ins["slot_mapping"][0]:
        if s >= 0:
            off = rec.region_offsets(attrs["layout"], "page_segregated", P, int(s))["codes"]
            b = out[off:off + 224]
            out[off:off + 224] = ((b >> 4) | (b << 4)) & 0xFF
    r = run_cli("check", edited(repo_root, tmp_path, name, outputs=out.reshape(want.shape)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "B52" in r.stdout and "e2m1 nibbles" in r.stdout, r.stdout


def test_reader_bugs_are_named_by_their_hints_and_nan_alone_names_none(cli, tmp_path):
    """Whole-case reader hypotheses of attn.sparse_mla_decode: a kernel ignoring the V41_FP4 extra scope is named by
    its hint; a misread whose output is NaN everywhere (scale bytes read from code bytes overflow every key) is
    explained by every misread hypothesis alike, so none is named."""
    import subprocess
    subprocess.run([cli, "selftest", "--only", "mla_decode_v41*", "--write", str(tmp_path)], check=True,
                   capture_output=True, text=True, timeout=300)
    p = subprocess.run([cli, "check", str(tmp_path / "selftest_mutants.h5")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = {ln.split()[1].split("/")[0] + "/" + ln.split()[1].split("/")[-1]: ln for ln in p.stdout.splitlines()
             if ln.startswith(("FAIL", "NONFINITE"))}
    assert "hint: v4 §9 extra scope ignored" in lines["mla_decode_v41_extra_ignored/out"], lines
    for name in ("mla_decode_v41_read_as_v32_no_rope", "mla_decode_v41_order_swapped"):
        assert lines[f"{name}/out"].startswith("NONFINITE"), lines
        assert "hint:" not in lines[f"{name}/out"], lines[f"{name}/out"]
