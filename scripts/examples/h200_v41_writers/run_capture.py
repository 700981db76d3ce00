"""Runs real engine KV-cache writers of DeepSeek-V4 / V4.1 on a GPU with random inputs and saves the inputs and the
raw cache bytes as .npy (then: to_dumps.py, dsa-check check). Needs vLLM's and sglang's Python sources importable
(installed, or their trees in ./vllm_tree and ./sglang_tree: only the kernel files and tiny import shims are needed;
they are not part of dsa-check):
  vllm  vllm/models/deepseek_v41/common/ops/{indexer_k_store,fused_compress_quant_cache,cache_utils}.py
  sglang python/sglang/srt/layers/attention/dsv4/{mxfp4_k_cache,nvfp4_k_cache}.py
vLLM's FP4 writers convert with PTX cvt.rn.satfinite.e2m1x2 (SM100+): on SM90 they fail unless --fp4 emulate swaps in
sm90_fp4_emulation.py's software RNE. --adv: hard rows (2^-40..2^12 scales, zero / -0 rows, e2m1 / e4m3 midpoints,
tiny blocks, NaN and +-inf).

    python run_capture.py --out out_native            # real kernels only
    python run_capture.py --out out_emul --fp4 emulate  # + vLLM FP4 writers
                                                        #   via sw e2m1 (sm_90)
Run each mode in its own process (Triton caches per-process globals).
"""

import argparse
import json
import os
import sys
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "vllm_tree"))
sys.path.insert(0, os.path.join(HERE, "sglang_tree"))
sys.path.insert(0, HERE)

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.path.join(HERE, "out"))
ap.add_argument("--fp4", choices=["native", "emulate"], default="native")
ap.add_argument("--tokens", type=int, default=40)
ap.add_argument("--page", type=int, default=64)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--adv", action="store_true")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)

if args.fp4 == "emulate":
    import sm90_fp4_emulation

    sm90_fp4_emulation.install()

from vllm.models.deepseek_v41.common.ops.indexer_k_store import (  # noqa: E402
    indexer_k_norm_rope_store,
)
from vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache import (  # noqa: E402
    rope_quant_insert,
)
from vllm.models.deepseek_v41.common.ops.cache_utils_writer_excerpt import (  # noqa: E402
    quantize_and_insert_k_cache,
)
from sglang.srt.layers.attention.dsv4.mxfp4_k_cache import (  # noqa: E402
    quantize_dsv4_mxfp4_k_cache_into,
)
from sglang.srt.layers.attention.dsv4.nvfp4_k_cache import (  # noqa: E402
    quantize_dsv4_nvfp4_k_cache_into,
)

dev = "cuda"
g = torch.Generator(device="cpu").manual_seed(args.seed)
T, P = args.tokens, args.page
NUM_PAGES = (T + P - 1) // P + 2

# Slot mapping: tokens scattered over pages, every 7th token padded (-1).
perm = torch.randperm(NUM_PAGES * P, generator=g)[:T]
slots = perm.clone()
slots[::7] = -1
slots = slots.to(torch.int64)
positions = torch.arange(100, 100 + T, dtype=torch.int64)  # odd+even => CR2 gating
MAX_POS = 4096
inv_freq = 1.0 / (10000 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
ang = torch.arange(MAX_POS, dtype=torch.float32)[:, None] * inv_freq[None, :]
cos_sin = torch.cat([ang.cos(), ang.sin()], dim=1)  # [MAX_POS, 64] GPT-J: cos|sin

k512 = (torch.randn(T, 512, generator=g) * 2.0).to(torch.bfloat16)
k128 = (torch.randn(T, 128, generator=g) * 3.0).to(torch.bfloat16)
if args.adv:  # hard rows: per-row scales 2^-40..2^12, zero / -0 rows, exact e2m1 / e4m3 midpoints, tiny blocks
    for k in (k512, k128):
        n = k.shape[1]
        sc = torch.tensor([2.0 ** (int(e)) for e in torch.randint(-40, 13, (T,), generator=g)])
        k.copy_((k.float() * sc[:, None]).to(torch.bfloat16))
        k[1].zero_()
        k[2] = -0.0
        mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, -0.25, -0.75, -1.75, -3.5, 1.0625, 1.1875, 448.0, 7.0])
        for r in (3, 4, 5):
            k[r] = (mids[torch.randint(0, 16, (n,), generator=g)] * 2.0 ** (r - 4)).to(torch.bfloat16)
        k[6] = (torch.randn(n, generator=g) * 1e-6).to(torch.bfloat16)
        k[8] = (torch.randn(n, generator=g) * 2.0 ** -127).to(torch.bfloat16)
        k[9, 5] = float("nan")
        k[10, 7] = float("inf")
        k[11, 40] = float("-inf")
