"""HDF5 interop between h5py (+ ml_dtypes) and dsa-check's schema-v1 reader/writer.

h5py -> C++: raw bits + `dtype` attr (how the capture kit stores bf16/fp8), ml_dtypes arrays that h5py stores
as opaque types, plain float16 arrays, bool attrs; checked through `dsa-check inspect --json` (dtype, shape,
statistics). C++ -> h5py: a file written by our writer (`dsa-check cut`) reads back in h5py with identical bits,
attrs and the gzip + shuffle filters.
"""
import json
import warnings

import h5py
import ml_dtypes
import numpy as np
import pytest

BF16, E4M3 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn


def quant_values():
    # Exactly representable values whose sums are exact in double: min/max/mean compare exactly.
    x = (np.arange(2 * 256, dtype=np.float64).reshape(2, 256) % 23 - 11) * 0.25
    return x.astype(BF16)


def write_quant_case(g, x, y=None, scale=None, raw_bits=True):
    g.attrs["schema_version"] = np.int64(1)
    g.attrs["stage"] = "indexer.quant"
    if raw_bits:
        d = g.create_dataset("inputs/x", data=x.view(np.uint16), compression="gzip", shuffle=True)
        d.attrs["dtype"] = "bf16"
    else:
        g.create_dataset("inputs/x", data=x)  # ml_dtypes array: h5py writes an opaque type
        g["inputs/x"].attrs["dtype"] = "bf16"
    if y is not None:
        d = g.create_dataset("outputs/y", data=y.view(np.uint8))
        d.attrs["dtype"] = "fp8_e4m3fn"
    if scale is not None:
        g.create_dataset("outputs/scale", data=scale)


def inspect_json(run_cli, tmp_path, path, rc):
    out = tmp_path / "inspect.json"
    p = run_cli("inspect", path, "--json", out)
    assert p.returncode == rc, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(out.read_text()), p


def tensors_by_name(jcase):
    return {f"{t['group']}/{t['name']}": t for t in jcase["tensors"]}


def stats(a):
    v = np.asarray(a).astype(np.float64).ravel()
    f = v[np.isfinite(v)]
    return dict(min=float(f.min()), max=float(f.max()), mean=float(f.sum() / f.size), nan=int(np.isnan(v).sum()),
                pos_inf=int(np.isposinf(v).sum()), neg_inf=int(np.isneginf(v).sum()))


def test_h5py_raw_bits_bf16_fp8_load(run_cli, tmp_path):
    x = quant_values()
    y = (x.astype(np.float32) * 4).astype(E4M3)
    scale = np.full((2, 2), 0.25, dtype=np.float32)
    path = tmp_path / "kit.h5"
    with h5py.File(path, "w") as f:
        write_quant_case(f.create_group("q0"), x, y, scale)
        g = f.create_group("q1")
        write_quant_case(g, x, raw_bits=False)  # opaque ml_dtypes storage + dtype attr
        g.attrs["clamp"] = np.True_  # h5py bool attr (enum over int8)
        g.attrs["scale_fmt"] = np.bytes_(b"fp32_div")  # fixed-length string attr
    j, _ = inspect_json(run_cli, tmp_path, path, 0)
    jf = j["files"][0]
    assert jf["valid"] and jf["problems"] == []
    cases = {c["name"]: c for c in jf["cases"]}
    t0 = tensors_by_name(cases["q0"])
    assert t0["inputs/x"]["dtype"] == "bf16" and t0["inputs/x"]["shape"] == [2, 256]
    assert {k: t0["inputs/x"][k] for k in stats(x)} == stats(x)
    assert t0["outputs/y"]["dtype"] == "fp8_e4m3fn"
    assert {k: t0["outputs/y"][k] for k in stats(y)} == stats(y)
    assert {k: t0["outputs/scale"][k] for k in stats(scale)} == stats(scale)
    t1 = tensors_by_name(cases["q1"])
    assert {k: t1["inputs/x"][k] for k in stats(x)} == stats(x)
    assert cases["q1"]["attrs"]["clamp"] == "1"
    assert cases["q1"]["attrs"]["scale_fmt"] == '"fp32_div"'


