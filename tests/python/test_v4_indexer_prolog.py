"""v4.indexer_prolog against an independent numpy model of the A3 kernels (spec v4 §3.2-3.4): dynamic_quant_int8
(amax * fl32(1/127), rint(x * fl32(127/amax)), fp16 scale), the A3 head weights fp16(bf16(w * c)), and the k8/scale
scatter at [block, offset] pairs (negative block skipped) or flat slots (-1 skipped). The model's outputs equal every
committed golden's expected/ bit for bit and pass `check`; a model with the scatter's padding written fails."""
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump

GOLDENS = ["v4ip_a3_pairs", "v4ip_kernel_amax0_flat"]


def dyn_quant(x_bits, amax_zero):
    x = x_bits.view(ml_dtypes.bfloat16).astype(np.float32)
    with np.errstate(all="ignore"):
        amax = np.max(np.abs(x), axis=-1)
        nan = np.isnan(x).any(axis=-1)
        scale = (amax * np.float32(1.0 / 127.0)).astype(np.float32)
        inv = (np.float32(127.0) / amax).astype(np.float32)
        codes = np.rint((x * inv[..., None]).astype(np.float32))
    zero = amax == 0
    codes[zero | nan] = 0
    codes[np.isnan(codes)] = 0  # inf * 0 (an inf in the row: inv = 0)
    scale[zero] = 1.0 if amax_zero == "scale1" else 0.0
    scale[nan] = np.nan
    s16 = scale.astype(np.float16).view(np.uint16).copy()
    s16[np.isnan(scale)] = 0x7FFF  # the CUDA-canonical NaN the reference writes
    return np.clip(codes, -127, 127).astype(np.int8), s16.view(np.float16)


def model(inputs, attrs, pad_written=False):
    az = attrs.get("amax_zero", b"scale1")
    az = az.decode() if isinstance(az, bytes) else str(az)
    out = {}
    q8, qs = dyn_quant(inputs["q"], az)
    out["q_int8"], out["q_scale"] = q8, qs.view(np.uint16)
    w = inputs["weights"].view(ml_dtypes.bfloat16).astype(np.float32)
    out["weights_fp16"] = (w * np.float32(0.011048543456039806)).astype(ml_dtypes.bfloat16).astype(np.float16).view(np.uint16)
    k8, ks = dyn_quant(inputs["k"], az)
    kc = inputs["k_cache_in"].copy()
    ksc = inputs["k_scale_cache_in"].copy()
    nblk, bs = kc.shape[0], kc.shape[1]
    kc2 = kc.reshape(nblk * bs, -1)
    ksc2 = ksc.reshape(nblk * bs)
    sm = inputs["slot_mapping"]
    for r in range(k8.shape[0]):
        if sm.ndim == 2:
            blk, off = int(sm[r, 0]), int(sm[r, 1])
            if blk < 0:
                if not pad_written:
                    continue
                blk = 0
            slot = blk * bs + off
        else:
            slot = int(sm[r])
            if slot < 0:
                continue
        kc2[slot] = k8[r]
        ksc2[slot] = ks.view(np.uint16)[r]
    out["k_cache"], out["k_scale_cache"] = kc, ksc
    return out


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]},
                dict(g.attrs))


