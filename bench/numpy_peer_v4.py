#!/usr/bin/env python3
"""numpy fp64 peer of the v4.compressor benchmark (bench/bench_attn.cpp BM_v4_compressor_prefill_32k): a 32K-token
prefill of one C4 layer (D 512, H 4096, r 4, coff 2): KV = x.wkv^T and S = x.wgate^T + ape in blocks of 1024 tokens
(BLAS dgemm), then the overlapped 8-row per-channel softmax pooling, RMSNorm and RoPE of the 8192 entries.
Reports effective projection MAC/s (T * 2 * coff * D * H) and peak RSS."""
import argparse
import resource
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=32768)
    ap.add_argument("--H", type=int, default=4096)
    ap.add_argument("--D", type=int, default=512)
    a = ap.parse_args()
    r, coff, D = 4, 2, a.D
    rng = np.random.default_rng(0)
    wkv = rng.standard_normal((coff * D, a.H)) / 64
    wg = rng.standard_normal((coff * D, a.H)) / 64
    ape = rng.standard_normal((r, coff * D))
    gamma = 1 + 0.1 * rng.standard_normal(D)
    x = rng.standard_normal((a.T, a.H)).astype(np.float32)  # bf16-valued activations held compactly
    t0 = time.perf_counter()
    kv = np.empty((a.T, coff * D), np.float32)
    sc = np.empty((a.T, coff * D), np.float32)
    for b in range(0, a.T, 1024):
        xb = x[b:b + 1024].astype(np.float64)
        kv[b:b + 1024] = xb @ wkv.T
        sc[b:b + 1024] = xb @ wg.T + ape[np.arange(b, b + len(xb)) % r]
    n = a.T // r
    kvg, scg = kv.reshape(n, r, coff * D).astype(np.float64), sc.reshape(n, r, coff * D).astype(np.float64)
    prev_kv = np.concatenate([np.zeros((1, r, D)), kvg[:-1, :, :D]])
    prev_sc = np.concatenate([np.full((1, r, D), -np.inf), scg[:-1, :, :D]])
    win_kv = np.concatenate([prev_kv, kvg[:, :, D:]], axis=1)
    win_sc = np.concatenate([prev_sc, scg[:, :, D:]], axis=1)
    w = np.exp(win_sc - win_sc.max(axis=1, keepdims=True))
    c = (w * win_kv).sum(axis=1) / w.sum(axis=1)
    y = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-6) * gamma
    ang = np.arange(n)[:, None] * r * (1.0 / 160000 ** (np.arange(0, 64, 2) / 64))[None, :]
    a0, a1 = y[:, D - 64::2].copy(), y[:, D - 63::2].copy()
    y[:, D - 64::2] = a0 * np.cos(ang) - a1 * np.sin(ang)
    y[:, D - 63::2] = a1 * np.cos(ang) + a0 * np.sin(ang)
    dt = time.perf_counter() - t0
    macs = a.T * 2 * coff * D * a.H
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"numpy_peer_v4 T={a.T} H={a.H} D={D}: {dt:.3f} s, {macs / dt / 1e9:.1f} G MAC/s, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
