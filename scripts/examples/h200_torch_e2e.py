#!/usr/bin/env python3
"""End-to-end example: DSA indexer stages computed with plain torch ops on a GPU, captured with dsa_dump into one
file, then judged by `dsa-check check`. No third-party kernel library is needed (torch + h5py + numpy).

    python scripts/examples/h200_torch_e2e.py --dsa-check build/dsa-check --out /tmp/e2e.h5

Stages:
  1. indexer.quant          ue8m0 act_quant in torch ops (amax per 1x128 block, pow2 scale from the fp32 bits,
                            x / s, clamp, .to(float8_e4m3fn))
  2. indexer.logits_ragged  fp8 MQA logits over a ragged batch of 2 sequences: per head torch._scaled_mm
                            (cuBLASLt fp8 GEMM, fp32 out) of q_fp8[:, h, :] x kv_fp8^T, relu, weighted head sum,
                            times the per-key scale; -inf outside [ks, ke) (clean_logits=1)
  3. indexer.topk           torch.topk on those logits (absolute column indices, -1 where fewer candidates;
                            fast_path=0: torch.topk orders short rows by score, not as [0..len-1])

Without CUDA (or without _scaled_mm support) it does a dry run on the CPU: step 2 then uses an fp32 matmul of
the dequantized fp8 codes instead of _scaled_mm. Exit code: dsa-check's (0 pass, 1 fail, 2 error), or 2 when a
step failed here.
"""
import argparse
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dsa_dump"))


