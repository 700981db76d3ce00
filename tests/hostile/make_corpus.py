"""Builds the hostile-input corpus in tests/hostile/corpus/ (committed; rerun after changing a case here).

    python3 tests/hostile/make_corpus.py [OUT_DIR]

Each file is small and crafted with h5py (high- and low-level API) to hit one class of bad input: data stored
outside the file, unwritten data, impossible storage, non-native bit layouts, bad attrs, broken structure and value
rules. expected.json lists, per file, the command, the exit code and a substring the output must contain;
run_corpus.py checks them (also under ASan/UBSan in CI)."""
import json
import os
import shutil
import sys

import h5py
import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
EXPECT = {}


def path(name):
    return os.path.join(OUT, name)


def expect(name, rc, text, cmd="check"):
    EXPECT[name] = {"cmd": cmd, "rc": rc, "contains": text}


def case(f, name, stage):
    g = f.create_group(name)
    g.attrs["schema_version"] = np.int64(1)
    g.attrs["stage"] = stage
    return g


def topk(f, name="t", logits=None, lengths=None, k=2, indices=None, **attrs):
    g = case(f, name, "indexer.topk")
    g.attrs["k"] = np.int64(k)
    for a, v in attrs.items():
        g.attrs[a] = v
    lg = np.array(logits if logits is not None else [[4.0, 3.0, 2.0, 1.0]], np.float32)
    g.create_dataset("inputs/logits", data=lg)
    g.create_dataset("inputs/lengths", data=np.array(lengths if lengths is not None else [lg.shape[1]] * lg.shape[0], np.int32))
    if indices is not None:
        g.create_dataset("outputs/indices", data=np.array(indices, np.int32))
    return g


def quant(f, name="q", x=None, **attrs):
    g = case(f, name, "indexer.quant")
    for a, v in attrs.items():
        g.attrs[a] = v
    xx = np.array(x if x is not None else np.ones((2, 128)), np.float32)
    g.create_dataset("inputs/x", data=xx)
    return g


def ragged(f, name="r", S=2, H=8, D=32, N=4, ks=(0, 0), ke=(2, 4), **attrs):
    g = case(f, name, "indexer.logits_ragged")
    for a, v in attrs.items():
        g.attrs[a] = v
    for n, a in (("q", np.zeros((S, H, D), np.uint8)), ("kv", np.zeros((N, D), np.uint8))):
        d = g.create_dataset("inputs/" + n, data=a)
        d.attrs["dtype"] = "fp8_e4m3fn"
    g.create_dataset("inputs/kv_scale", data=np.ones(N, np.float32))
    g.create_dataset("inputs/weights", data=np.ones((S, H), np.float32))
    g.create_dataset("inputs/ks", data=np.array(ks, np.int32))
    g.create_dataset("inputs/ke", data=np.array(ke, np.int32))
    return g


def paged(f, name="p", B=1, nn=1, H=8, D=32, P=2, ctx=(10,), maxctx=64, bt=((0, 1),), **attrs):
    g = case(f, name, "indexer.logits_paged")
    g.attrs["max_context_len"] = np.int64(maxctx)
    for a, v in attrs.items():
        g.attrs[a] = v
    d = g.create_dataset("inputs/q", data=np.zeros((B, nn, H, D), np.uint8))
    d.attrs["dtype"] = "fp8_e4m3fn"
    g.create_dataset("inputs/kv_cache", data=np.zeros((P, 64, 1, D + 4), np.uint8))
    g.create_dataset("inputs/weights", data=np.ones((B * nn, H), np.float32))
    g.create_dataset("inputs/context_lens", data=np.array(ctx, np.int32))
    g.create_dataset("inputs/block_table", data=np.array(bt, np.int32))
    return g


def new(name):
    return h5py.File(path(name), "w")


