#!/usr/bin/env python3
"""End-to-end timing of `dsa-check check --backend cuda` on a DeepGEMM paged-logits dump of serving size (issue #16):
B requests x context L, next_n, H 64, D 128, page size 64, shuffled block table (numpy + h5py, written uncompressed).
The kernel output stored in the file is the reference itself (`dsa-check expect --backend cuda`), so the check is a
full load + GPU reference + compare that must say BITEXACT.

    python3 bench/gpu_e2e_paged.py BUILD/dsa-check WORKDIR [B L NEXT_N]
"""
import os
import subprocess
import sys
import time

import h5py
import numpy as np


def main():
    exe, work = sys.argv[1], sys.argv[2]
    B, L, NN = (int(x) for x in sys.argv[3:6]) if len(sys.argv) > 5 else (64, 131072, 2)
    H, D, ps = 64, 128, 64
    MB = (L + ps - 1) // ps
    P = B * MB
    rng = np.random.default_rng(7)
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "paged_in.h5")
    dump = os.path.join(work, "paged_dump.h5")

    def fp8(shape):
        x = rng.integers(0, 256, size=shape, dtype=np.uint8)
        x[(x & 0x7F) == 0x7F] = 0x38
        return x

    cache = np.empty((P, ps, 1, D + 4), dtype=np.uint8)
    flat = cache.reshape(P, ps * (D + 4))
    flat[:, : ps * D] = fp8((P, ps * D))
    flat[:, ps * D:] = (rng.random((P, ps), dtype=np.float32) * 0.01 + 0.001).view(np.uint8).reshape(P, ps * 4)
    t0 = time.perf_counter()
    with h5py.File(src, "w") as f:
        g = f.create_group("paged_128k")
        g.attrs["schema_version"] = 1
        g.attrs["stage"] = "indexer.logits_paged"
        g.attrs["max_context_len"] = L
        g.attrs["clean_logits"] = 0
        i = g.create_group("inputs")
        q = i.create_dataset("q", data=fp8((B, NN, H, D)))
        q.attrs["dtype"] = "fp8_e4m3fn"
        i.create_dataset("kv_cache", data=cache)
        i.create_dataset("weights", data=(rng.random((B * NN, H), dtype=np.float32) * 2 - 1))
        i.create_dataset("context_lens", data=np.full(B, L, dtype=np.int32))
        i.create_dataset("block_table", data=rng.permutation(P).astype(np.int32).reshape(B, MB))
    print(f"wrote {src}: {os.path.getsize(src) / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s", flush=True)
    for f in (dump,):
        if os.path.exists(f):
            os.remove(f)
    t0 = time.perf_counter()
    subprocess.run([exe, "expect", src, "--out", dump, "--backend", os.environ.get("DSA_E2E_EXPECT_BACKEND", "cuda")], check=True, stdout=subprocess.DEVNULL)
    print(f"expect --backend cuda: {time.perf_counter() - t0:.1f} s (reference + gzip writer)", flush=True)
    for backend in ("cuda", "cpu"):
        t0 = time.perf_counter()
        r = subprocess.run([exe, "check", "--backend", backend, dump], capture_output=True, text=True,
                           env=dict(os.environ, DSA_TIMING="1"))
        dt = time.perf_counter() - t0
        line = next((x for x in r.stdout.splitlines() if "logits" in x), r.stdout.strip()[:200])
        print(f"check --backend {backend}: exit {r.returncode}, {dt:.2f} s wall: {line[:160]}", flush=True)
        for x in r.stderr.splitlines():  # DSA_TIMING: read, reference, comparison
            if x.startswith("timing:") or x.startswith("cuda logits:"):
                print("    " + x, flush=True)


if __name__ == "__main__":
    main()
