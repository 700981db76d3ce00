"""Committed goldens (golden/*.h5 + golden/MANIFEST), checked independently of the C++ code:
SHA-256 of every dataset recomputed with h5py + hashlib, the act_quant goldens recomputed with reference/indexer.py,
and the reproducibility gate (regenerate with 1 and 2 threads -> identical MANIFEST; dsa-check check -> exit 0)."""
import hashlib
import pathlib

import h5py
import numpy as np
import pytest

GOLDEN = pathlib.Path(__file__).resolve().parents[2] / "golden"


def manifest():
    rows = {}
    for line in (GOLDEN / "MANIFEST").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        f, obj, dtype, shape, digest = line.split(" ")
        rows[(f, obj)] = (dtype, shape, digest)
    return rows


def test_golden_manifest_matches_every_dataset():
    rows = manifest()
    files = sorted(p.name for p in GOLDEN.glob("*.h5"))
    assert files, "no committed goldens"
    assert sorted({f for f, _ in rows}) == files
    seen = set()
    n_cases = 0  # a layer golden holds several cases
    for name in files:
        with h5py.File(GOLDEN / name, "r") as h:
            for case in h:
                n_cases += 1
                for group in ("inputs", "outputs", "expected"):
                    if group not in h[case]:
                        continue
                    for t, ds in h[case][group].items():
                        key = (name, f"{case}/{group}/{t}")
                        assert key in rows, f"{key} missing from MANIFEST"
                        dtype, shape, digest = rows[key]
                        arr = ds[()]
                        assert dtype == ds.attrs["dtype"]
                        assert shape == "[" + ",".join(str(d) for d in arr.shape) + "]"
                        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
                        assert hashlib.sha256(raw).hexdigest() == digest, key
                        seen.add(key)
    assert seen == {k for k in rows if not k[1].endswith("/attrs")}
    assert sum(1 for k in rows if k[1].endswith("/attrs")) == n_cases


def test_golden_size_budget():
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    # 20 MiB until 2026-12 (#36 item 5 added 0.7 MB of sparse-MLA goldens at shapes FlashMLA itself runs, h_q 64);
    # 22 MiB until #37 added 1.1 MB of V4.1 / FP4 kv record goldens (12 records and producer rules); 24 MiB until #38
    # added the V4.1 indexer stages' goldens (K store, FP4 logits, selection, compressor ratios 1 / 2)
    assert total < 25 * 2**20, f"golden/ is {total} bytes"


@pytest.mark.parametrize("name", ["quant_gaussian_outliers", "quant_saturation_ue8m0", "quant_subnormal"])
def test_golden_quant_ue8m0_recomputed_with_ml_dtypes(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from reference import indexer as ref

    with h5py.File(GOLDEN / f"{name}.h5", "r") as h:
        c = h[name]
        assert c.attrs["scale_fmt"] == "ue8m0"
        bs = int(c.attrs["block_size"])
        x = c["inputs/x"][()].view(ml_dtypes.bfloat16)
        y_exp = c["expected/y"][()]
        s_exp = c["expected/scale"][()]
    y, s = ref.act_quant_ue8m0(x, bs)
    np.testing.assert_array_equal(s, s_exp)
    np.testing.assert_array_equal(y.view(np.uint8), y_exp)


def test_golden_reproducible_and_bitexact(run_cli, tmp_path):
    committed = (GOLDEN / "MANIFEST").read_text()
    for j in (1, 2):
        out = tmp_path / f"j{j}"
        out.mkdir()
        run_cli("golden", "--committed", "-j", j, "--out", out, check_rc=0)
        assert (out / "MANIFEST").read_text() == committed, f"-j {j}: regenerated MANIFEST differs from golden/MANIFEST"
    run_cli("check", "-q", *sorted(GOLDEN.glob("*.h5")), check_rc=0)
