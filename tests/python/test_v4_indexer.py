"""v4.indexer (Ascend npu_vllm_quant_lightning_indexer) against the independent numpy model of the A3 pipeline in
reference/v4.py (indexer_a3; spec v4 §3.5): wq = fp16(w16 * qs16), I = q8 . k8 (int32), s = fp16(relu(I) * 2^-10),
fp32 sums over the heads in two different orders (the cube's order is unknown), score = fl32(L * ks16), top-k
descending with ties to the lower index, -1 padded, whole row -1 when nvis <= 0. The model's outputs must pass `check`
on every committed golden; the model with a bug (visibility (p+2)//4, relu after the weighting, key scale dropped)
must fail; bad request metadata is exit 2 naming the tensor. The vllm-cuda and ref-bf16 variants likewise
(reference.v4.indexer_float)."""
import json
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v4 as ref

GOLDENS = ["v4i_flash_decode_mtp", "v4i_prefill_chunked_short", "v4i_ties", "v4i_pro_k1024", "v4i_nonfinite"]


def load(path):
    with h5py.File(path, "r") as f:
        name = next(iter(f))
        g = f[name]
        t = {k: g["inputs"][k][()] for k in g["inputs"]}
        return name, dict(g.attrs), t


def with_output(src, dst, idx):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        if "expected" in g:
            del g["expected"]
        d = g.create_dataset("outputs/sparse_indices", data=idx)
        d.attrs["dtype"] = "int32"


