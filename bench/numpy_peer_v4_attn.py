#!/usr/bin/env python3
"""numpy fp64 peer of the V4 sparse attention decode benchmark (bench/bench_attn.cpp BM_v4_sparse_attn_decode, catalogue
case v4sa_c4_flash_full): 32 requests x MTP 2 at the same context lengths, 64 heads, D 512; per row the sliding-window
keys (positions max(0, p - 127) .. p of the SWA cache) and min(512, (p + 1) // 4) compressed entries (C4), dequantized
fp64, S = q @ K.T (BLAS dgemm), softmax with the sink in the denominator, O = P @ K. Reports effective QK+PV MAC/s
(keys x N x 2 D summed over rows) and peak RSS. Threads: OMP/OPENBLAS_NUM_THREADS (bench.sh sets them)."""
import argparse
import resource
import time

import numpy as np

KV_LENS = [8192, 4100, 2053, 6000, 7777, 128, 129, 3000] * 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--q_len", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    N, D = a.heads, a.dim
    rows = []  # (request, position)
    for b, kl in enumerate(KV_LENS):
        for i in range(a.q_len):
            rows.append((b, kl - a.q_len + i))
    q = rng.standard_normal((len(rows), N, D))
    swa = [rng.standard_normal((kl, D)) for kl in KV_LENS]               # each request's window cache
    cmp = [rng.standard_normal((max(kl // 4, 1), D)) for kl in KV_LENS]  # each request's compressed entries
    sel = []
    for b, p in rows:
        n = min(a.topk, (p + 1) // 4)
        sel.append(rng.permutation((p + 1) // 4)[:n] if n else np.zeros(0, np.int64))
    sink, scale = 2.0, D ** -0.5
    best = float("inf")
    keys = 0
    for _ in range(a.reps):
        t0 = time.perf_counter()
        out = np.empty((len(rows), N, D))
        keys = 0
        for r, (b, p) in enumerate(rows):
            k = np.concatenate([swa[b][max(0, p - 127): p + 1], cmp[b][sel[r]]])  # [keys, D]
            keys += len(k)
            s = (q[r] @ k.T) * scale
            m = np.maximum(s.max(axis=1, keepdims=True), sink)
            e = np.exp(s - m)
            L = e.sum(axis=1, keepdims=True) + np.exp(sink - m)
            out[r] = (e @ k) / L
        best = min(best, time.perf_counter() - t0)
    macs = keys * N * 2 * D
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"numpy_peer_v4_attn rows={len(rows)} N={N} D={D} keys/row={keys / len(rows):.1f}: {best * 1e3:.1f} ms, "
          f"{macs / best / 1e9:.1f} G MAC/s, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
