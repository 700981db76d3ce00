"""`dsa-check import` (python -m dsa_dump.importer): engine dumps -> schema-v1 files without re-running anything.

Fixtures are built in each format's documented layout (tests/python/engine_dump_writers.py cites the sources) from
committed goldens -- the inputs of a golden case become the op's arguments and its `expected/` tensors (computed
by `dsa-check golden`) the op's outputs -- so `dsa-check check` on the imported file must PASS, and must FAIL once
an output is perturbed. tests/data/import holds real files written by torch.save (torch 2.15.0) and by msprobe
(mindstudio-probe 26.2.0 on CPU torch); the reader must read them as torch did. Every bad input is exit 2 naming
the thing at fault."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import h5py
import numpy as np
import pytest

from engine_dump_writers import MsprobeDump, T, pt_bytes_pickle, tensor, write_pt, write_safetensors

from dsa_dump import tensorfile
from dsa_dump.dtypes import Bits

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "import")


@pytest.fixture(scope="module")
def env(cli, repo_root):
    e = dict(os.environ)
    e["DSA_CHECK_BIN"] = str(cli)
    e["PYTHONPATH"] = os.pathsep.join([str(repo_root / "scripts" / "dsa_dump"), e.get("PYTHONPATH", "")])
    return e


@pytest.fixture
def imp(env, tmp_path):
    """Runs the importer CLI; returns (rc, stdout + stderr)."""

    def run(*args):
        p = subprocess.run([sys.executable, "-m", "dsa_dump.importer", *map(str, args)], capture_output=True,
                           text=True, env=env, timeout=300, cwd=tmp_path)
        return p.returncode, p.stdout + p.stderr

    return run


@pytest.fixture
def check(cli, tmp_path):
    def run(path):
        rep = tmp_path / "report.json"
        p = subprocess.run([str(cli), "check", str(path), "--json", str(rep)], capture_output=True, text=True,
                           timeout=300)
        return p.returncode, p.stdout + p.stderr

    return run


def golden(repo_root, name):
    """(attrs, {inputs/..., expected/...: T}) of a golden's single case, T in the writer's form."""
    with h5py.File(repo_root / "golden" / f"{name}.h5", "r") as f:
        g = f[next(iter(f))]
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
        ts = {}
        for grp in ("inputs", "expected"):
            for k, ds in g[grp].items():
                lg = ds.attrs.get("dtype", "")
                lg = lg.decode() if isinstance(lg, bytes) else str(lg)
                ts[f"{grp}/{k}"] = tensor(ds[()], lg if lg in ("bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2") else None)
        return attrs, ts


def perturbed(t, k=0):
    """The same tensor with element k changed (an index moved to another valid-looking value, a bit flipped)."""
    s = t.storage.copy()
    flat = s.reshape(-1)
    if flat.dtype.kind in "iu" and flat.dtype.itemsize >= 4:
        pos = int(np.flatnonzero(flat >= 0)[k])
        flat[pos] = (flat[pos] + 1) if (flat[pos] + 1) not in flat else flat[pos] + 7919
    else:
        flat.view(np.uint8)[k * flat.dtype.itemsize + flat.dtype.itemsize - 1] ^= 0x40
    return T(s.reshape(t.shape), t.dtype, t.view)


# ---- msprobe: npu_lightning_indexer (kwargs call, as seed 000) ----
def li_dump(root, ts, attrs, out=None, drop=(), npy=(), weights=None, task="tensor", extra=True):
    d = MsprobeDump(str(root), task=task)
    kw = {"query": ts["inputs/query"], "key": ts["inputs/key"], "weights": weights or ts["inputs/weights"],
          "actual_seq_lengths_query": ts["inputs/actual_seq_lengths_query"],
          "actual_seq_lengths_key": ts["inputs/actual_seq_lengths_key"], "block_table": ts["inputs/block_table"],
          "layout_query": attrs["layout_query"], "layout_key": attrs["layout_key"],
          "sparse_count": int(attrs["sparse_count"]), "sparse_mode": int(attrs["sparse_mode"])}
    for k in drop:
        kw.pop(k)
    if extra:
        d.call("add", [ts["inputs/weights"], 1], prefix="Tensor")
    api = d.call("npu_lightning_indexer", [], kw, [out or ts["expected/sparse_indices"], None], npy=npy)
    d.write()
    return d, api


CLI_STAGES = ("indexer.npu_lightning", "v4.compressor", "indexer.topk")


def test_msprobe_li_round_trip_passes_and_perturbed_fails(repo_root, tmp_path, imp, check):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    d, api = li_dump(tmp_path / "dump", ts, attrs, npy=("block_table",))
    rc, out = imp(tmp_path / "dump", "-o", tmp_path / "li.h5")
    assert rc == 0, out
    assert "1 case(s)" in out and "skipped 1 calls of unmapped ops: add (1)" in out
    with h5py.File(tmp_path / "li.h5", "r") as f:
        assert list(f) == [api]
        assert f[api].attrs["stage"] == "indexer.npu_lightning"
    rc, out = check(tmp_path / "li.h5")
    assert rc == 0, out
    bad = tmp_path / "bad"
    li_dump(bad, ts, attrs, out=perturbed(ts["expected/sparse_indices"]))
    rc, out = imp(bad, "-o", tmp_path / "li_bad.h5", "--mapping", "ascend_li")
    assert rc == 0, out
    rc, out = check(tmp_path / "li_bad.h5")
    assert rc == 1 and "1 failed" in out, out


# ---- msprobe: the compressor op (positional x..rope_cos, keywords after; seed 004) ----
def compressor_dump(root, ts, attrs, out=None):
    d = MsprobeDump(str(root))
    args = [ts[f"inputs/{k}"] for k in ("x", "wkv", "wgate", "state_cache_in", "ape", "norm_weight", "rope_sin", "rope_cos")]
    kw = {"state_block_table": ts["inputs/state_block_table"], "cu_seqlens": ts["inputs/cu_seqlens"], "seqused": None,
          "start_pos": ts["inputs/start_pos"], "rope_head_dim": int(attrs["rope_head_dim"]),
          "cmp_ratio": int(attrs["cmp_ratio"]), "coff": int(attrs["coff"]), "norm_eps": float(attrs["norm_eps"]),
          "rotary_mode": 2, "cache_mode": int(attrs["cache_mode"])}
    api = d.call("compressor", args, kw, [out or ts["expected/cmp_kv"]], prefix="Aten")
    d.write()
    return api


def test_msprobe_compressor_round_trip_passes_and_perturbed_fails(repo_root, tmp_path, imp, check):
    attrs, ts = golden(repo_root, "v4c4_ascend_midgroup")
    api = compressor_dump(tmp_path / "ok", ts, attrs)
    rc, out = imp(tmp_path / "ok" / "step0", "-o", tmp_path / "c.h5", "-m", "ascend_compressor")
    assert rc == 0, out
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f[api].attrs["stage"] == "v4.compressor" and f[api].attrs["meta.source"] == api
    rc, out = check(tmp_path / "c.h5")
    assert rc == 0, out
    compressor_dump(tmp_path / "bad", ts, attrs, out=perturbed(ts["expected/cmp_kv"], 5))
    rc, out = imp(tmp_path / "bad", "-o", tmp_path / "c_bad.h5")
    assert rc == 0, out
    rc, out = check(tmp_path / "c_bad.h5")
    assert rc == 1 and "1 failed" in out, out


# ---- sglang Pass files and plain dicts ----
TOPK_ATTRS = {"k": 64, "index_base": "relative", "sorted": 0, "fast_path": 1, "page_size": 64, "rows_per_request": 1,
              "num_init_tokens": 0, "num_local_tokens": 0}


def topk_mapping(path, pre="model.layers.{layer}.self_attn.indexer", index=0):
    args = {"logits": {"tensor": f"{pre}.logits", "dtype": "float32"}, "lengths": {"tensor": f"{pre}.lengths"},
            "indices": {"tensor": f"{pre}.topk", "index": index}}
    args.update({k: {"value": v} for k, v in TOPK_ATTRS.items()})
    path.write_text(json.dumps({"mapping_version": 1, "description": "test", "groups": [
        {"name": "topk", "helper": "capture_topk", "args": args}]}))
    return path


def test_sglang_real_pass_files_round_trip(repo_root, tmp_path, imp, check):
    m = topk_mapping(tmp_path / "m.json")
    rc, out = imp(os.path.join(DATA, "sglang"), "-o", tmp_path / "s.h5", "-m", m)
    assert rc == 0, out
    with h5py.File(tmp_path / "s.h5", "r") as f:
        names = sorted(f)
        assert names == [f"topk_pass{p:05d}_layer{l}" for p in (0, 1) for l in (3, 5)]
        assert (f["topk_pass00001_layer5"].attrs["layer"], f["topk_pass00001_layer5"].attrs["step"]) == (5, 1)
    rc, out = check(tmp_path / "s.h5")
    assert rc == 0 and "4 passed" in out, out
    # the same layout written by the test writer, one output perturbed: that case fails
    attrs, ts = golden(repo_root, "topk_nonfinite_rows")
    d = tmp_path / "dump" / "TP0_PP0_Rank0_pid1"
    d.mkdir(parents=True)
    pre = "model.layers.7.self_attn.indexer"
    write_pt(d / "Pass00003.pt", {"model.embed_tokens": tensor(np.zeros((2, 2), np.float32)),
                                  f"{pre}.logits": ts["inputs/logits"], f"{pre}.lengths": ts["inputs/lengths"],
                                  f"{pre}.topk": [perturbed(ts["expected/indices"]), None]})
    rc, out = imp(tmp_path / "dump", "-o", tmp_path / "s_bad.h5", "-m", m, "--format", "sglang")
    assert rc == 0, out
    rc, out = check(tmp_path / "s_bad.h5")
    assert rc == 1 and "1 failed" in out, out


def li_group(path, pre="indexer"):
    names = ["query", "key", "weights", "actual_seq_lengths_query", "actual_seq_lengths_key", "block_table"]
    args = {n: {"tensor": f"{pre}.{n}"} for n in names}
    args["query"]["dtype"] = "bf16|fp16"
    args["output"] = {"tensor": f"{pre}.topk_indices"}
    path.write_text(json.dumps({"groups": [{"name": "li", "helper": "capture_ascend_li", "args": args,
                                            "attrs": {"meta.engine": "test"}}]}))
    return path


def li_tensors(ts, out=None):
    t = {f"indexer.{k[len('inputs/'):]}": v for k, v in ts.items() if k.startswith("inputs/")}
    t["indexer.topk_indices"] = out or ts["expected/sparse_indices"]
    return t


def test_safetensors_dict_round_trip(repo_root, tmp_path, imp, check):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    m = li_group(tmp_path / "m.json")
    write_safetensors(tmp_path / "li.safetensors", li_tensors(ts), {"format": "pt"})
    rc, out = imp(tmp_path / "li.safetensors", "-o", tmp_path / "li.h5", "-m", m)
    assert rc == 0, out
    rc, out = check(tmp_path / "li.h5")
    assert rc == 0, out
    write_safetensors(tmp_path / "bad.safetensors", li_tensors(ts, perturbed(ts["expected/sparse_indices"], 3)))
    rc, out = imp(tmp_path / "bad.safetensors", "-o", tmp_path / "bad.h5", "-m", m)
    assert rc == 0, out
    rc, out = check(tmp_path / "bad.h5")
    assert rc == 1, out


def test_pt_dict_round_trip_nested(repo_root, tmp_path, imp, check):
    attrs, ts = golden(repo_root, "v4c4_ascend_midgroup")
    names = ["x", "wkv", "wgate", "ape", "norm_weight", "rope_sin", "rope_cos", "state_block_table", "cu_seqlens",
             "start_pos"]
    args = {n: {"tensor": f"cmp.{n}"} for n in names}
    args.update(state_cache={"tensor": "cmp.state_cache_in"}, output={"tensor": "cmp.out"},
                state_cache_after={"tensor": "cmp.state_after"},
                cmp_ratio={"value": 4}, coff={"value": 2})
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"groups": [{"name": "compressor", "helper": "capture_ascend_compressor", "args": args}]}))
    for out, want in ((ts["expected/cmp_kv"], 0), (perturbed(ts["expected/cmp_kv"], 9), 1)):
        d = {"cmp": {n: ts[f"inputs/{n}"] for n in names + ["state_cache_in"]}}
        d["cmp"].update(out=out, state_after=ts["expected/state_cache"])
        write_pt(tmp_path / "c.pt", d)
        rc, o = imp(tmp_path / "c.pt", "-o", tmp_path / "c.h5", "-m", m)
        assert rc == 0, o
        rc, o = check(tmp_path / "c.h5")
        assert rc == want, o


# ---- real files ----
def test_real_torch_save_read_as_torch_did():
    d = tensorfile.load_pt(os.path.join(DATA, "tensors.pt"))
    ref = np.load(os.path.join(DATA, "tensors_ref.npz"))
    kinds = {"bf16_t": "bf16", "fp16_slice": "fp16", "fp8_e4m3fn": "fp8_e4m3fn", "fp8_e5m2": "fp8_e5m2"}
    for k in ref.files:
        got = d["nested"]["list"][0] if k == "nested.list.0" else d[k]
        if k in kinds:
            assert isinstance(got, Bits) and got.dtype == kinds[k], k
            got = got.array
        assert got.shape == ref[k].shape and got.dtype == ref[k].dtype and np.array_equal(got, ref[k]), k
    assert d["nested"]["list"][1:] == [None, 7]


def test_real_msprobe_dump_imports_and_checks(tmp_path, imp, check):
    """A real msprobe dump of torch.topk on CPU: a mapping of that op onto capture_topk (lengths given as values)."""
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"ops": [{"op": "topk", "helper": "capture_topk", "args": {
        "logits": {"arg": 0, "kwarg": "input", "dtype": "float32"}, "k": {"arg": 1, "kwarg": "k"},
        "indices": {"output": 1, "dtype": "int64"}, "lengths": {"value": [64, 64, 64, 64]},
        "sorted": {"value": 1}}}]}))
    rc, out = imp(os.path.join(DATA, "msprobe"), "-o", tmp_path / "t.h5", "-m", m)
    assert rc == 0, out
    assert "skipped 1 calls of unmapped ops: einsum (1)" in out
    rc, out = check(tmp_path / "t.h5")
    assert rc == 0 and "1 passed" in out, out
    # the dump's other tensors read as dump.json declares them (dtype, shape), bf16 included
    dj = next(os.path.join(r, "dump.json") for r, _, fs in os.walk(os.path.join(DATA, "msprobe")) if "dump.json" in fs)
    doc = json.load(open(dj))
    for api, e in doc["data"].items():
        for item in e["input_args"] + e["output"]:
            if item and "data_name" in item:
                t = tensorfile.load_pt(os.path.join(os.path.dirname(dj), "dump_tensor_data", item["data_name"]))
                assert list(tensorfile.shape_of(t)) == item["shape"]
                assert tensorfile.logical_dtype(t) == {"torch.float32": "float32", "torch.int64": "int64",
                                                       "torch.bfloat16": "bf16"}[item["dtype"]]
    # perturbed: a copy of the dump whose indices file is rewritten with one index moved
    cp = tmp_path / "ms"
    shutil.copytree(os.path.join(DATA, "msprobe"), cp)
    tdir = next(os.path.join(r) for r, ds, fs in os.walk(cp) if r.endswith("dump_tensor_data"))
    f = os.path.join(tdir, "Torch.topk.0.forward.output.1.pt")
    idx = tensorfile.load_pt(f)
    logits = tensorfile.load_pt(os.path.join(tdir, "Torch.topk.0.forward.input.0.pt"))
    worst = np.argsort(logits, axis=1)[:, 0]
    idx[0, -1] = worst[0]  # the row's smallest logit in place of its 8th largest
    write_pt(f, tensor(idx))
    rc, out = imp(cp, "-o", tmp_path / "t_bad.h5", "-m", m)
    assert rc == 0, out
    rc, out = check(tmp_path / "t_bad.h5")
    assert rc == 1 and "1 failed" in out, out


# ---- errors: exit 2 naming the thing ----
def test_missing_tensor_and_missing_file(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    li_dump(tmp_path / "a", ts, attrs, drop=("weights",))
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5")
    assert rc == 2 and "missing tensor" in out and "'weights'" in out and "npu_lightning_indexer.0.forward" in out, out
    assert "Traceback" not in out and not (tmp_path / "o.h5").exists()
    d, api = li_dump(tmp_path / "b", ts, attrs)
    os.remove(os.path.join(d.tdir, f"{api}.kwargs.key.pt"))
    rc, out = imp(tmp_path / "b", "-o", tmp_path / "o.h5")
    assert rc == 2 and f"{api}.kwargs.key.pt is missing" in out, out
    # a dict missing one tensor of its group
    t = li_tensors(ts)
    del t["indexer.block_table"]
    write_safetensors(tmp_path / "x.safetensors", t)
    rc, out = imp(tmp_path / "x.safetensors", "-o", tmp_path / "o.h5", "-m", li_group(tmp_path / "m.json"))
    assert rc == 2 and "missing tensor 'indexer.block_table'" in out, out


def test_dtype_mismatches(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    d, api = li_dump(tmp_path / "a", ts, attrs)
    # dump.json declares bf16 for query; the file holds float32
    q = ts["inputs/query"]
    write_pt(os.path.join(d.tdir, f"{api}.kwargs.query.pt"), tensor(np.zeros(q.shape, np.float32)))
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5")
    assert rc == 2 and "dtype mismatch" in out and "torch.bfloat16" in out and "float32" in out and "query" in out, out
    # the mapping's dtype: query as float32 in a dict
    t = li_tensors(ts)
    t["indexer.query"] = tensor(np.zeros(q.shape, np.float32))
    write_safetensors(tmp_path / "x.safetensors", t)
    rc, out = imp(tmp_path / "x.safetensors", "-o", tmp_path / "o.h5", "-m", li_group(tmp_path / "m.json"))
    assert rc == 2 and "dtype mismatch" in out and "bf16|fp16" in out and "indexer.query" in out, out
    # the stage's dtype (the kit's validation speaks): int64 weights
    t = li_tensors(ts)
    t["indexer.weights"] = tensor(np.zeros(ts["inputs/weights"].shape, np.int64))
    write_safetensors(tmp_path / "y.safetensors", t)
    rc, out = imp(tmp_path / "y.safetensors", "-o", tmp_path / "o.h5", "-m", tmp_path / "m.json")
    assert rc == 2 and "inputs/weights" in out and "int64" in out, out
    assert not (tmp_path / "o.h5").exists()


def test_shape_mismatch(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    w = ts["inputs/weights"]
    half = T(w.storage.reshape(w.shape)[:, :32].copy(), w.dtype)
    li_dump(tmp_path / "a", ts, attrs, weights=half)
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5")
    assert rc == 2 and "inputs/weights" in out and "[5,32]" in out.replace(", ", ","), out
    # the file's shape disagrees with dump.json
    d, api = li_dump(tmp_path / "b", ts, attrs)
    bt = ts["inputs/block_table"]
    write_pt(os.path.join(d.tdir, f"{api}.kwargs.block_table.pt"), tensor(bt.storage.reshape(bt.shape)[:1].copy()))
    rc, out = imp(tmp_path / "b", "-o", tmp_path / "o.h5")
    assert rc == 2 and "shape mismatch" in out and "block_table" in out, out


def test_unknown_op_helper_and_mapping(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    li_dump(tmp_path / "a", ts, attrs)
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5", "--only", "npu_lightning_indexr")
    assert rc == 2 and "unknown op npu_lightning_indexr" in out and "npu_lightning_indexer" in out, out
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5", "-m", "ascend_lii")
    assert rc == 2 and "unknown mapping 'ascend_lii'" in out and "ascend_li" in out and "ascend_sparse_attn" in out, out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ops": [{"op": "npu_lightning_indexer", "helper": "capture_ascend_lightning",
                                        "args": {"query": {"kwarg": "query"}}}]}))
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5", "-m", bad)
    assert rc == 2 and "unknown helper 'capture_ascend_lightning'" in out and "capture_ascend_li" in out, out
    bad.write_text(json.dumps({"ops": [{"op": "npu_lightning_indexer", "helper": "capture_ascend_li",
                                        "args": {"querry": {"kwarg": "query"}}}]}))
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5", "-m", bad)
    assert rc == 2 and "'querry' is not an argument of capture_ascend_li" in out, out
    # only unmapped ops in the dump: zero cases
    d = MsprobeDump(str(tmp_path / "c"))
    d.call("add", [ts["inputs/weights"], 1], prefix="Tensor")
    d.call("matmul", [ts["inputs/weights"], ts["inputs/weights"]], prefix="Torch")
    d.write()
    rc, out = imp(tmp_path / "c", "-o", tmp_path / "o.h5")
    assert rc == 2 and "no case produced" in out and "add (1)" in out and "matmul (1)" in out, out


def test_statistics_dump(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    li_dump(tmp_path / "a", ts, attrs, task="statistics")
    rc, out = imp(tmp_path / "a", "-o", tmp_path / "o.h5")
    assert rc == 2 and "statistics" in out and "task 'tensor'" in out, out


def hostile_pickle():
    # GLOBAL os.system, a string argument, REDUCE: what pickle.dumps of a malicious __reduce__ produces
    return b"\x80\x02cos\nsystem\nX\x0b\x00\x00\x00touch pwned\x85R."


def test_hostile_and_broken_pt_files(tmp_path, imp, repo_root):
    os.chdir(tmp_path)
    write_pt(tmp_path / "evil.pt", None, pickle_bytes=hostile_pickle())
    with pytest.raises(tensorfile.TensorFileError, match=r"evil.pt: refused pickle global 'os.system'"):
        tensorfile.load_pt(tmp_path / "evil.pt")
    assert not (tmp_path / "pwned").exists()
    m = li_group(tmp_path / "m.json")
    rc, out = imp(tmp_path / "evil.pt", "-o", tmp_path / "o.h5", "-m", m)
    assert rc == 2 and "refused pickle global 'os.system'" in out and "evil.pt" in out, out
    assert not (tmp_path / "pwned").exists()
    # builtins.eval via a nested global is refused the same way
    write_pt(tmp_path / "evil2.pt", None, pickle_bytes=b"\x80\x02}(X\x01\x00\x00\x00acbuiltins\neval\nX\x01\x00\x00\x001\x85Ru.")
    rc, out = imp(tmp_path / "evil2.pt", "-o", tmp_path / "o.h5", "-m", m)
    assert rc == 2 and "refused pickle global 'builtins.eval'" in out, out
    # truncated zip
    write_pt(tmp_path / "ok.pt", {"indexer.query": tensor(np.zeros((4, 4), np.float32))})
    raw = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(raw[: len(raw) // 2])
    rc, out = imp(tmp_path / "trunc.pt", "-o", tmp_path / "o.h5", "-m", m)
    assert rc == 2 and "trunc.pt" in out and ("truncated" in out or "corrupt" in out), out
    # a storage shorter than its tensor declares
    pk, st = pt_bytes_pickle({"a": tensor(np.zeros(16, np.float32))})
    write_pt(tmp_path / "short.pt", None, pickle_bytes=pk, storages=[(st[0][0], st[0][1][:20])])
    rc, out = imp(tmp_path / "short.pt", "-o", tmp_path / "o.h5", "-m", m)
    assert rc == 2 and "short.pt" in out and "holds 20 bytes, the tensor declares 64" in out, out
    # a view reaching past its storage
    write_pt(tmp_path / "view.pt", {"a": T(np.zeros(8, np.float32), "float32", (4, (2, 4), (4, 1)))})
    with pytest.raises(tensorfile.TensorFileError, match="reach element 11 of a storage of 8"):
        tensorfile.load_pt(tmp_path / "view.pt")
    # an absurd declared size is refused before anything is read; a deflated member is read only up to its tensor
    pk, st = pt_bytes_pickle({"a": T(np.zeros(4, np.float32), "float32", (0, (1 << 20, 1 << 20), (0, 0)))})
    write_pt(tmp_path / "huge.pt", None, pickle_bytes=pk, storages=st)
    with pytest.raises(tensorfile.TensorFileError, match="limit"):
        tensorfile.load_pt(tmp_path / "huge.pt")
    pk, st = pt_bytes_pickle({"a": tensor(np.arange(4, dtype=np.float32))})
    write_pt(tmp_path / "bomb.pt", None, pickle_bytes=pk, storages=[(st[0][0], st[0][1] + bytes(50 << 20))],
             compress=True)
    assert os.path.getsize(tmp_path / "bomb.pt") < (1 << 20)
    assert np.array_equal(tensorfile.load_pt(tmp_path / "bomb.pt")["a"], np.arange(4, dtype=np.float32))
    # the legacy (non-zip) torch format
    (tmp_path / "legacy.pt").write_bytes(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")
    rc, out = imp(tmp_path / "legacy.pt", "-o", tmp_path / "o.h5", "-m", m)
    assert rc == 2 and "legacy" in out and "torch>=1.6" in out, out
    assert "Traceback" not in out


def test_broken_safetensors_and_npy(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", {"x": tensor(np.arange(6, dtype=np.float32))})
    raw = (tmp_path / "a.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(raw[:-4])
    with pytest.raises(tensorfile.TensorFileError, match="x: data_offsets .* run past the data"):
        tensorfile.load_safetensors(tmp_path / "t.safetensors")
    (tmp_path / "h.safetensors").write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(tensorfile.TensorFileError, match="header length"):
        tensorfile.load_safetensors(tmp_path / "h.safetensors")
    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.int32))
    (tmp_path / "b.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:200])
    with pytest.raises(tensorfile.TensorFileError, match="b.npy"):
        tensorfile.load_npy(tmp_path / "b.npy")


def test_output_guards_and_cli(repo_root, tmp_path, imp):
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    d, api = li_dump(tmp_path / "a", ts, attrs)
    target = os.path.join(d.tdir, f"{api}.kwargs.query.pt")
    before = open(target, "rb").read()
    rc, out = imp(tmp_path / "a", "-o", target)
    assert rc == 2 and "one of the inputs" in out and open(target, "rb").read() == before, out
    rc, out = imp(tmp_path / "a", "-o", tmp_path)
    assert rc == 2 and "not a regular file" in out, out
    rc, out = imp(tmp_path / "nowhere", "-o", tmp_path / "o.h5")
    assert rc == 2 and "no such file" in out, out
    rc, out = imp("--help")
    assert rc == 0 and "Example:" in out and "--mapping" in out
    rc, out = imp("--list-mappings")
    assert rc == 0 and all(n in out for n in ("ascend ", "ascend_li", "ascend_qli", "ascend_compressor",
                                              "ascend_sparse_attn"))
    rc, out = imp(tmp_path / "a")
    assert rc == 2 and "required" in out


def test_dsa_check_import_runs_the_kit_importer(repo_root, tmp_path, cli, check):
    """`dsa-check import` (the C++ CLI) runs the kit's importer with its arguments unchanged, without PYTHONPATH set,
    and its exit codes are the importer's; a Python that cannot be started is exit 2 saying what to install."""
    attrs, ts = golden(repo_root, "linpu_prefill_decode")
    li_dump(tmp_path / "dump", ts, attrs)
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DSA_CHECK_BIN", "DSA_DUMP_KIT")}
    e["DSA_PYTHON"] = sys.executable
    p = subprocess.run([str(cli), "import", str(tmp_path / "dump"), "-o", str(tmp_path / "li.h5")], capture_output=True,
                       text=True, env=e, timeout=300)
    assert p.returncode == 0 and "1 case(s)" in p.stdout, p.stdout + p.stderr
    assert check(tmp_path / "li.h5")[0] == 0
    p = subprocess.run([str(cli), "import", "--help"], capture_output=True, text=True, env=e, timeout=60)
    assert p.returncode == 0 and "Example:" in p.stdout and "dsa-check import" in p.stdout.split("Example:")[1]
    p = subprocess.run([str(cli), "import", str(tmp_path / "nowhere"), "-o", str(tmp_path / "o.h5")], capture_output=True,
                       text=True, env=e, timeout=60)
    assert p.returncode == 2 and "no such file" in p.stdout + p.stderr
    e["DSA_PYTHON"] = str(tmp_path / "no-python-here")
    p = subprocess.run([str(cli), "import", str(tmp_path / "dump")], capture_output=True, text=True, env=e, timeout=60)
    assert p.returncode == 2 and "could not be started" in p.stderr and "numpy and h5py" in p.stderr, p.stderr


