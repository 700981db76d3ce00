#!/usr/bin/env python3
"""Convert FlashMLA SM90 sparse-attention captures (one directory per case: numpy .npy inputs and outputs, case.json,
meta.txt; the capture tool of issue #39, run on an H100 / H200) into schema-v1 cases that `dsa-check check` judges.

    scripts/convert_flashmla_sm90.py OUT.h5 CASE_DIR[:ROWS] [CASE_DIR[:ROWS] ...] [--provenance KEY=VALUE ...]

ROWS (prefill only, e.g. `:0,7`) keeps those query rows and only the kv rows they index (indices renumbered, invalid
ones kept invalid): the kernel computes every query row alone from its indexed rows, so a cut case holds the same
output bits at a fraction of the size (the acceptance file tests/data/flashmla_sm90.h5 is cut this way).

prefill cases (flash_mla_sparse_fwd)  -> attn.sparse_mla_prefill: q, kv, indices [, attn_sink, topk_length] ->
                                         out, max_logits, lse (natural log, FlashMLA @082094b and later);
decode cases (flash_mla_with_kvcache) -> attn.sparse_mla_decode: q, k_cache (the padded page pool re-packed to
                                         [blocks, page, 1, record]), indices [, attn_sink, topk_length, extra scope] ->
                                         out, lse (the kernel's [b, s_q, h_q] buffer transposed to the API's [b, h_q, s_q]);
                                         attr num_sms = the SMs FlashMLA scheduled for (its split-KV schedule).
Every case carries attr kernel=flashmla-sm90 and its provenance (meta.txt: GPU, driver, kernel instance; --provenance
pairs: source commits, build flags). The output is written to a temp file and renamed. Exit 0 on success, 2 on bad
input."""
import json
import os
import sys

import h5py
import numpy as np

LAYOUT = {576: ("mla_fp8_656", 656), 512: ("model1_fp8_584", 584)}


def _ds(g, name, data, dtype):
    d = g.create_dataset(name, data=data, compression="gzip", compression_opts=9, shuffle=True)
    d.attrs["dtype"] = dtype
    return d


def _load(d, name, dtype=None, required=True):
    p = os.path.join(d, name + ".npy")
    if not os.path.isfile(p):
        if required:
            raise ValueError(f"{d}: {name}.npy: expected a file, found none")
        return None
    a = np.load(p, allow_pickle=False)
    if dtype is not None and a.dtype != np.dtype(dtype):
        raise ValueError(f"{d}: {name}.npy: expected {np.dtype(dtype).name}, found {a.dtype.name}")
    return a


def _meta(d):
    m = {}
    with open(os.path.join(d, "meta.txt")) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            if k:
                m[k] = v
    return m


def _pool(kc, page, rec, name):
    """[blocks, stride] bytes of a padded page pool -> [blocks, page, 1, rec] (the first page*rec bytes of each block)."""
    if kc.ndim != 2 or kc.shape[1] < page * rec:
        raise ValueError(f"{name}: expected [blocks, >= {page * rec}] bytes, found {list(kc.shape)}")
    return np.ascontiguousarray(kc[:, :page * rec]).reshape(kc.shape[0], page, 1, rec)


def _cut_prefill(q, kv, idx, rows, extra):
    """Query rows `rows` and the kv rows they index (renumbered in ascending order); invalid indices (< 0 or >= s_kv,
    or past the row's topk_length) become -1 (the kernel masks them alike)."""
    idx = idx[rows]
    s_kv = kv.shape[0]
    valid = (idx >= 0) & (idx < s_kv)
    if "topk_length" in extra:  # positions past a row's topk_length are masked like invalid ones
        valid &= np.arange(idx.shape[-1])[None, None, :] < extra["topk_length"][rows][:, None, None]
    used = np.unique(idx[valid])
    remap = np.full(s_kv, -1, np.int64)
    remap[used] = np.arange(len(used))
    new = np.where(valid, remap[np.where(valid, idx, 0)], -1).astype(np.int32)
    return q[rows], kv[used], new, {k: v[rows] for k, v in extra.items()}


