"""indexer.logits_ragged across calls: the rows of one unsplit call computed again by chunked-prefill calls (seed 000's
query-row chunks) or context-parallel ranks keep their global [ks, ke), and `check` demands the same bits for the same
(layer, step, request, ks, ke) row with identical inputs in every call (result rows/consistency/logits; cases opt
in with provenance attr request_ids). The chunks here are cut from a committed
golden, with its expected logits as the kernel's outputs; one flipped low bit in one chunk must FAIL naming both calls."""
import json

import h5py
import numpy as np


def split(src, dst, cuts, flip=None, with_full=True):
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as o:
        g = f[next(iter(f))]
        S = g["inputs/q"].shape[0]
        ks_all = g["inputs/ks"][()]
        rids = [int(np.searchsorted(np.unique(ks_all), k)) for k in ks_all]  # one id per packed sequence
        bounds = [0, *cuts, S]
        parts = [("full", 0, S)] if with_full else []
        parts += [(f"chunk{i}", a, b) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
        for name, a, b in parts:
            c = o.create_group(name)
            for k, v in g.attrs.items():
                c.attrs[k] = v
            c.attrs["layer"], c.attrs["step"] = np.int64(3), np.int64(9)
            c.attrs["request_ids"] = np.array(rids[a:b], np.int64)
            for k in g["inputs"]:
                d = g["inputs"][k]
                v = d[()]
                if k in ("q", "weights", "ks", "ke"):
                    v = v[a:b]
                c.create_dataset("inputs/" + k, data=v)
                for ak, av in d.attrs.items():
                    c["inputs/" + k].attrs[ak] = av
            lg = g["expected/logits"][()][a:b].copy()
            if flip is not None and name == flip[0]:
                lg.view(np.uint32)[flip[1], flip[2]] ^= 1
            c.create_dataset("outputs/logits", data=lg)


def consistency(run_cli, path, tmp_path):
    js = tmp_path / "r.json"
    p = run_cli("check", path, "--json", js)
    return p, [r for r in json.loads(js.read_text())["results"] if r["group"] == "consistency"]


def test_chunks_equal_the_unsplit_call(repo_root, run_cli, tmp_path):
    f = tmp_path / "chunks.h5"
    split(repo_root / "golden" / "ragged_chunked_prefill.h5", f, [5, 11])
    p, res = consistency(run_cli, f, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(res) == 1 and res[0]["verdict"] == "BITEXACT" and res[0]["numel"] > 0, res


def test_a_chunk_that_differs_fails_naming_both_calls(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "ragged_chunked_prefill.h5"
    with h5py.File(src, "r") as g0:
        g = g0[next(iter(g0))]
        ks, ke = g["inputs/ks"][()], g["inputs/ke"][()]
    row = 2  # chunk1 starts at row 5: its row 2 is the call's row 7
    col = int(ks[5 + row])
    f = tmp_path / "chunks.h5"
    split(src, f, [5, 11], flip=("chunk1", row, col))
    p, res = consistency(run_cli, f, tmp_path)
    assert res[0]["verdict"] == "FAIL", res
    m = res[0]["message"]
    assert "case 'full'" in m and "case 'chunk1'" in m and f"key {col}" in m and "of layer 3" in m, m
    assert p.returncode == 1


def test_without_provenance_or_with_other_inputs_nothing_is_compared(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "ragged_chunked_prefill.h5"
    f = tmp_path / "chunks.h5"
    split(src, f, [5, 11])
    with h5py.File(f, "r+") as h:  # chunk1 without request_ids; chunk2 with other queries
        del h["chunk1"].attrs["request_ids"]
        q = h["chunk2/inputs/q"][()]
        h["chunk2/inputs/q"][...] = q[::-1]
        lg = h["chunk2/outputs/logits"][()]
        h["chunk2/outputs/logits"][...] = lg[::-1]
    p, res = consistency(run_cli, f, tmp_path)
    # compared: chunk0's 5 rows and the middle one of chunk2's 13 reversed rows (its own q again); chunk2's other rows
    # now fail their own check, not the consistency
    assert res and res[0]["verdict"] == "BITEXACT" and res[0]["numel"] == 6, res