# ---- msprobe: the quant lightning indexer of the V4 backend (seed 004 AscendDSAImpl._indexer_qli, keyword call) ----
def qli_dump(root, ts, attrs, out=None, op="npu_vllm_quant_lightning_indexer"):
    d = MsprobeDump(str(root))
    kw = {"query": ts["inputs/query"], "key": ts["inputs/key"], "weights": ts["inputs/weights"],
          "query_dequant_scale": ts["inputs/query_dequant_scale"], "key_dequant_scale": ts["inputs/key_dequant_scale"],
          "actual_seq_lengths_query": ts["inputs/actual_seq_lengths_query"],
          "actual_seq_lengths_key": ts["inputs/actual_seq_lengths_key"], "block_table": ts["inputs/block_table"],
          "metadata": None, "query_quant_mode": 0, "key_quant_mode": 0, "layout_query": attrs["layout_query"],
          "layout_key": attrs["layout_key"], "sparse_count": int(attrs["sparse_count"]),
          "sparse_mode": int(attrs["sparse_mode"]), "pre_tokens": (1 << 63) - 1, "next_tokens": (1 << 63) - 1,
          "cmp_ratio": int(attrs["cmp_ratio"]), "return_value": False}
    api = d.call(op, [], kw, [out or ts["expected/sparse_indices"], None])
    d.write()
    return api


