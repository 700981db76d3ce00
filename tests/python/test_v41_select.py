"""v41.select (DeepSeek-V4.1 indexer selection, spec v41 §5) against the independent numpy model reference/v41.py
`select` (written from the spec, never from the C++ reference): the committed goldens' selections are the model's
(as sets: ties may be chosen differently), and end to end through the kit and the CLI: the model's output passes for
a publisher, a consumer and the REF short-row quirk; bugs fail (exit 1); a consumer list that breaks DeepGEMM's
contract is an input error (exit 2)."""
import subprocess

import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v41

CLI_STAGES = ("v41.select",)
GOLDENS = ["v41sel_publish", "v41sel_consumer", "v41sel_consumer_ref_quirk", "v41sel_ratio2", "v41sel_serving"]


def load(path):
    """The golden's inputs and expected tensors (bf16 as float32 values) and attrs, through the kit's reader."""
    c = dsa_dump.read_dump(str(path))[0]
    val = lambda t: t.astype(np.float32) if t.dtype == ml_dtypes.bfloat16 else t  # noqa: E731
    return {k: val(v) for k, v in c.inputs.items()}, {k: val(v) for k, v in c.expected.items()}, dict(c.attrs)


def model(ins, at):
    return v41.select(ins["scores"], ins["positions"], k=int(at["k"]), window=int(at["window"]), ratio=int(at["cmp_ratio"]),
                      block_size=int(at["block_size"]), topk_blocks=int(at["topk_blocks"]), publish=bool(at["publish"]),
                      candidate_blocks=ins.get("candidate_blocks"), short_rows=at.get("short_rows", "pad"))


