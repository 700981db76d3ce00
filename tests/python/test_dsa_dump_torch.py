"""Torch paths of the capture kit (skipped cleanly when torch is not importable, as in CI)."""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsa_dump  # noqa: E402
from dsa_dump import dtypes as dt  # noqa: E402
from reference import indexer as ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_dsa_dump_torch_tensors_store_the_same_bits_as_ml_dtypes():
    v = np.random.default_rng(0).standard_normal(257) * 100
    v[:4] = [np.nan, np.inf, -np.inf, -0.0]
    t64 = torch.from_numpy(v)
    for tdt, mdt, name in ((torch.bfloat16, ml_dtypes.bfloat16, "bf16"), (torch.float16, np.float16, "fp16"),
                           (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn, "fp8_e4m3fn"),
                           (torch.float8_e5m2, ml_dtypes.float8_e5m2, "fp8_e5m2")):
        finite = np.clip(v, -400, 400) if name == "fp8_e4m3fn" else v  # torch and ml_dtypes differ on e4m3 overflow
        raw, lg = dt.to_storage(torch.from_numpy(finite).to(tdt))
        want = finite.astype(mdt)
        nan = np.isnan(want.astype(np.float64))  # NaN payloads may differ between torch and ml_dtypes
        assert lg == name and np.array_equal(np.isnan(raw.view(mdt).astype(np.float64)), nan), name
        assert raw[~nan].tobytes() == want.view(raw.dtype)[~nan].tobytes(), name
        back = dt.to_torch(raw, lg)
        assert back.dtype == tdt and torch.equal(back.view(torch.uint8), torch.from_numpy(finite).to(tdt).view(torch.uint8))
    for tdt, name in ((torch.int8, "int8"), (torch.uint8, "uint8"), (torch.int32, "int32"), (torch.int64, "int64"),
                      (torch.float32, "float32"), (torch.float64, "float64")):
        src = torch.from_numpy(np.nan_to_num(np.clip(v, -100, 100))).to(tdt)  # finite, in range of every int type
        raw, lg = dt.to_storage(src)
        assert lg == name and raw.dtype.itemsize == src.element_size() and np.array_equal(raw, src.numpy())
    # a non-contiguous view (DeepGEMM's strided logits) is stored compactly
    big = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    raw, _ = dt.to_storage(big[:, :10])
    assert raw.shape == (4, 10) and np.array_equal(raw, big[:, :10].numpy())


def test_dsa_dump_torch_act_quant_example_matches_numpy_reference(tmp_path):
    from h200_torch_e2e import act_quant_ue8m0

    x = (torch.randn(8, 256, generator=torch.Generator().manual_seed(1)) * 7).to(torch.bfloat16)
    y, s = act_quant_ue8m0(x)
    y_ref, s_ref = ref.act_quant_ue8m0(x.float().numpy())  # first principles in numpy (spec v32 §2.5)
    assert np.array_equal(s.numpy(), s_ref)
    assert y.view(torch.uint8).numpy().tobytes() == y_ref.tobytes()
    path = str(tmp_path / "q.h5")
    dsa_dump.capture_act_quant(x, y, s, out=path)
    c = dsa_dump.read_dump(path)[0]
    assert c.raw["outputs/y"].tobytes() == y_ref.tobytes()


def test_dsa_dump_torch_run_golden_hands_torch_tensors(tmp_path):
    x = (torch.randn(4, 128) * 3).to(torch.bfloat16)
    golden = str(tmp_path / "g.h5")
    with dsa_dump.DumpWriter(golden) as w:
        w.add_case("g", "indexer.quant", {"x": x})
    seen = {}

    def kernel(inputs, attrs, case):
        from h200_torch_e2e import act_quant_ue8m0

        seen["dtype"] = inputs["x"].dtype
        y, s = act_quant_ue8m0(inputs["x"])
        return {"y": y, "scale": s}

    out = str(tmp_path / "o.h5")
    dsa_dump.run_golden(golden, kernel, out, framework="torch")
    assert seen["dtype"] == torch.bfloat16
    c = dsa_dump.read_dump(out)[0]
    assert c.raw["inputs/x"].tobytes() == x.view(torch.int16).numpy().tobytes()
    assert c.dtypes["outputs/y"] == "fp8_e4m3fn"


def test_dsa_dump_torch_e2e_example_dry_run(tmp_path, dsa_check_bin):
    out = tmp_path / "e2e.h5"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "examples", "h200_torch_e2e.py"), "--device", "cpu",
                        "--out", str(out), "--seq", "32", "48", "--heads", "8", "--topk", "16"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = subprocess.run([str(dsa_check_bin), "inspect", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {c.stage for c in dsa_dump.read_dump(str(out))} == {"indexer.quant", "indexer.logits_ragged", "indexer.topk"}
