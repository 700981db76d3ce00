"""The kit's captures of the V4.1 / FP4 KV record writers and readers (dsa_dump: capture_vllm_v41_cache_store,
capture_sglang_mxfp4_k_cache, capture_mla_kcache_store with a record layout, capture_flash_mla_with_kvcache on
FlashMLA's (V41, V41_FP4) pair): the goldens' tensors captured the way an engine hands them over, then checked by
the CLI (exit 0); a flipped code byte fails (exit 1); an ambiguous record width without a layout is refused."""
import h5py
import numpy as np
import pytest

import dsa_dump


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        def arr(d):
            a = d[()]
            return a.view(np.uint16) if d.attrs.get("dtype") in ("bf16", b"bf16") else a
        return ({k: arr(g["inputs"][k]) for k in g["inputs"]}, {k: arr(g["expected"][k]) for k in g["expected"]},
                {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()})


def bf16(bits):
    return dsa_dump.Bits(np.asarray(bits, np.uint16), "bf16")


def test_vllm_v41_writers(repo_root, tmp_path, run_cli):
    ins, exp, attrs = load(repo_root / "golden" / "kv_v41_mxfp8_528_fp32_rope.h5")
    f = tmp_path / "v41.h5"
    case = dsa_dump.capture_vllm_v41_cache_store(bf16(ins["kv_c"]), ins["k_pe"], ins["slot_mapping"], ins["kv_cache_in"],
                                                 exp["kv_cache"], out=str(f))
    assert case.attrs["layout"] == "v41_mxfp8_528" and case.attrs["quant_source"] == "fp32"
    run_cli("check", f, check_rc=0)
    ins, exp, attrs = load(repo_root / "golden" / "kv_v41_nvfp4_288_vllm_interleaved.h5")
    f = tmp_path / "v41fp4.h5"
    bad = exp["kv_cache"].copy()
    bad.reshape(-1)[np.flatnonzero(bad.reshape(-1) != ins["kv_cache_in"].reshape(-1))[0]] ^= 0x11
    dsa_dump.capture_vllm_v41_cache_store(bf16(ins["kv_c"]), bf16(ins["k_pe"]), ins["slot_mapping"], ins["kv_cache_in"],
                                          exp["kv_cache"], fp4=True, record_order="token_interleaved", out=str(f))
    run_cli("check", f, check_rc=0)
    f2 = tmp_path / "v41fp4_bad.h5"
    dsa_dump.capture_vllm_v41_cache_store(bf16(ins["kv_c"]), bf16(ins["k_pe"]), ins["slot_mapping"], ins["kv_cache_in"],
                                          bad, fp4=True, record_order="token_interleaved", out=str(f2))
    r = run_cli("check", f2, check_rc=1)
    assert "e2m1 nibbles" in r.stdout or "scale" in r.stdout


def test_sglang_mxfp4_codec_flat_pool(repo_root, tmp_path, run_cli):
    ins, exp, attrs = load(repo_root / "golden" / "kv_sglang_mxfp4_368.h5")
    P, ps = ins["kv_cache_in"].shape[:2]
    f = tmp_path / "sg.h5"
    dsa_dump.capture_sglang_mxfp4_k_cache(bf16(ins["kv_c"]), bf16(ins["k_pe"]), ins["slot_mapping"],
                                          ins["kv_cache_in"].reshape(P, ps * 368), exp["kv_cache"].reshape(P, ps * 368),
                                          page_size=ps, out=str(f))
    run_cli("check", f, check_rc=0)
    with pytest.raises(ValueError, match="368-byte record is ambiguous"):
        dsa_dump.capture_mla_kcache_store(bf16(ins["kv_c"]), bf16(ins["k_pe"]), ins["slot_mapping"], ins["kv_cache_in"],
                                          exp["kv_cache"])


def test_flashmla_v41_pair_from_widths(repo_root, tmp_path, run_cli):
    ins, exp, attrs = load(repo_root / "golden" / "mla_decode_v41_fp4_extra.h5")
    f = tmp_path / "dec.h5"
    case = dsa_dump.capture_flash_mla_with_kvcache(
        bf16(ins["q"]), ins["k_cache"], ins["indices"], (bf16(exp["out"]), exp["lse"]),
        softmax_scale=float(attrs["softmax_scale"]), attn_sink=ins["attn_sink"], topk_length=ins["topk_length"],
        extra_k_cache=ins["extra_k_cache"], extra_indices_in_kvcache=ins["extra_indices_in_kvcache"],
        extra_topk_length=ins["extra_topk_length"], out=str(f))
    assert case.attrs["layout"] == "v41_mxfp8_528" and case.attrs["extra_layout"] == "v41_nvfp4_288"
    run_cli("check", f, check_rc=0)


def test_vllm_v41_indexer_k_store(repo_root, tmp_path, run_cli):
    ins, exp, attrs = load(repo_root / "golden" / "kv_v41_idx_mxfp4_68.h5")
    k = np.concatenate([ins["kv_c"], ins["k_pe"]], axis=1)  # [T, 128] bf16 bits: the K the store takes
    f = tmp_path / "idx.h5"
    case = dsa_dump.capture_vllm_v41_indexer_k_store(bf16(k), ins["slot_mapping"], ins["kv_cache_in"], exp["kv_cache"],
                                                     out=str(f))
    assert case.attrs["layout"] == "v41_idx_mxfp4_68" and case.attrs["page_size"] == 128
    run_cli("check", f, check_rc=0)
    with pytest.raises(ValueError, match="128"):
        dsa_dump.capture_vllm_v41_indexer_k_store(bf16(k[:, :96]), ins["slot_mapping"], ins["kv_cache_in"], exp["kv_cache"])
