"""The same gate as test_logits_topk.py with numpy kernels (no torch): numpy + h5py + ml_dtypes.

    pip install ./scripts/dsa_dump        # or: PYTHONPATH=scripts/dsa_dump pytest -p dsa_dump.pytest_plugin ...
    DSA_CHECK_BIN=build/dsa-check pytest -q scripts/examples/pytest_torch_kernel/test_logits_topk_numpy.py

The logits are computed in fp64 (fp8 products and their 128-term dot products are exact there) and rounded once to
fp32, so dsa-check finds them bit-exact on the committed goldens, far inside the sm90-fp8 bound; the top-k picks any
of the tied candidates, which passes as WITHIN_BOUND (same sets up to accepted tie swaps).
"""
import numpy as np
import pytest


def mqa_logits(q, kv, kv_scale, weights, ks, ke, clean_logits=True, max_seqlen_k=0, logits_dtype="float32"):
    """DeepGEMM fp8_mqa_logits: logit(i, j) = kv_scale[j] * sum_h relu(q[i, h] . kv[j]) * weights[i, h] for
    ks[i] <= j < ke[i]; -inf elsewhere when clean_logits (undefined otherwise: 0 here). max_seqlen_k > 0: compressed
    rows, column t holds key ks[i] + t."""
    qf, kf = np.asarray(q, np.float64), np.asarray(kv, np.float64)  # fp8 (ml_dtypes) -> exact fp64
    S, H, D = qf.shape
    scores = np.maximum((qf.reshape(S * H, D) @ kf.T).reshape(S, H, -1), 0.0)  # [S, H, N], relu
    full = np.einsum("shn,sh->sn", scores, np.asarray(weights, np.float64)) * np.asarray(kv_scale, np.float64)
    out = np.full((S, max_seqlen_k or kf.shape[0]), -np.inf if clean_logits else 0.0)
    for i, (lo, hi) in enumerate(zip(np.asarray(ks, np.int64), np.asarray(ke, np.int64))):
        cols = slice(0, hi - lo) if max_seqlen_k else slice(lo, hi)
        out[i, cols] = full[i, lo:hi]
    out = out.astype(np.float32)  # one rounding from the fp64 sum
    if logits_dtype == "bf16":
        import ml_dtypes

        out = out.astype(ml_dtypes.bfloat16)
    return out


def topk_indices(logits, lengths, row_starts=None, offsets=None, page_table=None, k=2048, index_base="relative",
                 sorted=False, fast_path=True, short_rows="pad", page_size=64, rows_per_request=1, num_init_tokens=0,
                 num_local_tokens=0, **_):
    """Top-k of each row's candidates logits[r, start : start + len] (start = row_starts[r] or 0) as indices in the
    requested base: relative p, ragged_offset p + offsets[r], absolute start + p, page_slot
    page_table[r // rows_per_request][p // page_size] * page_size + p % page_size. fast_path: rows with len <= k
    give [0..len-1]. Short rows end in -1, or (short_rows="torch") in the -inf columns torch.topk picks."""
    x = np.asarray(logits, np.float32)
    R, C = x.shape
    out = np.full((R, k), -1, np.int32)
    for r in range(R):
        n = int(lengths[r])
        start = int(row_starts[r]) if row_starts is not None else 0
        score = np.full(C, -np.inf)  # non-candidates; a candidate's -inf ranks above them (-DBL_MAX, below all fp32)
        score[start:start + n] = np.where(x[r, start:start + n] == -np.inf, np.finfo(np.float64).min,
                                          x[r, start:start + n])
        score[start:start + min(num_init_tokens, n)] = np.inf  # sglang forced init / local tokens
        score[start + max(n - num_local_tokens, 0):start + n] = np.inf
        if fast_path and n <= k:
            p = np.arange(n)  # the fast path: [0..len-1] regardless of the scores
        else:  # descending score, NaN above +inf (as torch.topk); stable: ties by position
            nan = np.isnan(score)
            p = np.lexsort((-np.where(nan, 0.0, score), ~nan))[:k] - start
        valid = (p >= 0) & (p < n)
        if short_rows != "torch":
            p, valid = p[valid], valid[valid]  # -1 padding after the picks
        q = np.where(valid, p, 0)
        if index_base == "ragged_offset":
            idx = q + int(offsets[r])
        elif index_base == "absolute":
            idx = q + start
        elif index_base == "page_slot":
            pages = np.asarray(page_table[r // rows_per_request], np.int64)
            idx = pages[q // page_size] * page_size + q % page_size
        else:
            idx = q
        out[r, :len(p)] = np.where(valid, idx, p + start)  # invalid only with short_rows="torch": its column
    return out


@pytest.mark.dsa_golden(stages="indexer.logits_ragged")
def test_mqa_logits(dsa_case):
    i, a = dsa_case.inputs(framework="numpy"), dsa_case.attrs
    logits = mqa_logits(i["q"], i["kv"], i["kv_scale"], i["weights"], i["ks"], i["ke"], clean_logits=a["clean_logits"],
                        max_seqlen_k=a["max_seqlen_k"], logits_dtype=a["logits_dtype"])
    results = dsa_case.check({"logits": logits})  # the report's results, one per checked tensor
    assert results[0]["bounded"]["max_err_over_m"] < 2**-20  # fp64 sums: far inside the bound (sm90-fp8: 2^-10)


@pytest.mark.dsa_golden(stages=["indexer.topk"])
def test_topk(dsa_case):
    i, a = dsa_case.inputs(framework="numpy"), dsa_case.attrs
    dsa_case.check({"indices": topk_indices(i["logits"], i["lengths"], i.get("row_starts"), i.get("offsets"),
                                            i.get("page_table"), **a)})