def log(msg):
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def act_quant_ue8m0(x, block=128):
    """torch ue8m0 act_quant (spec v32 §2.5): returns (fp8 codes like x, fp32 scales [..., K/block])."""
    import torch

    shp = x.shape
    xf = x.float().reshape(*shp[:-1], shp[-1] // block, block)
    amax = xf.abs().amax(dim=-1).clamp_min(1e-4)
    t = amax * torch.tensor(1.0 / 448.0, dtype=torch.float32, device=x.device)  # fl32(1/448), one fp32 multiply
    bits = t.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)  # ceil(log2 t), exactly
    s = ((e + 127) << 23).view(torch.float32)  # 2^e from its bits
    y = (xf / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return y.reshape(shp), s


def scaled_mm_ok(device):
    """True when torch._scaled_mm runs on this device (fp8 GEMM: H100/H200 and newer)."""
    import torch

    if device.type != "cuda" or not hasattr(torch, "_scaled_mm"):
        return False
    try:
        a = torch.zeros(16, 32, device=device).to(torch.float8_e4m3fn)
        b = torch.zeros(16, 32, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        return True
    except Exception as e:  # noqa: BLE001
        log(f"torch._scaled_mm unavailable here ({type(e).__name__}: {e}); using an fp32 matmul instead")
        return False


def fp8_head_scores(q_h, kv, use_mm):
    """[S, N] fp32 = q_h [S, D] fp8 . kv [N, D] fp8^T. _scaled_mm wants mat1 row-major, mat2 column-major
    (kv.t() of a contiguous kv), all dims multiples of 16, fp32 scalar scales; products of fp8 values are exact,
    the accumulation is the GEMM's fp32."""
    import torch

    if use_mm:
        one = torch.ones((), dtype=torch.float32, device=q_h.device)
        return torch._scaled_mm(q_h.contiguous(), kv.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
    return q_h.float() @ kv.float().t()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsa-check", default=os.environ.get("DSA_CHECK_BIN"), help="dsa-check binary (check is skipped without it)")
    ap.add_argument("--out", default="h200_torch_e2e.h5", help="dump file to write")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--seq", type=int, nargs="+", default=[192, 320], help="sequence lengths of the ragged batch (multiples of 16)")
    ap.add_argument("--topk", type=int, default=128)
    a = ap.parse_args()

    try:
        import numpy as np  # noqa: F401
        import torch
        import dsa_dump
    except ImportError as e:
        log(f"error: {e} (needs torch, numpy, h5py)")
        return 2
    dev = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else ("cpu" if a.device == "auto" else a.device))
    log(f"torch {torch.__version__}, device {dev}" + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else " (dry run)"))
    if a.dsa_check:
        try:
            dsa_dump.load_schema(a.dsa_check, source="cli")
            log(f"schema from {a.dsa_check}")
        except Exception as e:  # noqa: BLE001
            log(f"warning: cannot read the schema from {a.dsa_check} ({e}); using the shipped copy")
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    failed = []
    cases = []

    # 1. indexer.quant
    try:
        log("step 1: indexer.quant — ue8m0 act_quant of x bf16 [64, 512] in torch ops")
        x = (torch.randn(64, 512, generator=g) * 4).to(torch.bfloat16).to(dev)
        y, s = act_quant_ue8m0(x)
        cases.append(dsa_dump.capture_act_quant(x, y, s, scale_fmt="ue8m0", name="quant"))
        log(f"  y {tuple(y.shape)} {y.dtype}, scale {tuple(s.shape)} in [{s.min().item():g}, {s.max().item():g}]")
    except Exception:  # noqa: BLE001
        failed.append("indexer.quant")
        log("step 1 failed:\n" + traceback.format_exc())

    # 2. indexer.logits_ragged
    logits = ks = ke = None
    try:
        H, D = a.heads, 128
        lens = a.seq
        S = N = sum(lens)
        use_mm = scaled_mm_ok(dev)
        log(f"step 2: indexer.logits_ragged — S={S} queries, N={N} keys in {len(lens)} sequences, H={H}, D={D}, "
            f"{'torch._scaled_mm per head' if use_mm else 'fp32 matmul of fp8 codes'}")
        if use_mm and any(n % 16 for n in (S, N, D)):
            raise ValueError(f"_scaled_mm needs S, N, D multiples of 16, got {S}, {N}, {D}")
        q = torch.randn(S, H, D, generator=g).to(torch.bfloat16).to(dev)
        k = torch.randn(N, D, generator=g).to(torch.bfloat16).to(dev)
        w = (torch.randn(S, H, generator=g) * H ** -0.5).to(dev)
        q_fp8, q_scale = act_quant_ue8m0(q)  # one 128-block per head: q_scale [S, H, 1]
        kv_fp8, kv_scale = act_quant_ue8m0(k)  # [N, 1]
        q_scale, kv_scale = q_scale.squeeze(-1), kv_scale.squeeze(-1).contiguous()
        weights = (w * q_scale) * torch.tensor(D ** -0.5, dtype=torch.float32, device=dev)  # head gates W
        # ragged causal ranges: query i of sequence b sees keys [start_b, start_b + pos + 1)
        ks_l, ke_l, start = [], [], 0
        for n in lens:
            ks_l += [start] * n
            ke_l += [start + p + 1 for p in range(n)]
            start += n
        ks = torch.tensor(ks_l, dtype=torch.int32, device=dev)
        ke = torch.tensor(ke_l, dtype=torch.int32, device=dev)
        acc = torch.zeros(S, N, dtype=torch.float32, device=dev)
        for h in range(H):  # fixed head order
            acc = acc + fp8_head_scores(q_fp8[:, h, :], kv_fp8, use_mm).clamp_min(0.0) * weights[:, h : h + 1]
        logits = acc * kv_scale.unsqueeze(0)
        cols = torch.arange(N, device=dev).unsqueeze(0)
        valid = (cols >= ks.unsqueeze(1)) & (cols < ke.unsqueeze(1))
        logits = logits.masked_fill(~valid, float("-inf"))
        cases.append(dsa_dump.capture_fp8_mqa_logits(q_fp8, (kv_fp8, kv_scale), weights, ks, ke, logits,
                                                     clean_logits=True, name="logits_ragged"))
        fin = logits[valid]
        log(f"  logits {tuple(logits.shape)}: {valid.sum().item()} valid entries in [{fin.min().item():.4g}, {fin.max().item():.4g}]")
    except Exception:  # noqa: BLE001
        failed.append("indexer.logits_ragged")
        log("step 2 failed:\n" + traceback.format_exc())

    # 3. indexer.topk
    if logits is not None:
        try:
            kk = min(a.topk, logits.shape[1])
            log(f"step 3: indexer.topk — torch.topk(k={kk}) per row over [ks, ke), absolute indices, -1 padding")
            vals, idx = torch.topk(logits, kk, dim=-1)
            idx = torch.where(torch.isinf(vals) & (vals < 0), torch.full_like(idx, -1), idx).to(torch.int32)
            cases.append(dsa_dump.capture_topk(logits, ke - ks, idx, k=kk, index_base="absolute", row_starts=ks,
                                               sorted=False, fast_path=False, name="topk"))
            log(f"  indices {tuple(idx.shape)}, {(idx < 0).sum().item()} padded slots")
        except Exception:  # noqa: BLE001
            failed.append("indexer.topk")
            log("step 3 failed:\n" + traceback.format_exc())

    if not cases:
        log("error: no stage produced a case")
        return 2
    try:
        with dsa_dump.DumpWriter(a.out) as wr:
            for c in cases:
                wr.add(c)
        log(f"wrote {a.out}: {', '.join(c.name + ' (' + c.stage + ')' for c in cases)}")
    except Exception:  # noqa: BLE001
        log("writing the dump failed:\n" + traceback.format_exc())
        return 2

    rc = 0
    if a.dsa_check:
        subs = [["inspect", a.out], ["check", a.out]]
        try:
            helptext = subprocess.run([a.dsa_check, "--help"], capture_output=True, text=True, timeout=60).stdout
            if not any(line.split()[:1] == ["check"] for line in helptext.splitlines()):
                log(f"note: {a.dsa_check} has no `check` subcommand yet: only inspecting the file")
                subs = subs[:1]
        except Exception as e:  # noqa: BLE001
            log(f"cannot run {a.dsa_check}: {e}")
            return 2
        for sub in subs:
            log("$ " + " ".join([a.dsa_check] + sub))
            try:
                p = subprocess.run([a.dsa_check] + sub, capture_output=True, text=True, timeout=600)
            except Exception as e:  # noqa: BLE001
                log(f"cannot run {a.dsa_check}: {e}")
                return 2
            sys.stdout.write(p.stdout)
            sys.stdout.write(p.stderr)
            log(f"exit code {p.returncode}")
            rc = p.returncode
            if p.returncode == 2:
                break
    else:
        log("no --dsa-check binary given: run `dsa-check check " + a.out + "` yourself")
    if failed:
        log("steps that failed here: " + ", ".join(failed))
        return 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