def tie_equal(sc, got, want, offset):
    """The same number of picks, differing only in candidates tied at the reference's k-th score (exact ties: the
    scores are the case's inputs)."""
    g, w = set(int(x) for x in got if x >= 0), set(int(x) for x in want if x >= 0)
    if len(g) != len(w):
        return False
    if g == w:
        return True
    kth = min(sc[j - offset] for j in w)
    return all(sc[j - offset] == kth for j in g ^ w)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_selection_is_the_numpy_models(repo_root, name):
    ins, exp, at = load(repo_root / "golden" / f"{name}.h5")
    idx, pub = model(ins, at)
    want = exp["indices"]
    for r in range(len(idx)):
        assert list(np.sort(idx[r][idx[r] >= 0])) == list(idx[r][idx[r] >= 0])  # ascending
        assert tie_equal(ins["scores"][r], idx[r], want[r], int(at["window"])), f"row {r}"
    if pub is not None:
        for r in range(len(pub)):
            p = int(ins["positions"][r])
            n = (p + 1) // int(at["cmp_ratio"]) if p >= 0 else 0
            bs = int(at["block_size"])
            bsc = np.array([np.max(ins["scores"][r][b * bs:min(n, (b + 1) * bs)]) for b in range((n + bs - 1) // bs)] or [0.0])
            if n:
                bsc[-1] = np.inf
            assert tie_equal(bsc, pub[r], exp["published_blocks"][r], 0), f"published row {r}"


def make(seed, S, N, positions, k, consumer_blocks=0, neg_inf=False):
    rng = np.random.default_rng(seed)
    sc = (np.abs(rng.standard_normal((S, N))) * 8).astype(ml_dtypes.bfloat16).astype(np.float32)
    if neg_inf:
        sc[:, 3::5] = -np.inf
    cb = None
    if consumer_blocks:
        one = (np.abs(rng.standard_normal((S, N))) * 8).astype(ml_dtypes.bfloat16).astype(np.float32)
        _, cb = v41.select(one, positions, k=k, publish=True, topk_blocks=consumer_blocks)
    return sc, np.array(positions, np.int32), cb


def run_check(cli, path):
    p = subprocess.run([cli, "check", str(path)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("kind", ["publish", "consumer", "ref_quirk", "ratio2"])
def test_numpy_model_passes(cli, tmp_path, kind):
    pos = [1999, 1200, 640, 63, 0, -1]
    sc, p, cb = make(5, 6, 2000, pos, 128, consumer_blocks=10 if kind in ("consumer", "ref_quirk") else 0,
                     neg_inf=kind == "ref_quirk")
    ratio = 2 if kind == "ratio2" else 1
    short = "ref" if kind == "ref_quirk" else None
    idx, pub = v41.select(sc, p, k=128, ratio=ratio, topk_blocks=64, publish=kind == "publish", candidate_blocks=cb,
                          short_rows=short or "pad")
    path = tmp_path / f"{kind}.h5"
    dsa_dump.capture_v41_select(sc.astype(ml_dtypes.bfloat16), p, idx, pub, candidate_blocks=cb, k=128, cmp_ratio=ratio,
                                topk_blocks=64, short_rows=short, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 0, txt
    assert "indices" in txt


@pytest.mark.parametrize("bug", ["descending", "no_window", "pinned_block_missing", "mask_ignored"])
def test_bugs_fail(cli, tmp_path, bug):
    pos = [1999, 1203, 641]
    sc, p, cb = make(6, 3, 2000, pos, 128, consumer_blocks=12 if bug == "mask_ignored" else 0)
    publish = bug == "pinned_block_missing"
    idx, pub = v41.select(sc, p, k=128, topk_blocks=64, publish=publish, candidate_blocks=None if bug == "mask_ignored" else cb)
    if bug == "descending":
        for r in range(len(idx)):
            v = idx[r][idx[r] >= 0]
            idx[r][:len(v)] = v[np.argsort(-sc[r][v - 128], kind="stable")]
    elif bug == "no_window":
        idx = np.where(idx >= 0, idx - 128, -1).astype(np.int32)
    elif bug == "pinned_block_missing":  # the newest (partial) block not pinned: only full blocks ranked
        for r, q in enumerate(pos):
            n = q + 1
            full = sc[r][:n // 8 * 8].reshape(-1, 8).max(axis=1)
            chosen = np.sort(np.argsort(-full, kind="stable")[:64])
            pub[r] = -1
            pub[r][:len(chosen)] = chosen
    path = tmp_path / f"{bug}.h5"
    dsa_dump.capture_v41_select(sc, p, idx, pub, candidate_blocks=cb, k=128, topk_blocks=64, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    if bug == "no_window":
        assert "no_window_offset" in txt


@pytest.mark.parametrize("edit", ["unsorted", "repeated", "after_padding"])
def test_consumer_lists_breaking_the_contract_are_input_errors(cli, tmp_path, edit):
    sc, p, cb = make(7, 2, 800, [799, 500], 64, consumer_blocks=8)
    idx, _ = v41.select(sc, p, k=64, candidate_blocks=cb)
    cb = cb.copy()
    if edit == "unsorted":
        cb[0, [1, 2]] = cb[0, [2, 1]]
    elif edit == "repeated":
        cb[1, 3] = cb[1, 2]
    else:
        cb[0, 4] = -1
    path = tmp_path / f"{edit}.h5"
    w = dsa_dump.DumpWriter(str(path), validate=False)
    dsa_dump.capture_v41_select(sc, p, idx, candidate_blocks=cb, k=64, out=w)
    w.close()
    rc, txt = run_check(cli, path)
    assert rc == 2, txt
    assert "inputs/candidate_blocks" in txt and "B59" in txt


def test_consumer_on_deepgemm_sparse_logits(repo_root, dsa_check_bin, tmp_path):
    """scores_layout candidates: a consumer fed DeepGEMM's sparse logits (column c = list[c // 8] * 8 + c % 8) selects
    what the model selects on the same scores laid out by position; reading the columns as positions fails."""
    ins, exp, at = load(repo_root / "golden" / "v41sel_consumer_sparse_logits.h5")
    sp, cb, pos = ins["scores"], ins["candidate_blocks"], ins["positions"]
    assert sp.shape[1] == cb.shape[1] * 8
    N = 400
    sc = np.full((sp.shape[0], N), -np.inf, np.float32)
    for r in range(sp.shape[0]):
        for e, b in enumerate(cb[r]):
            if b >= 0:
                for o in range(8):
                    if b * 8 + o < N:
                        sc[r, b * 8 + o] = sp[r, e * 8 + o]
    idx, _ = v41.select(sc, pos, k=int(at["k"]), window=int(at["window"]), candidate_blocks=cb)
    for r in range(len(idx)):
        assert tie_equal(sc[r], idx[r], exp["indices"][r], int(at["window"])), f"row {r}"
    # The same file without the layout attr: the 96 sparse columns read as positions cannot cover the rows' reach.
    import shutil

    import h5py
    f = tmp_path / "pos.h5"
    shutil.copy(repo_root / "golden" / "v41sel_consumer_sparse_logits.h5", f)
    with h5py.File(f, "r+") as h:
        del h[next(iter(h))].attrs["scores_layout"]
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "a column for every reachable position" in p.stdout + p.stderr, p.stdout + p.stderr


def test_candidate_reuse_is_checked_across_cases(repo_root, dsa_check_bin, tmp_path):
    """A consumer (v41.select with candidate_blocks, v41.logits with sparse_blocks) whose attr candidate_source_layer
    names a publisher (v41.select, attr layer, publish 1) among the files read must read exactly its published_blocks:
    BITEXACT when it does, FAIL naming the row and entry when the publisher output other blocks."""
    import h5py  # noqa: F401

    cases = {c.name: c for c in dsa_dump.read_dump(str(repo_root / "golden" / "layer_v41_decode.h5"))}
    pub, con, sel = cases["src_select"], cases["dst_logits"], cases["dst_select"]

    def write(path, published):
        with dsa_dump.DumpWriter(str(path)) as w:
            w.add_case("pub", "v41.select", inputs=dict(pub.inputs), outputs={"indices": pub.expected["indices"], "published_blocks": published},
                       attrs={**pub.attrs, "layer": 20})
            w.add_case("con", "v41.logits", inputs=dict(con.inputs), outputs={"logits": con.expected["logits"]},
                       attrs={**con.attrs, "layer": 24, "candidate_source_layer": 20})
            w.add_case("sel", "v41.select", inputs=dict(sel.inputs), outputs={"indices": sel.expected["indices"]},
                       attrs={**sel.attrs, "layer": 24, "candidate_source_layer": 20})

    ok = tmp_path / "ok.h5"
    write(ok, pub.expected["published_blocks"])
    p = subprocess.run([str(dsa_check_bin), "check", str(ok)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("candidate reuse: layer 24") == 2, p.stdout
    bad = tmp_path / "bad.h5"
    other = np.array(pub.expected["published_blocks"], copy=True)
    other[1, 0] = other[1, 0] + 1 if other[1, 1] != other[1, 0] + 1 else other[1, 0] - 1
    write(bad, other)
    p = subprocess.run([str(dsa_check_bin), "check", str(bad)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "candidate reuse:" in p.stdout and "row 1 entry 0" in p.stdout, p.stdout


def test_consumer_work_is_bounded_by_its_list_not_its_reach(repo_root, dsa_check_bin, tmp_path):
    """A consumer on DeepGEMM's sparse logits with rows at the largest position its dtype holds: only the listed blocks' positions are
    ranked, so the check takes the time of its inputs (the same picks: exit 0). The REF quirk ranks every reachable
    position (rows as wide as the longest on the GPU): rows x the largest reach past 2^26 is an input error naming the limit
    (exit 2), never a huge allocation."""
    import shutil
    import time

    import h5py
    f = tmp_path / "far.h5"
    shutil.copy(repo_root / "golden" / "v41sel_consumer_sparse_logits.h5", f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        pos = g["inputs/positions"]
        v = pos[...]
        v[v >= 0] = np.iinfo(v.dtype).max
        pos[...] = v
    t0 = time.monotonic()
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert time.monotonic() - t0 < 60
    with h5py.File(f, "r+") as h:
        h[next(iter(h))].attrs["short_rows"] = np.bytes_(b"ref")
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "rows x the largest reach <= 2^26" in p.stdout + p.stderr, p.stdout + p.stderr
