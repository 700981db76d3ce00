"""Regenerates the real engine files of this folder (needs torch and mindstudio-probe; see README.md).

    python make_real.py            # from this folder, with torch + mindstudio-probe + h5py installed
"""
import json
import os
import shutil

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "..", "golden")


def torch_save_dict():
    """tensors.pt: torch.save of the dtypes and layouts the reader must handle; tensors_ref.npz: their values."""
    g = torch.Generator().manual_seed(36)
    base = torch.randn(6, 10, generator=g)
    obj = {
        "f32": base[:3, :4].clone(),
        "bf16_t": base.to(torch.bfloat16).t(),                       # non-contiguous (stride (1, 10))
        "fp16_slice": base.half()[1:5:2, 3:],                        # offset + strides
        "fp8_e4m3fn": (base[:2] / 4).to(torch.float8_e4m3fn),       # _rebuild_tensor_v3 + UntypedStorage
        "fp8_e5m2": (base[2:4] / 4).to(torch.float8_e5m2),
        "i64": torch.arange(-5, 7, dtype=torch.int64)[::3],
        "i32": torch.arange(12, dtype=torch.int32).reshape(3, 4),
        "u8": torch.arange(250, 256, dtype=torch.uint8),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "bool": torch.tensor([True, False, True]),
        "param": torch.nn.Parameter(torch.ones(3)),                  # _rebuild_parameter
        "empty": torch.zeros(0, 4),
        "scalar": torch.tensor(2.5),
        "nested": {"list": [torch.tensor([1, 2], dtype=torch.int32), None, 7]},
    }
    torch.save(obj, os.path.join(HERE, "tensors.pt"))
    ref = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().contiguous()
            if v.dtype in (torch.bfloat16, torch.float16):
                v = v.view(torch.int16).view(torch.uint16) if hasattr(torch, "uint16") else v.view(torch.int16)
                ref[k] = v.numpy().view(np.uint16)
            elif v.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
                ref[k] = v.view(torch.uint8).numpy()
            else:
                ref[k] = v.numpy()
    ref["nested.list.0"] = obj["nested"]["list"][0].numpy()
    np.savez(os.path.join(HERE, "tensors_ref.npz"), **ref)


def sglang_pass():
    """sglang/TP0_PP0_Rank0_pid0/Pass0000{0,1}.pt as TensorDumper writes them (torch.save of {module path: tensor |
    [tensors]}) holding the topk_nonfinite_rows golden's logits / lengths and expected indices for layers 3 and 5."""
    with h5py.File(os.path.join(GOLDEN, "topk_nonfinite_rows.h5"), "r") as f:
        c = f[next(iter(f))]
        logits, lengths, idx = (torch.from_numpy(c[p][()]) for p in ("inputs/logits", "inputs/lengths", "expected/indices"))
    d = os.path.join(HERE, "sglang", "TP0_PP0_Rank0_pid0")
    os.makedirs(d, exist_ok=True)
    for p in range(2):
        cur = {"model.forward_batch_info.input_ids": torch.arange(4), "model.embed_tokens": torch.zeros(4, 8)}
        for layer in (3, 5):
            pre = f"model.layers.{layer}.self_attn.indexer"
            cur[f"{pre}.logits"] = logits.clone()
            cur[f"{pre}.lengths"] = lengths.clone()
            cur[f"{pre}.topk"] = [idx.clone(), torch.zeros(1)]  # a tuple output: TensorDumper keeps a list
        torch.save(cur, os.path.join(d, f"Pass{p:05d}.pt"))


def msprobe_topk():
    """msprobe/: a real msprobe task-tensor dump (level L1) of torch.topk and torch.einsum on CPU."""
    out = os.path.join(HERE, "msprobe")
    shutil.rmtree(out, ignore_errors=True)
    cfg = os.path.join(HERE, "_msprobe_config.json")
    with open(cfg, "w") as f:
        json.dump({"task": "tensor", "dump_path": out, "level": "L1", "rank": [], "step": [],
                   "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}, f)
    from msprobe.pytorch import PrecisionDebugger

    g = torch.Generator().manual_seed(7)
    logits = torch.randn(4, 64, generator=g)
    dbg = PrecisionDebugger(config_path=cfg)
    dbg.start()
    torch.topk(logits, 8, dim=-1)
    torch.einsum("td,d->t", logits.to(torch.bfloat16), torch.ones(64, dtype=torch.bfloat16))
    dbg.stop()
    dbg.step()
    os.remove(cfg)


if __name__ == "__main__":
    torch_save_dict()
    sglang_pass()
    msprobe_topk()