@pytest.mark.parametrize("op", ["npu_vllm_quant_lightning_indexer", "npu_quant_lightning_indexer"])
def test_msprobe_qli_round_trip_passes_and_perturbed_fails(repo_root, tmp_path, imp, check, op):
    attrs, ts = golden(repo_root, "v4i_ties")
    api = qli_dump(tmp_path / "ok", ts, attrs, op=op)
    rc, out = imp(tmp_path / "ok", "-o", tmp_path / "q.h5", "-m", "ascend_qli")
    assert rc == 0, out
    with h5py.File(tmp_path / "q.h5", "r") as f:
        assert list(f) == [api] and f[api].attrs["stage"] == "v4.indexer"
    rc, out = check(tmp_path / "q.h5")
    assert rc == 0, out
    qli_dump(tmp_path / "bad", ts, attrs, out=perturbed(ts["expected/sparse_indices"]), op=op)
    rc, out = imp(tmp_path / "bad", "-o", tmp_path / "q_bad.h5")  # the default mapping (ascend) holds qli too
    assert rc == 0, out
    rc, out = check(tmp_path / "q_bad.h5")
    assert rc == 1 and "1 failed" in out, out


# ---- msprobe: npu_sparse_attn_sharedkv (seed 004 AscendDSAImpl attn_op: q positional, the rest keywords) ----
def sparse_attn_dump(root, ts, attrs, out=None):
    d = MsprobeDump(str(root))
    kw = {k: ts[f"inputs/{k}"] for k in ("ori_kv", "ori_block_table", "cu_seqlens_q", "seqused_kv", "sinks", "cmp_kv",
                                          "cmp_sparse_indices", "cmp_block_table")}
    kw.update(metadata=None, softmax_scale=512 ** -0.5, cmp_ratio=int(attrs["cmp_ratio"]),
              ori_mask_mode=int(attrs["ori_mask_mode"]), cmp_mask_mode=int(attrs["cmp_mask_mode"]),
              ori_win_left=int(attrs["ori_win_left"]), ori_win_right=int(attrs["ori_win_right"]),
              layout_q=attrs["layout_q"], layout_kv=attrs["layout_kv"])
    api = d.call("npu_sparse_attn_sharedkv", [ts["inputs/q"]], kw, [out or ts["expected/out"], None])
    d.write()
    return api


def test_msprobe_sparse_attn_round_trip_passes_and_perturbed_fails(repo_root, tmp_path, imp, check):
    attrs, ts = golden(repo_root, "v4sa_c4_flash_mtp")
    assert "softmax_scale" not in attrs  # the golden uses the default 512^-0.5, as the call above
    api = sparse_attn_dump(tmp_path / "ok", ts, attrs)
    rc, out = imp(tmp_path / "ok", "-o", tmp_path / "a.h5", "-m", "ascend_sparse_attn")
    assert rc == 0, out
    with h5py.File(tmp_path / "a.h5", "r") as f:
        assert list(f) == [api] and f[api].attrs["stage"] == "attn.v4_sparse"
    rc, out = check(tmp_path / "a.h5")
    assert rc == 0, out
    sparse_attn_dump(tmp_path / "bad", ts, attrs, out=perturbed(ts["expected/out"], k=5))
    rc, out = imp(tmp_path / "bad", "-o", tmp_path / "a_bad.h5", "-m", "ascend_sparse_attn")
    assert rc == 0, out
    rc, out = check(tmp_path / "a_bad.h5")
    assert rc == 1 and "1 failed" in out, out
