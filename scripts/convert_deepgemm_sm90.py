#!/usr/bin/env python3
"""Convert the neutral DeepGEMM sm90 logits file (../shared/data/deepgemm_sm90_logits.h5, layout in
../shared/specs/sm90_fp8_wgmma.md §3) into schema-v1 cases that `dsa-check check` can judge.

    scripts/convert_deepgemm_sm90.py IN.h5 OUT.h5

ragged_* groups -> stage indexer.logits_ragged, cases <group> (float32 logits) and <group>_bf16;
paged_* groups  -> stage indexer.logits_paged, case <group> (2-D context_lens, clean_logits=0).
outputs/logits holds the real DeepGEMM output; every case carries attr kernel=deepgemm-sm90.
The output is written to a temp file and renamed. Exit 0 on success, 2 on bad input.
"""
import os
import sys

import h5py
import numpy as np


def _ds(g, name, data, dtype=None):
    d = g.create_dataset(name, data=data, compression="gzip", shuffle=True)
    if dtype is not None:
        d.attrs["dtype"] = dtype
    return d


def _need(src, gname, name, dtype, rank):
    if name not in src[gname]:
        raise ValueError(f"{gname}/{name}: expected a dataset, found none")
    a = src[gname][name][()]
    if a.dtype != np.dtype(dtype) or a.ndim != rank:
        raise ValueError(f"{gname}/{name}: expected {np.dtype(dtype).name} rank {rank}, found {a.dtype.name} rank {a.ndim}")
    return a


def _case(dst, name, stage, attrs):
    g = dst.create_group(name)
    g.attrs["schema_version"] = np.int64(1)
    g.attrs["stage"] = stage
    for k, v in attrs.items():
        g.attrs[k] = v
    return g, g.create_group("inputs"), g.create_group("outputs")


def convert(src_path, dst_path):
    n = 0
    tmp = dst_path + ".tmp"
    with h5py.File(src_path, "r") as src, h5py.File(tmp, "w") as dst:
        for gname in sorted(src.keys()):
            if gname.startswith("ragged"):
                q = _need(src, gname, "q_fp8", np.uint8, 3)
                kv = _need(src, gname, "kv_fp8", np.uint8, 2)
                sc = _need(src, gname, "kv_scale", np.float32, 1)
                w = _need(src, gname, "weights", np.float32, 2)
                ks = _need(src, gname, "ks", np.int32, 1)
                ke = _need(src, gname, "ke", np.int32, 1)
                outs = {"float32": (_need(src, gname, "logits", np.float32, 2), None),
                        "bf16": (_need(src, gname, "logits_bf16_bits", np.uint16, 2), "bf16")}
                for ldt, (logits, tag) in outs.items():
                    name = gname if ldt == "float32" else gname + "_bf16"
                    _, gi, go = _case(dst, name, "indexer.logits_ragged",
                                      {"clean_logits": np.int64(1), "max_seqlen_k": np.int64(0),
                                       "logits_dtype": ldt, "kernel": "deepgemm-sm90"})
                    _ds(gi, "q", q, "fp8_e4m3fn")
                    _ds(gi, "kv", kv, "fp8_e4m3fn")
                    _ds(gi, "kv_scale", sc)
                    _ds(gi, "weights", w)
                    _ds(gi, "ks", ks)
                    _ds(gi, "ke", ke)
                    _ds(go, "logits", logits, tag)
                    n += 1
            elif gname.startswith("paged"):
                a = src[gname].attrs
                _, gi, go = _case(dst, gname, "indexer.logits_paged",
                                  {"clean_logits": np.int64(0), "max_context_len": np.int64(a["max_len"]),
                                   "page_size": np.int64(a["block"]), "logits_dtype": "float32",
                                   "kernel": "deepgemm-sm90"})
                _ds(gi, "q", _need(src, gname, "q_fp8", np.uint8, 4), "fp8_e4m3fn")
                _ds(gi, "kv_cache", _need(src, gname, "kv_cache", np.uint8, 4))
                _ds(gi, "weights", _need(src, gname, "weights", np.float32, 2))
                _ds(gi, "context_lens", _need(src, gname, "context_lens_2d", np.int32, 2))
                _ds(gi, "block_table", _need(src, gname, "block_table", np.int32, 2))
                _ds(go, "logits", _need(src, gname, "logits", np.float32, 2))
                n += 1
            else:
                raise ValueError(f"{gname}: expected a group named ragged_* or paged_*")
    if n == 0:
        os.remove(tmp)
        raise ValueError("no ragged_*/paged_* groups")
    os.replace(tmp, dst_path)
    return n


def main(argv):
    if len(argv) != 3:
        print("usage: convert_deepgemm_sm90.py IN.h5 OUT.h5", file=sys.stderr)
        return 2
    try:
        n = convert(argv[1], argv[2])
    except (OSError, ValueError, KeyError) as e:
        if os.path.exists(argv[2] + ".tmp"):
            os.remove(argv[2] + ".tmp")
        print(f"error: {argv[1]}: {e}", file=sys.stderr)
        return 2
    print(f"{argv[2]}: {n} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
