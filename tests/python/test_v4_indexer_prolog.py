"""v4.indexer_prolog against the independent numpy model of the A3 kernels in reference/v4.py (indexer_prolog,
dyn_quant; spec v4 §3.2-3.4): dynamic_quant_int8 (amax * fl32(1/127), rint(x * fl32(127/amax)), fp16 scale), the A3
head weights fp16(bf16(w * c)), and the k8/scale scatter at [block, offset] pairs (negative block skipped) or flat
slots (-1 skipped). The model's outputs equal every committed golden's expected/ bit for bit and pass `check`; a model
with the scatter's padding written fails. The query path from q_pre (RoPE + Hadamard):
reference.v4.indexer_prolog_qpath, fp32 kernel models that must pass within the bound."""
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v4 as ref

GOLDENS = ["v4ip_a3_pairs", "v4ip_kernel_amax0_flat"]


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]},
                dict(g.attrs))


@pytest.mark.parametrize("name", GOLDENS)
def test_model_equals_golden_and_passes(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    ins, exp, attrs = load(src)
    out = ref.indexer_prolog(ins, attrs)
    for k, v in exp.items():
        assert np.array_equal(np.asarray(out[k]).view(np.uint8), v.view(np.uint8)), k
    f = tmp_path / "k.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        dts = {k: g["expected"][k].attrs["dtype"] for k in g["expected"]}
        del g["expected"]
        for k, v in out.items():
            d = g.create_dataset(f"outputs/{k}", data=np.asarray(v))
            d.attrs["dtype"] = dts[k]
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "5 passed, 0 failed" in p.stdout


def test_padding_written_fails(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4ip_a3_pairs.h5"
    ins, exp, attrs = load(src)
    out = ref.indexer_prolog(ins, attrs, pad_written=True)
    f = tmp_path / "bad.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        d = g.create_dataset("outputs/k_cache", data=out["k_cache"])
        d.attrs["dtype"] = "int8"
    p = run_cli("check", f)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "k_cache" in p.stdout and "block 0 slot 15" in p.stdout


def test_kit_capture_ascend_indexer_prolog(repo_root, run_cli, tmp_path):
    ins, exp, attrs = load(repo_root / "golden" / "v4ip_a3_pairs.h5")
    out = ref.indexer_prolog(ins, attrs)
    bf = lambda a: a.view(ml_dtypes.bfloat16)  # noqa: E731  (engine tensors: bf16 / fp16 arrays)
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_indexer_prolog(
        q=bf(ins["q"]), q_int8=out["q_int8"], q_scale=out["q_scale"].view(np.float16), weights=bf(ins["weights"]),
        weights_fp16=out["weights_fp16"].view(np.float16), k=bf(ins["k"]), slot_mapping=ins["slot_mapping"],
        k_cache_before=ins["k_cache_in"], k_scale_cache_before=ins["k_scale_cache_in"].view(np.float16),
        k_cache_after=out["k_cache"], k_scale_cache_after=out["k_scale_cache"].view(np.float16), out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "5 passed, 0 failed" in p.stdout


# ---- the query path from q_pre: RoPE + Hadamard (+ the quant of the kernel's own q_rot) ----------------------------

def qpath_case(repo_root, tmp_path, name, rot, edit=None):
    src = repo_root / "golden" / f"{name}.h5"
    f = tmp_path / f"{name}.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[name]
        ins = {k: g["inputs"][k][()] for k in g["inputs"]}
        az = g.attrs.get("amax_zero", "scale1")
        q8, qs = ref.dyn_quant(rot, az if isinstance(az, str) else az.decode())
        del g["expected"]
        for n, v, dt in (("q_rot", rot, "bf16"), ("q_int8", q8, "int8"), ("q_scale", qs.view(np.uint16), "fp16")):
            g.create_dataset(f"outputs/{n}", data=v).attrs["dtype"] = dt
        if edit:
            edit(g)
    return f, ins


@pytest.mark.parametrize("name,kind", [("v4ip_qpath_ascend", "ascend"), ("v4ip_qpath_fwht", "fwht")])
@pytest.mark.parametrize("fma", [False, True])
def test_qpath_fp32_kernels_pass(name, kind, fma, repo_root, run_cli, tmp_path):
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
        exp = h[name]["expected/q_rot"][()]
    rot = ref.indexer_prolog_qpath(ins, kind, fma=fma)
    f, _ = qpath_case(repo_root, tmp_path, name, rot)
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (rot == exp).mean() > 0.999  # the bound admits the rare boundary values only


@pytest.mark.parametrize("bug", ["neox", "quant_of_reference"])
def test_qpath_bugs_fail(bug, repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    rot = ref.indexer_prolog_qpath(ins, "ascend", neox=bug == "neox")

    def other_quant(g):  # q_int8 computed from a different rotation than the dumped q_rot
        q8, _ = ref.dyn_quant(ref.indexer_prolog_qpath(ins, "ascend", neox=True), "scale1")
        g["outputs/q_int8"][...] = q8
    f, _ = qpath_case(repo_root, tmp_path, name, rot, other_quant if bug == "quant_of_reference" else None)
    p = run_cli("check", f)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("q_rot" if bug == "neox" else "q_int8") in p.stdout


def test_qpath_needs_the_kernels_q_rot(repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    f, _ = qpath_case(repo_root, tmp_path, name, ref.indexer_prolog_qpath(ins, "ascend"),
                      lambda g: g.__delitem__("outputs/q_rot"))
    p = run_cli("check", f)
    assert p.returncode == 2 and "outputs/q_rot" in p.stderr, p.stdout + p.stderr


def test_kit_capture_qpath_roundtrip(repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    rot = ref.indexer_prolog_qpath(ins, "ascend")
    q8, qs = ref.dyn_quant(rot, "scale1")
    T = rot.shape[0]
    bf = lambda a: a.view(ml_dtypes.bfloat16)  # noqa: E731
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_indexer_prolog(q_pre=bf(ins["q_pre"]), rope_cos=ins["rope_cos"].reshape(T, 1, 1, 64),
                                           rope_sin=ins["rope_sin"].reshape(T, 1, 1, 64), q_rot=bf(rot), q_int8=q8,
                                           q_scale=qs, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