@pytest.mark.parametrize("name", GOLDENS)
def test_model_equals_golden_and_passes(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    ins, exp, attrs = load(src)
    out = model(ins, attrs)
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
    out = model(ins, attrs, pad_written=True)
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
    out = model(ins, attrs)
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

def hadamard_matrix(n):
    i = np.arange(n)
    return np.where(np.bitwise_count(i[:, None] & i[None, :]) % 2 == 1, -1.0, 1.0).astype(np.float32) \
        if hasattr(np, "bitwise_count") else \
        np.array([[(-1.0) ** bin(a & b).count("1") for b in range(n)] for a in range(n)], np.float32)


def rotate_model(inputs, kind, fma=False, neox=False):
    """An fp32 kernel: RoPE x*c - y*s in fp32 (fma: one rounding of x*c - fl(y*s)), bf16; ascend: bf16(r @ H^T) with
    numpy's fp32 matmul, bf16(fl32(h * fl32(128^-0.5))); fwht: the fp32 butterflies h = 1..64, then the same scale."""
    bf = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    x = inputs["q_pre"].view(ml_dtypes.bfloat16).astype(np.float32)
    T, H, D = x.shape
    c = inputs["rope_cos"][:, 0::2][:, None, :].astype(np.float32)
    s = inputs["rope_sin"][:, 0::2][:, None, :].astype(np.float32)
    r = x.copy()
    base = D - 64
    ia = base + (np.arange(32) if neox else 2 * np.arange(32))
    ib = ia + (32 if neox else 1)
    a, b = x[..., ia], x[..., ib]
    if fma:
        ra = (a.astype(np.float64) * c - (b * s).astype(np.float32)).astype(np.float32)
        rb = (b.astype(np.float64) * c + (a * s).astype(np.float32)).astype(np.float32)
    else:
        ra = ((a * c).astype(np.float32) - (b * s).astype(np.float32)).astype(np.float32)
        rb = ((b * c).astype(np.float32) + (a * s).astype(np.float32)).astype(np.float32)
    r[..., ia], r[..., ib] = bf(ra), bf(rb)
    s32 = np.float32(128 ** -0.5)
    if kind == "ascend":
        h = bf((r.reshape(-1, D) @ hadamard_matrix(D).T).astype(np.float32)).reshape(T, H, D)
    else:
        h = r.reshape(-1, D).copy()
        w = 1
        while w < D:
            v = h.reshape(-1, D // (2 * w), 2, w)
            lo, hi = v[:, :, 0, :].copy(), v[:, :, 1, :].copy()
            v[:, :, 0, :], v[:, :, 1, :] = (lo + hi).astype(np.float32), (lo - hi).astype(np.float32)
            h = v.reshape(-1, D)
            w *= 2
        h = h.reshape(T, H, D)
    return (h * s32).astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def qpath_case(repo_root, tmp_path, name, rot, edit=None):
    src = repo_root / "golden" / f"{name}.h5"
    f = tmp_path / f"{name}.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[name]
        ins = {k: g["inputs"][k][()] for k in g["inputs"]}
        az = g.attrs.get("amax_zero", "scale1")
        q8, qs = dyn_quant(rot, az if isinstance(az, str) else az.decode())
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
    rot = rotate_model(ins, kind, fma=fma)
    f, _ = qpath_case(repo_root, tmp_path, name, rot)
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (rot == exp).mean() > 0.999  # the bound admits the rare boundary values only


@pytest.mark.parametrize("bug", ["neox", "quant_of_reference"])
def test_qpath_bugs_fail(bug, repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    rot = rotate_model(ins, "ascend", neox=bug == "neox")

    def other_quant(g):  # q_int8 computed from a different rotation than the dumped q_rot
        q8, _ = dyn_quant(rotate_model(ins, "ascend", neox=True), "scale1")
        g["outputs/q_int8"][...] = q8
    f, _ = qpath_case(repo_root, tmp_path, name, rot, other_quant if bug == "quant_of_reference" else None)
    p = run_cli("check", f)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("q_rot" if bug == "neox" else "q_int8") in p.stdout


def test_qpath_needs_the_kernels_q_rot(repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    f, _ = qpath_case(repo_root, tmp_path, name, rotate_model(ins, "ascend"), lambda g: g.__delitem__("outputs/q_rot"))
    p = run_cli("check", f)
    assert p.returncode == 2 and "outputs/q_rot" in p.stderr, p.stdout + p.stderr


def test_kit_capture_qpath_roundtrip(repo_root, run_cli, tmp_path):
    name = "v4ip_qpath_ascend"
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as h:
        ins = {k: h[name]["inputs"][k][()] for k in h[name]["inputs"]}
    rot = rotate_model(ins, "ascend")
    q8, qs = dyn_quant(rot, "scale1")
    T = rot.shape[0]
    bf = lambda a: a.view(ml_dtypes.bfloat16)  # noqa: E731
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_indexer_prolog(q_pre=bf(ins["q_pre"]), rope_cos=ins["rope_cos"].reshape(T, 1, 1, 64),
                                           rope_sin=ins["rope_sin"].reshape(T, 1, 1, 64), q_rot=bf(rot), q_int8=q8,
                                           q_scale=qs, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
