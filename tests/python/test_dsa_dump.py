"""Tests of the Python capture kit scripts/dsa_dump against the C++ CLI (numpy + h5py + ml_dtypes; torch parts
are in test_dsa_dump_torch.py and skip without torch).

Expected values come from first principles (the numpy models of reference/, numpy / ml_dtypes) or from the real
DeepGEMM data in shared/data, never from the kit itself."""
import json
import os
import subprocess
import sys
import warnings

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from dsa_dump import schema as dsa_schema
from reference import indexer as ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)


def inspect_json(cli, path, tmp_path):
    js = tmp_path / "inspect.json"
    p = run(cli, "inspect", path, "--json", js)
    with open(js) as f:
        j = json.load(f)
    stats = {}
    for c in j["files"][0]["cases"]:
        for t in c["tensors"]:
            stats[(c["name"], t["group"] + "/" + t["name"])] = t
    return p, stats


def has_check(cli):
    """True once the `check` subcommand is built (listed under Subcommands in --help)."""
    return any(line.split()[:1] == ["check"] for line in run(cli, "--help").stdout.splitlines())


def rand_bf16(shape, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------------------------------------------------------
def test_dsa_dump_shipped_schema_equals_cli(cli):
    with open(dsa_schema.SHIPPED_SCHEMA) as f:
        shipped = json.load(f)
    assert shipped == dsa_schema.schema_from_cli(cli), (
        "scripts/dsa_dump/dsa_dump/stages.json is stale: run python -m dsa_dump.sync_schema")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "scripts", "dsa_dump"))
    p = subprocess.run([sys.executable, "-m", "dsa_dump.sync_schema", "--bin", cli, "--check"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 0, p.stderr


def test_dsa_dump_sync_schema_check_detects_stale(cli, tmp_path):
    stale = tmp_path / "stages.json"
    stale.write_text(json.dumps({"stages": []}))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "scripts", "dsa_dump"))
    args = [sys.executable, "-m", "dsa_dump.sync_schema", "--bin", cli, "--out", str(stale)]
    assert subprocess.run(args + ["--check"], capture_output=True, env=env).returncode == 1
    assert subprocess.run(args, capture_output=True, env=env).returncode == 0
    assert json.loads(stale.read_text()) == dsa_schema.schema_from_cli(cli)
    assert subprocess.run(args + ["--check"], capture_output=True, env=env).returncode == 0


def _value_stats(vals):
    v = np.asarray(vals, dtype=np.float64).ravel()
    fin = v[np.isfinite(v)]
    return dict(min=fin.min(), max=fin.max(), mean=fin.mean(), nan=int(np.isnan(v).sum()),
                pos_inf=int((v == np.inf).sum()), neg_inf=int((v == -np.inf).sum()))


