"""v4.indexer_prolog, kernel vllm-cuda (issue #34 item 5): vLLM's fused_indexer_q_rope_quant FP8 branch against the
independent numpy model reference.v4.vllm_indexer_q (fp32, the Triton kernel's operation order; spec v4 §10): the
model's outputs pass `check` on the committed golden's inputs (with or without FMA contraction in the RoPE), planted
bugs FAIL, and the capture kit's capture_vllm_v4_indexer_q writes a dump the stage accepts."""
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v4 as ref

GOLDEN = "v4ip_vllm_q.h5"


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return {k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]}, dict(g.attrs)


def with_outputs(repo_root, tmp_path, out, name="m.h5"):
    dst = tmp_path / name
    shutil.copy(repo_root / "golden" / GOLDEN, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        dts = {k: g["expected"][k].attrs["dtype"] for k in g["expected"]}
        del g["expected"]
        for k in ("q_fp8", "weights_out"):
            d = g.create_dataset(f"outputs/{k}", data=np.asarray(out[k]))
            d.attrs["dtype"] = dts[k]
    return dst


@pytest.mark.parametrize("fma", [False, True])
def test_model_passes(repo_root, run_cli, tmp_path, fma):
    ins, outs, attrs = load(repo_root / "golden" / GOLDEN)
    assert attrs["kernel"] == "vllm-cuda"
    out = ref.vllm_indexer_q(ins, attrs, fma=fma)
    same = np.count_nonzero(out["q_fp8"] == outs["q_fp8"].view(np.uint8))
    assert same >= out["q_fp8"].size - 8  # the golden is the reference: at most a few RoPE / e4m3 tie flips
    r = run_cli("check", with_outputs(repo_root, tmp_path, out), check_rc=0)
    assert "2 passed, 0 failed" in r.stdout, r.stdout


def test_golden_equals_model_bytes(repo_root):
    # expected/ is the reference (RoPE rounded once from the exact value): the fp32 model agrees byte for byte here.
    ins, exp, attrs = load(repo_root / "golden" / GOLDEN)
    out = ref.vllm_indexer_q(ins, attrs)
    assert np.array_equal(out["weights_out"].view(np.uint32), exp["weights_out"].view(np.uint32))
    assert np.array_equal(out["q_fp8"], exp["q_fp8"].view(np.uint8))


@pytest.mark.parametrize("bug", ["no_rope", "hadamard", "not_folded", "neox", "position"])
def test_planted_bugs_fail(repo_root, run_cli, tmp_path, bug):
    ins, _, attrs = load(repo_root / "golden" / GOLDEN)
    if bug in ("no_rope", "hadamard"):
        out = ref.vllm_indexer_q(ins, attrs, bug=bug)
    elif bug == "position":
        P = ins["cos_sin_cache"].shape[0]
        out = ref.vllm_indexer_q(dict(ins, positions=(ins["positions"] + 1) % P), attrs)
    elif bug == "neox":  # NeoX halves: pairs (64 + i, 96 + i) instead of (64 + 2i, 65 + 2i)
        q = ins["index_q"].copy()
        perm = np.arange(128)
        perm[64:128:2], perm[65:128:2] = np.arange(64, 96), np.arange(96, 128)
        out = ref.vllm_indexer_q(dict(ins, index_q=q[:, :, perm]), attrs)
        inv = np.argsort(perm)
        out["q_fp8"] = out["q_fp8"][:, :, inv]
    else:
        out = ref.vllm_indexer_q(ins, attrs)
        w = ins["index_weights"].view(ml_dtypes.bfloat16).astype(np.float32)
        out["weights_out"] = ((w * np.float32(128 ** -0.5)).astype(np.float32) * np.float32(0.125)).astype(np.float32)
    r = run_cli("check", with_outputs(repo_root, tmp_path, out), check_rc=1)
    assert "failed" in r.stdout and "0 failed" not in r.stdout, r.stdout


def test_kit_capture_round_trip(repo_root, run_cli, tmp_path):
    ins, _, attrs = load(repo_root / "golden" / GOLDEN)
    out = ref.vllm_indexer_q(ins, attrs)
    f = tmp_path / "kit.h5"
    dsa_dump.capture_vllm_v4_indexer_q(
        ins["positions"], ins["index_q"].view(ml_dtypes.bfloat16), ins["cos_sin_cache"],
        ins["index_weights"].view(ml_dtypes.bfloat16), (out["q_fp8"].view(ml_dtypes.float8_e4m3fn), out["weights_out"]),
        out=str(f))
    with h5py.File(f, "r") as h:
        assert h[next(iter(h))].attrs["kernel"] == "vllm-cuda"
    r = run_cli("check", f, check_rc=0)
    assert "2 passed, 0 failed" in r.stdout, r.stdout
