"""scripts/convert_deepgemm_sm90.py: the real DeepGEMM sm90 logits become schema-v1 cases that dsa-check reads."""
import os
import pathlib
import subprocess
import sys

import h5py
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("DSA_SHARED_DIR", ROOT.parent / "shared"))
SRC = SHARED / "data" / "deepgemm_sm90_logits.h5"


def _src():
    if not SRC.is_file():
        if os.environ.get("DSA_REQUIRE_SHARED") == "1":
            pytest.fail(f"shared data missing: {SRC} (DSA_REQUIRE_SHARED=1)")
        pytest.skip(f"shared data missing: {SRC}")
    return SRC


def test_convert_then_inspect(tmp_path, dsa_check_bin):
    out = tmp_path / "dg.h5"
    r = subprocess.run([sys.executable, str(ROOT / "scripts/convert_deepgemm_sm90.py"), str(_src()), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f, h5py.File(_src(), "r") as s:
        assert sorted(f.keys()) == sorted(["paged_n1", "paged_n2", "ragged_h32", "ragged_h32_bf16", "ragged_h64",
                                           "ragged_h64_bf16", "ragged_h64_cp", "ragged_h64_cp_bf16"])
        g = f["ragged_h64_bf16"]
        assert g.attrs["stage"] == "indexer.logits_ragged" and g.attrs["kernel"] == "deepgemm-sm90"
        assert g["outputs/logits"].attrs["dtype"] == "bf16"
        assert np.array_equal(g["outputs/logits"][()], s["ragged_h64/logits_bf16_bits"][()])
        assert g["inputs/q"].attrs["dtype"] == "fp8_e4m3fn"
        p = f["paged_n2"]
        assert p.attrs["max_context_len"] == s["paged_n2"].attrs["max_len"]
        assert np.array_equal(p["inputs/context_lens"][()], s["paged_n2/context_lens_2d"][()])
        assert np.array_equal(p["outputs/logits"][()], s["paged_n2/logits"][()], equal_nan=True)
    r = subprocess.run([str(dsa_check_bin), "inspect", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "paged_n2" in r.stdout
    # The real DeepGEMM output is BITEXACT against the deepgemm-sm90 emulation in every converted case (this also
    # keeps the Python converter and the C++ acceptance importer (src/io/deepgemm_import.cpp) in agreement).
    r = subprocess.run([str(dsa_check_bin), "check", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "/outputs/logits" in ln]
    assert len(lines) == 8 and all(ln.startswith("BITEXACT") and "deepgemm-sm90" in ln for ln in lines), r.stdout
    assert r.stdout.strip().splitlines()[-1] == "8 passed, 0 failed"


def test_convert_bad_input_exit_2(tmp_path):
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f.create_group("something_else")
    out = tmp_path / "o.h5"
    r = subprocess.run([sys.executable, str(ROOT / "scripts/convert_deepgemm_sm90.py"), str(bad), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "something_else" in r.stderr
    assert not out.exists() and not (tmp_path / "o.h5.tmp").exists()