def test_dsa_dump_roundtrip_every_dtype_through_cli(cli, tmp_path):
    rng = np.random.default_rng(1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.25], dtype=np.float64)
    arrays = {  # name -> (array handed to the kit, logical dtype, float64 values computed by numpy / ml_dtypes)
        "bf16": rand_bf16((5, 7), 2),
        "fp16": np.concatenate([rng.standard_normal(20), specials]).astype(np.float16),
        "fp8_e4m3fn": (rng.standard_normal((3, 16)) * 50).astype(ml_dtypes.float8_e4m3fn),
        "fp8_e5m2": np.concatenate([rng.standard_normal(9) * 1e3, specials]).astype(ml_dtypes.float8_e5m2),
        "int8": rng.integers(-128, 128, (4, 4)).astype(np.int8),
        "uint8": rng.integers(0, 256, (6,)).astype(np.uint8),
        "uint16": rng.integers(0, 65536, (6,)).astype(np.uint16),
        "int32": rng.integers(-2 ** 31, 2 ** 31, (3, 3)).astype(np.int32),
        "int64": rng.integers(-2 ** 40, 2 ** 40, (5,)).astype(np.int64),
        "float32": np.concatenate([rng.standard_normal(10), specials]).astype(np.float32),
        "float64": np.concatenate([rng.standard_normal(10), specials]),
    }
    # bf16 with specials through raw bits (Bits wrapper) as an engine would hand them over
    bf16_special = specials.astype(ml_dtypes.bfloat16)
    path = str(tmp_path / "all_dtypes.h5")
    with dsa_dump.DumpWriter(path, validate=False) as w:  # extra tensors are not in any stage's schema
        ins = {f"t_{k}": v for k, v in arrays.items()}
        ins["t_bf16_bits"] = dsa_dump.Bits(bf16_special.view(np.uint16), "bf16")
        ins["x"] = rand_bf16((2, 128), 3)
        w.add_case("all", "indexer.quant", ins)
    p, stats = inspect_json(cli, path, tmp_path)
    assert p.returncode == 2  # the extra tensors are reported as unknown ...
    assert "inputs/t_fp16: expected one of the stage's tensors (x), found an unknown tensor" in p.stderr
    assert "truncated" not in p.stderr and "storage" not in p.stderr  # ... but every dtype was readable
    expect = dict(arrays, bf16_bits=bf16_special)
    for k, arr in expect.items():
        t = stats[("all", f"inputs/t_{k}")]
        assert t["dtype"] == ("bf16" if k == "bf16_bits" else k)
        assert t["shape"] == list(arr.shape)
        want = _value_stats(arr.astype(np.float64))
        for key in ("nan", "pos_inf", "neg_inf"):
            assert t[key] == want[key], (k, key)
        assert t["min"] == want["min"] and t["max"] == want["max"], k
        assert t["mean"] == pytest.approx(want["mean"], rel=1e-12, abs=1e-12), k
    # and back through Python: raw bits identical, logical dtypes restored
    c = dsa_dump.read_dump(path)[0]
    for k, arr in arrays.items():
        got = c.inputs[f"t_{k}"]
        assert got.dtype == arr.dtype and got.shape == arr.shape
        assert got.tobytes() == arr.tobytes(), k
    assert c.raw["inputs/t_bf16_bits"].tobytes() == bf16_special.tobytes()
    # storage follows schema v1: raw bits + dtype attr, gzip + shuffle
    with h5py.File(path) as f:
        g = f["all"]
        assert g.attrs["schema_version"] == 1 and g.attrs["stage"] == "indexer.quant"
        assert f["all/inputs/t_bf16"].dtype == np.uint16 and f["all/inputs/t_bf16"].attrs["dtype"] == "bf16"
        assert f["all/inputs/t_fp16"].dtype == np.uint16
        assert f["all/inputs/t_fp8_e5m2"].dtype == np.uint8
        assert f["all/inputs/t_int8"].dtype == np.int8
        assert f["all/inputs/t_bf16"].compression == "gzip" and f["all/inputs/t_bf16"].shuffle


def test_dsa_dump_fp8_decoder_matches_ml_dtypes():
    from dsa_dump import dtypes as dt

    codes = np.arange(256, dtype=np.uint8)
    for lg, mt in (("fp8_e4m3fn", ml_dtypes.float8_e4m3fn), ("fp8_e5m2", ml_dtypes.float8_e5m2)):
        want = codes.view(mt).astype(np.float64)
        got = dt.to_float64(codes, lg)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    bits = np.arange(65536, dtype=np.uint16)
    with np.errstate(invalid="ignore"):
        want = bits.view(ml_dtypes.bfloat16).astype(np.float64)
        got = dt.to_float64(bits, "bf16")
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_dsa_dump_valid_cases_of_every_stage_pass_inspect(cli, tmp_path):
    x = rand_bf16((6, 256), 4)
    y, s = ref.act_quant_ue8m0(x)
    R, C, k = 3, 40, 8
    logits = np.random.default_rng(5).standard_normal((R, C)).astype(np.float32)
    lengths = np.array([40, 5, 20], dtype=np.int64)  # int64 as torch gives: widened exactly to int32
    idx = np.full((R, k), -1, dtype=np.int64)
    for r in range(R):
        order = np.argsort(-logits[r, : lengths[r]], kind="stable")[:k]
        idx[r, : len(order)] = order
    path = str(tmp_path / "stages.h5")
    with dsa_dump.DumpWriter(path) as w:
        dsa_dump.capture_act_quant(x.reshape(6, 2, 128), y.reshape(6, 2, 128), s.reshape(6, 2, 1), out=w, name="q")
        dsa_dump.capture_topk(logits, lengths, idx, k=k, out=w, name="topk")
        kv_in = np.zeros((2, 64 * 132), dtype=np.uint8)  # sglang's [pages, 64*(128+4)] buffer
        dsa_dump.capture_kcache_store(y[:, :128].reshape(6, 128), s[:, 0], np.arange(6), kv_in, kv_in.copy(),
                                      out=w, name="kc")
    p = run(cli, "inspect", path)
    assert p.returncode == 0, p.stderr
    c = {c.name: c for c in dsa_dump.read_dump(path)}
    assert c["q"].inputs["x"].shape == (12, 128) and c["q"].outputs["scale"].shape == (12, 1)
    assert c["topk"].dtypes["inputs/lengths"] == "int32" and c["topk"].attrs["k"] == k
    assert c["kc"].inputs["kv_cache_in"].shape == (2, 64, 1, 132)


