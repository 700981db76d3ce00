"""Gate a torch implementation of the DSA indexer's MQA logits and top-k on dsa-check's goldens.

    pip install ./scripts/dsa_dump                      # the kit + its pytest plugin (entry point, no -p needed)
    DSA_CHECK_BIN=build/dsa-check pytest -n auto --junitxml=report.xml scripts/examples/pytest_torch_kernel

Each test runs once per golden case of its stage (ids `<file>::<case>`); `dsa_case.check()` writes the case's
inputs plus the kernel's outputs to a file, runs `dsa-check check` on it and fails the test with dsa-check's
verdict lines when the outputs are wrong. Runs on CUDA when available, else on the CPU (torch >= 2.1 for fp8).
test_logits_topk_numpy.py is the same without torch.
"""
import pytest

torch = pytest.importorskip("torch")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def mqa_logits(q, kv, kv_scale, weights, ks, ke, clean_logits=True, max_seqlen_k=0, logits_dtype="float32"):
    """DeepGEMM fp8_mqa_logits in torch ops: logit(i, j) = kv_scale[j] * sum_h relu(q[i, h] . kv[j]) * weights[i, h]
    for ks[i] <= j < ke[i] (fp32 accumulation); outside, -inf when clean_logits, else left as computed.
    max_seqlen_k > 0: compressed rows [S, max_seqlen_k], column t holds key ks[i] + t."""
    scores = torch.einsum("shd,nd->shn", q.float(), kv.float()).relu()           # [S, H, N]
    logits = (scores * weights.unsqueeze(-1)).sum(dim=1) * kv_scale.unsqueeze(0)   # [S, N]
    ks, ke = ks.long().unsqueeze(1), ke.long().unsqueeze(1)
    if max_seqlen_k > 0:
        key = ks + torch.arange(max_seqlen_k, device=q.device).unsqueeze(0)      # key of column t
        logits = logits.gather(1, key.clamp(max=kv.shape[0] - 1))
    else:
        key = torch.arange(kv.shape[0], device=q.device).unsqueeze(0)
    if clean_logits:
        logits = logits.masked_fill((key < ks) | (key >= ke), float("-inf"))
    return logits.to(torch.bfloat16 if logits_dtype == "bf16" else torch.float32)


def topk_indices(logits, lengths, row_starts=None, offsets=None, page_table=None, k=2048, index_base="relative",
                 sorted=False, fast_path=True, short_rows="pad", page_size=64, rows_per_request=1, num_init_tokens=0,
                 num_local_tokens=0, **_):
    """Top-k of each row's candidates logits[r, start : start + len] (start = row_starts[r] or 0) as indices in the
    requested base: relative p, ragged_offset p + offsets[r], absolute start + p, page_slot
    page_table[r // rows_per_request][p // page_size] * page_size + p % page_size. fast_path: rows with len <= k
    give [0..len-1]. Short rows end in -1, or (short_rows="torch") in the -inf columns torch.topk picked."""
    R, C = logits.shape
    dev = logits.device
    n = lengths.long().unsqueeze(1)
    start = row_starts.long().unsqueeze(1) if row_starts is not None else torch.zeros_like(n)
    p = torch.arange(C, device=dev).unsqueeze(0) - start                         # relative position of a column
    cand = (p >= 0) & (p < n)
    score = logits.double()  # exact; a candidate's -inf must rank above the non-candidates' (-DBL_MAX < any fp32)
    score = score.masked_fill(score == float("-inf"), torch.finfo(torch.float64).min).masked_fill(~cand, float("-inf"))
    score = score.masked_fill(cand & ((p < num_init_tokens) | (p >= n - num_local_tokens)), float("inf"))  # sglang
    kk = min(k, C)
    pick = score.topk(kk, dim=1, sorted=bool(sorted)).indices - start             # relative positions
    if fast_path:
        pick = torch.where(n <= k, torch.arange(kk, device=dev).expand(R, kk), pick)
    valid = (pick >= 0) & (pick < n)
    if short_rows != "torch":                                                     # -1 padding trails the picks
        pick = pick.gather(1, torch.argsort((~valid).int(), dim=1, stable=True))
        valid = (pick >= 0) & (pick < n)
    if index_base == "ragged_offset":
        idx = pick + offsets.long().unsqueeze(1)
    elif index_base == "absolute":
        idx = pick + start
    elif index_base == "page_slot":
        pages = page_table.long()[torch.arange(R, device=dev) // rows_per_request]
        block = (pick.clamp(min=0) // page_size).clamp(max=pages.shape[1] - 1)
        idx = pages.gather(1, block) * page_size + pick % page_size
    else:
        idx = pick
    pad = pick + start if short_rows == "torch" else torch.full_like(idx, -1)
    out = torch.full((R, k), -1, dtype=torch.int32, device=dev)
    out[:, :kk] = torch.where(valid, idx, pad).int()
    return out


@pytest.mark.dsa_golden(stages="indexer.logits_ragged")
def test_mqa_logits(dsa_case):
    i, a = dsa_case.inputs(framework="torch", device=DEVICE), dsa_case.attrs
    logits = mqa_logits(i["q"], i["kv"], i["kv_scale"], i["weights"], i["ks"], i["ke"], clean_logits=a["clean_logits"],
                        max_seqlen_k=a["max_seqlen_k"], logits_dtype=a["logits_dtype"])
    dsa_case.check({"logits": logits})  # judged by the stage's default bound (sm90-fp8; bf16-logits for bf16)


@pytest.mark.dsa_golden(stages="indexer.topk")
def test_topk(dsa_case):
    i, a = dsa_case.inputs(framework="torch", device=DEVICE), dsa_case.attrs
    indices = topk_indices(i["logits"], i["lengths"], i.get("row_starts"), i.get("offsets"), i.get("page_table"), **a)
    results = dsa_case.check({"indices": indices})
    assert all(r["pass"] for r in results)  # the returned report: verdict, message, metrics per tensor
