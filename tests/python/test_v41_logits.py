"""v41.logits (DeepGEMM's FP4 indexer logits of DeepSeek-V4.1, spec v41 §5) against the independent numpy model
reference/v41.py `fp4_logits` (float64 from the spec's definitions, never from the C++ reference): the committed
goldens' logits are the model's; the model's logits, captured through the kit, pass the CLI for both variants; a
logit off by a few bound widths and seeded bugs fail (exit 1, the bug named); DeepGEMM's sparse contract and the
dtype rule are input errors (exit 2)."""
import shutil
import subprocess

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v41

GOLDENS = ["v41lg_ragged_f32", "v41lg_sparse_mtp"]


def load(path):
    c = dsa_dump.read_dump(str(path))[0]
    val = lambda t: t.astype(np.float32) if t.dtype == ml_dtypes.bfloat16 else t  # noqa: E731
    return {k: val(v) for k, v in c.inputs.items()}, {k: val(v) for k, v in c.expected.items()}, dict(c.attrs), c.inputs


def model(ins, at, **kw):
    return v41.fp4_logits(ins, clean_logits=bool(at.get("clean_logits", True)), sparse_block_kv=int(at.get("sparse_block_kv", 8)),
                          bf16=at.get("logits_dtype") == "bf16", **kw)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_logits_are_the_numpy_models(repo_root, name):
    ins, exp, at, _ = load(repo_root / "golden" / f"{name}.h5")
    got, want = model(ins, at), exp["logits"].astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    assert fin.sum() > 100
    np.testing.assert_allclose(got[fin], want[fin], rtol=2.0 ** -7 if at.get("logits_dtype") == "bf16" else 2.0 ** -22, atol=1e-30)
    assert np.isnan(want).any() == (name == "v41lg_ragged_f32")  # the NaN-policy golden's 0xFF key


def capture(raw, at, logits, out):
    if "kv_fp4" in raw:
        return dsa_dump.capture_fp8_fp4_mqa_logits((raw["q_fp4"], raw["q_sf"]), (raw["kv_fp4"], raw["kv_sf"]), raw["weights"],
                                                   raw["ks"], raw["ke"], logits, out=str(out))
    return dsa_dump.capture_fp8_fp4_paged_sparse_mqa_logits((raw["q_fp4"][:, None], raw["q_sf"][:, None]), raw["kv_cache"], raw["weights"],
                                                            raw["context_lens"], raw["block_table"], raw["sparse_blocks"], logits,
                                                            next_n=int(at.get("next_n", 1)), out=str(out))


def as_dtype(x, at):
    return x.astype(ml_dtypes.bfloat16) if at.get("logits_dtype") == "bf16" else x.astype(np.float32)