# ---- schema errors: same text in Python and C++ ----
def _bad_cases():
    x = rand_bf16((4, 256), 6)
    y, s = ref.act_quant_ue8m0(x)
    q = np.zeros((3, 64, 128), dtype=ml_dtypes.float8_e4m3fn)
    kv = np.zeros((10, 128), dtype=ml_dtypes.float8_e4m3fn)
    ks = np.zeros(3, np.int32)
    ke = np.full(3, 10, np.int32)
    good_ragged = dict(q=q, kv=kv, kv_scale=np.ones(10, np.float32), weights=np.ones((3, 64), np.float32), ks=ks, ke=ke)
    return [
        ("wrong_dtype", "indexer.quant", {"x": x.astype(np.float16)}, {"y": y, "scale": s}, {}),
        ("wrong_rank", "indexer.quant", {"x": x.reshape(4, 2, 128)}, {}, {}),
        ("dim_mismatch", "indexer.quant", {"x": x}, {"y": y[:, :128], "scale": s}, {}),
        ("missing_and_unknown", "indexer.logits_ragged", dict(good_ragged, ks=None, extra=ks), {}, {}),
        ("bound_by_attr", "indexer.logits_ragged", good_ragged, {}, {"S": 5, "clean_logits": True}),
        ("product_dim", "indexer.logits_paged",
         dict(q=np.zeros((2, 2, 64, 128), ml_dtypes.float8_e4m3fn), kv_cache=np.zeros((3, 64, 1, 132), np.uint8),
              weights=np.ones((3, 64), np.float32), context_lens=np.ones(2, np.int32),
              block_table=np.zeros((2, 1), np.int32)), {}, {}),
        ("alternatives", "indexer.logits_paged",
         dict(q=np.zeros((2, 2, 64, 128), ml_dtypes.float8_e4m3fn), kv_cache=np.zeros((3, 64, 1, 132), np.uint8),
              weights=np.ones((4, 64), np.float32), context_lens=np.ones((3, 2, 1), np.int32),
              block_table=np.zeros((2, 1), np.int32)), {}, {"max_context_len": 64}),
        ("bad_attrs", "indexer.quant", {"x": x}, {}, {"scale_fmt": "ue9m0", "block_size": 1.5, "clamp": 7}),
        ("unknown_stage", "indexer.qaunt", {"x": x}, {}, {}),
    ]


