"""indexer.npu_lightning (Ascend V3.2 npu_lightning_indexer and its context-parallel split) against the independent
numpy model of the A2/A3 kernel (ops-transformer lightning_indexer) in reference/indexer.py (npu_lightning): fp32 dots
of the bf16/fp16 q and k (numpy's own order), ReLU, fp32 multiply by the head weight, head sum in fp32 as 16 lanes
(lane r adds heads r, r+16, r+32, r+48) then a tree 8/4/2/1 -- also in a second tree order of the same depth --
top-k descending with ties to the lower index, -1 padded. The model's outputs must pass `check` on every committed
golden; the model with a bug must fail; a CP split whose second half got the first half's kv lengths fails when the
dump carries the rows' positions (with a note naming the disagreeing row), and passes unnoticed without them; bad
metadata is exit 2 naming the tensor."""
import json
import shutil

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import indexer as ref
from reference import numerics as num

GOLDENS = ["linpu_prefill_decode", "linpu_cp_split", "linpu_ties_fp16", "linpu_nonfinite"]


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return dict(g.attrs), {k: g["inputs"][k][()] for k in g["inputs"]}


def dtypes(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]["inputs"]
        return {"_dtype_query": g["query"].attrs.get("dtype", "float32"), "_dtype_weights": g["weights"].attrs.get("dtype", "float32")}


def with_output(src, dst, idx, edit=None):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        if "expected" in g:
            del g["expected"]
        g.create_dataset("outputs/sparse_indices", data=idx).attrs["dtype"] = "int32"
        if edit:
            edit(g)


def case(repo_root, name):
    src = repo_root / "golden" / f"{name}.h5"
    attrs, t = load(src)
    attrs.update(dtypes(src))
    return src, attrs, t


@pytest.mark.parametrize("name", GOLDENS)
def test_npu_model_passes_in_two_tree_orders(name, repo_root, run_cli, tmp_path):
    src, attrs, t = case(repo_root, name)
    for tree in ("a3", "other"):
        idx = ref.npu_lightning(t, attrs, tree, use_positions=True)
        f = tmp_path / f"{tree}.h5"
        with_output(src, f, idx)
        p = run_cli("check", f, "--json", tmp_path / "r.json")
        assert p.returncode == 0, p.stdout + p.stderr
        r = json.loads((tmp_path / "r.json").read_text())["results"][0]
        assert r["verdict"] in ("BITEXACT", "WITHIN_BOUND") and r["kind"] == "topk_set"
    with h5py.File(src, "r") as f:
        exp = f[next(iter(f))]["expected/sparse_indices"][()]
    assert ((exp == -1) == (idx == -1)).all()


def test_goldens_cover_selection_short_rows_and_ties(repo_root):
    _, attrs, t = case(repo_root, "linpu_prefill_decode")
    valid = (ref.npu_lightning(t, attrs)[:, 0, :] >= 0).sum(axis=1)
    assert (valid == 2048).any() and ((valid > 0) & (valid < 2048)).any()
    _, attrs, t = case(repo_root, "linpu_ties_fp16")
    q = num.as_f32(t["query"], "fp16")
    assert t["weights"].dtype == np.float32 and q.dtype == np.float32


@pytest.mark.parametrize("bug", ["visibility", "relu_after", "weights"])
def test_npu_model_with_a_bug_fails(bug, repo_root, run_cli, tmp_path):
    src, attrs, t = case(repo_root, "linpu_prefill_decode")
    f = tmp_path / "bug.h5"
    with_output(src, f, ref.npu_lightning(t, attrs, bug=bug))
    p = run_cli("check", f, "--json", tmp_path / "r.json")
    assert p.returncode == 1, p.stdout + p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["verdict"] in ("FAIL", "STRUCTURE")


def test_cp_split_with_mixed_metadata_fails_only_with_positions(repo_root, run_cli, tmp_path):
    src, attrs, t = case(repo_root, "linpu_cp_split")
    kv_prev = t["actual_seq_lengths_key"]
    idx = ref.npu_lightning(t, attrs, kv_next=kv_prev)  # the engine's bug: the second half gets the first half's kv lengths

    def mix(g):
        g["inputs/actual_seq_lengths_key_next"][...] = kv_prev
    f = tmp_path / "b45.h5"
    with_output(src, f, idx, mix)
    p = run_cli("check", "-v", f, "--json", tmp_path / "r.json")
    assert p.returncode == 1, p.stdout + p.stderr
    r = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert r["verdict"] in ("FAIL", "STRUCTURE")
    assert "B45" in p.stdout and "second CP half" in p.stdout and "inputs/positions" in p.stdout

    def mix_no_positions(g):
        mix(g)
        del g["inputs/positions"]
    f2 = tmp_path / "b45_blind.h5"
    with_output(src, f2, idx, mix_no_positions)
    p = run_cli("check", f2)
    assert p.returncode == 0, p.stdout + p.stderr  # without provenance the split is self-consistent


@pytest.mark.parametrize("edit,tensor", [
    (lambda g: g["inputs/actual_seq_lengths_query_next"].__setitem__(-1, 99), "actual_seq_lengths_query_next"),
    (lambda g: g.__delitem__("inputs/actual_seq_lengths_key_next"), "actual_seq_lengths_key_next"),
    (lambda g: g["inputs/positions"].__setitem__(0, 10**6), "positions"),
    (lambda g: g["inputs/block_table"].__setitem__((0, 0), -5), "block_table"),
])
def test_bad_metadata_is_exit_2(edit, tensor, repo_root, run_cli, tmp_path):
    f = tmp_path / "bad.h5"
    shutil.copy(repo_root / "golden" / "linpu_cp_split.h5", f)
    with h5py.File(f, "r+") as h:
        edit(h[next(iter(h))])
    p = run_cli("check", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert tensor in p.stderr and "linpu_cp_split" in p.stderr


def test_kit_capture_cp_pairs_roundtrip(repo_root, run_cli, tmp_path):
    _, attrs, t = case(repo_root, "linpu_cp_split")
    idx = ref.npu_lightning(t, attrs, use_positions=True)[:, 0, :]  # the op's [T, k] output
    T = idx.shape[0]
    h = (T + 1) // 2
    bf = lambda a: a.view(ml_dtypes.bfloat16)  # noqa: E731
    f = tmp_path / "kit.h5"
    dsa_dump.capture_ascend_li(
        bf(t["query"]), bf(t["key"]), bf(t["weights"]), (idx[:h], idx[h:]),
        actual_seq_lengths_query=(t["actual_seq_lengths_query"], t["actual_seq_lengths_query_next"]),
        actual_seq_lengths_key=(t["actual_seq_lengths_key"], t["actual_seq_lengths_key_next"]),
        block_table=t["block_table"], positions=t["positions"], layer=3, out=str(f))
    p = run_cli("check", f)
    assert p.returncode == 0, p.stdout + p.stderr
    with pytest.raises(TypeError, match="pairs"):
        dsa_dump.capture_ascend_li(bf(t["query"]), bf(t["key"]), bf(t["weights"]), idx,
                                   actual_seq_lengths_query=(t["actual_seq_lengths_query"], t["actual_seq_lengths_query_next"]),
                                   actual_seq_lengths_key=t["actual_seq_lengths_key"], block_table=t["block_table"],
                                   out=str(tmp_path / "x.h5"))
