#!/usr/bin/env python3
"""Torch peers of the GPU logits benchmark (bench/gpu_logits.cpp), same shapes, same device, same run:

  torch fp32 reference  written like DeepGEMM's test (ref_fp8_mqa_logits): dequantised q, k in fp32, einsum per
                        row chunk, relu, weighted head sum, kv scale, causal mask. Not exact (fp32 sums).
  torch fp64 reference  the same in fp64 (exact s_h, like our CPU reference; its head sum is one fp64 sum).
  _scaled_mm floor      torch._scaled_mm fp8 x fp8 -> fp32 (cuBLASLt) per row chunk plus the same epilogue: the speed
                        of the fp8 tensor-core GEMM that the kernels under test use. Not exact.

Reports time (best of 3, CUDA-synchronised) and peak device memory beyond the inputs (torch.cuda.max_memory_allocated).

    python3 bench/torch_peer_gpu.py ragged 8192 65536 64 128
    python3 bench/torch_peer_gpu.py paged 64 131072 2 64 128
"""
import sys
import time

import torch


def timed(fn, reps=3):
    best = float("inf")
    out = None
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def rand_fp8(shape, gen):
    x = torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda", generator=gen)
    x[(x & 0x7F) == 0x7F] = 0x38  # no NaN codes
    return x.view(torch.float8_e4m3fn)


def ragged_logits(q, kv, sc, w, ke, dtype, chunk):
    """q [S,H,D] fp8, kv [N,D] fp8, sc [N], w [S,H], rows see keys [0, ke[i])."""
    S, N = q.shape[0], kv.shape[0]
    k = kv.to(dtype)
    out = torch.empty(S, N, dtype=torch.float32, device="cuda")
    cols = torch.arange(N, device="cuda")
    for i0 in range(0, S, chunk):
        qi = q[i0:i0 + chunk].to(dtype)
        s = torch.einsum("mhd,nd->mhn", qi, k).relu_()
        lg = torch.einsum("mhn,mh->mn", s, w[i0:i0 + chunk].to(dtype)) * sc.to(dtype)
        lg = lg.float().masked_fill_(cols[None, :] >= ke[i0:i0 + chunk, None], float("-inf"))
        out[i0:i0 + chunk] = lg
        del s, lg
    return out


def ragged_scaled_mm(q, kv, sc, w, ke, chunk):
    S, H, D = q.shape
    N = kv.shape[0]
    one = torch.ones((), device="cuda")
    out = torch.empty(S, N, dtype=torch.float32, device="cuda")
    cols = torch.arange(N, device="cuda")
    kt = kv.t()
    for i0 in range(0, S, chunk):
        qi = q[i0:i0 + chunk].reshape(-1, D)
        s = torch._scaled_mm(qi, kt, scale_a=one, scale_b=one, out_dtype=torch.float32).view(-1, H, N).relu_()
        lg = torch.einsum("mhn,mh->mn", s, w[i0:i0 + chunk]) * sc
        out[i0:i0 + chunk] = lg.masked_fill_(cols[None, :] >= ke[i0:i0 + chunk, None], float("-inf"))
        del s, lg
    return out


def main():
    kind = sys.argv[1]
    gen = torch.Generator(device="cuda").manual_seed(42)
    dev = torch.cuda.get_device_name()
    if kind == "ragged":
        S, N, H, D = map(int, sys.argv[2:6])
        q = rand_fp8((S, H, D), gen)
        kv = rand_fp8((N, D), gen)
        sc = torch.rand(N, device="cuda", generator=gen) * 0.01 + 0.001
        w = torch.rand(S, H, device="cuda", generator=gen) * 2 - 1
        ke = torch.arange(S, device="cuda") + (N - S + 1)
        macs = sum(N - S + i + 1 for i in range(S)) * H * D
        peers = [("torch fp32 reference (einsum, chunk 64 rows)", lambda: ragged_logits(q, kv, sc, w, ke, torch.float32, 64)),
                 ("torch fp64 reference (einsum, chunk 32 rows)", lambda: ragged_logits(q, kv, sc, w, ke, torch.float64, 32)),
                 ("torch._scaled_mm fp8 floor (chunk 128 rows)", lambda: ragged_scaled_mm(q, kv, sc, w, ke, 128))]
    else:
        B, L, NN, H, D = map(int, sys.argv[2:7])
        # The paged peers read the keys already gathered (contiguous per request): a lower bound on their time.
        q = rand_fp8((B * NN, H, D), gen)
        kv = rand_fp8((B, L, D), gen)
        sc = torch.rand(B, L, device="cuda", generator=gen) * 0.01 + 0.001
        w = torch.rand(B * NN, H, device="cuda", generator=gen) * 2 - 1
        macs = sum(B * (L - NN + t + 1) for t in range(NN)) * H * D

        def paged(dtype):
            outs = []
            for b in range(B):
                ke = torch.arange(NN, device="cuda") + (L - NN + 1)
                outs.append(ragged_logits(q[b * NN:(b + 1) * NN], kv[b], sc[b], w[b * NN:(b + 1) * NN], ke, dtype, NN))
            return torch.stack(outs)

        def paged_mm():
            outs = []
            for b in range(B):
                ke = torch.arange(NN, device="cuda") + (L - NN + 1)
                outs.append(ragged_scaled_mm(q[b * NN:(b + 1) * NN], kv[b], sc[b], w[b * NN:(b + 1) * NN], ke, NN))
            return torch.stack(outs)

        peers = [("torch fp32 reference (per request)", lambda: paged(torch.float32)),
                 ("torch fp64 reference (per request)", lambda: paged(torch.float64)),
                 ("torch._scaled_mm fp8 floor (per request)", paged_mm)]
    print(f"torch {torch.__version__} on {dev}: {kind} {' '.join(sys.argv[2:])}, {macs / 1e12:.4g} T q.k MAC")
    for name, fn in peers:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        try:
            t, out = timed(fn)
            extra = torch.cuda.max_memory_allocated() - base - out.numel() * out.element_size()
            print(f"  {name}: {t * 1e3:.1f} ms, +{extra / 2**30:.2f} GiB beyond inputs and output")
            del out
        except torch.cuda.OutOfMemoryError:
            print(f"  {name}: out of memory")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