def v4sa(f, name="a", T=1, N=1, D=8, bs=16, nb=1, mb=1, kv=(1,), cu=None, idx=None, ratio=1, **attrs):
    """An attn.v4_sparse case: zero bf16 q / caches, every table entry block 0."""
    g = case(f, name, "attn.v4_sparse")
    g.attrs["cmp_ratio"] = np.int64(ratio)
    for a, v in attrs.items():
        g.attrs[a] = v
    B = len(kv)
    for n, shp in (("q", (T, N, D)), ("ori_kv", (nb, bs, 1, D))) + ((("cmp_kv", (nb, bs, 1, D)),) if ratio > 1 else ()):
        d = g.create_dataset("inputs/" + n, data=np.zeros(shp, np.uint16), compression="gzip")
        d.attrs["dtype"] = "bf16"
    g.create_dataset("inputs/ori_block_table", data=np.zeros((B, mb), np.int32), compression="gzip")
    if ratio > 1:
        g.create_dataset("inputs/cmp_block_table", data=np.zeros((B, mb), np.int32), compression="gzip")
    if idx is not None:
        g.create_dataset("inputs/cmp_sparse_indices", data=np.array(idx, np.int32))
    g.create_dataset("inputs/cu_seqlens_q", data=np.array(cu if cu is not None else [0, T], np.int32))
    g.create_dataset("inputs/seqused_kv", data=np.array(kv, np.int32))
    return g


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    # ---- data stored outside the file --------------------------------------------------------------------
    with new("other.h5") as f:  # the target of the links below (itself valid)
        topk(f, "t", indices=[[0, 1]])
    expect("other.h5", 0, "1 passed, 0 failed")
    with new("other_raw.h5") as f:  # a plain HDF5 file, not a dump
        f.create_dataset("raw", data=np.arange(4, dtype=np.float32))
    expect("other_raw.h5", 2, "case groups only at the top level")
    with new("external_link_case.h5") as f:
        f["t"] = h5py.ExternalLink("other.h5", "/t")
    expect("external_link_case.h5", 2, "an external link to other.h5:/t")
    with new("external_link_tensor.h5") as f:
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/logits"]
        g["inputs/logits"] = h5py.ExternalLink("other.h5", "/t/inputs/logits")
    expect("external_link_tensor.h5", 2, "inputs/logits: expected a dataset stored in this file, found an external link")
    with open(path("raw.bin"), "wb") as r:
        r.write(np.array([[4, 3, 2, 1]], np.float32).tobytes())
    with new("external_storage.h5") as f:
        g = case(f, "t", "indexer.topk")
        g.attrs["k"] = np.int64(2)
        g.create_dataset("inputs/logits", shape=(1, 4), dtype=np.float32, external=[("raw.bin", 0, 16)])
        g.create_dataset("inputs/lengths", data=np.array([4], np.int32))
    expect("external_storage.h5", 2, "external raw-data storage")
    with new("vds_self.h5") as f:
        g = topk(f, "t")
        layout = h5py.VirtualLayout(shape=(1, 4), dtype=np.float32)
        layout[:] = h5py.VirtualSource(path("vds_self.h5"), "/t/inputs/logits", shape=(1, 4))
        del g["inputs/logits"]
        g.create_virtual_dataset("inputs/logits", layout)
    expect("vds_self.h5", 2, "a virtual dataset (VDS")
    with new("vds_other.h5") as f:
        g = topk(f, "t")
        layout = h5py.VirtualLayout(shape=(4,), dtype=np.float32)
        layout[:] = h5py.VirtualSource("other_raw.h5", "/raw", shape=(4,))
        g.create_virtual_dataset("outputs/indices", layout)
    expect("vds_other.h5", 2, "a virtual dataset (VDS")
    with new("soft_link_dangling.h5") as f:
        g = topk(f, "t")
        g["outputs/indices"] = h5py.SoftLink("/nowhere")
    expect("soft_link_dangling.h5", 2, "a dangling soft link")
    with new("soft_link_inside.h5") as f:  # allowed: a link to data of this file
        f.create_dataset("shared_logits", data=np.array([[4.0, 3.0, 2.0, 1.0]], np.float32))
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/logits"]
        g["inputs/logits"] = h5py.SoftLink("/shared_logits")
        h = case(f, "u", "indexer.topk")
        h.attrs["k"] = np.int64(2)
        h["inputs"] = h5py.SoftLink("/t/inputs")
        h.create_dataset("outputs/indices", data=np.array([[1, 0]], np.int32))
    expect("soft_link_inside.h5", 2, "case groups only at the top level")  # the shared dataset sits at the top
    with new("soft_link_loop.h5") as f:
        g = topk(f, "t", indices=[[0, 1]])
        g["outputs/loop"] = h5py.SoftLink("/t")
    expect("soft_link_loop.h5", 2, "outputs/loop: expected a dataset, found a group or other object")

    # ---- unwritten / impossible data -----------------------------------------------------------------------
    with new("unwritten_huge.h5") as f:
        g = case(f, "q", "indexer.quant")
        g.create_dataset("inputs/x", shape=(1 << 20, 1024), dtype=np.float32)
    expect("unwritten_huge.h5", 2, "never written")
    with new("partially_written.h5") as f:
        g = case(f, "q", "indexer.quant")
        d = g.create_dataset("inputs/x", shape=(64, 128), dtype=np.float32, chunks=(8, 128))
        d[0:8] = 1.0
    expect("partially_written.h5", 2, "1 of 8 chunks were written")
    with new("huge_declared_compressed.h5") as f:
        g = case(f, "q", "indexer.quant")
        d = g.create_dataset("inputs/x", shape=(1 << 16, 1 << 14), dtype=np.float32, chunks=(1 << 12, 1 << 8),
                             compression="gzip")
        d[0:1 << 12, 0:1 << 8] = 0.0
    expect("huge_declared_compressed.h5", 2, "expected data stored in this file")
    with new("rank9.h5") as f:
        g = case(f, "q", "indexer.quant")
        g.create_dataset("inputs/x", data=np.zeros((1,) * 9, np.float32))
    expect("rank9.h5", 2, "expected rank 0..8, found rank 9")

    # ---- bit layouts and types -------------------------------------------------------------------------------
    with new("int_bit_offset.h5") as f:
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/lengths"]
        tid = h5py.h5t.STD_I32LE.copy()
        tid.set_offset(8)
        tid.set_precision(24)
        sp = h5py.h5s.create_simple((1,))
        ds = h5py.h5d.create(g["inputs"].id, b"lengths", tid, sp)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([4], np.int32))
    expect("int_bit_offset.h5", 2, "non-native bit layout (offset 8")
    with new("non_ieee_float.h5") as f:
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/logits"]
        tid = h5py.h5t.IEEE_F32LE.copy()
        tid.set_ebias(100)
        sp = h5py.h5s.create_simple((1, 4))
        ds = h5py.h5d.create(g["inputs"].id, b"logits", tid, sp)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([[4, 3, 2, 1]], np.float32))
    expect("non_ieee_float.h5", 2, "a non-IEEE 32-bit float layout")
    with new("big_endian_ok.h5") as f:
        g = case(f, "t", "indexer.topk")
        g.attrs["k"] = np.int64(2)
        g.create_dataset("inputs/logits", data=np.array([[4.0, 3.0, 2.0, 1.0]], ">f4"))
        g.create_dataset("inputs/lengths", data=np.array([4], ">i4"))
        g.create_dataset("outputs/indices", data=np.array([[0, 1]], ">i4"))
    expect("big_endian_ok.h5", 0, "BITEXACT")
    with new("compound_dataset.h5") as f:
        g = topk(f, "t")
        g.create_dataset("outputs/indices", data=np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]))
    expect("compound_dataset.h5", 2, "outputs/indices: expected a supported storage type")
    with new("opaque_without_dtype.h5") as f:
        g = topk(f, "t")
        g.create_dataset("outputs/indices", data=np.void(b"\x00" * 8))
    expect("opaque_without_dtype.h5", 2, "outputs/indices")
    with new("dtype_attr_garbage.h5") as f:
        g = quant(f)
        g["inputs/x"].attrs["dtype"] = "float7"
    expect("dtype_attr_garbage.h5", 2, "found 'float7'")
    with new("unavailable_filter.h5") as f:
        g = case(f, "q", "indexer.quant")
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2, 128))
        dcpl.set_filter(32111, h5py.h5z.FLAG_OPTIONAL, ())
        sp = h5py.h5s.create_simple((2, 128))
        ds = h5py.h5d.create(g.create_group("inputs").id, b"x", h5py.h5t.IEEE_F32LE, sp, dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ones((2, 128), np.float32))
    expect("unavailable_filter.h5", 2, "filter 32111")

    # ---- attrs -----------------------------------------------------------------------------------------------
    with new("empty_stage.h5") as f:
        g = quant(f)
        g.attrs["stage"] = ""
    expect("empty_stage.h5", 2, "attr stage: expected a non-empty string naming the stage", cmd="inspect")
    with new("stage_not_string.h5") as f:
        g = quant(f)
        g.attrs["stage"] = np.int64(3)
    expect("stage_not_string.h5", 2, "attr stage")
    with new("schema_version_2.h5") as f:
        g = quant(f)
        g.attrs["schema_version"] = np.int64(2)
    expect("schema_version_2.h5", 2, "this dsa-check reads schema v1")
    with new("embedded_nul.h5") as f:
        g = quant(f)
        g.attrs.create("scale_fmt", np.bytes_(b"ue8m0\x00fp32_div"), dtype="S15")
    expect("embedded_nul.h5", 2, "a string with an embedded NUL byte")
    with new("attr_rank2.h5") as f:
        g = quant(f)
        g.attrs["block_size"] = np.ones((2, 2), np.int64)
    expect("attr_rank2.h5", 2, "attr block_size")
    with new("attr_compound.h5") as f:
        g = quant(f)
        g.attrs["block_size"] = np.zeros(1, dtype=[("a", "i4"), ("b", "f4")])[0]
    expect("attr_compound.h5", 2, "attr block_size")
    with new("kernel_misspelt.h5") as f:
        ragged(f, kernel="deepgemm_sm90")
    expect("kernel_misspelt.h5", 2, "attr kernel: expected a profile serving indexer.logits_ragged (deepgemm-sm90, vllm-torch), found 'deepgemm_sm90' (unknown profile)")
    with new("attr_typo.h5") as f:
        quant(f, scale_fmtt="fp32_div", **{"meta.note": "user metadata is fine"})
    expect("attr_typo.h5", 2, "attr scale_fmtt: expected an attr of stage indexer.quant (did you mean scale_fmt?)")
    with new("attr_longer_name.h5") as f:  # not a near miss by edit distance: one name inside the other
        quant(f, scale_format="fp32_div")
    expect("attr_longer_name.h5", 2, "attr scale_format: expected an attr of stage indexer.quant (did you mean scale_fmt?)")
    with new("attr_unread.h5") as f:  # far from every attr: still an error, listing the stage's attrs
        quant(f, engine="vllm")
    expect("attr_unread.h5", 2, "attr engine: expected an attr of stage indexer.quant: block_size, scale_fmt")
    with new("summary_counts_problems.h5") as f:
        quant(f, "bad", scale_fmt="ue9m0")
    expect("summary_counts_problems.h5", 2, "1 input problem(s) reported on stderr: the cases they name were not checked")
    with new("unknown_stage.h5") as f:
        case(f, "z", "indexer.nope").create_dataset("inputs/x", data=np.zeros(2, np.float32))
    expect("unknown_stage.h5", 2, "attr stage: expected one of indexer.quant")

    # ---- structure -------------------------------------------------------------------------------------------
    with new("dataset_at_top.h5") as f:
        f.create_dataset("x", data=np.zeros(2, np.float32))
    expect("dataset_at_top.h5", 2, "case groups only at the top level")
    with new("missing_inputs.h5") as f:
        case(f, "q", "indexer.quant")
    expect("missing_inputs.h5", 2, "inputs/: expected a group of input tensors")
    with new("extra_group.h5") as f:
        g = quant(f)
        g.create_group("junk")
    expect("extra_group.h5", 2, "only inputs/, outputs/, expected/ in a case")
    with new("group_as_tensor.h5") as f:
        g = quant(f)
        g.create_group("outputs/y")
    expect("group_as_tensor.h5", 2, "outputs/y: expected a dataset")
    with new("empty_file.h5") as f:
        pass
    expect("empty_file.h5", 2, "an empty file")
    with open(path("not_hdf5.h5"), "w") as t:
        t.write("not an hdf5 file\n")
    expect("not_hdf5.h5", 2, "not HDF5")
    open(path("zero_bytes.h5"), "wb").close()
    expect("zero_bytes.h5", 2, "not HDF5")
    with new("valid_for_truncation.h5") as f:
        topk(f, "t", logits=np.arange(4096, dtype=np.float32).reshape(4, 1024), k=8)
    data = open(path("valid_for_truncation.h5"), "rb").read()
    os.remove(path("valid_for_truncation.h5"))
    with open(path("truncated.h5"), "wb") as t:
        t.write(data[: len(data) // 2])
    expect("truncated.h5", 2, "truncated or corrupt")

    # ---- value rules -----------------------------------------------------------------------------------------
    with new("negative_context_lens.h5") as f:
        paged(f, ctx=(-5,))
    expect("negative_context_lens.h5", 2, "inputs/context_lens: expected >= 0, found entry 0: -5")
    with new("max_context_len_too_small.h5") as f:
        paged(f, ctx=(100,), maxctx=64)
    expect("max_context_len_too_small.h5", 2, "attr max_context_len: expected >= every request's context length")
    with new("max_seqlen_k_too_small.h5") as f:
        ragged(f, ks=(0, 0), ke=(4, 4), clean_logits=np.int64(0), max_seqlen_k=np.int64(2))
    expect("max_seqlen_k_too_small.h5", 2, "attr max_seqlen_k: expected >= every row's ke - ks")
    with new("ks_after_ke.h5") as f:
        ragged(f, ks=(3, 0), ke=(1, 4))
    expect("ks_after_ke.h5", 2, "row 0: ks=3 ke=1")
    with new("nan_amax_eps.h5") as f:
        quant(f, amax_eps=float("nan"))
    expect("nan_amax_eps.h5", 2, "attr amax_eps: expected a finite number >= 0, found nan")
    with new("negative_amax_eps.h5") as f:
        quant(f, amax_eps=-1e-4)
    expect("negative_amax_eps.h5", 2, "attr amax_eps: expected a finite number >= 0")
    with new("int64_min_position.h5") as f:
        g = case(f, "p", "indexer.prolog")
        g.attrs["hadamard"] = np.int64(0)
        g.create_dataset("inputs/q", data=np.zeros((1, 1, 64), np.uint16)).attrs["dtype"] = "bf16"
        g.create_dataset("inputs/k", data=np.zeros((1, 64), np.uint16)).attrs["dtype"] = "bf16"
        g.create_dataset("inputs/w", data=np.ones((1, 1), np.float32))
        g.create_dataset("inputs/ln_weight", data=np.ones(64, np.float32))
        g.create_dataset("inputs/ln_bias", data=np.zeros(64, np.float32))
        g.create_dataset("inputs/positions", data=np.array([np.iinfo(np.int64).min], np.int64))
    expect("int64_min_position.h5", 2, "inputs/positions: expected positions in [0, 2^31)")
    with new("page_table_negative.h5") as f:
        paged(f, ctx=(100,), maxctx=128, bt=((0, -1),))
    expect("page_table_negative.h5", 2, "inputs/block_table: expected page ids in [0, 2)")
    with new("duplicate_slots.h5") as f:
        g = case(f, "k", "indexer.kcache_store")
        g.create_dataset("inputs/k_fp8", data=np.zeros((2, 32), np.uint8)).attrs["dtype"] = "fp8_e4m3fn"
        g.create_dataset("inputs/k_scale", data=np.ones(2, np.float32))
        g.create_dataset("inputs/slot_mapping", data=np.array([5, 5], np.int64))
        g.create_dataset("inputs/kv_cache_in", data=np.zeros((1, 64, 1, 36), np.uint8))
    expect("duplicate_slots.h5", 2, "tokens 0 and 1 both store into slot 5")
    with new("topk_all_nan_row.h5") as f:
        topk(f, "t", logits=[[np.nan] * 4, [4.0, 3.0, 2.0, 1.0]], k=2, indices=[[2, 3], [0, 1]])
    expect("topk_all_nan_row.h5", 0, "1 row(s) whose every reference score is NaN")
    with new("topk_k_zero.h5") as f:
        topk(f, "t", k=0, indices=[[0, 1]])
    expect("topk_k_zero.h5", 2, "attr k: expected > 0, found 0")

    # ---- sparse attention and the V4 compressor: values that would divide by zero, loop for ever or allocate -----
    def v4(f, name="c", coff=2, r=4, bs=8, start=(0,), q=(4,), T=None, D=8, H=4):
        g = case(f, name, "v4.compressor")
        g.attrs["cmp_ratio"] = np.int64(r)
        g.attrs["coff"] = np.int64(coff)
        g.attrs["rope_head_dim"] = np.int64(4)
        T = sum(q) if T is None else T
        C2 = max(coff, 1) * D
        for n, shp in (("x", (T, H)), ("wkv", (C2, H)), ("wgate", (C2, H))):
            d = g.create_dataset("inputs/" + n, data=np.zeros(shp, np.uint16))
            d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/ape", data=np.zeros((r, C2), np.float32))
        d = g.create_dataset("inputs/norm_weight", data=np.zeros(D, np.uint16))
        d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/rope_sin", data=np.zeros((2, 4), np.float32))
        g.create_dataset("inputs/rope_cos", data=np.ones((2, 4), np.float32))
        g.create_dataset("inputs/state_cache_in", data=np.zeros((3, bs, 2 * C2), np.float32))
        g.create_dataset("inputs/state_block_table", data=np.ones((len(start), 2), np.int32))
        g.create_dataset("inputs/cu_seqlens", data=np.concatenate([[0], np.cumsum(q)]).astype(np.int32))
        g.create_dataset("inputs/start_pos", data=np.array(start, np.int64))
        return g
    with new("v4_coff_zero.h5") as f:
        v4(f, coff=0)
    expect("v4_coff_zero.h5", 2, "attr coff: expected 1 or 2, found 0")
    with new("v4_cmp_ratio_zero.h5") as f:
        v4(f, r=0)
    expect("v4_cmp_ratio_zero.h5", 2, "inputs/ape: expected a non-empty tensor")  # r = 0 rows of ape
    with new("v4_state_block_size_zero.h5") as f:
        v4(f, bs=0)
    expect("v4_state_block_size_zero.h5", 2, "inputs/state_cache_in: expected a non-empty tensor")
    with new("v4_start_pos_huge.h5") as f:  # a loop over positions up to 2^62 would hang
        v4(f, start=(1 << 62,))
    expect("v4_start_pos_huge.h5", 2, "inputs/start_pos: expected <= 2^40")
    with new("mla_decode_index_past_cache.h5") as f:
        g = case(f, "d", "attn.sparse_mla_decode")
        d = g.create_dataset("inputs/q", data=np.zeros((1, 1, 1, 576), np.uint16))
        d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/k_cache", data=np.zeros((1, 64, 1, 656), np.uint8))
        g.create_dataset("inputs/indices", data=np.array([[[3] * 63 + [64]]], np.int32))
    expect("mla_decode_index_past_cache.h5", 2, "position 63: 64")
    with new("mla_prefill_huge_topk.h5") as f:  # 4 M copies of key 0 in one row: a multi-GB workspace per thread
        g = case(f, "p", "attn.sparse_mla_prefill")
        for n, shp in (("q", (1, 1, 512)), ("kv", (1, 1, 512))):
            d = g.create_dataset("inputs/" + n, data=np.zeros(shp, np.uint16))
            d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/indices", data=np.zeros((1, 1, 1 << 22), np.int32), chunks=(1, 1, 1 << 18), compression="gzip")
    expect("mla_prefill_huge_topk.h5", 2, "a reference within the memory budget")

    with new("v4sa_window_huge.h5") as f:  # a 2^20-token window over a table aliasing one block: hours of work
        v4sa(f, T=2000, N=4, bs=1024, mb=1024, kv=(1 << 20,), ori_win_left=np.int64(1 << 20))
    expect("v4sa_window_huge.h5", 2, "a reference within the compute budget")
    with new("v4sa_list_future_entry.h5") as f:  # position 7 sees entries 0, 1 only
        v4sa(f, ratio=4, kv=(8,), idx=[[[0, 2, -1, -1]]])
    expect("v4sa_list_future_entry.h5", 2, "slot 1: 2")
    with new("v4sa_list_hole.h5") as f:  # -5 before the first -1
        v4sa(f, ratio=4, kv=(12,), idx=[[[0, -5, 1, -1]]])
    expect("v4sa_list_hole.h5", 2, "before the first -1")
    with new("v4sa_cu_decreasing.h5") as f:
        v4sa(f, T=2, kv=(4, 4), cu=[0, 2, 1])
    expect("v4sa_cu_decreasing.h5", 2, "inputs/cu_seqlens_q")
    with new("v4sa_table_short.h5") as f:  # 40 tokens need 3 blocks of 16, the table has 1 column
        v4sa(f, kv=(40,))
    expect("v4sa_table_short.h5", 2, "at least 3 columns")

    with new("v4out_groups_not_dividing.h5") as f:  # 3 groups over 4 heads
        g = case(f, "o", "attn.v4_out")
        g.attrs["o_groups"] = np.int64(3)
        for n, shp in (("o", (2, 4, 64)), ("wo_a", (6, 64)), ("wo_b", (8, 6))):
            d = g.create_dataset("inputs/" + n, data=np.zeros(shp, np.uint16))
            d.attrs["dtype"] = "bf16"
        for n in ("cos", "sin"):
            g.create_dataset("inputs/" + n, data=np.ones((2, 64), np.float32))
    expect("v4out_groups_not_dividing.h5", 2, "attr o_groups: expected a divisor of the 4 heads")
    with new("model1_record_mismatch.h5") as f:  # layout model1_fp8_584 over a 656-byte cache
        g = case(f, "d", "attn.sparse_mla_decode")
        g.attrs["layout"] = "model1_fp8_584"
        d = g.create_dataset("inputs/q", data=np.zeros((1, 1, 1, 512), np.uint16))
        d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/k_cache", data=np.zeros((1, 2, 1, 656), np.uint8))
        g.create_dataset("inputs/indices", data=np.array([[[0, 1, -1, -1]]], np.int32))
    expect("model1_record_mismatch.h5", 2, "inputs/k_cache: expected 584-byte records")
    with new("model1_extra_past_cache.h5") as f:  # an extra-scope slot past its 2-token cache
        g = case(f, "d", "attn.sparse_mla_decode")
        g.attrs["layout"] = "model1_fp8_584"
        d = g.create_dataset("inputs/q", data=np.zeros((1, 1, 1, 512), np.uint16))
        d.attrs["dtype"] = "bf16"
        g.create_dataset("inputs/k_cache", data=np.zeros((1, 2, 1, 584), np.uint8))
        g.create_dataset("inputs/indices", data=np.array([[[0, 1, -1, -1]]], np.int32))
        g.create_dataset("inputs/extra_k_cache", data=np.zeros((1, 2, 1, 584), np.uint8))
        g.create_dataset("inputs/extra_indices_in_kvcache", data=np.array([[[1, 2]]], np.int32))
    expect("model1_extra_past_cache.h5", 2, "inputs/extra_indices_in_kvcache")

    # ---- widths only an attr gives (no stored tensor bounds them): the reference must fit the memory budget --------
    with new("fused_huge_width.h5") as f:  # a fused indexer's logits never exist in the file
        g = paged(f, "u", maxctx=1 << 40)
        g.attrs["stage"] = "indexer.fused"
        g.attrs["k"] = np.int64(4)
        g.create_dataset("outputs/indices", data=np.array([[0, 1, 2, 3]], np.int32))
    expect("fused_huge_width.h5", 2, "attr max_context_len: expected a reference within the memory budget")
    with new("paged_inputs_only_huge_width.h5") as f:  # inputs captured for `expect`: no logits tensor anywhere
        paged(f, "w", maxctx=1 << 40)
    expect("paged_inputs_only_huge_width.h5", 2, "attr max_context_len: expected a reference within the memory budget", cmd="validate")
    with new("ragged_inputs_only_huge_width.h5") as f:
        ragged(f, "w", max_seqlen_k=np.int64(1 << 40), clean_logits=np.int64(0))
    expect("ragged_inputs_only_huge_width.h5", 2, "attr max_seqlen_k: expected a reference within the memory budget", cmd="validate")

    # ---- layer links (one case's input taken from another's output) ------------------------------------------
    with new("link_cycle.h5") as f:  # a's input is b's output and b's is a's: no pipeline
        a = topk(f, "a", indices=[[0, 1]])
        b = topk(f, "b", indices=[[0, 1]])
        del a["inputs/lengths"], b["inputs/lengths"]
        f["a/inputs/lengths"] = f["b/outputs/indices"]
        f["b/inputs/lengths"] = f["a/outputs/indices"]
    expect("link_cycle.h5", 2, "a cycle of links: ")
    with new("link_attr_not_string.h5") as f:
        topk(f, "t", indices=[[0, 1]]).attrs["from:logits"] = np.int64(3)
    expect("link_attr_not_string.h5", 2, "attr from:logits: expected a string 'CASE/outputs/TENSOR'")
    with new("link_attr_ghost_case.h5") as f:  # the input exists only through the link, to a case that does not
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/logits"]
        g.attrs["from:logits"] = "ghost/outputs/logits"
    expect("link_attr_ghost_case.h5", 2, "expected a case of this file (t), found 'ghost'")
    with new("link_attr_own_output.h5") as f:
        topk(f, "t", indices=[[0, 1]]).attrs["from:lengths"] = "t/outputs/indices"
    expect("link_attr_own_output.h5", 2, "a case's input cannot be its own output")
    with new("link_attr_path_escape.h5") as f:
        topk(f, "t", indices=[[0, 1]]).attrs["from:logits"] = "../../other.h5/outputs/logits"
    expect("link_attr_path_escape.h5", 2, "expected 'CASE/outputs/TENSOR' or 'CASE/expected/TENSOR'")
    with new("link_attr_inputs_group.h5") as f:  # a source must be an output, not another case's input
        topk(f, "s", indices=[[0, 1]])
        g = topk(f, "t", indices=[[0, 1]])
        del g["inputs/logits"]
        g.attrs["from:logits"] = "s/inputs/logits"
    expect("link_attr_inputs_group.h5", 2, "expected a source in outputs/ or expected/ of another case")
    with new("link_attr_wrong_bytes.h5") as f:  # the glue between kernels changed the data
        topk(f, "s", indices=[[0, 1]])
        topk(f, "t", logits=[[1.0, 2.0, 3.0, 4.0]], indices=[[3, 2]]).attrs["from:logits"] = "s/inputs/logits"
        f["t"].attrs["from:lengths"] = "s/outputs/indices"
    expect("link_attr_wrong_bytes.h5", 2, "expected inputs/lengths holding the bytes of s/outputs/indices (int32, 2 elements), found int32, 1 elements")

    # ---- names -------------------------------------------------------------------------------------------------
    with new("control_chars_name.h5") as f:
        topk(f, "x\nerror: forged", indices=[[0, 1]])
    expect("control_chars_name.h5", 0, "x\\x0aerror: forged/outputs/indices")
    with new("latin1_name.h5") as f:
        topk(f, "ok", indices=[[0, 1]])
        f.move("ok", b"caf\xe9")
    expect("latin1_name.h5", 0, "caf\\xe9/outputs/indices")

    with open(os.path.join(OUT, "expected.json"), "w") as e:
        json.dump(EXPECT, e, indent=1, sort_keys=True)
        e.write("\n")
    print(f"{len(EXPECT)} files in {OUT}")


if __name__ == "__main__":
    main()
