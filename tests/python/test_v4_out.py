"""attn.v4_out (DeepSeek-V4 attention output on Ascend: inplace_partial_rotary_mul(o, cos, -sin) on the last 64 dims,
npu_transpose_batchmatmul with wo_a per head group, wo_b) against the independent numpy model of the kernels' fp32
arithmetic in reference/v4.py (attn_out), written from spec v4 §4.4: each output rounded to bf16 and fed to the next.
It must pass `check` on every committed golden; the model with a bug must fail from the output the bug touches first
on, and pass before it."""
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v4 as ref

GOLDENS = ["v4out_small_groups", "v4out_nonfinite"]
BF16 = ml_dtypes.bfloat16


def load(path):
    with h5py.File(path, "r") as f:
        name = next(iter(f))
        g = f[name]
        t = {}
        for k in g["inputs"]:
            d = g["inputs"][k]
            v = d[()]
            t[k] = v.view(BF16).astype(np.float32) if d.attrs.get("dtype") == "bf16" else v
        return name, dict(g.attrs), t


def with_outputs(src, dst, outs):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        if "expected" in g:
            del g["expected"]
        for n, v in zip(("o_rot", "o_lora", "output"), outs):
            g.create_dataset(f"outputs/{n}", data=v.view(np.uint16)).attrs["dtype"] = "bf16"


@pytest.mark.parametrize("name", GOLDENS)
def test_fp32_model_passes(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    f = tmp_path / "m.h5"
    with_outputs(src, f, ref.attn_out(t, attrs))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("bug,first", [("forward", "o_rot"), ("groups", "o_lora")])
def test_fp32_model_with_a_bug_fails_where_it_starts(bug, first, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4out_small_groups.h5"
    _, attrs, t = load(src)
    f = tmp_path / "m.h5"
    with_outputs(src, f, ref.attn_out(t, attrs, bug))
    p = run_cli("check", f)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = {l.split()[1].split("/")[-1]: l.split()[0] for l in p.stdout.splitlines() if "/outputs/" in l}
    assert lines[first] == "FAIL", p.stdout
    assert lines["output"] == "FAIL", p.stdout
    if bug == "groups":  # the rotation is right
        assert lines["o_rot"] in ("BITEXACT", "WITHIN_BOUND"), p.stdout


def test_mismatched_weights_are_exit_2(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4out_small_groups.h5"
    f = tmp_path / "bad.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        g.attrs["o_groups"] = np.int64(3)
    p = run_cli("check", f)
    assert p.returncode == 2 and "o_groups" in p.stderr, p.stdout + p.stderr


def test_kit_capture_roundtrip(repo_root, run_cli, tmp_path):
    _, attrs, t = load(repo_root / "golden" / "v4out_small_groups.h5")
    rot, lora, out = ref.attn_out(t, attrs)
    f = tmp_path / "kit.h5"
    T = t["o"].shape[0]
    dsa_dump.capture_ascend_attn_out(t["o"].astype(BF16), t["cos"].reshape(T, 1, 1, 64), t["sin"].reshape(T, 1, 1, 64),
                                     t["wo_a"].astype(BF16), t["wo_b"].astype(BF16), o_lora=lora.reshape(T, -1),
                                     output=out, o_groups=int(attrs["o_groups"]), out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "o_lora" in p.stdout and "output" in p.stdout
