"""Turns the raw captures of run_capture.py (real vLLM / sglang cache writers run on an H200) into dsa-check dumps
through the kit, one case per writer and run, then checks them:

    python3 to_dumps.py CAPTURE_DIR OUT.h5 [--label native]     # CAPTURE_DIR: in_*.npy, <writer>.npy, report.json
    dsa-check check OUT.h5

Each writer's stage (what is modelled where):
  vllm_v41_indexer_k_{fp8,mxfp4}_cr{1,2}   v41.indexer_k (k_norm, RoPE at the group start, 132 / 68-byte records)
  vllm_quantize_and_insert_k_cache_528     mla.kcache_store v41_mxfp8_528 (the SWA writer: no RoPE)
  vllm_quantize_and_insert_k_cache_584     mla.kcache_store model1_fp8_584, scale_fmt ue8m0
  vllm_v41_rope_quant_insert_{528,288}_cr* mla.kcache_store with k_pe = the fp32 GPT-J RoPE of the latent's last 64
                                           dims at the group start (numpy, no FMA), quant_source fp32; mid-group
                                           tokens' slots -1 (the kernel writes nothing for them)
  vllm_v41_rope_quant_insert_584_cr*       mla.kcache_store model1_fp8_584 with k_pe = bf16 of that RoPE
  sglang_dsv4_mxfp4_368                    mla.kcache_store sglang_mxfp4_368
The caches were filled with 0xEE before each call: kv_cache_in is that fill. Writers whose e2m1 conversion needs
SM100 (vLLM's MXFP4 / NVFP4) are in the capture only when run with --fp4 emulate (software RNE): their cases carry
attr meta.provenance "emulated e2m1" and check the rest of the kernel (layout, scales, RoPE), not PTX's cvt."""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "dsa_dump"))
import dsa_dump  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def bf16(bits):
    return np.asarray(bits).view(np.uint16).view(ml_dtypes.bfloat16)


def rope_fp32(x_bits, positions, cos_sin, ratio):
    """fp32 GPT-J RoPE of dims 448..511 of the bf16 latent at the group start (p // r) * r: (e c - o s, o c + e s)."""
    x = (np.asarray(x_bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)[:, 448:]
    g = (np.asarray(positions) // ratio) * ratio
    c, s = cos_sin[g, :32].astype(np.float32), cos_sin[g, 32:].astype(np.float32)
    e, o = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = (e * c).astype(np.float32) - (o * s).astype(np.float32)
    out[:, 1::2] = (o * c).astype(np.float32) + (e * s).astype(np.float32)
    return out.astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("out")
    ap.add_argument("--label", default=None)
    a = ap.parse_args()
    d = a.capture
    rep = json.load(open(os.path.join(d, "report.json")))
    label = a.label or os.path.basename(os.path.normpath(d))
    emul = rep.get("fp4_mode") == "emulate"
    ld = lambda n: np.load(os.path.join(d, n + ".npy"))  # noqa: E731
    slots, pos, cs = ld("in_slots").astype(np.int64), ld("in_positions").astype(np.int64), ld("in_cos_sin").astype(np.float32)
    cs = cs[:int(pos.max()) + 1]  # the rows the positions reach (the table is positions x 64)
    k512, k128, w = ld("in_k512"), ld("in_k128"), ld("in_rms_w128")
    P = int(rep["page"])
    prov = {"meta.provenance": f"{rep['device']} sm_{rep['cap'][0]}{rep['cap'][1]}, torch {rep['torch']}, {label}" + (", emulated e2m1" if emul else "")}
    writer = dsa_dump.DumpWriter(a.out) if hasattr(dsa_dump, "DumpWriter") else None
    made = []

    def emit(fn, name, *args, **kw):
        kw.setdefault("attrs", {}).update(prov)
        fn(*args, name=f"{label}_{name}", out=writer, **kw)
        made.append(name)

    for run, meta in rep["runs"].items():
        if not meta.get("ok"):
            continue
        cache = ld(run)
        fill = np.full_like(cache, 0xEE)
        fp4_writer = run.startswith("vllm") and ("mxfp4" in run or "_288_" in run)  # vLLM's PTX e2m1 (sglang's codecs are plain Triton)
        if fp4_writer and not emul:
            continue  # cannot have run on sm_90
        if run.startswith("vllm_v41_indexer_k_"):
            r = int(run[-1])
            emit(dsa_dump.capture_vllm_v41_indexer_k, run, bf16(k128), pos, cs, bf16(w), fill, slots, cache, compress_ratio=r,
                 rms_norm_eps=1e-6, use_fp4_cache="mxfp4" in run)
        elif run.startswith("vllm_quantize_and_insert_k_cache_"):
            W = int(run.rsplit("_", 1)[1])
            c4 = cache.reshape(cache.shape[0], P, 1, W)
            lay = "v41_mxfp8_528" if W == 528 else "model1_fp8_584"
            extra = {} if W == 528 else {"scale_fmt": "ue8m0"}
            emit(dsa_dump.capture_mla_kcache_store, run, bf16(k512[:, :448]), bf16(k512[:, 448:]), slots, np.full_like(c4, 0xEE), c4,
                 page_size=P, layout=lay, **extra)
        elif run.startswith("vllm_v41_rope_quant_insert_"):
            W, r = int(run.split("_")[-2]), int(run[-1])
            sl = np.where((pos + 1) % r == 0, slots, -1)
            pe = rope_fp32(k512, pos, cs, r)
            c4 = cache.reshape(cache.shape[0], P, 1, W)
            if W == 584:
                emit(dsa_dump.capture_mla_kcache_store, run, bf16(k512[:, :448]), pe.astype(ml_dtypes.bfloat16), sl, np.full_like(c4, 0xEE),
                     c4, page_size=P, layout="model1_fp8_584", scale_fmt="ue8m0")
            else:
                emit(dsa_dump.capture_vllm_v41_cache_store, run, bf16(k512[:, :448]), pe, sl, np.full_like(c4, 0xEE), c4,
                     fp4=W == 288, page_size=P)
        elif run == "sglang_dsv4_mxfp4_368":
            emit(dsa_dump.capture_sglang_mxfp4_k_cache, run, bf16(k512[:, :448]), bf16(k512[:, 448:]), slots, fill, cache, page_size=P)
    if writer is not None:
        writer.close()
    print(f"{a.out}: {len(made)} case(s): {', '.join(made)}")


if __name__ == "__main__":
    main()