@pytest.mark.parametrize("name", GOLDENS)
def test_npu_model_passes_in_both_sum_orders(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    k = int(attrs["sparse_count"])
    for order in ("forward", "backward"):
        idx = ref.indexer_a3(t, k, order)
        f = tmp_path / f"{order}.h5"
        with_output(src, f, idx)
        p = run_cli("check", f, "--json", tmp_path / "r.json")
        assert p.returncode == 0, p.stdout + p.stderr
        r = json.loads((tmp_path / "r.json").read_text())["results"][0]
        assert r["verdict"] in ("BITEXACT", "WITHIN_BOUND") and r["kind"] == "topk_set"
    # The golden's own expected indices agree with the model up to in-band ties.
    with h5py.File(src, "r") as f:
        exp = f[next(iter(f))]["expected/sparse_indices"][()]
    assert exp.shape == idx.shape
    assert ((exp == -1) == (idx == -1)).all()


def test_golden_rows_cover_nvis_zero_short_and_long(repo_root):
    _, attrs, t = load(repo_root / "golden" / "v4i_prefill_chunked_short.h5")
    idx = ref.indexer_a3(t, int(attrs["sparse_count"]))
    valid = (idx[:, 0, :] >= 0).sum(axis=1)
    assert (valid == 0).any() and ((valid > 0) & (valid < 512)).any() and (valid == 512).any()


@pytest.mark.parametrize("bug,verdicts", [("visibility", {"STRUCTURE"}), ("relu_after", {"FAIL", "STRUCTURE"}),
                                          ("no_key_scale", {"FAIL", "STRUCTURE"})])
def test_npu_model_with_a_bug_fails(bug, verdicts, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4i_flash_decode_mtp.h5"
    _, attrs, t = load(src)
    f = tmp_path / "bug.h5"
    with_output(src, f, ref.indexer_a3(t, int(attrs["sparse_count"]), bug=bug))
    p = run_cli("check", f, "--json", tmp_path / "r.json")
    assert p.returncode == 1, p.stdout + p.stderr
    r = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert r["verdict"] in verdicts, r["message"]


@pytest.mark.parametrize("edit,tensor", [
    (lambda g: g["inputs/actual_seq_lengths_query"].__setitem__(-1, 1), "actual_seq_lengths_query"),
    (lambda g: g["inputs/block_table"].__setitem__((0, 0), 10**6), "block_table"),
])
def test_bad_request_metadata_is_exit_2(edit, tensor, repo_root, run_cli, tmp_path):
    f = tmp_path / "bad.h5"
    shutil.copy(repo_root / "golden" / "v4i_flash_decode_mtp.h5", f)
    with h5py.File(f, "r+") as h:
        edit(h[next(iter(h))])
    p = run_cli("check", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert tensor in p.stderr and "v4i_flash_decode_mtp" in p.stderr


def test_kit_capture_ascend_qli_roundtrip(repo_root, run_cli, tmp_path):
    _, attrs, t = load(repo_root / "golden" / "v4i_flash_decode_mtp.h5")
    k = int(attrs["sparse_count"])
    idx = ref.indexer_a3(t, k)
    f = tmp_path / "kit.h5"
    # As the engine holds them: fp16 tensors as float16, the key cache [nblk, bs, 1, D] int8, i32 metadata.
    dsa_dump.capture_ascend_qli(
        t["query"], t["key"], t["weights"].view(np.float16), t["query_dequant_scale"].view(np.float16),
        t["key_dequant_scale"].view(np.float16), idx, actual_seq_lengths_query=t["actual_seq_lengths_query"],
        actual_seq_lengths_key=t["actual_seq_lengths_key"], block_table=t["block_table"], sparse_count=k,
        layer=2, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    with pytest.raises(ValueError, match="quant modes"):
        dsa_dump.capture_ascend_qli(t["query"], t["key"], t["weights"], t["query_dequant_scale"], t["key_dequant_scale"], idx,
                                    actual_seq_lengths_query=t["actual_seq_lengths_query"],
                                    actual_seq_lengths_key=t["actual_seq_lengths_key"], block_table=t["block_table"],
                                    query_quant_mode=1, out=str(tmp_path / "x.h5"))


# ---- the vllm-cuda and ref-bf16 variants (reference.v4.indexer_float) -------------------------------------------

@pytest.mark.parametrize("name", ["v4i_vllm_cuda_fp8", "v4i_ref_bf16"])
def test_float_variant_models_pass(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    for order in ("forward", "backward"):
        f = tmp_path / f"{order}.h5"
        with_output(src, f, ref.indexer_float(t, attrs, order=order))
        p = run_cli("check", f, "--json", tmp_path / "r.json")
        assert p.returncode == 0, p.stdout + p.stderr
        assert json.loads((tmp_path / "r.json").read_text())["results"][0]["verdict"] in ("BITEXACT", "WITHIN_BOUND")


def test_vllm_cuda_accepts_the_torch_logits_fallback(repo_root, run_cli, tmp_path):
    # Where DeepGEMM is absent vLLM computes the logits with fp8_mqa_logits_torch (bf16 head scores): the band includes
    # the vllm-torch bound indexer.logits_ragged judges those logits by (engines/logits/torch_logits_core.hpp).
    src = repo_root / "golden" / "v4i_vllm_cuda_fp8.h5"
    _, attrs, t = load(src)
    for order in ("forward", "backward"):
        f = tmp_path / f"torch_{order}.h5"
        with_output(src, f, ref.indexer_float(t, attrs, order=order, logits="torch"))
        run_cli("check", f, check_rc=0)


@pytest.mark.parametrize("name,bug", [("v4i_vllm_cuda_fp8", "no_key_scale"), ("v4i_vllm_cuda_fp8", "relu_after"),
                                      ("v4i_ref_bf16", "relu_after")])
def test_float_variant_models_with_a_bug_fail(name, bug, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    _, attrs, t = load(src)
    f = tmp_path / "bug.h5"
    with_output(src, f, ref.indexer_float(t, attrs, bug=bug))
    p = run_cli("check", f)
    assert p.returncode == 1, p.stdout + p.stderr


@pytest.mark.parametrize("edit,needle", [
    (lambda g: g.attrs.__setitem__("variant", "vllm-cuda"), "e4m3fn with variant=vllm-cuda"),  # int8 codes
    (lambda g: g["inputs"].__delitem__("key_dequant_scale"), "key_dequant_scale"),
])
def test_variant_dtype_mismatch_is_exit_2(edit, needle, repo_root, run_cli, tmp_path):
    f = tmp_path / "bad.h5"
    shutil.copy(repo_root / "golden" / "v4i_flash_decode_mtp.h5", f)
    with h5py.File(f, "r+") as h:
        edit(h[next(iter(h))])
    p = run_cli("check", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stderr and "v4i_flash_decode_mtp" in p.stderr


def test_kit_capture_vllm_fused_cache_roundtrip(repo_root, run_cli, tmp_path):
    _, attrs, t = load(repo_root / "golden" / "v4i_vllm_cuda_fp8.h5")
    idx = ref.indexer_float(t, attrs)[:, 0, :]
    codes = t["key"].reshape(t["key"].shape[0], -1)                    # [nblk, bs * D] e4m3 bits
    scales = t["key_dequant_scale"].reshape(t["key"].shape[0], -1)      # [nblk, bs] fp32
    fused = np.concatenate([codes.view(np.uint8), scales.view(np.uint8)], axis=1)  # vLLM's per-block layout
    aq = t["actual_seq_lengths_query"]
    f = tmp_path / "kit.h5"
    dsa_dump.capture_vllm_v4_indexer(
        t["query"].view(ml_dtypes.float8_e4m3fn), fused, t["weights"], idx,
        query_start_loc=np.concatenate([[0], aq]).astype(np.int32), seq_lens=t["actual_seq_lengths_key"],
        block_table=t["block_table"], sparse_count=int(attrs["sparse_count"]), out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    with pytest.raises(ValueError, match="fused cache"):
        dsa_dump.capture_vllm_v4_indexer(t["query"].view(ml_dtypes.float8_e4m3fn), fused[:, :-1], t["weights"], idx,
                                         query_start_loc=np.concatenate([[0], aq]), seq_lens=t["actual_seq_lengths_key"],
                                         block_table=t["block_table"], out=str(tmp_path / "x.h5"))



@pytest.mark.parametrize("bug", [None, "values_doubled"])
def test_return_value_scores_judged_at_the_kernels_indices(bug, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "v4i_ties.h5"
    _, attrs, t = load(src)
    idx, vals = ref.indexer_a3(t, int(attrs["sparse_count"]), order="backward", values=True)
    if bug:
        idx, vals2 = ref.indexer_a3(t, int(attrs["sparse_count"]), order="backward", bug=bug, values=True)
        vals = vals2
    f = tmp_path / "v.h5"
    with_output(src, f, idx)
    with h5py.File(f, "r+") as h:
        h[next(iter(h))].create_dataset("outputs/sparse_values", data=vals).attrs["dtype"] = "float32"
    p = run_cli("check", f, "--json", tmp_path / "r.json")
    res = {r["tensor"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert res["sparse_indices"]["verdict"] in ("BITEXACT", "WITHIN_BOUND")
    if bug:
        assert p.returncode == 1 and res["sparse_values"]["verdict"] == "FAIL", p.stdout
    else:
        assert p.returncode == 0, p.stdout + p.stderr
        assert res["sparse_values"]["verdict"] in ("BITEXACT", "WITHIN_BOUND")


def test_kit_capture_ascend_qli_return_value(repo_root, run_cli, tmp_path):
    _, attrs, t = load(repo_root / "golden" / "v4i_prefill_chunked_short.h5")
    k = int(attrs["sparse_count"])
    idx, vals = ref.indexer_a3(t, k, values=True)
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_qli(
        t["query"], t["key"], t["weights"].view(np.float16), t["query_dequant_scale"].view(np.float16),
        t["key_dequant_scale"].view(np.float16), (idx, vals), actual_seq_lengths_query=t["actual_seq_lengths_query"],
        actual_seq_lengths_key=t["actual_seq_lengths_key"], block_table=t["block_table"], sparse_count=k,
        return_value=True, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sparse_values" in p.stdout