@pytest.mark.parametrize("name", GOLDENS)
def test_model_logits_pass_through_the_kit(dsa_check_bin, repo_root, tmp_path, name):
    ins, _, at, raw = load(repo_root / "golden" / f"{name}.h5")
    capture(raw, at, as_dtype(model(ins, at), at), tmp_path / "ok.h5")
    p = subprocess.run([str(dsa_check_bin), "check", str(tmp_path / "ok.h5")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("name,bug,hint", [
    ("v41lg_ragged_f32", "no_relu", "B4"),
    ("v41lg_sparse_mtp", "identity_map", "v41 §5"),
    ("v41lg_ragged_f32", "one_logit", None),
])
def test_seeded_bugs_fail(dsa_check_bin, repo_root, tmp_path, name, bug, hint):
    ins, exp, at, raw = load(repo_root / "golden" / f"{name}.h5")
    out = model(ins, at)
    if bug == "no_relu":  # sum_h w relu(s) without the relu, in the model's own terms
        q = v41._mx4_rows(ins["q_fp4"], ins["q_sf"])
        k = v41._mx4_rows(ins["kv_fp4"], ins["kv_sf"])
        with np.errstate(all="ignore"):
            nr = np.einsum("rh,rhn->rn", np.asarray(ins["weights"], np.float64), np.einsum("rhd,nd->rhn", q, k))
        out = np.where(np.isfinite(out), nr, out)
    elif bug == "identity_map":  # column c scored against position c's key (mask kept from the list)
        sb = ins["sparse_blocks"].copy()
        alt = dict(ins)
        cols = out.shape[1] // 8
        alt["sparse_blocks"] = np.tile(np.arange(cols, dtype=np.int32), (sb.shape[0], 1))
        shifted = model(alt, at)
        out = np.where(np.isfinite(out) & np.isfinite(shifted), shifted, out)
    else:  # one finite logit off by 1e-3 of its magnitude: far past the fp32 bound
        r, c = np.argwhere(np.isfinite(out) & (np.abs(out) > 1e-3))[0]
        out[r, c] *= 1.001
    capture(raw, at, as_dtype(out, at), tmp_path / "bad.h5")
    p = subprocess.run([str(dsa_check_bin), "check", str(tmp_path / "bad.h5")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout
    if hint:
        assert hint in p.stdout, p.stdout


def edited(repo_root, tmp_path, name, fn):
    f = tmp_path / "e.h5"
    shutil.copy(repo_root / "golden" / f"{name}.h5", f)
    with h5py.File(f, "r+") as h:
        fn(h[next(iter(h))])
    return f


@pytest.mark.parametrize("name,edit,want", [
    ("v41lg_sparse_mtp", lambda g: g["inputs/sparse_blocks"].__setitem__((0, slice(0, 2)), np.array([5, 3])), "B59"),
    ("v41lg_sparse_mtp", lambda g: g["inputs/sparse_blocks"].__setitem__((0, slice(0, 2)), np.array([3, 3])), "B59"),
    ("v41lg_sparse_mtp", lambda g: g["inputs/sparse_blocks"].__setitem__((2, 0), 0), "kBlockQ 2"),
    ("v41lg_sparse_mtp", lambda g: g.attrs.__setitem__("sparse_block_kv", 12), "8 or 16"),
    ("v41lg_sparse_mtp", lambda g: g.attrs.__setitem__("logits_dtype", "float32"), "bf16 weights need bf16 logits"),
    ("v41lg_ragged_f32", lambda g: g["inputs/ke"].__setitem__(0, 1000), "ke <= N"),
])
def test_contract_violations_exit_2(dsa_check_bin, repo_root, tmp_path, name, edit, want):
    f = edited(repo_root, tmp_path, name, edit)
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and want in p.stdout + p.stderr, p.stdout + p.stderr


def test_q_scale_as_bytes_and_3d_cache(dsa_check_bin, repo_root, tmp_path):
    """vLLM hands the paged kernel its q_scale as uint8 [rows, H, 4] and the cache as [pages, page, 68]: the same case."""
    ins, _, at, raw = load(repo_root / "golden" / "v41lg_sparse_mtp.h5")
    sf = raw["q_sf"].astype(np.uint32).view(np.uint8).reshape(raw["q_sf"].shape + (4,))
    kc = raw["kv_cache"].reshape(raw["kv_cache"].shape[0], raw["kv_cache"].shape[1], 68)
    f = tmp_path / "b.h5"
    dsa_dump.capture_fp8_fp4_paged_sparse_mqa_logits((raw["q_fp4"], sf), kc, raw["weights"], raw["context_lens"], raw["block_table"],
                                                     raw["sparse_blocks"], as_dtype(model(ins, at), at), next_n=2, out=str(f))
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_layer_v41_decode_names_the_consumer(dsa_check_bin, repo_root, tmp_path):
    """layer_v41_decode with every member's outputs = its expected ones, the consumer's logits from another source
    layer's K cache (keys of other values): the chain's first divergence is the consumer's logits."""
    f = tmp_path / "layer.h5"
    shutil.copy(repo_root / "golden" / "layer_v41_decode.h5", f)
    with h5py.File(f, "r+") as h:
        for name, g in h.items():
            o = g.require_group("outputs")
            for t, d in g["expected"].items():
                v = d[()]
                if name == "dst_logits":
                    fin = np.isfinite(v)
                    v = np.where(fin, v[:, ::-1], v)  # scores of other keys, the -inf mask kept
                od = o.create_dataset(t, data=v)
                for k, a in d.attrs.items():
                    od.attrs[k] = a
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout
    assert "first divergence" in p.stdout and "dst_logits" in p.stdout.split("first divergence")[1].splitlines()[0], p.stdout