def test_h5py_float16_arrays_and_special_values_load(run_cli, tmp_path):
    h = np.array([[1.5, -2.0, np.nan, np.inf, -np.inf, 65504.0, 6e-8, -0.0]] * 2, dtype=np.float16)
    path = tmp_path / "f16.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("c")
        g.attrs["schema_version"] = 1
        g.attrs["stage"] = "indexer.quant"
        g.attrs["clamp"] = False
        g.create_dataset("inputs/x", data=h)  # plain IEEE half: no dtype attr needed
    # Loads as fp16; the only problem is that indexer.quant takes bf16 or float32 x.
    j, p = inspect_json(run_cli, tmp_path, path, 2)
    jf = j["files"][0]
    assert jf["problems"] == [f"{path}: case 'c': inputs/x: expected dtype bf16 or float32, found fp16"]
    t = tensors_by_name(jf["cases"][0])["inputs/x"]
    assert t["dtype"] == "fp16" and t["shape"] == [2, 8]
    assert {k: t[k] for k in stats(h)} == stats(h)
    assert jf["cases"][0]["attrs"]["clamp"] == "0"
    assert p.stderr.count("error: ") == 1


def test_h5py_opaque_without_dtype_attr_is_explained(run_cli, tmp_path):
    path = tmp_path / "opaque.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("c")
        g.attrs["schema_version"] = 1
        g.attrs["stage"] = "indexer.quant"
        g.create_dataset("inputs/x", data=quant_values())  # opaque, no dtype attr
    p = run_cli("inspect", path)
    assert p.returncode == 2
    lines = [l for l in p.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, p.stderr
    assert f"{path}: case 'c': inputs/x: expected a supported storage type" in lines[0]
    assert "opaque16 without a dtype attr" in lines[0]


def test_cpp_writer_output_reads_in_h5py(run_cli, tmp_path):
    x = quant_values()
    y = (x.astype(np.float32) * 4).astype(E4M3)
    scale = np.full((2, 2), 0.25, dtype=np.float32)
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        for name in ("keep", "drop"):
            g = f.create_group(name)
            write_quant_case(g, x, y, scale)
            g.attrs["scale_fmt"] = "fp32_mul"
            g.attrs["amax_eps"] = 1e-10
            g.attrs["meta.note"] = "captured on H200"
            g.attrs["meta.sizes"] = np.array([1, 2, 3], dtype=np.int64)
    out = tmp_path / "cut.h5"
    p = run_cli("cut", src, "--case", "k*", "--out", out)
    assert p.returncode == 0, p.stderr
    with h5py.File(out, "r") as f:
        assert list(f.keys()) == ["keep"]
        g = f["keep"]
        assert g.attrs["schema_version"] == 1 and g.attrs["stage"] == "indexer.quant"
        assert g.attrs["scale_fmt"] == "fp32_mul" and g.attrs["meta.note"] == "captured on H200"
        assert g.attrs["amax_eps"] == 1e-10
        assert list(g.attrs["meta.sizes"]) == [1, 2, 3]
        assert "block_size" not in g.attrs  # cut copies attrs, it does not add defaults
        for name, want, dt in (("inputs/x", x.view(np.uint16), "bf16"), ("outputs/y", y.view(np.uint8), "fp8_e4m3fn"),
                               ("outputs/scale", scale, "float32")):
            d = g[name]
            assert d.dtype == want.dtype, name
            assert np.array_equal(d[()].view(np.uint8), want.view(np.uint8)), name
            assert d.attrs["dtype"] == dt
            assert d.compression == "gzip" and d.shuffle, name
        # The raw bits convert back to the same ml_dtypes values.
        assert np.array_equal(g["inputs/x"][()].view(BF16).astype(np.float32), x.astype(np.float32))
    # And our own reader accepts what our writer wrote.
    j, _ = inspect_json(run_cli, tmp_path, out, 0)
    assert j["files"][0]["valid"]