@pytest.mark.parametrize("case", _bad_cases(), ids=lambda c: c[0])
def test_dsa_dump_schema_errors_match_cli_text(cli, tmp_path, case):
    name, stage, ins, outs, attrs = case
    path = str(tmp_path / f"{name}.h5")
    with pytest.raises(dsa_dump.SchemaError) as ei:
        with dsa_dump.DumpWriter(path) as w:
            w.add_case(name, stage, {k: v for k, v in ins.items() if v is not None}, outs, attrs=attrs)
    assert not os.path.exists(path) and os.listdir(tmp_path) == []  # nothing written, no temp left
    py_lines = str(ei.value).splitlines()
    assert py_lines and all(line.startswith(f"{path}: case '{name}': ") for line in py_lines)
    with dsa_dump.DumpWriter(path, validate=False) as w:
        w.add_case(name, stage, {k: v for k, v in ins.items() if v is not None}, outs, attrs=attrs)
    p = run(cli, "inspect", path)
    assert p.returncode == 2
    cpp_lines = [line[len("error: "):] for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert py_lines == cpp_lines


# ---- dsa-check check on kit-written cases ----
def test_dsa_dump_indexer_quant_check_passes_and_catches_a_flip(cli, tmp_path):
    if not has_check(cli):
        pytest.skip("dsa-check check is not built yet")
    x = rand_bf16((16, 512), 7, scale=10.0)
    y, s = ref.act_quant_ue8m0(x)
    good = str(tmp_path / "quant.h5")
    dsa_dump.capture_act_quant(x, y, s, scale_fmt="ue8m0", out=good)
    p = run(cli, "check", good)
    assert p.returncode == 0, p.stdout + p.stderr
    y_bad = y.view(np.uint8).copy()
    y_bad[3, 77] ^= 1
    bad = str(tmp_path / "quant_bad.h5")
    dsa_dump.capture_act_quant(x, y_bad.view(ml_dtypes.float8_e4m3fn), s, out=bad)
    p = run(cli, "check", bad)
    assert p.returncode == 1, p.stdout + p.stderr


def _real(shared_dir, group):
    path = shared_dir / "data" / "deepgemm_sm90_logits.h5"
    if not path.is_file():
        if os.environ.get("DSA_REQUIRE_SHARED") == "1":
            pytest.fail(f"{path} not found (DSA_REQUIRE_SHARED=1)")
        pytest.skip(f"{path} not found")
    with h5py.File(path) as f:
        return {k: v[()] for k, v in f[group].items()}, dict(f[group].attrs)


def test_dsa_dump_real_deepgemm_ragged_logits(cli, tmp_path, shared_dir):
    d, _ = _real(shared_dir, "ragged_h64")
    path = str(tmp_path / "ragged.h5")
    dsa_dump.capture_fp8_mqa_logits(dsa_dump.Bits(d["q_fp8"], "fp8_e4m3fn"),
                                    (dsa_dump.Bits(d["kv_fp8"], "fp8_e4m3fn"), d["kv_scale"]), d["weights"], d["ks"],
                                    d["ke"], d["logits"], clean_logits=True, kernel="deepgemm-sm90", out=path)
    p = run(cli, "inspect", path)
    assert p.returncode == 0, p.stderr
    c = dsa_dump.read_dump(path)[0]
    assert c.raw["inputs/q"].tobytes() == d["q_fp8"].tobytes()
    assert c.outputs["logits"].tobytes() == d["logits"].tobytes()
    if has_check(cli):
        p = run(cli, "check", path)
        assert p.returncode == 0, p.stdout + p.stderr


def test_dsa_dump_real_deepgemm_paged_logits(cli, tmp_path, shared_dir):
    d, a = _real(shared_dir, "paged_n2")
    path = str(tmp_path / "paged.h5")
    # sglang hands the cache as [pages, 64*132] bytes: the helper restores the [P, 64, 1, 132] view
    dsa_dump.capture_fp8_paged_mqa_logits(dsa_dump.Bits(d["q_fp8"], "fp8_e4m3fn"),
                                          d["kv_cache"].reshape(d["kv_cache"].shape[0], -1), d["weights"],
                                          d["context_lens_2d"], d["block_table"], d["logits"],
                                          kernel="deepgemm-sm90", out=path)
    p = run(cli, "inspect", path)
    assert p.returncode == 0, p.stderr
    c = dsa_dump.read_dump(path)[0]
    assert c.attrs["max_context_len"] == int(a["max_len"]) and c.inputs["kv_cache"].shape == d["kv_cache"].shape
    if has_check(cli):
        p = run(cli, "check", path)
        assert p.returncode == 0, p.stdout + p.stderr


# ---- the capture wrapper ----
def _np_act_quant(x, block_size=128, scale_fmt="ue8m0"):
    y, s = ref.act_quant_ue8m0(x.reshape(-1, x.shape[-1]), block_size)
    return y.reshape(x.shape), s.reshape(x.shape[:-1] + (x.shape[-1] // block_size,))


def _quant_map(x, block_size=128, scale_fmt="ue8m0", result=None):
    return dict(x=x, y=result[0], scale=result[1], scale_fmt=scale_fmt, block_size=block_size)


def test_dsa_dump_capture_samples_every_nth_call_with_layer_filter(cli, tmp_path):
    out = tmp_path / "dumps"
    kern = dsa_dump.capture(_np_act_quant, stage="indexer.quant", map_args=_quant_map, out_dir=str(out), every=2,
                            skip=1, layers=[3, 5], max_cases=3)
    xs = [rand_bf16((2, 128), 100 + i) for i in range(16)]
    results = []
    for i, x in enumerate(xs):
        with dsa_dump.layer_scope(3 if i % 2 else 4):  # odd calls on layer 3, even calls on layer 4 (filtered out)
            results.append(kern(x, 128, scale_fmt="ue8m0"))
    # the wrapper returns the kernel's own results
    for x, (y, s) in zip(xs, results):
        y0, s0 = _np_act_quant(x)
        assert y.tobytes() == y0.tobytes() and s.tobytes() == s0.tobytes()
    # calls 1, 3, 5, ... are past skip=1 and every=2; all of those are on layer 3; max_cases stops at 3
    assert kern.calls == 16 and kern.captured == 3 and not kern.errors
    files = sorted(os.listdir(out))
    assert files == ["indexer_quant_L3_00000.h5", "indexer_quant_L3_00001.h5", "indexer_quant_L3_00002.h5"]
    for n, f in zip((1, 3, 5), files):
        c = dsa_dump.read_dump(str(out / f))[0]
        assert c.inputs["x"].tobytes() == xs[n].tobytes() and c.attrs["layer"] == 3
    assert run(cli, "inspect", out / files[0]).returncode == 0


def test_dsa_dump_capture_size_cap_errors_and_decorator(tmp_path):
    out = tmp_path / "d"
    kern = dsa_dump.capture(_np_act_quant, stage="indexer.quant", map_args=_quant_map, out_dir=str(out),
                            max_bytes=2 * 128 * 2)  # room for a [2, 128] bf16 x, not a [4, 128] one
    kern(rand_bf16((4, 128), 1))
    kern(rand_bf16((2, 128), 2))
    assert kern.skipped_size == 1 and kern.captured == 1 and len(os.listdir(out)) == 1

    @dsa_dump.capture(stage="indexer.quant", map_args=lambda x, result=None: dict(x=x, y=result[0], scale=result[1][:, :1]),
                      out_dir=str(tmp_path / "e"))
    def broken_dump(x):
        return _np_act_quant(x)

    with warnings.catch_warnings(record=True) as wl:
        warnings.simplefilter("always")
        y, _ = broken_dump(rand_bf16((2, 256), 3))  # the dump is invalid (scale dims), the call still returns
    assert y.shape == (2, 256) and len(broken_dump.errors) == 1
    assert isinstance(broken_dump.errors[0], dsa_dump.SchemaError) and any("dsa_dump" in str(w.message) for w in wl)
    assert not os.path.exists(tmp_path / "e") or os.listdir(tmp_path / "e") == []
    strict = dsa_dump.capture(_np_act_quant, stage="indexer.quant",
                              map_args=lambda x, result=None: dict(x=x, y=result[0], scale=result[1][:, :1]),
                              out_dir=str(tmp_path / "f"), strict=True)
    with pytest.raises(dsa_dump.SchemaError):
        strict(rand_bf16((2, 256), 4))
    with pytest.raises(ValueError):
        dsa_dump.capture(_np_act_quant, stage="indexer.nope", map_args=_quant_map)


def test_dsa_dump_capture_snapshots_inputs_of_inplace_kernels(tmp_path):
    def store(cache, page, vals):  # an in-place kernel: writes vals into cache
        cache[page, : vals.size] = vals.ravel()

    def m(cache, page, vals, result=None):
        after = cache_live.copy()
        return dict(k_fp8=np.zeros((1, 128), ml_dtypes.float8_e4m3fn), k_scale=np.ones(1, np.float32),
                    slot_mapping=np.array([page * 64], np.int32), kv_cache_in=cache, kv_cache=after)

    cache_live = np.zeros((2, 64 * 132), np.uint8)
    k = dsa_dump.capture(store, stage="indexer.kcache_store", map_args=m, out_dir=str(tmp_path))
    k(cache_live, 1, np.full(10, 7, np.uint8))
    c = dsa_dump.read_dump(k.files[0])[0]
    assert c.inputs["kv_cache_in"].max() == 0 and c.outputs["kv_cache"][1].ravel()[:10].tolist() == [7] * 10


# ---- atomic writes ----
def test_dsa_dump_writer_is_atomic(tmp_path):
    path = tmp_path / "a.h5"
    with pytest.raises(RuntimeError):
        with dsa_dump.DumpWriter(str(path)) as w:
            raise RuntimeError("engine crashed before any case")
    assert os.listdir(tmp_path) == []
    # What was captured before a crash is kept (whole cases only; the exception still propagates, with a note).
    with pytest.raises(RuntimeError) as e:
        with dsa_dump.DumpWriter(str(path)) as w:
            w.add_case("c", "indexer.quant", {"x": rand_bf16((1, 128), 1)})
            raise RuntimeError("engine crashed mid-dump")
    assert sorted(os.listdir(tmp_path)) == ["a.h5"] and [c.name for c in dsa_dump.read_dump(str(path))] == ["c"]
    assert f"1 case(s) added before this error were written to {path}" in e.value.__notes__[0]
    path.unlink()
    with pytest.raises(ValueError):
        dsa_dump.DumpWriter(str(path)).close()  # no case: refuses to write an empty dump
    assert os.listdir(tmp_path) == []
    path.write_bytes(b"old")
    w = dsa_dump.DumpWriter(str(path))
    w.add_case("c", "indexer.quant", {"x": rand_bf16((1, 128), 1)})
    assert path.read_bytes() == b"old"  # untouched until close
    w.close()
    assert h5py.is_hdf5(path) and sorted(os.listdir(tmp_path)) == ["a.h5"]
    with pytest.raises(FileNotFoundError):
        dsa_dump.DumpWriter(str(tmp_path / "missing_dir" / "x.h5"))


# ---- goldens ----
def test_dsa_dump_run_golden_keeps_inputs_and_adds_outputs(cli, tmp_path):
    x = rand_bf16((8, 256), 9, scale=20.0)
    y, s = ref.act_quant_ue8m0(x)
    golden = str(tmp_path / "golden.h5")
    with dsa_dump.DumpWriter(golden) as w:
        w.add_case("g0", "indexer.quant", {"x": x}, expected={"y": y, "scale": s}, attrs={"scale_fmt": "ue8m0"})

    seen = {}

    def kernel(inputs, attrs, case):
        xi = inputs["x"]
        seen["type"] = type(xi).__module__
        yy, ss = _np_act_quant(np.asarray(xi), int(attrs["block_size"]) if "block_size" in attrs else 128)
        if isinstance(xi, np.ndarray):
            xi[...] = 0  # a kernel scribbling over its input must not change the written copy
        return {"y": yy, "scale": ss}

    out = str(tmp_path / "run.h5")
    dsa_dump.run_golden(golden, kernel, out, framework="numpy")
    c = dsa_dump.read_dump(out)[0]
    assert c.raw["inputs/x"].tobytes() == x.tobytes()
    assert c.outputs["y"].tobytes() == y.tobytes() and c.expected["scale"].tobytes() == s.tobytes()
    assert dsa_dump.read_dump(golden)[0].raw["inputs/x"].tobytes() == x.tobytes()
    assert run(cli, "inspect", out).returncode == 0
    if has_check(cli):
        p = run(cli, "check", out)
        assert p.returncode == 0, p.stdout + p.stderr
    with pytest.raises(ValueError):
        dsa_dump.run_golden(golden, kernel, golden)


def test_dump_writer_validates_the_finished_file_with_the_cli(cli, tmp_path):
    """One source of truth: a case that fits the declared schema but breaks a stage's value rule (the ragged key
    range ke > N, and clean_logits with max_seqlen_k) is refused by DumpWriter exactly as `dsa-check validate` and
    `check` refuse it, and no file is left behind."""
    S, H, D, N = 2, 8, 32, 4
    q = np.zeros((S, H, D), dtype=ml_dtypes.float8_e4m3fn)
    kv = np.zeros((N, D), dtype=ml_dtypes.float8_e4m3fn)
    inputs = {"q": q, "kv": kv, "kv_scale": np.ones(N, np.float32), "weights": np.ones((S, H), np.float32),
              "ks": np.array([0, 0], np.int32), "ke": np.array([2, N + 1], np.int32)}
    out = tmp_path / "bad.h5"
    with pytest.raises(dsa_dump.SchemaError) as e:
        with dsa_dump.DumpWriter(str(out)) as w:
            w.add_case("r", "indexer.logits_ragged", inputs=inputs, attrs={"clean_logits": 1, "max_seqlen_k": 4})
    msg = str(e.value)
    assert f"{out}: case 'r': inputs/ks, inputs/ke: expected 0 <= ks <= ke <= N = 4, found row 1: ks=0 ke=5" in msg
    assert f"{out}: case 'r': attr clean_logits: expected 0 when max_seqlen_k > 0 (DeepGEMM requires it), found 1" in msg
    assert not out.exists() and not any(p.name.startswith(".bad.h5") for p in tmp_path.iterdir())
    # The same file written without validation: the CLI's validate says the same, exit 2.
    with dsa_dump.DumpWriter(str(out), validate=False) as w:
        w.add_case("r", "indexer.logits_ragged", inputs=inputs, attrs={"clean_logits": 1, "max_seqlen_k": 4})
    p = run(cli, "validate", out)
    assert p.returncode == 2
    assert "found row 1: ks=0 ke=5" in p.stderr
    assert "row 1: ks=0 ke=5" in [p.found for p in dsa_schema.validate_file(str(out))]


def test_nan_codes_of_torch_cuda_are_not_errors(cli, tmp_path):
    """NaN policy: the reference writes the CUDA-canonical NaN codes (torch's CUDA fp8 cast writes a NaN block as
    0x7F codes and its fp32 NaN scale as 0x7FFFFFFF): such a kernel is BITEXACT, even under --nan-bits exact. Other
    NaN codes of the same formats (x86 / CPU casts: 0xFF, 0xFFC00000) pass by default, with a note naming them,
    and fail under --nan-bits exact; a NaN where the reference is finite still fails."""
    x = rand_bf16((2, 256), 5)
    x[1, 7] = np.nan  # row 1: only block 0 sees the NaN
    y_ok, s_ok = ref.act_quant_ue8m0(x[:1])
    y = np.zeros((2, 256), np.uint8)
    s = np.zeros((2, 2), np.float32)
    y[0] = y_ok.view(np.uint8)[0]
    s[0] = s_ok[0]
    y1, s1 = ref.act_quant_ue8m0(x[1:, 128:])  # the clean block of row 1
    y[1, 128:] = y1.view(np.uint8)[0]
    s[1, 1] = s1[0, 0]
    y[1, :128] = 0x7F                       # torch CUDA: every code of a NaN block is 0x7F
    s.view(np.uint32)[1, 0] = 0x7FFFFFFF     # torch CUDA fp32 NaN
    p = tmp_path / "nan.h5"
    with dsa_dump.DumpWriter(str(p)) as w:
        w.add_case("q", "indexer.quant", inputs={"x": x}, outputs={"y": dsa_dump.Bits(y, "fp8_e4m3fn"), "scale": s})
    for extra in ([], ["--nan-bits", "exact"]):
        r = run(cli, "check", *extra, p)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.count("BITEXACT") == 2 and "up to NaN codes" not in r.stdout, r.stdout
    # x86-signed NaN codes: equal up to NaN codes by default, a failure when the bits must match.
    y[1, :128] = 0xFF
    s.view(np.uint32)[1, 0] = 0xFFC00000
    p = tmp_path / "nan_x86.h5"
    with dsa_dump.DumpWriter(str(p)) as w:
        w.add_case("q", "indexer.quant", inputs={"x": x}, outputs={"y": dsa_dump.Bits(y, "fp8_e4m3fn"), "scale": s})
    r = run(cli, "check", p)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "up to NaN codes" in r.stdout and "out 0xffc00000" in r.stdout, r.stdout
    r = run(cli, "check", "--nan-bits", "exact", p)
    assert r.returncode == 1, r.stdout + r.stderr
    s[0, 0] = np.nan  # a NaN where the reference is finite
    with dsa_dump.DumpWriter(str(tmp_path / "nan2.h5")) as w:
        w.add_case("q", "indexer.quant", inputs={"x": x}, outputs={"y": dsa_dump.Bits(y, "fp8_e4m3fn"), "scale": s})
    r = run(cli, "check", tmp_path / "nan2.h5")
    assert r.returncode == 1 and "NONFINITE" in r.stdout, r.stdout


def test_capture_torch_topk_defaults_pass_a_correct_torch_topk(cli, tmp_path):
    """A torch.topk-style result (sorted, -inf picks for short rows, no fast path) captured with capture_torch_topk
    passes with the helper's defaults; captured with plain capture_topk it fails, naming the attrs to set."""
    rng = np.random.default_rng(3)
    R, C, k = 4, 40, 8
    lengths = np.array([40, 5, 0, 17], np.int32)
    logits = rng.standard_normal((R, C)).astype(np.float32)
    masked = np.where(np.arange(C)[None, :] < lengths[:, None], logits, -np.inf)
    # torch.topk(sorted=True): descending values; equal values (the -inf tail) by ascending index on CPU
    picks = np.stack([np.lexsort((np.arange(C), -row))[:k] for row in masked]).astype(np.int64)
    good = tmp_path / "torch_good.h5"
    dsa_dump.capture_torch_topk(masked, lengths, picks, k, out=str(good))
    r = run(cli, "check", good)
    assert r.returncode == 0, r.stdout + r.stderr
    plain = tmp_path / "torch_plain.h5"
    dsa_dump.capture_topk(masked, lengths, picks, k, out=str(plain))
    r = run(cli, "check", plain)
    assert r.returncode == 1 and "fast_path=0" in r.stdout, r.stdout


def test_repeated_captures_with_default_names_all_land(cli, tmp_path):
    """Captures without name= into one DumpWriter get indexer_topk, indexer_topk_1, ...; an explicit duplicate name
    is a ValueError that leaves the cases already added (the writer is still usable)."""
    logits = np.array([[4.0, 3.0, 2.0, 1.0]], np.float32)
    idx = np.array([[0, 1]], np.int32)
    p = tmp_path / "many.h5"
    with dsa_dump.DumpWriter(str(p)) as w:
        for _ in range(3):
            dsa_dump.capture_topk(logits, [4], idx, 2, out=w)
        dsa_dump.capture_topk(logits, [4], idx, 2, name="mine", out=w)
        with pytest.raises(ValueError):
            dsa_dump.capture_topk(logits, [4], idx, 2, name="mine", out=w)
    assert [c.name for c in dsa_dump.read_dump(str(p))] == ["indexer_topk", "indexer_topk_1", "indexer_topk_2", "mine"]
    r = run(cli, "check", p)
    assert r.returncode == 0 and "4 passed, 0 failed" in r.stdout, r.stdout + r.stderr


def test_dump_writer_never_loses_the_cases_already_captured(cli, tmp_path):
    """New-user trial: a typo'd attr is refused by add_case itself (naming the attr and the closest), and neither
    that error inside the ``with`` block nor a case the CLI's value rules refuse at close() loses the good cases
    already added: they are written (a note on the exception says where), the bad case is left out."""
    S, H, D, N = 2, 8, 32, 4
    q = np.zeros((S, H, D), dtype=ml_dtypes.float8_e4m3fn)
    kv = np.zeros((N, D), dtype=ml_dtypes.float8_e4m3fn)
    good = {"q": q, "kv": kv, "kv_scale": np.ones(N, np.float32), "weights": np.ones((S, H), np.float32),
            "ks": np.array([0, 0], np.int32), "ke": np.array([2, N], np.int32)}
    bad = dict(good, ke=np.array([2, N + 1], np.int32))  # fits the declared schema, breaks ke <= N
    out = tmp_path / "typo.h5"
    with pytest.raises(dsa_dump.SchemaError) as e:
        with dsa_dump.DumpWriter(str(out)) as w:
            w.add_case("good", "indexer.logits_ragged", inputs=good)
            w.add_case("typo", "indexer.logits_ragged", inputs=good, attrs={"clean_logit": 1})
    assert "attr clean_logit: expected an attr of stage indexer.logits_ragged (did you mean clean_logits?)" in str(e.value)
    assert any(f"1 case(s) added before this error were written to {out}" in n for n in e.value.__notes__)
    assert [c.name for c in dsa_dump.read_dump(str(out))] == ["good"]

    out = tmp_path / "rule.h5"
    with pytest.raises(dsa_dump.SchemaError) as e:
        with dsa_dump.DumpWriter(str(out)) as w:
            w.add_case("good", "indexer.logits_ragged", inputs=good)
            w.add_case("bad", "indexer.logits_ragged", inputs=bad)
    assert "case 'bad': inputs/ks, inputs/ke" in str(e.value)
    assert any("the 1 valid case(s) (good) were written to" in n for n in e.value.__notes__)
    assert [c.name for c in dsa_dump.read_dump(str(out))] == ["good"]
    assert not any(p.name.startswith(".rule.h5") for p in tmp_path.iterdir())
    subprocess.run([cli, "validate", str(out)], check=True, capture_output=True)