rms_w128 = (1.0 + 0.1 * torch.randn(128, generator=g)).to(torch.bfloat16)

common = dict(slots=slots, positions=positions, cos_sin=cos_sin, k512=k512,
              k128=k128, rms_w128=rms_w128)
for name, t in common.items():
    np.save(os.path.join(args.out, f"in_{name}.npy"),
            t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy())

slots_d, pos_d, cs_d = slots.to(dev), positions.to(dev), cos_sin.to(dev)
k512_d, k128_d, w_d = k512.to(dev), k128.to(dev), rms_w128.to(dev)
report = {"device": torch.cuda.get_device_name(), "cap": torch.cuda.get_device_capability(),
          "torch": torch.__version__, "fp4_mode": args.fp4, "T": T, "page": P, "runs": {}}


def run(name, fn, cache):
    try:
        fn(cache)
        torch.cuda.synchronize()
        np.save(os.path.join(args.out, f"{name}.npy"), cache.cpu().numpy())
        report["runs"][name] = {"ok": True, "shape": list(cache.shape)}
    except Exception as e:  # noqa: BLE001
        report["runs"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        traceback.print_exc()


def fresh(shape):
    # 0xEE fill so untouched bytes are visible
    return torch.full(shape, 0xEE, dtype=torch.uint8, device=dev)


# 1. vLLM V4.1 indexer K: MXFP4 68 B/token (FP4 -> needs sm_100 or --fp4 emulate)
for cr in (1, 2):
    run(f"vllm_v41_indexer_k_mxfp4_cr{cr}", lambda c, cr=cr: indexer_k_norm_rope_store(
        k128_d, pos_d, cs_d, w_d, 1e-6, c, slots_d, cr, True), fresh((NUM_PAGES, P, 68)))
    # 1b. same kernel, FP8 path: 128 B e4m3 + 4 B fp32 scale = 132 B/token
    run(f"vllm_v41_indexer_k_fp8_cr{cr}", lambda c, cr=cr: indexer_k_norm_rope_store(
        k128_d, pos_d, cs_d, w_d, 1e-6, c, slots_d, cr, False), fresh((NUM_PAGES, P, 132)))

# 2. vLLM V4.1 compressed/main cache insert (RoPE + quant). latent = k512.
for width in (584, 528, 288):
    for cr in (1, 2):
        run(f"vllm_v41_rope_quant_insert_{width}_cr{cr}",
            lambda c, cr=cr: rope_quant_insert(k512_d, pos_d, cs_d, c, slots_d, cr),
            fresh((NUM_PAGES, P, width)))

# 3. vLLM quantize_and_insert_k_cache (SWA cache writer, no RoPE): 584 / 528
for width in (584, 528):
    run(f"vllm_quantize_and_insert_k_cache_{width}",
        lambda c, w=width: quantize_and_insert_k_cache(k512_d, c, slots_d, block_size=P,
                                                      bytes_per_token=w),
        fresh((NUM_PAGES, P * width)))

# 4. sglang DSV4 MXFP4 368 B/token (row-interleaved). loc = flat row index.
run("sglang_dsv4_mxfp4_368", lambda c: quantize_dsv4_mxfp4_k_cache_into(
    k512_d, c, slots_d, P), fresh((NUM_PAGES, P * 368)))

# 5. sglang DSV4 NVFP4 380 B/token, global_scale 1.0 and 0.625
for gs in (1.0, 0.625):
    run(f"sglang_dsv4_nvfp4_380_gs{gs}", lambda c, gs=gs: quantize_dsv4_nvfp4_k_cache_into(
        k512_d, c, slots_d, P, gs), fresh((NUM_PAGES, P * 380)))

with open(os.path.join(args.out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
print(json.dumps(report, indent=1))
