"""indexer.fused (#17 item 3): a fused indexer's top-k judged against exact logits. The committed goldens' expected
indices are checked here against the independent numpy model of reference/indexer.py (paged_logits: exact fp64 q.k
from the fp8 codes, ReLU-weighted head sum, kv scale; canonical_order: top-k by score then position), and kernel
outputs built from it pass or fail as they must."""
import h5py
import ml_dtypes
import pytest

import dsa_dump
from reference import indexer as ref


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]},
                {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()})


@pytest.mark.parametrize("name", ["fused_decode_mtp", "fused_aiter_preshuffle"])
def test_expected_indices_are_the_numpy_top_k(repo_root, name):
    ins, exp, attrs = load(repo_root / "golden" / f"{name}.h5")
    k = int(attrs["k"])
    for r, row in enumerate(ref.paged_logits(ins, attrs.get("layout", "indexer_kcache_planar"))):
        got = exp["indices"][r]
        if len(row) <= k:  # fast path
            assert list(got[: len(row)]) == list(range(len(row))) and (got[len(row):] == -1).all()
            continue
        assert set(got.tolist()) == set(ref.canonical_order(row)[:k]), (name, r)


def test_kernel_outputs_pass_or_fail(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "fused_decode_mtp.h5"
    ins, exp, attrs = load(src)
    k = int(attrs["k"])
    logits = ref.paged_logits(ins, "indexer_kcache_planar")
    r = next(i for i, row in enumerate(logits) if len(row) > k)
    order = ref.canonical_order(logits[r])

    def run(indices):
        path = tmp_path / "k.h5"
        q = ins["q"]
        dsa_dump.capture_fused_indexer(q.view(ml_dtypes.float8_e4m3fn), ins["kv_cache"], ins["weights"], ins["context_lens"],
                                       ins["block_table"], indices, k=k, max_context_len=int(attrs["max_context_len"]), out=path)
        return run_cli("check", path)

    good = exp["indices"].copy()
    good[r] = good[r][::-1]  # any order of the right set (sorted=0)
    p = run(good)
    assert p.returncode == 0, p.stdout + p.stderr
    bad = exp["indices"].copy()
    bad[r, list(bad[r]).index(order[0])] = order[-1]  # the best key replaced by the worst
    p = run(bad)
    assert p.returncode == 1 and "FAIL" in p.stdout, p.stdout
