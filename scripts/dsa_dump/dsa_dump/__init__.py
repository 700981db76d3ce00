"""dsa_dump: capture DSA kernel calls from PyTorch engines into dsa-check schema-v1 HDF5 dumps, and feed
dsa-check goldens to kernels. Needs numpy + h5py; torch and ml_dtypes are used when importable.

    import dsa_dump
    dsa_dump.capture_fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, logits, clean_logits=False,
                                    out="logits.h5")          # then: dsa-check check logits.h5
"""
from .capture import (KV_RECORDS, MLA_RECORD, Capture, STAGE_HELPERS, aiter_kcache_read_back, capture, capture_act_quant, capture_aiter_kcache_store,
                      capture_aiter_paged_mqa_logits, capture_cutedsl_paged_mqa_logits, capture_ascend_compressor, capture_ascend_indexer_prolog, capture_ascend_li, capture_ascend_attn_out, capture_ascend_qli, capture_ascend_sparse_attn, capture_vllm_v4_indexer, capture_vllm_v4_indexer_q, capture_vllm_v4_compressor,
                      capture_flash_mla_sparse_fwd,
                      capture_flash_mla_with_kvcache, capture_fp8_mqa_logits, capture_fused_indexer, capture_fp8_paged_mqa_logits,
                      capture_kcache_store, capture_mla_kcache_store, capture_prolog, capture_sglang_mxfp4_k_cache, capture_topk,
                      capture_vllm_v41_cache_store, capture_vllm_v41_indexer_k, capture_fp8_fp4_mqa_logits, capture_fp8_fp4_paged_sparse_mqa_logits,
                      capture_vllm_v41_indexer_k_store, capture_v41_select,
                      capture_torch_topk, current_layer, layer_scope, track_layer, LayerCapture, capture_layers)
from .dtypes import Bits, parse_dtype
from .golden import case_inputs, run_golden
from .h5 import Case, DumpWriter, read_dump, write_dump
from .schema import Problem, SchemaError, find_dsa_check, load_schema

__version__ = "0.1.0"

__all__ = [
    "Bits", "Capture", "Case", "LayerCapture", "capture_layers", "aiter_kcache_read_back", "DumpWriter", "MLA_RECORD", "Problem", "STAGE_HELPERS", "SchemaError", "capture",
    "capture_act_quant", "capture_aiter_kcache_store", "capture_aiter_paged_mqa_logits", "capture_cutedsl_paged_mqa_logits", "capture_ascend_compressor", "capture_ascend_indexer_prolog", "capture_ascend_li", "capture_ascend_attn_out", "capture_ascend_qli", "capture_ascend_sparse_attn", "capture_vllm_v4_indexer", "capture_vllm_v4_indexer_q", "capture_vllm_v4_compressor", "capture_flash_mla_sparse_fwd", "capture_flash_mla_with_kvcache", "capture_fp8_mqa_logits",
    "capture_fp8_paged_mqa_logits", "capture_fused_indexer", "capture_kcache_store", "capture_mla_kcache_store", "capture_vllm_v41_cache_store", "capture_vllm_v41_indexer_k", "capture_fp8_fp4_mqa_logits", "capture_fp8_fp4_paged_sparse_mqa_logits", "capture_vllm_v41_indexer_k_store", "capture_v41_select", "capture_sglang_mxfp4_k_cache", "capture_prolog",
    "capture_topk", "capture_torch_topk", "case_inputs", "current_layer", "find_dsa_check", "layer_scope",
    "load_schema", "parse_dtype", "read_dump", "run_golden", "track_layer", "write_dump",
]
