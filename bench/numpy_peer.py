#!/usr/bin/env python3
"""numpy fp64 peer of the ragged logits benchmark: s = q.reshape(S*H, D) @ k.T (BLAS dgemm), relu, weighted
head sum, kv scale. S is reduced (default 512) because the [S*H, N] fp64 score matrix of S = 4096 would need
8.6 GB. Reports effective q.k MAC/s and peak RSS. Threads: OMP/OPENBLAS_NUM_THREADS (bench.sh sets 2)."""
import argparse
import resource
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--S", type=int, default=512)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--D", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    # fp8-representable values are not needed for the timing; fp64 gaussian data of the same shape.
    q = rng.standard_normal((a.S, a.H, a.D))
    k = rng.standard_normal((a.N, a.D))
    w = rng.standard_normal((a.S, a.H))
    sc = rng.random(a.N)
    best = float("inf")
    for _ in range(a.reps):
        t0 = time.perf_counter()
        s = q.reshape(a.S * a.H, a.D) @ k.T                   # [S*H, N]
        np.maximum(s, 0.0, out=s)
        logits = np.einsum("shn,sh->sn", s.reshape(a.S, a.H, a.N), w) * sc[None, :]
        best = min(best, time.perf_counter() - t0)
        del s, logits
    macs = a.S * a.N * a.H * a.D
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"numpy_peer S={a.S} N={a.N} H={a.H} D={a.D}: {best:.3f} s, {macs / best / 1e9:.1f} G MAC/s, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
