"""indexer.topk across calls (#18 item 3): context-parallel ranks (seed 000's prev/next halves), chunked prefill and
reruns select from rows of one unsplit call. Cases with provenance attr request_ids opt in; rows with the same
(layer, step, request, length) and byte-identical candidate scores must select the same candidates in every call
(result rows/consistency/indices). The calls here are cut from committed goldens, with the golden's expected
indices as the kernel's outputs."""
import json

import h5py
import numpy as np


def split(src, dst, parts, edit=None):
    """parts: {name: row list}; edit(name, indices) may change a part's indices in place."""
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as o:
        g = f[next(iter(f))]
        R = g["inputs/lengths"].shape[0]
        for name, rows in {"full": list(range(R)), **parts}.items():
            c = o.create_group(name)
            for k, v in g.attrs.items():
                c.attrs[k] = v
            c.attrs["layer"], c.attrs["step"] = np.int64(5), np.int64(2)
            c.attrs["request_ids"] = np.array([100 + r for r in rows], np.int64)
            for k in g["inputs"]:
                c.create_dataset("inputs/" + k, data=g["inputs"][k][()][rows])
            ind = g["expected/indices"][()][rows].copy()
            if edit:
                edit(name, ind)
            c.create_dataset("outputs/indices", data=ind)


def consistency(run_cli, path, tmp_path):
    js = tmp_path / "r.json"
    p = run_cli("check", path, "--json", js)
    return p, [r for r in json.loads(js.read_text())["results"] if r["group"] == "consistency"]


RANKS = {"rank0": [0, 1, 2, 6], "rank1": [3, 4, 5]}  # balanced split of 7 rows: prev + next half on rank 0


def test_ranks_select_what_the_unsplit_call_selects(repo_root, run_cli, tmp_path):
    f = tmp_path / "cp.h5"
    split(repo_root / "golden" / "topk_lengths_sparse.h5", f, RANKS)
    p, res = consistency(run_cli, f, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(res) == 1 and res[0]["verdict"] == "BITEXACT" and res[0]["numel"] == 7, res
    assert "select the same candidates" in res[0]["message"]


def test_a_rank_selecting_another_candidate_fails_naming_both_calls(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "topk_lengths_sparse.h5"
    with h5py.File(src, "r") as h:
        g = h[next(iter(h))]
        lens, ind = g["inputs/lengths"][()], g["expected/indices"][()]
    r = int(np.argmax(lens))  # a row longer than k: some candidate is not selected
    assert lens[r] > ind.shape[1]
    missing = sorted(set(range(lens[r])) - set(ind[r].tolist()))[0]
    name = "rank0" if r in RANKS["rank0"] else "rank1"
    local = RANKS[name].index(r)

    def edit(part, x):
        if part == name:
            x[local, 0] = missing

    f = tmp_path / "cp.h5"
    split(src, f, RANKS, edit)
    p, res = consistency(run_cli, f, tmp_path)
    assert res[0]["verdict"] == "FAIL", res
    m = res[0]["message"]
    assert "case 'full'" in m and f"case '{name}'" in m and "of layer 5" in m and f"request {100 + r}" in m, m
    assert p.returncode == 1


def test_other_choices_among_exact_ties_at_the_kth_score_pass(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "topk_ties_at_kth.h5"
    with h5py.File(src, "r") as h:
        g = h[next(iter(h))]
        lg, lens, ind = g["inputs/logits"][()], g["inputs/lengths"][()], g["expected/indices"][()]
    r = 0
    row = lg[r, : lens[r]]
    kth = np.sort(row)[::-1][ind.shape[1] - 1]
    tied = set(np.flatnonzero(row == kth).tolist())
    chosen = set(ind[r].tolist())
    p_in, p_out = sorted(tied & chosen)[0], sorted(tied - chosen)[0]

    def edit(part, x):
        if part == "rank0":
            x[0, list(x[0]).index(p_in)] = p_out

    f = tmp_path / "cp.h5"
    split(src, f, {"rank0": [0], "rank1": list(range(1, len(lens)))}, edit)
    p, res = consistency(run_cli, f, tmp_path)
    assert len(res) == 1 and res[0]["verdict"] == "BITEXACT", res


def test_without_provenance_nothing_is_compared(repo_root, run_cli, tmp_path):
    f = tmp_path / "cp.h5"
    split(repo_root / "golden" / "topk_lengths_sparse.h5", f, RANKS)
    with h5py.File(f, "r+") as h:
        for n in ("rank0", "rank1"):
            del h[n].attrs["request_ids"]
    p, res = consistency(run_cli, f, tmp_path)
    # One line all the same, saying that nothing was compared (only the unsplit call keeps its ids).
    assert len(res) == 1 and res[0]["verdict"] == "BITEXACT" and res[0]["numel"] == 0 and p.returncode == 0, (res, p.stdout)
    assert res[0]["message"].startswith("0 repeated row(s) compared: no row repeats"), res
    with h5py.File(f, "r+") as h:
        del h["full"].attrs["request_ids"]
    p, res = consistency(run_cli, f, tmp_path)
    assert len(res) == 1 and res[0]["numel"] == 0 and p.returncode == 0, (res, p.stdout)
    assert res[0]["message"] == "0 repeated row(s) compared: no call carries the provenance attr request_ids (one id per row)", res
