#!/usr/bin/env python3
"""numpy fp64 peer of the sparse MLA decode benchmark (bench/bench_attn.cpp): per (batch, q token) row, gather the
topk selected keys of a 656-byte-cache-sized key set (dequantized fp64), S = q @ K.T (BLAS dgemm), softmax, O = P @ V
(V = the first 512 dims of K), lse. Same shape as the reference benchmark: b 64, s_q 2, h_q 128, topk 2048.
Reports effective QK+PV MAC/s and peak RSS. Threads: OMP/OPENBLAS_NUM_THREADS (bench.sh sets them)."""
import argparse
import resource
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=64)
    ap.add_argument("--s_q", type=int, default=2)
    ap.add_argument("--h", type=int, default=128)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    q = rng.standard_normal((a.b * a.s_q, a.h, 576))
    kv = rng.standard_normal((a.tokens, 576))
    idx = np.stack([rng.permutation(a.tokens)[: a.topk] for _ in range(a.b * a.s_q)])
    best = float("inf")
    for _ in range(a.reps):
        t0 = time.perf_counter()
        out = np.empty((a.b * a.s_q, a.h, 512))
        lse = np.empty((a.b * a.s_q, a.h))
        for r in range(a.b * a.s_q):
            k = kv[idx[r]]                     # [topk, 576]
            s = q[r] @ k.T                     # [h, topk]
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - m)
            L = p.sum(axis=1, keepdims=True)
            out[r] = (p @ k[:, :512]) / L
            lse[r] = (m + np.log(L))[:, 0]
        best = min(best, time.perf_counter() - t0)
    macs = a.b * a.s_q * a.h * a.topk * (576 + 512)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"numpy_peer_attn b={a.b} s_q={a.s_q} h_q={a.h} topk={a.topk}: {best:.3f} s, {macs / best / 1e9:.1f} G MAC/s, "
          f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