def convert_case(dst, d, prov, rows=None):
    with open(os.path.join(d, "case.json")) as f:
        cj = json.load(f)
    meta = _meta(d)
    if meta.get("status") != "ok" or meta.get("deterministic") != "1":
        raise ValueError(f"{d}: the capture did not finish deterministically (meta.txt status/deterministic)")
    name, mode, dqk = cj["name"], cj["mode"], int(cj["d_qk"])
    g = dst.create_group(name)
    g.attrs.update({"schema_version": np.int64(1), "kernel": "flashmla-sm90", "softmax_scale": float(cj["sm_scale"])})
    for k in ("device", "driver", "runtime", "kernel", "num_sms_used"):
        if k in meta:
            g.attrs["meta.capture_" + k] = meta[k]
    for k, v in prov.items():
        g.attrs["meta." + k] = v
    gi, go = g.create_group("inputs"), g.create_group("outputs")
    sink = _load(d, "attn_sink", np.float32, required=False)
    if sink is not None and cj.get("sink"):
        _ds(gi, "attn_sink", sink, "float32")
    if mode == "prefill":
        g.attrs["stage"] = "attn.sparse_mla_prefill"
        g.attrs["lse_base"] = "e"
        q, kv, idx = _load(d, "q", np.uint16), _load(d, "kv", np.uint16), _load(d, "indices", np.int32)
        per_row = {"out": _load(d, "out", np.uint16), "max_logits": _load(d, "max_logits", np.float32), "lse": _load(d, "lse", np.float32)}
        tl = _load(d, "topk_length", np.int32, required=False)
        if tl is not None:
            per_row["topk_length"] = tl
        if rows is not None:
            if max(rows) >= q.shape[0]:
                raise ValueError(f"{d}: row {max(rows)} of {q.shape[0]} query rows")
            q, kv, idx, per_row = _cut_prefill(q, kv, idx, rows, per_row)
            g.attrs["meta.cut_rows"] = ",".join(map(str, rows))
        _ds(gi, "q", q, "bf16")
        _ds(gi, "kv", kv, "bf16")
        _ds(gi, "indices", idx, "int32")
        if tl is not None:
            _ds(gi, "topk_length", per_row["topk_length"], "int32")
        _ds(go, "out", per_row["out"], "bf16")
        _ds(go, "max_logits", per_row["max_logits"], "float32")
        _ds(go, "lse", per_row["lse"], "float32")
    elif mode == "decode":
        if rows is not None:
            raise ValueError(f"{d}: ROWS applies to prefill cases only")
        g.attrs["stage"] = "attn.sparse_mla_decode"
        layout, rec = LAYOUT[dqk]
        g.attrs["layout"] = layout
        # The kernel's split-KV schedule follows the GPU's SM count (the flashmla-sm90 emulation needs it).
        if "num_sms_used" in meta:
            g.attrs["num_sms"] = np.int64(int(meta["num_sms_used"]))
        _ds(gi, "q", _load(d, "q", np.uint16), "bf16")
        _ds(gi, "k_cache", _pool(_load(d, "kcache", np.uint8), int(cj["block_size"]), rec, f"{d}: kcache"), "uint8")
        _ds(gi, "indices", _load(d, "indices", np.int32), "int32")
        for src, dstn in (("topk_length", "topk_length"), ("extra_topk_length", "extra_topk_length"), ("seqlens", "cache_seqlens")):
            a = _load(d, src, np.int32, required=False)
            if a is not None:
                _ds(gi, dstn, a, "int32")
        ek = _load(d, "extra_kcache", np.uint8, required=False)
        if ek is not None:
            _ds(gi, "extra_k_cache", _pool(ek, int(cj["extra_block_size"]), rec, f"{d}: extra_kcache"), "uint8")
            _ds(gi, "extra_indices_in_kvcache", _load(d, "extra_indices", np.int32), "int32")
        _ds(go, "out", _load(d, "out", np.uint16), "bf16")
        _ds(go, "lse", np.ascontiguousarray(np.transpose(_load(d, "lse", np.float32), (0, 2, 1))), "float32")
    else:
        raise ValueError(f"{d}: case.json mode {mode!r}: expected prefill or decode")


def main(argv):
    args, prov = [], {}
    it = iter(argv)
    for a in it:
        if a == "--provenance":
            k, _, v = next(it).partition("=")
            prov[k] = v
        else:
            args.append(a)
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, dirs = args[0], args[1:]
    tmp = out + ".tmp"
    try:
        with h5py.File(tmp, "w") as dst:
            for spec in dirs:
                d, _, r = spec.partition(":")
                convert_case(dst, d.rstrip("/"), prov, [int(x) for x in r.split(",")] if r else None)
        os.replace(tmp, out)
    except (OSError, ValueError, KeyError) as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        print(f"convert_flashmla_sm90: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(dirs)} case(s) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
