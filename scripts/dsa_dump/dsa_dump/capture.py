"""Call-site helpers (one per registered stage, mirroring the engines' kernel APIs) and the ``capture`` wrapper
that samples kernel calls inside a serving engine.

Each ``capture_*`` helper builds a Case from the tensors the kernel was given and returned, reshaped to the
stage's schema (leading batch dims flattened, ``[..., 1]`` scale dims squeezed, exact dtype widenings such as
bf16 -> fp32 or int64 -> int32 when the values fit). With ``out=PATH`` it writes a one-case file, with
``out=DumpWriter`` it adds the case to that writer; it always returns the Case.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import dtypes as _dt
from .h5 import Case, DumpWriter

Out = Union[None, str, "os.PathLike[str]", DumpWriter]


# ---- tensor plumbing ----
def _np(x: Any) -> Any:
    """Leaves torch tensors as torch (on CPU) and everything else as numpy."""
    if x is None:
        return None
    if _dt.is_torch_tensor(x):
        return x.detach().cpu().contiguous()
    if isinstance(x, _dt.Bits):
        return x
    return np.ascontiguousarray(np.asarray(x))


def _device_sms(*xs: Any) -> Optional[int]:
    """The SM count of the CUDA device holding the first CUDA torch tensor among xs (None: none is on a GPU)."""
    for x in xs:
        if x is not None and _dt.is_torch_tensor(x) and getattr(x, "is_cuda", False):
            import torch
            return int(torch.cuda.get_device_properties(x.device).multi_processor_count)
    return None


def _shape(x: Any) -> tuple:
    return tuple(int(d) for d in (x.array.shape if isinstance(x, _dt.Bits) else x.shape))


def _reshape(x: Any, shape: Sequence[int]) -> Any:
    """x reshaped to `shape` (one -1 allowed) when the element count allows it, else x unchanged (the schema
    check then reports the real shape)."""
    if x is None:
        return None
    n = int(np.prod(_shape(x)))
    shape = list(shape)
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1])) or 1
        if n % known:
            return x
        shape[shape.index(-1)] = n // known
    if int(np.prod(shape)) != n:
        return x
    if isinstance(x, _dt.Bits):
        return _dt.Bits(np.asarray(x.array).reshape(shape), x.dtype)
    return x.reshape(shape)


def _logical(x: Any) -> str:
    return _dt.to_storage(x)[1] if not isinstance(x, _dt.Bits) else _dt.parse_dtype(x.dtype) or x.dtype


def _widen(x: Any, allowed: Sequence[str]) -> Any:
    """Exact conversions into an allowed dtype: bf16 / fp16 -> float32, int64 / int16 / uint8 ... -> int32 (when
    every value fits). Anything else is left for the schema check to report."""
    if x is None or isinstance(x, _dt.Bits):
        return x
    lg = _logical(x)
    if lg in allowed:
        return x
    if lg in ("bf16", "fp16") and "float32" in allowed:
        if _dt.is_torch_tensor(x):
            import torch

            return x.to(torch.float32)
        raw, _ = _dt.to_storage(x)
        return _dt.to_float64(raw, lg).astype(np.float32)
    if lg in ("int64", "int8", "uint8", "uint16") and ("int32" in allowed or "int64" in allowed):
        target = "int32" if "int32" in allowed else "int64"
        raw, _ = _dt.to_storage(x)
        if raw.size and target == "int32" and (raw.min() < -(2 ** 31) or raw.max() >= 2 ** 31):
            return x
        return raw.astype(np.int32 if target == "int32" else np.int64)
    return x


def _emit(case: Case, out: Out) -> Case:
    if out is None:
        return case
    if isinstance(out, DumpWriter):
        out.add(case)
    else:
        with DumpWriter(os.fspath(out)) as w:
            w.add(case)
    return case


def _case(stage: str, name: Optional[str], inputs: Dict[str, Any], outputs: Dict[str, Any],
          attrs: Dict[str, Any]) -> Case:
    return Case(name=name or stage.replace(".", "_"), stage=stage, auto_name=name is None,
                attrs={k: v for k, v in attrs.items() if v is not None},
                inputs={k: v for k, v in inputs.items() if v is not None},
                outputs={k: v for k, v in outputs.items() if v is not None})


# ---- one helper per stage ----
def capture_act_quant(x: Any, y: Any, scale: Any, scale_fmt: Optional[str] = "ue8m0", *, block_size: int = 128,
                      scale_apply: Optional[str] = None, amax_eps: Optional[float] = None,
                      clamp: Optional[bool] = None, name: Optional[str] = None, out: Out = None,
                      attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.quant: ``y, scale = act_quant(x, block_size, scale_fmt)`` (sglang / demo) or
    ``per_token_group_quant_fp8(x, 128, use_ue8m0=True)`` (vLLM). x [..., K] bf16/fp32, y [..., K] fp8,
    scale [..., K/block_size] (a trailing 1 is fine); rows are flattened to [T, K]. scale_fmt None (the demo's
    non-pow2 scale) is recorded as fp32_mul."""
    x, y, scale = _np(x), _np(y), _np(scale)
    K = _shape(x)[-1]
    nb = K // block_size if block_size and K % block_size == 0 else -1
    x = _widen(_reshape(x, (-1, K)), ["bf16", "float32"])
    y = _reshape(y, (-1, K))
    scale = _reshape(scale, (-1, nb)) if nb > 0 else scale
    fmt = "fp32_mul" if scale_fmt is None else scale_fmt
    a = dict(block_size=block_size, scale_fmt=fmt, scale_apply=scale_apply, amax_eps=amax_eps, clamp=clamp)
    a.update(attrs or {})
    return _emit(_case("indexer.quant", name, {"x": x}, {"y": y, "scale": scale}, a), out)


def capture_prolog(q: Any, k: Any, w: Any, ln_weight: Any, ln_bias: Any, q_fp8: Any, q_scale: Any, k_fp8: Any,
                   k_scale: Any, weights: Any, *, cos: Any = None, sin: Any = None, positions: Any = None,
                   rope_layout: str = "neox", rope_dim: int = 64, hadamard: bool = True,
                   scale_fmt: Optional[str] = "ue8m0", intermediates: Optional[Dict[str, Any]] = None,
                   name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.prolog: the q/k path of the indexer (sglang ``Indexer._get_q_k_bf16`` + act_quant +
    ``_get_logits_head_gate``; the demo's ``Indexer.forward`` up to fp8_index). q [.., H, Dh] bf16 after wq_b,
    k [.., Dh] bf16 after wk, w [.., H] fp32 = weights_proj(x)*H^-0.5, k LayerNorm weight/bias, outputs
    q_fp8/q_scale/k_fp8/k_scale and the head gates ``weights`` [.., H]. RoPE: per-token cos/sin tables
    [T, rope_dim/2] (bit-exact) or positions. intermediates: optional bf16 sub-step outputs the schema lists
    (k_norm, q_rope, k_rope, q_rot, k_rot) to locate a diverging sub-step."""
    q, k = _np(q), _np(k)
    H, Dh = _shape(q)[-2], _shape(q)[-1]
    f32 = ["float32"]
    ins = {"q": _reshape(q, (-1, H, Dh)), "k": _reshape(k, (-1, Dh)), "w": _widen(_reshape(_np(w), (-1, H)), f32),
           "ln_weight": _widen(_reshape(_np(ln_weight), (-1,)), f32), "ln_bias": _widen(_reshape(_np(ln_bias), (-1,)), f32),
           "cos": _widen(_reshape(_np(cos), (-1, rope_dim // 2)), f32) if cos is not None else None,
           "sin": _widen(_reshape(_np(sin), (-1, rope_dim // 2)), f32) if sin is not None else None,
           "positions": _reshape(_np(positions), (-1,)) if positions is not None else None}
    outs = {"q_fp8": _reshape(_np(q_fp8), (-1, H, Dh)), "q_scale": _reshape(_np(q_scale), (-1, H)),
            "k_fp8": _reshape(_np(k_fp8), (-1, Dh)), "k_scale": _reshape(_np(k_scale), (-1,)),
            "weights": _reshape(_np(weights), (-1, H))}
    for iname, t in (intermediates or {}).items():
        t = _np(t)
        outs[iname] = _reshape(t, (-1, H, Dh) if iname.startswith("q") else (-1, Dh)) if t is not None else None
    a = dict(rope_layout=rope_layout, rope_dim=rope_dim, hadamard=hadamard,
             scale_fmt="fp32_mul" if scale_fmt is None else scale_fmt)
    a.update(attrs or {})
    return _emit(_case("indexer.prolog", name, ins, outs, a), out)


def _paged(cache: Any, page_size: int) -> Any:
    """[P, page_size*(D+4)] (sglang's index_k_with_scale_buffer) or [P, page_size, 1, D+4] -> the 4-D view."""
    return _reshape(cache, (_shape(cache)[0], page_size, 1, -1)) if cache is not None else None


def capture_kcache_store(k_fp8: Any, k_scale: Any, slot_mapping: Any, kv_cache_in: Any, kv_cache: Any, *,
                         page_size: int = 64, layout: Optional[str] = None, name: Optional[str] = None, out: Out = None,
                         attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.kcache_store: sglang ``token_to_kv_pool.set_index_k_scale_buffer(layer_id, loc, index_k,
    index_k_scale)`` / vLLM ``indexer_k_quant_and_cache``. kv_cache_in is a copy of the cache bytes taken
    before the store (the ``capture`` wrapper's ``snapshot`` does that), kv_cache the bytes after. layout: the
    cache's byte layout (indexer_kcache_planar by default; aiter_rowmajor_p1, aiter_preshuffle: see
    capture_aiter_kcache_store)."""
    k_fp8 = _np(k_fp8)
    Dh = _shape(k_fp8)[-1]
    ins = {"k_fp8": _reshape(k_fp8, (-1, Dh)), "k_scale": _widen(_reshape(_np(k_scale), (-1,)), ["float32"]),
           "slot_mapping": _widen(_reshape(_np(slot_mapping), (-1,)), ["int32", "int64"]),
           "kv_cache_in": _paged(_np(kv_cache_in), page_size)}
    a = dict(page_size=page_size, layout=layout)
    a.update(attrs or {})
    return _emit(_case("indexer.kcache_store", name, ins, {"kv_cache": _paged(_np(kv_cache), page_size)}, a), out)


def aiter_kcache_read_back(kv_cache: Any, slot_mapping: Any, *, preshuffle: bool, head_dim: int = 128) -> Any:
    """The fp8 codes [T, head_dim] (uint8) and fp32 scales [T] that aiter's fused ``indexer_k_quant_and_cache``
    stored for each token (slot -1: zeros), read back from the cache bytes after the call ([P, page_size, 132] or
    [P, page_size, 1, 132]). With them the fused op is two checkable cases: ``capture_act_quant(k, codes, scales,
    scale_fmt=...)`` (aiter: fp32 scale = max(amax, 1e-4) / 448, ue8m0 rounds it up to a power of two) and
    ``capture_aiter_kcache_store(codes, scales, slot_mapping, cache_before, cache_after, preshuffle=...)``."""
    def as_bytes(x: Any) -> Any:
        x = _np(x)
        if _dt.is_torch_tensor(x):
            import torch

            return x.view(torch.uint8).numpy()
        return np.asarray(x).view(np.uint8)

    cache = as_bytes(kv_cache)
    P, ps = cache.shape[0], cache.shape[1]
    pages = cache.reshape(P, ps * (head_dim + 4))
    vals = pages[:, : ps * head_dim]
    if preshuffle:  # tokens in groups of 16, tiles of 16 tokens x 16 dims (aiter's Gluon reader's view)
        vals = vals.reshape(P, ps // 16, head_dim // 32, 2, 16, 16).transpose(0, 1, 4, 2, 3, 5)
    vals = vals.reshape(P * ps, head_dim)
    scales = np.ascontiguousarray(pages[:, ps * head_dim:]).view(np.float32).reshape(P * ps)
    slots = np.asarray(_np(slot_mapping)).reshape(-1).astype(np.int64)  # torch CPU tensors convert too
    ok = slots >= 0
    codes = np.zeros((slots.size, head_dim), np.uint8)
    sc = np.zeros(slots.size, np.float32)
    codes[ok] = vals[slots[ok]]
    sc[ok] = scales[slots[ok]]
    return codes, sc


def capture_aiter_kcache_store(k_fp8: Any, k_scale: Any, slot_mapping: Any, kv_cache_in: Any, kv_cache: Any, *,
                               preshuffle: bool, page_size: Optional[int] = None, name: Optional[str] = None,
                               out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.kcache_store on ROCm: ``aiter.ops.cache.indexer_k_quant_and_cache(k, kv_cache, slot_mapping,
    quant_block_size, scale_fmt, preshuffle=...)`` as sglang's ``Indexer._store_index_k_cache`` calls it, with the
    cache viewed [P, page_size, 132]. aiter quantizes and stores in one op: pass the fp8 codes and fp32 scales it
    stored (e.g. from ``indexer.quant`` of the same k, or read back from kv_cache) as k_fp8 / k_scale.
    preshuffle=False is the legacy layout (page_size 1, 132-byte records: aiter_rowmajor_p1); True the MFMA 16x16
    tiles (aiter_preshuffle, page_size a multiple of 16, 64 in sglang)."""
    cache = _np(kv_cache)
    ps = page_size if page_size is not None else (_shape(cache)[1] if len(_shape(cache)) >= 3 else (64 if preshuffle else 1))
    return capture_kcache_store(k_fp8, k_scale, slot_mapping, kv_cache_in, kv_cache, page_size=ps,
                                layout="aiter_preshuffle" if preshuffle else "aiter_rowmajor_p1", name=name, out=out,
                                attrs=attrs)


def capture_fp8_mqa_logits(q: Any, kv: Any, weights: Any, ks: Any, ke: Any, logits: Any, clean_logits: bool = True,
                           max_seqlen_k: int = 0, *, logits_dtype: Optional[str] = None,
                           kernel: Optional[str] = None, name: Optional[str] = None, out: Out = None,
                           attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.logits_ragged: ``logits = deep_gemm.fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke,
    clean_logits=..., max_seqlen_k=...)``. q [S, H, D] fp8, kv a (kv_fp8 [N, D], kv_scale [N]) tuple, weights
    [S, H] fp32, ks/ke [S] int32, logits [S, N] (or [S, max_seqlen_k]) fp32 or bf16 — DeepGEMM's strided view
    is fine. kernel (e.g. "deepgemm-sm90") selects the emulation profile in dsa-check; "vllm-torch" records vLLM's
    torch fallback fp8_mqa_logits_torch (bf16 head scores; judged by its derived bound)."""
    kv_fp8, kv_scale = kv
    logits = _np(logits)
    lg = _logical(logits)
    ins = {"q": _np(q), "kv": _np(kv_fp8), "kv_scale": _widen(_reshape(_np(kv_scale), (-1,)), ["float32"]),
           "weights": _widen(_reshape(_np(weights), (_shape(q)[0], -1)), ["float32"]),
           "ks": _widen(_reshape(_np(ks), (-1,)), ["int32"]), "ke": _widen(_reshape(_np(ke), (-1,)), ["int32"])}
    a = dict(clean_logits=clean_logits, max_seqlen_k=max_seqlen_k,
             logits_dtype=logits_dtype or ("bf16" if lg == "bf16" else None), kernel=kernel)
    a.update(attrs or {})
    return _emit(_case("indexer.logits_ragged", name, ins, {"logits": logits}, a), out)


def capture_fp8_paged_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                                 logits: Any, max_context_len: Optional[int] = None, clean_logits: bool = False,
                                 *, schedule_meta: Any = None, page_size: int = 64, layout: Optional[str] = None,
                                 logits_dtype: Optional[str] = None, kernel: Optional[str] = None,
                                 name: Optional[str] = None, out: Out = None,
                                 attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.logits_paged: ``logits = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens,
    block_table, schedule_meta, max_context_len, clean_logits=...)``. q [B, next_n, H, D] fp8 (a 3-D [B, H, D]
    q is taken as next_n = 1), kv_cache uint8 [P, 64, 1, D+4] or [P, 64*(D+4)], weights [B*next_n, H],
    context_lens [B] or [B, next_n] int32, block_table [B, max_blocks] int32. schedule_meta is not recorded
    (it only affects scheduling); max_context_len defaults to logits.shape[1]. kernel: the producer's profile,
    e.g. "deepgemm-sm90", or "vllm-torch" for vLLM's fp8_paged_mqa_logits_torch fallback."""
    del schedule_meta
    q = _np(q)
    if len(_shape(q)) == 3:
        q = _reshape(q, (_shape(q)[0], 1) + _shape(q)[1:])
    logits = _np(logits)
    lg = _logical(logits)
    cache = _np(kv_cache)
    if _dt.is_torch_tensor(cache) and str(cache.dtype) != "torch.uint8":
        import torch

        cache = cache.view(torch.uint8)
    ins = {"q": q, "kv_cache": _paged(cache, page_size),
           "weights": _widen(_reshape(_np(weights), (-1, _shape(q)[2])), ["float32"]),
           "context_lens": _widen(_np(context_lens), ["int32"]), "block_table": _widen(_np(block_table), ["int32"])}
    a = dict(max_context_len=int(max_context_len if max_context_len is not None else _shape(logits)[1]),
             clean_logits=clean_logits, page_size=page_size, layout=layout,
             logits_dtype=logits_dtype or ("bf16" if lg == "bf16" else None), kernel=kernel)
    a.update(attrs or {})
    return _emit(_case("indexer.logits_paged", name, ins, {"logits": logits}, a), out)


def capture_aiter_paged_mqa_logits(q_fp8: Any, kv_cache: Any, weights: Any, seqlens: Any, block_tables: Any,
                                   max_seq_len: int, logits: Any, *, preshuffle: bool, kv_block_size: int,
                                   name: Optional[str] = None, out: Out = None,
                                   attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.logits_paged on ROCm: sglang's ``aiter_paged_mqa_logits(q_fp8, kv_cache_fp8, weights, seqlens_32,
    block_tables, max_seq_len, preshuffle=..., kv_block_size=...)`` (aiter ``deepgemm_fp8_paged_mqa_logits``).
    q_fp8 [T, H, D] (or [B, next_n, H, D]), weights [T, H], kv_cache [P, kv_block_size, 1, 132]. seqlens with one
    entry per q row (target verify: ``get_seqlens_expanded``) make every row its own request (next_n 1, its own
    block-table row); seqlens [B] with T = B * next_n rows use the causal MTP rule. Columns past a row's length are
    not compared (aiter leaves the tail unwritten)."""
    q = _np(q_fp8)
    sl = _reshape(_np(seqlens), (-1,))
    T = _shape(q)[0] * (_shape(q)[1] if len(_shape(q)) == 4 else 1)
    B = _shape(sl)[0]
    nn = 1 if B == T else T // B
    H, D = _shape(q)[-2], _shape(q)[-1]
    return capture_fp8_paged_mqa_logits(_reshape(q, (B, nn, H, D)), kv_cache, weights, sl, block_tables, logits,
                                        max_context_len=int(max_seq_len), clean_logits=False, page_size=kv_block_size,
                                        layout="aiter_preshuffle" if preshuffle else "aiter_rowmajor_p1", name=name,
                                        out=out, attrs=attrs)


def capture_cutedsl_paged_mqa_logits(q_fp8: Any, kv_cache_fp8: Any, weights: Any, ctx_lens_1d: Any, block_tables: Any,
                                     max_seq_len: int, logits: Any, *, q_offset: int, B: int, next_n: int,
                                     dsl_expand_factor: int = 1, dsl_atom: int = 1, name: Optional[str] = None,
                                     out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.logits_paged for sglang's CuTe-DSL kernel: ``cutedsl_paged_mqa_logits(q_fp8, kv_cache_fp8, weights,
    ctx_lens_1d, block_tables, schedule_metadata, max_seq_len, q_offset=..., B=..., next_n=...,
    dsl_expand_factor=..., dsl_atom=..., ...)`` (``Indexer._get_topk_paged``). Only the q_offset real rows count
    (q, weights and logits are cut there); a block table with one row per query row (target verify) is
    de-expanded as the wrapper does (``block_tables[::next_n]``). Same math and planar page-64 cache as DeepGEMM;
    ctx_lens_1d [B] are L_b, row t of request b sees keys < L_b - next_n + t + 1; the kernel does not clean the
    rest (clean_logits 0: not compared). dsl_expand_factor / dsl_atom only split the work and are kept as
    provenance attrs."""
    q = _np(q_fp8)
    H, D = _shape(q)[-2], _shape(q)[-1]
    q = _reshape(_reshape(q, (-1, H, D))[:q_offset], (B, next_n, H, D))
    w = _reshape(_np(weights), (-1, H))[:q_offset]
    bt = _np(block_tables)
    if _shape(bt)[0] == B * next_n and next_n > 1:
        bt = bt[::next_n]
    lg = _np(logits)[:q_offset]
    a = dict(dsl_expand_factor=int(dsl_expand_factor), dsl_atom=int(dsl_atom))
    a.update(attrs or {})
    return capture_fp8_paged_mqa_logits(q, kv_cache_fp8, w, _reshape(_np(ctx_lens_1d), (-1,)), bt, lg,
                                        max_context_len=int(max_seq_len), clean_logits=False, page_size=64, name=name,
                                        out=out, attrs=a)


def capture_fused_indexer(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any, indices: Any, *,
                          k: int, max_context_len: int, page_size: int = 64, layout: Optional[str] = None,
                          sorted: bool = False, fast_path: bool = True, kernel: Optional[str] = None,
                          name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.fused: a kernel that computes the paged fp8 MQA logits and their top-k in one call (the logits never
    leave it). The inputs are those of ``deep_gemm.fp8_paged_mqa_logits`` (q [B, next_n, H, D] fp8, kv_cache
    [P, page_size, 1, D+4] uint8, weights [B*next_n, H], context_lens [B] or [B, next_n], block_table), indices
    [B*next_n, >=k] the selected key positions (-1 padded). kernel: a profile emulating the kernel's internal logits
    (exact tie band), else the band is each logit's sm90-fp8 bound."""
    q = _np(q)
    if len(_shape(q)) == 3:
        q = _reshape(q, (_shape(q)[0], 1) + _shape(q)[1:])
    cache = _np(kv_cache)
    if _dt.is_torch_tensor(cache) and str(cache.dtype) != "torch.uint8":
        import torch

        cache = cache.view(torch.uint8)
    ins = {"q": q, "kv_cache": _paged(cache, page_size),
           "weights": _widen(_reshape(_np(weights), (-1, _shape(q)[2])), ["float32"]),
           "context_lens": _widen(_np(context_lens), ["int32"]), "block_table": _widen(_np(block_table), ["int32"])}
    a = dict(k=int(k), max_context_len=int(max_context_len), page_size=page_size, layout=layout, sorted=sorted,
             fast_path=fast_path, kernel=kernel)
    a.update(attrs or {})
    return _emit(_case("indexer.fused", name, ins, {"indices": _widen(_np(indices), ["int32", "int64"])}, a), out)


def capture_topk(logits: Any, lengths: Any, indices: Any, k: int, index_base: str = "relative", row_starts: Any = None,
                 *, offsets: Any = None, page_table: Any = None, sorted: Optional[bool] = None,
                 fast_path: Optional[bool] = None, page_size: Optional[int] = None,
                 rows_per_request: Optional[int] = None, num_init_tokens: Optional[int] = None,
                 num_local_tokens: Optional[int] = None, short_rows: Optional[str] = None, name: Optional[str] = None,
                 out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.topk: sglang ``fast_topk_v2(score, lengths, k, row_starts)`` (relative),
    ``fast_topk_transform_fused`` (page_slot, with page_table), ``fast_topk_transform_ragged_fused``
    (ragged_offset, with offsets); vLLM ``top_k_per_row_prefill/decode`` (relative to row_starts = ks); the demo's
    ``torch.topk`` (absolute = row_start + p, sorted). logits [R, C] (bf16 is widened exactly to fp32), lengths /
    row_starts [R] int32, indices [R, k] int32/int64 with -1 padding."""
    ins = {"logits": _widen(_np(logits), ["float32"]), "lengths": _widen(_reshape(_np(lengths), (-1,)), ["int32"]),
           "row_starts": _widen(_reshape(_np(row_starts), (-1,)), ["int32"]) if row_starts is not None else None,
           "offsets": _widen(_reshape(_np(offsets), (-1,)), ["int32"]) if offsets is not None else None,
           "page_table": _widen(_np(page_table), ["int32"]) if page_table is not None else None}
    a = dict(k=int(k), index_base=index_base, sorted=sorted, fast_path=fast_path, page_size=page_size,
             rows_per_request=rows_per_request, num_init_tokens=num_init_tokens, num_local_tokens=num_local_tokens,
             short_rows=short_rows)
    a.update(attrs or {})
    return _emit(_case("indexer.topk", name, ins, {"indices": _widen(_np(indices), ["int32", "int64"])}, a), out)


def capture_torch_topk(logits: Any, lengths: Any, indices: Any, k: int, index_base: str = "relative", row_starts: Any = None,
                       **kw: Any) -> Case:
    """indexer.topk as ``torch.topk(masked_logits, k, dim=-1, sorted=True).indices`` computes it: sorted, no fast path
    (attr fast_path=0), and rows shorter than k end in picks of -inf columns instead of -1 (attr short_rows=torch).
    Same arguments as capture_topk (use index_base="absolute" with row_starts for the demo's absolute columns)."""
    kw.setdefault("sorted", True)
    kw.setdefault("fast_path", False)
    kw.setdefault("short_rows", "torch")
    return capture_topk(logits, lengths, indices, k, index_base, row_starts, **kw)


def capture_v41_select(scores: Any, positions: Any, indices: Any, published_blocks: Any = None, *,
                       candidate_blocks: Any = None, k: int = 512, window: int = 128, cmp_ratio: int = 1,
                       block_size: int = 8, topk_blocks: int = 2048, publish: Optional[bool] = None,
                       short_rows: Optional[str] = None, name: Optional[str] = None, out: Out = None,
                       attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v41.select: the DeepSeek-V4.1 indexer's selection (spec v41 §5) from its scores [S, N] (bf16 as the reference's
    tensors, fp32 or fp16 kernels' logits; column j = compressed position j) and each row's token position
    (positions [S], -1 = padding row): indices [S, >= k] = the chosen positions + window, ascending, -1 padded. The
    candidate source layer (layer 20) also publishes: pass published_blocks [S, >= topk_blocks] (ascending block ids,
    -1 padded; publish=True is implied). Consumer layers (24/28/32/36) pass the published lists they read as
    candidate_blocks [S, M] (strictly increasing, -1 padded). short_rows="ref" declares the reference model's quirk
    (short rows filled with reachable non-candidates instead of -1)."""
    if publish is None:
        publish = published_blocks is not None
    ins = {"scores": _np(scores), "positions": _widen(_reshape(_np(positions), (-1,)), ["int32", "int64"]),
           "candidate_blocks": _widen(_np(candidate_blocks), ["int32"]) if candidate_blocks is not None else None}
    outs = {"indices": _widen(_np(indices), ["int32", "int64"]),
            "published_blocks": _widen(_np(published_blocks), ["int32", "int64"]) if published_blocks is not None else None}
    a = dict(k=int(k), window=int(window), cmp_ratio=int(cmp_ratio), block_size=int(block_size),
             topk_blocks=int(topk_blocks), publish=bool(publish), short_rows=short_rows)
    a.update(attrs or {})
    return _emit(_case("v41.select", name, ins, outs, a), out)


# ---- MLA cache writer and sparse MLA attention (FlashMLA) ----
MLA_RECORD = 656  # bytes per token of the fp8 MLA cache: 512 e4m3 codes, 4 fp32 tile scales, 64 bf16 RoPE values
MODEL1_RECORD = 584  # DeepSeek-V4 / FlashMLA MODEL1: per block, 576-byte token records then 8-byte scale records
# The V4.1 / FP4 KV records (src/layouts/kv_records.hpp): bytes per token and the NoPE width of kv_c. FlashMLA's
# decode picks V41 / V41_FP4 from the cache's last dim (528 / 288); the other widths are ambiguous in circulation
# (b12x has a different 368-byte record; 352 is also the data stride inside the 384-byte page): name their layout.
KV_RECORDS = {"v41_mxfp8_528": (528, 448), "v41_nvfp4_288": (288, 448), "sglang_mxfp4_368": (368, 448),
              "flashmla_nvfp4_352": (352, 512), "nvfp4_384": (384, 448), "nvfp4_432": (432, 512),
              "nvfp4_432_v4": (432, 448), "v41_idx_mxfp4_68": (68, 64), "v41_idx_fp8_132": (132, 64)}
_BY_WIDTH = {528: "v41_mxfp8_528", 288: "v41_nvfp4_288"}


def _record_bytes(layout: str) -> int:
    if layout == "model1_fp8_584":
        return MODEL1_RECORD
    if layout == "mla_fp8_656":
        return MLA_RECORD
    if layout in KV_RECORDS:
        return KV_RECORDS[layout][0]
    raise ValueError(f"unknown MLA cache layout {layout!r}: known mla_fp8_656, model1_fp8_584, {', '.join(KV_RECORDS)}")


def _last_dim(cache: Any) -> int:
    shp = _shape(_as_bytes(_np(cache)))
    return shp[-1] if len(shp) >= 3 else -1


def _infer_layout(cache: Any, fallback: str, fn: str) -> str:
    """The layout a cache's width names: 528 / 288 (FlashMLA's V41 / V41_FP4 choice), 584 MODEL1, 656 V3.2; the
    other FP4 widths must be named (ValueError), any other width gives `fallback`."""
    w = _last_dim(cache)
    if w in _BY_WIDTH:
        return _BY_WIDTH[w]
    if w in (368, 352, 384, 432):
        names = [n for n, (b, _) in KV_RECORDS.items() if b == w]
        raise ValueError(f"{fn}: a {w}-byte record is ambiguous ({', '.join(names)} and other engines' records of that "
                         f"width): pass layout=")
    return fallback


def _as_bytes(x: Any) -> Any:
    """The raw bytes of a cache tensor as uint8, whatever view the engine holds (uint8, float8, int8, bf16, ...):
    the last dim grows by the element size. Bits wrappers are unwrapped to their storage bytes."""
    if x is None:
        return None
    if isinstance(x, _dt.Bits):
        raw, _ = _dt.to_storage(x)
        return np.ascontiguousarray(raw).view(np.uint8)
    if _dt.is_torch_tensor(x):
        import torch

        if x.dtype == torch.uint8:
            return x
        if x.dim() == 0:
            return x
        return x.contiguous().view(torch.uint8)
    a = np.ascontiguousarray(np.asarray(x))
    if a.dtype == np.uint8 or a.ndim == 0:
        return a
    return a.view(np.uint8)


def _mla_cache(cache: Any, page_size: Optional[int], record: int = MLA_RECORD) -> Tuple[Any, int]:
    """An MLA cache as [num_blocks, page_size, 1, record] uint8 (record 656: V3.2; 584: MODEL1), from [P, ps, 1, rec],
    [P, ps, rec], [P, ps*rec], FlashMLA's padded MODEL1 block storage [P, ceil(ps*584/576)*576] (the padding is
    dropped) or any same-size view of another dtype; page_size defaults to dim 1 of a cache of rank >= 3."""
    cache = _as_bytes(_np(cache))
    shp = _shape(cache)
    if page_size is None:
        page_size = shp[1] if len(shp) >= 3 else 64
    page_size = int(page_size)
    padded = (page_size * record + 575) // 576 * 576
    if record == MODEL1_RECORD and len(shp) == 2 and shp[1] == padded != page_size * record:
        cache = cache[:, : page_size * record]
    if len(shp) >= 1:
        cache = _reshape(cache, (shp[0], page_size, 1, record))
    return cache, page_size


def _kernel_outputs(output: Any, rest: Sequence[Any], out: Out, fn: str) -> list:
    """[output, *rest] with a kernel's returned tuple unpacked: ``output=result`` fills the outputs left as None
    (``(out, max_logits, lse)`` of flash_mla_sparse_fwd, ``(out, lse)`` of flash_mla_with_kvcache)."""
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError(f"{fn}: out= is where the case goes (a path or a DumpWriter), found {type(out).__name__}; "
                        "pass the attention output tensor as `output`")
    vals = [output, *rest]
    if isinstance(output, (tuple, list)):
        got = list(output)[: len(vals)]
        vals = [got[i] if i < len(got) and (i == 0 or vals[i] is None) else vals[i] for i in range(len(vals))]
    if vals[0] is None:
        raise TypeError(f"{fn}: the attention output tensor (`output`) is required")
    return vals


def capture_mla_kcache_store(kv_c: Any, k_pe: Any, slot_mapping: Any, kv_cache_in: Any, kv_cache: Any, *,
                             scale_fmt: str = "pow2", scale_apply: str = "div", amax_eps: Optional[float] = None,
                             page_size: Optional[int] = None, layout: Optional[str] = None, name: Optional[str] = None,
                             out: Out = None, attrs: Optional[Dict[str, Any]] = None, **extra_attrs: Any) -> Case:
    """mla.kcache_store: the fp8 MLA cache writer — vLLM ``concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping,
    "fp8_ds_mla", scale)`` (cache [num_blocks, block_size, 656] uint8), sglang NSA's ``quantize_k_cache`` + store,
    FlashMLA's test writer ``quantize_k_cache``. kv_c [..., 512] bf16 (after kv_norm), k_pe [..., 64] bf16 (a
    [T, 1, 64] view is fine), slot_mapping [T] (page * page_size + offset; -1 = padded token). kv_cache_in is a
    copy of the cache taken before the store (``capture`` snapshots arguments), kv_cache the cache after it:
    [num_blocks, page_size, 656] or [..., 1, 656] bytes, or the same memory seen as float8 / int8 / bf16 (read as
    raw bytes). page_size defaults to dim 1 of a cache of rank >= 3 (64 for a flat [P, page_size*656] cache).
    scale_fmt names how the writer computed the 4 tile scales (pow2, ue8m0, amax448, amax448_eps, flt_min: see
    `dsa-check stages`); extra keyword arguments are recorded as attrs too. DeepSeek-V4 (FlashMLA MODEL1, vLLM's
    V4 main store): kv_c [..., 448] (the NoPE dims), caches of 584 bytes per token (layout model1_fp8_584, taken
    from kv_c's width when not given; scale_fmt pow2 = FlashMLA's quantize_k_cache, ue8m0 = vLLM). DeepSeek-V4.1 and
    the FP4 caches: layout = a KV record (v41_mxfp8_528 and v41_nvfp4_288 are taken from a 528 / 288-byte cache,
    the others must be named: sglang_mxfp4_368, flashmla_nvfp4_352, nvfp4_384, nvfp4_432); kv_c [..., 448] or
    [..., 512] as the record says, k_pe bf16 or the unrounded fp32 rotary output; the codec options go as keyword
    attrs (record_order, mxfp8_rule, nvfp4_rule, mxfp4_rule, e2m1_tie, e2m1_zero, e2m1_nan, rope_cast,
    quant_source, scale_byte_max: `dsa-check stages mla.kcache_store`), absent = the record's own producer."""
    kv_c, k_pe = _np(kv_c), _np(k_pe)
    if layout is None:
        layout = _infer_layout(kv_cache, "model1_fp8_584" if _shape(kv_c)[-1] == 448 else "mla_fp8_656", "capture_mla_kcache_store")
    rec = _record_bytes(layout)
    kv_cache_in, ps = _mla_cache(kv_cache_in, page_size, rec)
    kv_cache, _ = _mla_cache(kv_cache, ps, rec)
    ins = {"kv_c": _reshape(kv_c, (-1, _shape(kv_c)[-1])), "k_pe": _reshape(k_pe, (-1, _shape(k_pe)[-1])),
           "slot_mapping": _widen(_reshape(_np(slot_mapping), (-1,)), ["int32", "int64"]),
           "kv_cache_in": kv_cache_in}
    if layout in KV_RECORDS:  # the fp8 tile scale rule is not theirs: their codec options come as keyword attrs
        a = dict(page_size=ps, layout=layout)
    else:
        a = dict(scale_fmt=scale_fmt, scale_apply=scale_apply, amax_eps=amax_eps, page_size=ps, layout=layout)
    a.update(extra_attrs)
    a.update(attrs or {})
    return _emit(_case("mla.kcache_store", name, ins, {"kv_cache": kv_cache}, a), out)


def capture_flash_mla_sparse_fwd(q: Any, kv: Any, indices: Any, sm_scale: float, output: Any = None,
                                 max_logits: Any = None, lse: Any = None, *, attn_sink: Any = None,
                                 topk_length: Any = None, lse_base: str = "e", lse_includes_sink: Optional[bool] = None,
                                 name: Optional[str] = None, out: Out = None,
                                 attrs: Optional[Dict[str, Any]] = None) -> Case:
    """attn.sparse_mla_prefill: ``output, max_logits, lse = flash_mla.flash_mla_sparse_fwd(q, kv, indices, sm_scale,
    d_v=512, attn_sink=..., topk_length=...)``. q [s_q, h_q, d_qk] bf16 (d_qk 576 = 512 latent + 64 RoPE, or 512),
    kv [s_kv, 1, d_qk] (or [s_kv, d_qk]) bf16, indices [s_q, 1, topk] (or [s_q, topk]) int32 (invalid: negative
    or >= s_kv), attn_sink [h_q] fp32, topk_length [s_q] int32. Returns: output [s_q, h_q, 512] bf16, max_logits
    and lse [s_q, h_q] fp32 (either may be left out). sm_scale is recorded as given (V3.2: the MLA scale
    0.1352337788608801). lse_base "2" for the 2025 release, whose max_logits / lse are in log2 units.
    The kernel's output tensor is `output` (``out=`` is where the case goes, as for every helper); the kernel's
    returned tuple may be passed whole as `output`."""
    output, max_logits, lse = _kernel_outputs(output, (max_logits, lse), out, "capture_flash_mla_sparse_fwd")
    q, kv = _np(q), _np(kv)
    qs = _shape(q)
    s_q, h_q = (qs[0], qs[1]) if len(qs) == 3 else (-1, -1)
    idx = _np(indices)
    ins = {"q": q, "kv": _reshape(kv, (-1, 1, _shape(kv)[-1])),
           "indices": _widen(_reshape(idx, (s_q, 1, -1)) if s_q > 0 else idx, ["int32", "int64"]),
           "attn_sink": _widen(_reshape(_np(attn_sink), (-1,)), ["float32"]) if attn_sink is not None else None,
           "topk_length": _widen(_reshape(_np(topk_length), (-1,)), ["int32", "int64"])
           if topk_length is not None else None}
    outs = {"out": _reshape(_np(output), (s_q, h_q, -1)) if s_q > 0 else _np(output),
            "max_logits": _reshape(_np(max_logits), (s_q, h_q)) if (max_logits is not None and s_q > 0)
            else _np(max_logits),
            "lse": _reshape(_np(lse), (s_q, h_q)) if (lse is not None and s_q > 0) else _np(lse)}
    a = dict(softmax_scale=float(sm_scale), lse_base=lse_base, lse_includes_sink=lse_includes_sink)
    a.update(attrs or {})
    return _emit(_case("attn.sparse_mla_prefill", name, ins, outs, a), out)


def capture_flash_mla_with_kvcache(q: Any, k_cache: Any, indices: Any, output: Any = None, lse: Any = None, *,
                                   softmax_scale: Optional[float] = None, block_table: Any = None,
                                   cache_seqlens: Any = None, attn_sink: Any = None, topk_length: Any = None,
                                   dequant: str = "bf16_scale", lse_includes_sink: Optional[bool] = None,
                                   page_size: Optional[int] = None, extra_k_cache: Any = None,
                                   extra_indices_in_kvcache: Any = None, extra_topk_length: Any = None,
                                   extra_page_size: Optional[int] = None, layout: Optional[str] = None,
                                   extra_layout: Optional[str] = None, record_order: Optional[str] = None,
                                   num_sms: Optional[int] = None, name: Optional[str] = None, out: Out = None,
                                   attrs: Optional[Dict[str, Any]] = None) -> Case:
    """attn.sparse_mla_decode: ``output, lse = flash_mla.flash_mla_with_kvcache(q, k_cache, block_table,
    cache_seqlens, 512, sched_meta, softmax_scale=..., is_fp8_kvcache=True, indices=..., attn_sink=...,
    topk_length=...)`` on the sparse fp8 path. q [b, s_q, h_q, 576] bf16 (a 3-D [b, h_q, 576] q is taken as
    s_q = 1), k_cache the 656-byte-per-token cache [num_blocks, page_size, 1, 656] (also [num_blocks, page_size,
    656], or a float8 / bf16 view of the same bytes), indices [b, s_q, topk] int32 = page * page_size + offset
    (-1 = invalid; a flattened [b*s_q, topk] is reshaped), block_table / cache_seqlens (unused by the sparse path,
    kept for provenance), attn_sink [h_q] fp32, topk_length [b] int32. Returns: output [b, s_q, h_q, 512] bf16,
    lse [b, h_q, s_q] fp32 (natural log). softmax_scale None is recorded as FlashMLA's default q.shape[-1]**-0.5.
    dequant: "bf16_scale" (SM90 kernel: bf16(bf16(fp8) * bf16(scale))) or "f32_scale" (bf16(fl32(fp8 * scale))).
    The returned ``(out, lse)`` tuple may be passed whole as `output`. DeepSeek-V4 (FlashMLA "MODEL1"): q with
    d_qk 512 selects layout model1_fp8_584 (the 584-byte cache) unless `layout` says otherwise; the extra KV scope
    (extra_k_cache in the same layout, its own page size; extra_indices_in_kvcache [b, s_q, extra_topk];
    extra_topk_length [b]) is attended in the same softmax. DeepSeek-V4.1 (FlashMLA's kv_format from kv.size(3)): a
    528-byte k_cache is layout v41_mxfp8_528 and a 288-byte extra_k_cache extra_layout v41_nvfp4_288 (the (V41,
    V41_FP4) pair); the other FP4 records are named with layout=; record_order page_segregated (FlashMLA
    kv_cache_format.h, the default) or token_interleaved. num_sms: the SMs of the GPU that ran the kernel (its split-KV
    schedule, which the flashmla-sm90 emulation follows); None reads it from the device of q / output when they are
    CUDA tensors, else the attribute keeps its default (132: H100 SXM / H800 / H200)."""
    if num_sms is None:
        num_sms = _device_sms(q, output[0] if isinstance(output, tuple) else output, k_cache)
    output, lse = _kernel_outputs(output, (lse,), out, "capture_flash_mla_with_kvcache")
    q = _np(q)
    if len(_shape(q)) == 3:
        q = _reshape(q, (_shape(q)[0], 1) + _shape(q)[1:])
    qs = _shape(q)
    b, s_q, h_q = (qs[0], qs[1], qs[2]) if len(qs) == 4 else (-1, -1, -1)
    if layout is None:
        layout = _infer_layout(k_cache, "model1_fp8_584" if qs[-1] == 512 else "mla_fp8_656", "capture_flash_mla_with_kvcache")
    rec = _record_bytes(layout)
    cache, _ = _mla_cache(k_cache, page_size, rec)
    if (extra_k_cache is None) != (extra_indices_in_kvcache is None):
        raise TypeError("capture_flash_mla_with_kvcache: extra_k_cache and extra_indices_in_kvcache go together")
    if extra_k_cache is not None and extra_layout is None and layout in KV_RECORDS:
        extra_layout = _infer_layout(extra_k_cache, layout, "capture_flash_mla_with_kvcache")
    xrec = _record_bytes(extra_layout) if extra_layout else rec
    xcache = _mla_cache(extra_k_cache, extra_page_size, xrec)[0] if extra_k_cache is not None else None
    if softmax_scale is None:
        softmax_scale = float(qs[-1]) ** -0.5
    i32 = ["int32"]
    ins = {"q": q, "k_cache": cache,
           "indices": _widen(_reshape(_np(indices), (b, s_q, -1)) if b > 0 else _np(indices), ["int32", "int64"]),
           "block_table": _widen(_np(block_table), i32) if block_table is not None else None,
           "cache_seqlens": _widen(_reshape(_np(cache_seqlens), (-1,)), i32) if cache_seqlens is not None else None,
           "attn_sink": _widen(_reshape(_np(attn_sink), (-1,)), ["float32"]) if attn_sink is not None else None,
           "topk_length": _widen(_reshape(_np(topk_length), (-1,)), ["int32", "int64"])
           if topk_length is not None else None,
           "extra_k_cache": xcache,
           "extra_indices_in_kvcache": (_widen(_reshape(_np(extra_indices_in_kvcache), (b, s_q, -1)) if b > 0
                                        else _np(extra_indices_in_kvcache), ["int32", "int64"])
                                        if extra_indices_in_kvcache is not None else None),
           "extra_topk_length": _widen(_reshape(_np(extra_topk_length), (-1,)), ["int32", "int64"])
           if extra_topk_length is not None else None}
    outs = {"out": _reshape(_np(output), (b, s_q, h_q, -1)) if b > 0 else _np(output),
            "lse": _reshape(_np(lse), (b, h_q, s_q)) if (lse is not None and b > 0) else _np(lse)}
    a = dict(softmax_scale=float(softmax_scale), dequant=dequant, lse_includes_sink=lse_includes_sink, layout=layout,
             extra_layout=extra_layout if extra_layout != layout else None, record_order=record_order,
             num_sms=int(num_sms) if num_sms is not None else None)
    a.update(attrs or {})
    return _emit(_case("attn.sparse_mla_decode", name, ins, outs, a), out)


def capture_vllm_v41_cache_store(kv_c: Any, k_pe: Any, slot_mapping: Any, kv_cache_in: Any, kv_cache: Any, *,
                                 fp4: bool = False, page_size: Optional[int] = None, name: Optional[str] = None,
                                 out: Out = None, attrs: Optional[Dict[str, Any]] = None, **extra_attrs: Any) -> Case:
    """mla.kcache_store for vLLM's DeepSeek-V4.1 cache writers (vllm/models/deepseek_v41/common/ops: the window KV
    into the 528-byte MXFP8 record, `fp4=True` the compressed KV into the 288-byte NVFP4 record with vLLM's scale
    rule nvfp4_rule=vllm). kv_c [T, 448] bf16, k_pe [T, 64]: the fp32 rotary output as the writer quantizes it
    (recorded as quant_source fp32; a bf16 k_pe as quant_source bf16). Other arguments as capture_mla_kcache_store."""
    a = dict(quant_source="fp32" if str(getattr(_np(k_pe), "dtype", "")) in ("float32", "torch.float32") else "bf16")
    if fp4:
        a["nvfp4_rule"] = "vllm"
    a.update(extra_attrs)
    return capture_mla_kcache_store(kv_c, k_pe, slot_mapping, kv_cache_in, kv_cache, page_size=page_size,
                                    layout="v41_nvfp4_288" if fp4 else "v41_mxfp8_528", name=name, out=out, attrs=attrs, **a)


def capture_vllm_v41_indexer_k_store(k: Any, slot_mapping: Any, kv_cache_in: Any, kv_cache: Any, *,
                                     page_size: Optional[int] = None, fp8: bool = False, name: Optional[str] = None,
                                     out: Out = None, attrs: Optional[Dict[str, Any]] = None, **extra_attrs: Any) -> Case:
    """mla.kcache_store with layout v41_idx_mxfp4_68: vLLM's DeepSeek-V4.1 indexer K store (indexer_k_store.py) of
    k [T, 128] bf16 (k_norm(wk(latent)) with RoPE on dims 64..127) into the MXFP4 cache [pages, page_size, 68]
    (per page: the tokens' 64 code bytes, then their 4 ue8m0 scales; pages a multiple of 512 bytes, so page_size a
    multiple of 128). `fp8=True`: the FP8 option, layout v41_idx_fp8_132 ([pages, page_size, 132]: per page the
    tokens' 128 e4m3 codes, then their fp32 2^e scales). The record is split as the stage takes it: kv_c = dims
    0..63, k_pe = dims 64..127."""
    k = _np(k)
    k = _reshape(k, (-1, _shape(k)[-1]))
    if _shape(k)[-1] != 128:
        raise ValueError(f"capture_vllm_v41_indexer_k_store: k has {_shape(k)[-1]} dims per token, the V4.1 indexer K has 128")
    if isinstance(k, _dt.Bits):
        lo, hi = _dt.Bits(k.array[:, :64], k.dtype), _dt.Bits(k.array[:, 64:], k.dtype)
    else:
        lo, hi = k[:, :64], k[:, 64:]
    return capture_mla_kcache_store(lo, hi, slot_mapping, kv_cache_in, kv_cache, page_size=page_size,
                                    layout="v41_idx_fp8_132" if fp8 else "v41_idx_mxfp4_68", name=name, out=out,
                                    attrs=attrs, **extra_attrs)


def capture_sglang_mxfp4_k_cache(k_nope: Any, k_rope: Any, loc: Any, cache_in: Any, cache_out: Any, *,
                                 page_size: Optional[int] = None, name: Optional[str] = None, out: Out = None,
                                 attrs: Optional[Dict[str, Any]] = None, **extra_attrs: Any) -> Case:
    """mla.kcache_store for sglang's DeepSeek-V4 SM90 MXFP4 codec (mxfp4_k_cache.py's quantize into the 368-byte
    record: [224 e2m1 NoPE | 14 ue8m0 + 2 pad | 128 bf16 RoPE], exponent round(log2(amax / 6))): k_nope [T, 448] and
    k_rope [T, 64] bf16 (split the [T, 512] row the codec takes), loc [T] the rows (page * page_size + slot),
    cache_in / cache_out the pool buffer ([num_pages, page_size * 368] or [rows, 368]) before and after."""
    return capture_mla_kcache_store(k_nope, k_rope, loc, cache_in, cache_out, page_size=page_size,
                                    layout="sglang_mxfp4_368", name=name, out=out, attrs=attrs, **extra_attrs)


def capture_ascend_compressor(x: Any, wkv: Any, wgate: Any, state_cache: Any, ape: Any, norm_weight: Any,
                              rope_sin: Any, rope_cos: Any, output: Any = None, state_cache_after: Any = None, *,
                              state_block_table: Any, cu_seqlens: Any, start_pos: Any, seqused: Any = None,
                              rope_head_dim: int = 64, cmp_ratio: int, coff: int, norm_eps: float = 1e-6,
                              rotary_mode: int = 2, cache_mode: int = 1, rotate: bool = False,
                              variant: str = "ascend-a3", kv_proj: Any = None, score_proj: Any = None,
                              request_ids: Any = None, layer: Optional[int] = None, name: Optional[str] = None, out: Out = None,
                              model: Optional[str] = None, ring_rows: Optional[int] = None,
                              pooled_bf16: Optional[bool] = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.compressor: ``cmp_kv = torch.ops._C_ascend.compressor(x, wkv, wgate, state_cache, ape, norm_weight, rope_sin,
    rope_cos, state_block_table=..., cu_seqlens=..., seqused=None, start_pos=..., rope_head_dim=64, cmp_ratio=r,
    coff=c, norm_eps=eps, rotary_mode=2, cache_mode=1)`` (vLLM-Ascend's DeepSeek-V4 DSA backend; the same argument
    order, sin before cos). `state_cache` is a copy of the state taken before the call (``capture`` snapshots
    arguments), `state_cache_after` the state after it; either may be [nblk, bs, 1, 2*coff*D] (squeezed here).
    `output` is the op's return value [R, D] bf16 (``out=`` is where the case goes). rotate=True when `output` is
    the indexer compressor's kv after ``rotate_activation`` (the op itself does not rotate). A torch reference of
    the DeepSeek inference code is captured with variant="ref" (or "vllm-cuda" for vLLM's CUDA path).
    kv_proj / score_proj ([T, coff*D] fp32, x.W^T without ape) replace x, wkv and wgate when the kernel's own
    projections are available. seqused must be None and rotary_mode 2 (interleaved), as vLLM-Ascend passes them.
    request_ids ([B] ints, e.g. the engine's request index) and layer are provenance: `dsa-check check` then demands
    identical rows for the same (layer, request, entry) across all captured calls — one prefill, chunked prefill and
    token-by-token decode, in any batch (consistency result).
    DeepSeek-V4.1 (model="v41"): cmp_ratio 1 or 2, coff 1, ape=None (no APE), wgate=None / score_proj=None at ratio 1
    (no gate); variant "ref" (the reference: NVFP4 QAT from bf16), "vllm-cuda" (NVFP4 of the fp32 result) or
    "ascend-a3" (compressor_v2, bf16 out); ring_rows with cache_mode=2 (row p mod ring_rows: vLLM's ring capacity,
    32 for compressor_v2); pooled_bf16 overrides the rounding of the pooled value before the norm."""
    if seqused is not None:
        raise ValueError("capture_ascend_compressor: seqused is not modelled (vLLM-Ascend passes None)")
    if int(rotary_mode) != 2:
        raise ValueError(f"capture_ascend_compressor: rotary_mode {rotary_mode}: only 2 (interleaved pairs) is modelled")
    if output is None:
        raise TypeError("capture_ascend_compressor: the op's output tensor (`output`) is required")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_compressor: out= is where the case goes (a path or a DumpWriter); pass the "
                        "op's output as `output`")

    def state(t: Any) -> Any:
        t = _np(t)
        shp = _shape(t)
        return _reshape(t, (shp[0], shp[1], shp[-1])) if len(shp) == 4 else t

    ins = {"norm_weight": _np(norm_weight), "rope_sin": _np(rope_sin), "rope_cos": _np(rope_cos),
           "state_cache_in": state(state_cache), "state_block_table": _np(state_block_table),
           "cu_seqlens": _widen(_reshape(_np(cu_seqlens), (-1,)), ["int32", "int64"]),
           "start_pos": _widen(_reshape(_np(start_pos), (-1,)), ["int32", "int64"])}
    if ape is not None:
        ins["ape"] = _np(ape)
    if kv_proj is not None or score_proj is not None:
        ins["kv_proj"] = _np(kv_proj)
        if score_proj is not None:
            ins["score_proj"] = _np(score_proj)
    else:
        ins.update(x=_np(x), wkv=_np(wkv))
        if wgate is not None:
            ins["wgate"] = _np(wgate)
    outs = {"cmp_kv": _np(output),
            "state_cache": state(state_cache_after) if state_cache_after is not None else None}
    a = dict(cmp_ratio=int(cmp_ratio), coff=int(coff), rope_head_dim=int(rope_head_dim), norm_eps=float(norm_eps),
             cache_mode=int(cache_mode), rotate=bool(rotate), variant=variant)
    if model is not None:
        a["model"] = str(model)
    if ring_rows is not None:
        a["ring_rows"] = int(ring_rows)
    if pooled_bf16 is not None:
        a["pooled_bf16"] = bool(pooled_bf16)
    if request_ids is not None:
        a["request_ids"] = [int(i) for i in np.asarray(_np(request_ids)).reshape(-1)]
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("v4.compressor", name, ins, outs, a), out)


def capture_vllm_v4_compressor(kv_score: Any, ape: Any, rms_norm_weight: Any, cos_sin_cache: Any, positions: Any,
                               token_to_req_indices: Any, slot_mapping: Any, block_table: Any, kv_slot_mapping: Any,
                               state_cache_in: Any, kv_cache_in: Any, state_cache: Any = None, kv_cache: Any = None, *,
                               compress_ratio: int, rope_head_dim: int = 64, rms_norm_eps: float = 1e-6,
                               rotate: bool = False, name: Optional[str] = None, out: Out = None,
                               attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.compressor_cache: vLLM's CUDA DeepSeek-V4 compressor step (``DeepseekCompressor.forward``):
    ``save_partial_states(kv, score, ape, positions, state_cache, slot_mapping, ...)`` then
    ``compress_norm_rope_store_triton(state_cache, num_actual, token_to_req_indices, positions, slot_mapping,
    block_table, block_size, state_width, cos_sin_cache, kv_cache, k_cache_metadata, ...)``. Pass `kv_score` (the fused
    projection, [T', 2*coff*D] fp32; its first T = len(slot_mapping) rows are used, as num_actual), the module's `ape`
    and `norm.weight`, the rotary embedding's cos_sin_cache ([P, rope] fp32: cos | sin), the state metadata's
    token_to_req_indices, slot_mapping and block_table, the KV cache metadata's slot_mapping as `kv_slot_mapping`, and
    copies of the state cache and KV cache taken before the call (`*_in`) and after it (`state_cache`, `kv_cache`).
    The KV cache may be [nb, bs, rec] or [nb, bs, 1, rec] uint8 (584-byte MODEL1 records for D 512, 132 for the
    D 128 indexer). rotate: the model's indexer flag (stored; vLLM's CUDA kernels apply no Hadamard). attrs: provenance
    added by ``capture`` / ``LayerCapture`` (layer_id ...)."""
    T = int(_shape(_np(slot_mapping))[0])

    def rows(x: Any, n: int) -> Any:
        x = _np(x)
        return x[:n] if _shape(x)[0] != n else x

    def cache3(x: Any) -> Any:
        if x is None:
            return None
        x = _np(x)
        shp = _shape(x)
        return _reshape(x, (shp[0], shp[1], shp[-1])) if len(shp) == 4 else x

    def ints(x: Any, n: int) -> Any:
        return _widen(_reshape(rows(x, n), (-1,)), ["int64", "int32"])

    ins = {"kv_score": rows(kv_score, T), "ape": _np(ape), "norm_weight": _np(rms_norm_weight),
           "cos_sin_cache": _np(cos_sin_cache), "positions": ints(positions, T),
           "token_to_req_indices": ints(token_to_req_indices, T), "slot_mapping": ints(slot_mapping, T),
           "block_table": _np(block_table), "kv_slot_mapping": ints(kv_slot_mapping, T),
           "state_cache_in": cache3(state_cache_in), "kv_cache_in": cache3(kv_cache_in)}
    outs = {"state_cache": cache3(state_cache), "kv_cache": cache3(kv_cache)}
    a = dict(cmp_ratio=int(compress_ratio), rope_head_dim=int(rope_head_dim), norm_eps=float(rms_norm_eps),
             rotate=bool(rotate))
    a.update(attrs or {})
    return _emit(_case("v4.compressor_cache", name, ins, outs, a), out)


def capture_vllm_v41_indexer_k(k_pre: Any, positions: Any, cos_sin_cache: Any, rms_norm_weight: Any, k_cache_in: Any,
                               kv_slot_mapping: Any, k_cache: Any = None, *, compress_ratio: int, rms_norm_eps: float = 1e-6,
                               use_fp4_cache: Optional[bool] = None, name: Optional[str] = None, out: Out = None,
                               attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v41.indexer_k: vLLM's DeepSeek-V4.1 indexer K store ``indexer_k_norm_rope_store(k_pre, positions,
    cos_sin_cache, rms_norm_weight, rms_norm_eps, k_cache, kv_slot_mapping, compress_ratio, use_fp4_cache)``
    (vllm/models/deepseek_v41/common/ops/indexer_k_store.py): k_norm, RoPE at the group start, MXFP4 (68-byte
    records) or the FP8 option (132) into the paged indexer K cache. Pass the kernel's arguments with a copy of the
    cache taken before the call (`k_cache_in`) and the cache after it (`k_cache`), [nblk, page, rec] uint8.
    k_pre's and positions' first len(kv_slot_mapping) rows are used (the kernel's num_tokens). `use_fp4_cache`: the
    record (layout attr v41_idx_mxfp4_68 / v41_idx_fp8_132); None = the one of the cache's width."""
    T = int(_shape(_np(kv_slot_mapping))[0])

    def rows(x: Any) -> Any:
        x = _np(x)
        return x[:T] if _shape(x)[0] != T else x

    def ints(x: Any) -> Any:
        return _widen(_reshape(rows(x), (-1,)), ["int64", "int32"])

    ins = {"k_pre": rows(k_pre), "positions": ints(positions), "cos_sin_cache": _np(cos_sin_cache),
           "norm_weight": _np(rms_norm_weight), "kv_slot_mapping": ints(kv_slot_mapping), "k_cache_in": _np(k_cache_in)}
    w = _last_dim(k_cache_in)
    if use_fp4_cache is not None and w != (68 if use_fp4_cache else 132):
        raise ValueError(f"capture_vllm_v41_indexer_k: use_fp4_cache={use_fp4_cache} but the cache has {w} bytes per slot "
                         f"({'68' if use_fp4_cache else '132'} expected)")
    a: Dict[str, Any] = dict(cmp_ratio=int(compress_ratio), norm_eps=float(rms_norm_eps))
    if use_fp4_cache is not None:
        a["layout"] = "v41_idx_mxfp4_68" if use_fp4_cache else "v41_idx_fp8_132"
    a.update(attrs or {})
    outs = {"k_cache": _np(k_cache)} if k_cache is not None else {}
    return _emit(_case("v41.indexer_k", name, ins, outs, a), out)


def _fp4_pair(x: Any, fn: str, what: str) -> Any:
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise TypeError(f"{fn}: {what} is the kernel's (values, scales) pair")
    return _np(x[0]), _np(x[1])


def _squeeze1(x: Any, ndim: int) -> Any:
    """Drops DeepGEMM's singleton dim 1 ([rows, 1, ...] -> [rows, ...]) when the tensor has ndim + 1 dims."""
    shp = _shape(x)
    return _reshape(x, (shp[0],) + tuple(shp[2:])) if len(shp) == ndim + 1 and shp[1] == 1 else x


def capture_fp8_fp4_mqa_logits(q: Any, kv: Any, weights: Any, ks: Any, ke: Any, logits: Any = None, *,
                               clean_logits: bool = True, name: Optional[str] = None, out: Out = None,
                               attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v41.logits, ragged: DeepGEMM ``fp8_fp4_mqa_logits(q=(q_fp4, q_sf), kv=(kv_fp4, kv_sf), weights, ks, ke,
    clean_logits, ...)`` on MXFP4 operands: q_fp4 uint8 [S, H, D/2] (dim 2i in the low nibble), q_sf int32 [S, H]
    (D/32 ue8m0 bytes, little-endian), kv_fp4 [N, D/2], kv_sf int32 [N], weights [S, H] f32 / bf16, logits [S, N]
    f32 / bf16 (bf16 weights need bf16 logits)."""
    fn = "capture_fp8_fp4_mqa_logits"
    q_fp4, q_sf = _fp4_pair(q, fn, "q")
    kv_fp4, kv_sf = _fp4_pair(kv, fn, "kv")
    ins = {"q_fp4": _as_bytes(q_fp4), "q_sf": _np(q_sf), "weights": _np(weights), "kv_fp4": _as_bytes(kv_fp4),
           "kv_sf": _reshape(_np(kv_sf), (-1,)), "ks": _reshape(_np(ks), (-1,)), "ke": _reshape(_np(ke), (-1,))}
    a: Dict[str, Any] = dict(clean_logits=bool(clean_logits))
    if logits is not None and "bfloat16" in str(getattr(_np(logits), "dtype", "")):
        a["logits_dtype"] = "bf16"
    a.update(attrs or {})
    return _emit(_case("v41.logits", name, ins, {"logits": _np(logits)} if logits is not None else {}, a), out)


def capture_fp8_fp4_paged_sparse_mqa_logits(q: Any, kv_cache: Any, weights: Any, context_lens: Any, block_table: Any,
                                            sparse_blocks: Any, logits: Any = None, *, sparse_block_kv: int = 8,
                                            next_n: int = 1, clean_logits: bool = True, name: Optional[str] = None,
                                            out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v41.logits, paged sparse: DeepGEMM 2.8 ``fp8_fp4_paged_sparse_mqa_logits((q_fp4, q_sf), kv_cache, weights,
    metadata, num_max_sparse_blocks, sparse_block_kv)``: q_fp4 uint8 [rows, 1, H, 64] (or [rows, H, 64]), q_sf int32
    [rows, 1, H], kv_cache uint8 [pages, page, 1, 68] (the V4.1 indexer K cache: per page the codes, then the
    scales), weights [rows, H] bf16, the rows' context lengths, block table and candidate block lists [rows,
    num_max_sparse_blocks] (strictly increasing, -1 padded), logits bf16 [rows, num_max_sparse_blocks * sparse_block_kv].
    next_n 2: MTP row pairs (DeepGEMM's kBlockQ 2)."""
    fn = "capture_fp8_fp4_paged_sparse_mqa_logits"
    q_fp4, q_sf = _fp4_pair(q, fn, "q")
    kc = _as_bytes(_np(kv_cache))
    shp = _shape(kc)
    if len(shp) == 3:
        kc = _reshape(kc, (shp[0], shp[1], 1, shp[2]))
    ins = {"q_fp4": _squeeze1(_as_bytes(q_fp4), 3), "q_sf": _squeeze1(_np(q_sf), 2), "weights": _np(weights),
           "kv_cache": kc, "context_lens": _reshape(_np(context_lens), (-1,)), "block_table": _np(block_table),
           "sparse_blocks": _np(sparse_blocks)}
    a: Dict[str, Any] = dict(sparse_block_kv=int(sparse_block_kv), next_n=int(next_n), clean_logits=bool(clean_logits))
    if logits is None or "bfloat16" in str(getattr(_np(logits), "dtype", "")):
        a["logits_dtype"] = "bf16"
    a.update(attrs or {})
    return _emit(_case("v41.logits", name, ins, {"logits": _np(logits)} if logits is not None else {}, a), out)


def capture_ascend_qli(query: Any, key: Any, weights: Any, query_dequant_scale: Any, key_dequant_scale: Any,
                       output: Any = None, *, actual_seq_lengths_query: Any, actual_seq_lengths_key: Any,
                       block_table: Any, metadata: Any = None, query_quant_mode: int = 0, key_quant_mode: int = 0,
                       layout_query: str = "TND", layout_key: str = "PA_BSND", sparse_count: int = 512,
                       sparse_mode: int = 3, pre_tokens: int = (1 << 63) - 1, next_tokens: int = (1 << 63) - 1,
                       cmp_ratio: int = 4, return_value: bool = False, layer: Optional[int] = None,
                       name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.indexer: ``topk_idxs, _ = torch.ops._C_ascend.npu_vllm_quant_lightning_indexer(query=q_int8, key=k_cache,
    weights=w16, query_dequant_scale=qs16, key_dequant_scale=ks16, actual_seq_lengths_query=..., actual_seq_lengths_key=...,
    block_table=..., metadata=..., query_quant_mode=0, key_quant_mode=0, layout_query="TND", layout_key="PA_BSND",
    sparse_count=k, sparse_mode=3, pre_tokens=2^63-1, next_tokens=2^63-1, cmp_ratio=4, return_value=False)`` as seed 004's
    ``AscendDSAImpl._indexer_qli`` calls it, with the tensors *after* ``DeviceOperator.prepare_dsa_indexer_*`` (fp16
    weights and scales on A3). `output` is the op's first return value [T, 1, k] int32 (with return_value=True the
    pair (indices, values): the values are judged at the kernel's own indices). The metadata tensor only
    schedules the kernel and is not stored; modes other than the V4 backend's (quant modes 0, sparse_mode 3,
    unbounded pre/next tokens) are refused."""
    if output is None:
        raise TypeError("capture_ascend_qli: the op's first output (topk indices) is required as `output`")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_qli: out= is where the case goes (a path or a DumpWriter); pass the indices as `output`")
    if int(query_quant_mode) != 0 or int(key_quant_mode) != 0:
        raise ValueError(f"capture_ascend_qli: quant modes {query_quant_mode}/{key_quant_mode}: only 0/0 (int8 per-row "
                         "scales, the A3 path) is modelled")
    if int(pre_tokens) != (1 << 63) - 1 or int(next_tokens) != (1 << 63) - 1:
        raise ValueError("capture_ascend_qli: pre_tokens/next_tokens other than 2^63-1 are not modelled")
    outs = {}
    if return_value:  # the op returns (indices, values): the values are judged at the kernel's own indices
        if not isinstance(output, (tuple, list)) or len(output) != 2:
            raise TypeError("capture_ascend_qli: with return_value=True pass output=(topk_idxs, topk_values)")
        output, values = output
        outs["sparse_values"] = _np(values)
    ins = {"query": _np(query), "key": _np(key), "weights": _np(weights), "query_dequant_scale": _np(query_dequant_scale),
           "key_dequant_scale": _np(key_dequant_scale), "block_table": _np(block_table),
           "actual_seq_lengths_query": _widen(_reshape(_np(actual_seq_lengths_query), (-1,)), ["int32", "int64"]),
           "actual_seq_lengths_key": _widen(_reshape(_np(actual_seq_lengths_key), (-1,)), ["int32", "int64"])}
    a = dict(sparse_count=int(sparse_count), sparse_mode=int(sparse_mode), cmp_ratio=int(cmp_ratio),
             layout_query=layout_query, layout_key=layout_key)
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("v4.indexer", name, ins, {"sparse_indices": _np(output), **outs}, a), out)


def capture_ascend_sparse_attn(q: Any, output: Any = None, *, ori_kv: Any, ori_block_table: Any, cu_seqlens_q: Any,
                               seqused_kv: Any, sinks: Any = None, cmp_kv: Any = None, cmp_sparse_indices: Any = None,
                               cmp_block_table: Any = None, metadata: Any = None, softmax_scale: float = 512 ** -0.5,
                               cmp_ratio: int = 1, ori_mask_mode: int = 4, cmp_mask_mode: int = 3, ori_win_left: int = 127,
                               ori_win_right: int = 0, layout_q: str = "TND", layout_kv: str = "PA_ND",
                               variant: str = "ascend-a3", layer: Optional[int] = None, step: Optional[int] = None,
                               topk_source_layer: Optional[int] = None, topk_source_offset: int = 0,
                               name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None,
                               **ignored: Any) -> Case:
    """attn.v4_sparse: ``out = npu_sparse_attn_sharedkv(q, ori_kv=swa_cache, cmp_kv=compress_kv_cache,
    cmp_sparse_indices=topk_idxs, ori_block_table=..., cmp_block_table=..., cu_seqlens_q=..., seqused_kv=...,
    sinks=attn_sink, metadata=..., softmax_scale=512**-0.5, cmp_ratio=r, ori_mask_mode=4, cmp_mask_mode=3,
    ori_win_left=window-1, ori_win_right=0, layout_q="TND", layout_kv="PA_ND")[0]`` as seed 004's
    ``AscendDSAImpl._forward_prefill`` / ``_forward_decode`` call it (SWA-only layers: no cmp_* arguments,
    cmp_ratio 1; C128: no cmp_sparse_indices). `output` is the op's first return value [T, N, D] bf16. The metadata
    tensor (the AICPU work split) and cu_seqlens_ori_kv / cu_seqlens_cmp_kv (ignored by PA_ND) are not stored.
    Masks other than the V4 backend's (ori_mask_mode 4, cmp_mask_mode 3) are refused. IndexCache (``skip_topk``
    layers): give `topk_source_layer` (the layer whose top-k is reused), `topk_source_offset` (num_decode_tokens for
    the prefill segment, 0 for decode), and `layer` / `step` here and on that layer's capture_ascend_qli case:
    `check` then demands the reused indices equal the source layer's."""
    if output is None:
        raise TypeError("capture_ascend_sparse_attn: the op's first output (attention out) is required as `output`")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_sparse_attn: out= is where the case goes (a path or a DumpWriter); pass the "
                        "attention output as `output`")
    if int(ori_mask_mode) != 4 or int(cmp_mask_mode) != 3:
        raise ValueError(f"capture_ascend_sparse_attn: ori_mask_mode {ori_mask_mode} / cmp_mask_mode {cmp_mask_mode}: "
                         "only 4 / 3 (sliding window, causal compressed entries) is modelled")
    unknown = sorted(set(ignored) - {"cu_seqlens_ori_kv", "cu_seqlens_cmp_kv"})
    if unknown:
        raise TypeError(f"capture_ascend_sparse_attn: unexpected argument(s) {', '.join(unknown)}")
    if isinstance(output, (tuple, list)):
        output = output[0]
    idx = cmp_sparse_indices
    if idx is not None and len(_shape(idx)) == 2:  # [T, K] -> the op's [T, 1, K]
        idx = _reshape(_np(idx), (_shape(idx)[0], 1, _shape(idx)[1]))
    def cache4(x: Any) -> Any:  # [nb, bs, D] -> PA_ND [nb, bs, 1, D]
        if x is None:
            return None
        sh = _shape(x)
        return _reshape(_np(x), (sh[0], sh[1], 1, sh[2])) if len(sh) == 3 else _np(x)
    ins = {"q": _np(q), "ori_kv": cache4(ori_kv), "ori_block_table": _widen(_np(ori_block_table), ["int32"]),
           "cu_seqlens_q": _widen(_reshape(_np(cu_seqlens_q), (-1,)), ["int32", "int64"]),
           "seqused_kv": _widen(_reshape(_np(seqused_kv), (-1,)), ["int32", "int64"]),
           "sinks": _widen(_np(sinks), ["float32"]) if sinks is not None else None, "cmp_kv": cache4(cmp_kv),
           "cmp_block_table": _widen(_np(cmp_block_table), ["int32"]) if cmp_block_table is not None else None,
           "cmp_sparse_indices": _widen(_np(idx), ["int32", "int64"]) if idx is not None else None}
    a = dict(softmax_scale=float(softmax_scale), cmp_ratio=int(cmp_ratio), ori_mask_mode=int(ori_mask_mode),
             cmp_mask_mode=int(cmp_mask_mode), ori_win_left=int(ori_win_left), ori_win_right=int(ori_win_right),
             layout_q=layout_q, layout_kv=layout_kv, variant=variant)
    for k, v in (("layer", layer), ("step", step), ("topk_source_layer", topk_source_layer)):
        if v is not None:
            a[k] = int(v)
    if topk_source_layer is not None:
        a["topk_source_offset"] = int(topk_source_offset)
    a.update(attrs or {})
    return _emit(_case("attn.v4_sparse", name, ins, {"out": _np(output)}, a), out)


def capture_ascend_attn_out(o: Any, cos: Any, sin: Any, wo_a: Any, wo_b: Any, *, o_rot: Any = None, o_lora: Any = None,
                            output: Any = None, o_groups: int = 8, rope_head_dim: int = 64, layer: Optional[int] = None,
                            name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """attn.v4_out: the tail of seed 004's ``AscendDSAImpl.forward`` -- ``inplace_partial_rotary_mul(o.unsqueeze(1), cos,
    -sin, rotary_mode="interleave", partial_slice=[nope, D])`` then ``_forward_o_proj`` (non-A5, no o-proj TP):
    ``npu_transpose_batchmatmul(o.view(T, G, -1), wo_a.weight, perm_x1=(1, 0, 2), perm_y=(1, 0, 2))`` and
    ``wo_b``. `o` is the attention output *before* the in-place rotation (snapshot it: the op overwrites it), `cos` /
    `sin` the layer's per-token rows ([T, 64] or [T, 1, 1, 64]), `wo_a` / `wo_b` the weights. Give any of the
    results: `o_rot` (o after the rotation), `o_lora` (the batch-matmul output [T, G, R]), `output` ([T, dim]); each
    is judged on the kernel's own upstream result when that is captured too."""
    if o_rot is None and o_lora is None and output is None:
        raise TypeError("capture_ascend_attn_out: give at least one of o_rot, o_lora, output")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_attn_out: out= is where the case goes (a path or a DumpWriter)")
    def rows(x: Any) -> Any:
        sh = _shape(x)
        return _widen(_reshape(_np(x), (sh[0], sh[-1])) if len(sh) != 2 else _np(x), ["float32"])
    ins = {"o": _np(o), "cos": rows(cos), "sin": rows(sin), "wo_a": _np(getattr(wo_a, "weight", wo_a)),
           "wo_b": _np(getattr(wo_b, "weight", wo_b))}
    outs = {"o_rot": _np(o_rot) if o_rot is not None else None, "o_lora": _np(o_lora) if o_lora is not None else None,
            "output": _np(output) if output is not None else None}
    a = dict(o_groups=int(o_groups), rope_head_dim=int(rope_head_dim))
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("attn.v4_out", name, ins, outs, a), out)


def capture_ascend_li(query: Any, key: Any, weights: Any, output: Any = None, *, actual_seq_lengths_query: Any,
                      actual_seq_lengths_key: Any, block_table: Any, layout_query: str = "TND", layout_key: str = "PA_BSND",
                      sparse_count: int = 2048, sparse_mode: int = 3, pre_tokens: int = (1 << 63) - 1,
                      next_tokens: int = (1 << 63) - 1, positions: Any = None, variant: str = "ascend-a3",
                      layer: Optional[int] = None, name: Optional[str] = None, out: Out = None,
                      attrs: Optional[Dict[str, Any]] = None) -> Case:
    """indexer.npu_lightning: ``torch_npu.npu_lightning_indexer(query=q, key=past_key_states, weights=weights,
    actual_seq_lengths_query=..., actual_seq_lengths_key=..., block_table=..., layout_query="TND",
    layout_key="PA_BSND", sparse_count=2048, sparse_mode=3)`` as seed 000's NPU indexer calls it; `output` is the op's
    first return value (``topk_indices[0]``, [T, k] or [T, 1, k]).

    Context parallelism (``do_npu_cp_balance_indexer``): pass the (prev, next) pairs exactly as the engine holds them
    -- ``actual_seq_lengths_query=(q_prev, q_next)``, ``actual_seq_lengths_key=(kv_prev, kv_next)``, and
    ``output=(topk_prev, topk_next)`` -- with the whole `query` / `weights` (split at ceil(T/2) as the engine does).
    `positions` (``forward_batch.positions`` of these rows) is the provenance that lets `check` judge the split
    against the unsplit call: without it a split whose metadata mixes rank-local and global lengths (B45) can look
    right."""
    if output is None:
        raise TypeError("capture_ascend_li: the op's first output (topk indices) is required as `output`")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_li: out= is where the case goes (a path or a DumpWriter); pass the indices as `output`")
    if int(pre_tokens) != (1 << 63) - 1 or int(next_tokens) != (1 << 63) - 1:
        raise ValueError("capture_ascend_li: pre_tokens/next_tokens other than 2^63-1 are not modelled")
    pairs = [isinstance(x, (tuple, list)) for x in (actual_seq_lengths_query, actual_seq_lengths_key, output)]
    if any(pairs) and not all(pairs):
        raise TypeError("capture_ascend_li: a context-parallel capture gives actual_seq_lengths_query, "
                        "actual_seq_lengths_key and output all as (prev, next) pairs")
    lens = lambda x: _widen(_reshape(_np(x), (-1,)), ["int32", "int64"])  # noqa: E731
    cp = all(pairs)
    ins = {"query": _np(query), "key": _np(key), "weights": _np(weights), "block_table": _np(block_table)}
    a = dict(sparse_count=int(sparse_count), sparse_mode=int(sparse_mode), layout_query=layout_query,
             layout_key=layout_key, variant=variant)
    if cp:
        if len(actual_seq_lengths_query) != 2 or len(actual_seq_lengths_key) != 2 or len(output) != 2:
            raise ValueError("capture_ascend_li: the context-parallel pairs must have two entries (prev, next)")
        ins["actual_seq_lengths_query"], ins["actual_seq_lengths_query_next"] = map(lens, actual_seq_lengths_query)
        ins["actual_seq_lengths_key"], ins["actual_seq_lengths_key_next"] = map(lens, actual_seq_lengths_key)
        prev, nxt = (_np(o) for o in output)
        if prev.ndim != nxt.ndim or prev.shape[1:] != nxt.shape[1:]:
            raise ValueError(f"capture_ascend_li: the two halves' outputs differ in shape: {prev.shape} and {nxt.shape}")
        idx = np.concatenate([prev, nxt], axis=0)
        a["cp_split"] = "prev_next"
    else:
        ins["actual_seq_lengths_query"] = lens(actual_seq_lengths_query)
        ins["actual_seq_lengths_key"] = lens(actual_seq_lengths_key)
        idx = _np(output)
    if positions is not None:
        ins["positions"] = lens(positions)
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("indexer.npu_lightning", name, ins, {"sparse_indices": idx}, a), out)


def capture_vllm_v4_indexer(q_fp8: Any, k_cache: Any, weights: Any, output: Any = None, *, query_start_loc: Any,
                            seq_lens: Any, block_table: Any, k_scale: Any = None, head_dim: int = 128,
                            sparse_count: int = 512, sorted: bool = False, layer: Optional[int] = None,
                            name: Optional[str] = None, out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.indexer, variant vllm-cuda: vLLM's CUDA DeepSeek-V4 indexer (spec v4 §10) from its tensors -- `q_fp8` the
    e4m3 query [T, H, D] of ``fused_indexer_q_rope_quant`` (its scale folded into the fp32 `weights` [T, H]), the
    indexer K cache and the top-k output [T, k] (or [T, 1, k]) of the compressed entries. `k_cache` is either the e4m3
    codes [nblk, bs, D] with `k_scale` fp32 [nblk, bs], or vLLM's fused uint8 cache [nblk, bs * (D + 4)] (per block:
    bs * D code bytes, then bs fp32 scales), split here. `query_start_loc` [B + 1] and `seq_lens` [B] (uncompressed
    tokens) are the attention metadata. `sorted`: whether the top-k kernel emits descending score order."""
    if output is None:
        raise TypeError("capture_vllm_v4_indexer: the top-k indices are required as `output`")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_vllm_v4_indexer: out= is where the case goes (a path or a DumpWriter)")
    if k_scale is None:
        kc = _as_bytes(_np(k_cache))
        if _dt.is_torch_tensor(kc):
            kc = kc.cpu().numpy()
        if kc.dtype != np.uint8 or kc.ndim != 2 or kc.shape[1] % (head_dim + 4):
            raise ValueError(f"capture_vllm_v4_indexer: a fused cache must be uint8 [nblk, bs * ({head_dim} + 4)], got "
                             f"{kc.dtype} {list(kc.shape)} (or pass the codes and k_scale separately)")
        nblk, bs = kc.shape[0], kc.shape[1] // (head_dim + 4)
        codes = _dt.Bits(np.ascontiguousarray(kc[:, : bs * head_dim]).reshape(nblk, bs, head_dim), "fp8_e4m3fn")
        scale = np.ascontiguousarray(kc[:, bs * head_dim:]).view(np.float32).reshape(nblk, bs)
    else:
        codes, scale = _np(k_cache), _np(k_scale)
    qsl = _reshape(_np(query_start_loc), (-1,))
    ins = {"query": _np(q_fp8), "key": codes, "weights": _np(weights), "key_dequant_scale": scale,
           "block_table": _np(block_table), "actual_seq_lengths_query": _widen(qsl[1:], ["int32", "int64"]),
           "actual_seq_lengths_key": _widen(_reshape(_np(seq_lens), (-1,)), ["int32", "int64"])}
    a = dict(sparse_count=int(sparse_count), variant="vllm-cuda", sorted=int(bool(sorted)))
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("v4.indexer", name, ins, {"sparse_indices": _np(output)}, a), out)


def capture_vllm_v4_indexer_q(positions: Any, index_q: Any, cos_sin_cache: Any, index_weights: Any, q_fp8: Any = None,
                              weights_out: Any = None, *, softmax_scale: Optional[float] = None,
                              head_scale: Optional[float] = None, layer: Optional[int] = None, name: Optional[str] = None,
                              out: Out = None, attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.indexer_prolog, kernel vllm-cuda: ``q_fp8, weights_out = fused_indexer_q_rope_quant(positions, index_q,
    cos_sin_cache, index_weights, softmax_scale, head_scale)`` (vLLM's DeepSeek-V4 FP8 indexer q path, spec v4 §10):
    `index_q` bf16 [T, H, 128] before RoPE, `positions` [T], `cos_sin_cache` [P, 64] (cos 32 | sin 32 per position,
    fp32 or bf16), `index_weights` [T, H]; outputs `q_fp8` e4m3 [T, H, 128] and `weights_out` fp32 [T, H] (the
    kernel's return tuple may be passed as q_fp8). softmax_scale / head_scale: the two factors of the weight fold
    (recorded only when given; dsa-check's defaults are 128^-0.5 and 64^-0.5)."""
    if isinstance(q_fp8, (tuple, list)):
        if weights_out is not None:
            raise TypeError("capture_vllm_v4_indexer_q: give the kernel's result tuple or q_fp8 and weights_out, not both")
        q_fp8, weights_out = q_fp8
    if q_fp8 is None or weights_out is None:
        raise TypeError("capture_vllm_v4_indexer_q: q_fp8 and weights_out (the kernel's outputs) are required")
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_vllm_v4_indexer_q: out= is where the case goes (a path or a DumpWriter)")
    ins = {"index_q": _np(index_q), "positions": _widen(_reshape(_np(positions), (-1,)), ["int64", "int32"]),
           "cos_sin_cache": _np(cos_sin_cache), "index_weights": _np(index_weights)}
    a: Dict[str, Any] = dict(kernel="vllm-cuda")
    if softmax_scale is not None:
        a["softmax_scale"] = float(softmax_scale)
    if head_scale is not None:
        a["head_scale"] = float(head_scale)
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("v4.indexer_prolog", name, ins, {"q_fp8": _np(q_fp8), "weights_out": _np(weights_out)}, a), out)


def capture_ascend_indexer_prolog(*, q: Any = None, q_int8: Any = None, q_scale: Any = None, weights: Any = None,
                                   weights_fp16: Any = None, k: Any = None, slot_mapping: Any = None,
                                   k_cache_before: Any = None, k_scale_cache_before: Any = None, k_cache_after: Any = None,
                                   k_scale_cache_after: Any = None, amax_zero: str = "scale1", q_pre: Any = None,
                                   rope_cos: Any = None, rope_sin: Any = None, q_rot: Any = None, hadamard: str = "ascend",
                                   layer: Optional[int] = None, name: Optional[str] = None, out: Out = None,
                                   attrs: Optional[Dict[str, Any]] = None) -> Case:
    """v4.indexer_prolog: the tensors around seed 004's A3 indexer inputs. Query path: `q` = the rotated bf16 query
    [T, H, D] that ``indexer_quantize_query`` quantizes, `q_int8` / `q_scale` its outputs. Weights path: `weights` =
    the bf16 ``weights_proj`` output [T, H], `weights_fp16` = ``prepare_dsa_indexer_weights(weights * c)``. Key path:
    `k` = the indexer compressor rows [R, D] bf16, `slot_mapping` the [block, offset] pairs (or flat slots) of
    ``indexer_quant_scatter``, the caches copied before the call (``capture`` snapshots arguments) and after it.
    Any path may be left out (all its tensors None); each given path's outputs are checked bit for bit.

    The query path may start one step earlier: `q_pre` = the wq_b output [T, H, D] (before RoPE and the Hadamard),
    `rope_cos` / `rope_sin` the tokens' fp32 RoPE rows ([T, 64] interleave-duplicated as the Ascend table, or
    [T, 32]; a [T, 1, 1, 64] gather is flattened), `q_rot` the rotated query the engine then quantizes (required with
    q_int8 / q_scale: the quant is judged on it), `hadamard` = "ascend" (vLLM-Ascend rotate_activation) or "fwht"."""
    if out is not None and not isinstance(out, (str, os.PathLike, DumpWriter)):
        raise TypeError("capture_ascend_indexer_prolog: out= is where the case goes (a path or a DumpWriter)")
    ins: Dict[str, Any] = {}
    outs: Dict[str, Any] = {}
    if q is not None and q_pre is not None:
        raise TypeError("capture_ascend_indexer_prolog: give q (rotated) or q_pre (before RoPE and the Hadamard), not both")
    if q is not None or q_pre is not None:
        if q_pre is not None:
            if rope_cos is None or rope_sin is None:
                raise TypeError("capture_ascend_indexer_prolog: q_pre needs rope_cos and rope_sin")
            T = _np(q_pre).shape[0]
            ins.update(q_pre=_np(q_pre), rope_cos=_reshape(_np(rope_cos), (T, -1)), rope_sin=_reshape(_np(rope_sin), (T, -1)))
            outs["q_rot"] = _np(q_rot) if q_rot is not None else None
        else:
            ins["q"] = _np(q)
        outs.update(q_int8=_np(q_int8) if q_int8 is not None else None, q_scale=_np(q_scale) if q_scale is not None else None)
    if weights is not None:
        ins["weights"] = _np(weights)
        outs["weights_fp16"] = _np(weights_fp16) if weights_fp16 is not None else None
    if k is not None:
        if slot_mapping is None or k_cache_before is None or k_scale_cache_before is None:
            raise TypeError("capture_ascend_indexer_prolog: k needs slot_mapping, k_cache_before and k_scale_cache_before")
        ins.update(k=_np(k), slot_mapping=_np(slot_mapping), k_cache_in=_np(k_cache_before),
                   k_scale_cache_in=_np(k_scale_cache_before))
        outs.update(k_cache=_np(k_cache_after) if k_cache_after is not None else None,
                    k_scale_cache=_np(k_scale_cache_after) if k_scale_cache_after is not None else None)
    if not ins:
        raise TypeError("capture_ascend_indexer_prolog: give at least one path (q or q_pre, weights or k)")
    a: Dict[str, Any] = dict(amax_zero=amax_zero)
    if q_pre is not None:
        a["hadamard"] = hadamard
    if layer is not None:
        a["layer"] = int(layer)
    a.update(attrs or {})
    return _emit(_case("v4.indexer_prolog", name, ins, {k2: v for k2, v in outs.items() if v is not None}, a), out)


STAGE_HELPERS: Dict[str, Callable[..., Case]] = {
    "indexer.quant": capture_act_quant,
    "indexer.prolog": capture_prolog,
    "indexer.kcache_store": capture_kcache_store,
    "indexer.logits_ragged": capture_fp8_mqa_logits,
    "indexer.logits_paged": capture_fp8_paged_mqa_logits,
    "indexer.fused": capture_fused_indexer,
    "indexer.topk": capture_topk,
    "indexer.npu_lightning": capture_ascend_li,
    "mla.kcache_store": capture_mla_kcache_store,
    "attn.sparse_mla_prefill": capture_flash_mla_sparse_fwd,
    "attn.sparse_mla_decode": capture_flash_mla_with_kvcache,
    "v4.compressor": capture_ascend_compressor,
    "v4.compressor_cache": capture_vllm_v4_compressor,
    "v4.indexer_prolog": capture_ascend_indexer_prolog,
    "v4.indexer": capture_ascend_qli,
    "v41.select": capture_v41_select,
    "v41.indexer_k": capture_vllm_v41_indexer_k,
    "v41.logits": capture_fp8_fp4_paged_sparse_mqa_logits,
    "attn.v4_sparse": capture_ascend_sparse_attn,
    "attn.v4_out": capture_ascend_attn_out,
}


# ---- layer tracking ----
_layer: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar("dsa_dump_layer", default=None)


@contextlib.contextmanager
def layer_scope(layer_id: Optional[int]):
    """Marks the kernel calls inside the block as belonging to layer `layer_id` (for capture's layer filter)."""
    tok = _layer.set(None if layer_id is None else int(layer_id))
    try:
        yield
    finally:
        _layer.reset(tok)


def current_layer() -> Optional[int]:
    return _layer.get()


def _layer_of_call(args: tuple, kwargs: Dict[str, Any], layer_arg: str, position: Optional[int]) -> Any:
    """The layer id a call passes: keyword `layer_arg`, else the positional argument `position`, else None."""
    lid = kwargs.get(layer_arg)
    if lid is None and position is not None and len(args) > position:
        lid = args[position]
    return lid


def track_layer(owner: Any, method: str, layer_arg: str = "layer_id", position: Optional[int] = None) -> Callable[[], None]:
    """Wraps ``owner.method`` (a class or an object) so that every call runs inside ``layer_scope(<its layer_arg
    argument>)``; e.g. ``track_layer(Indexer, "forward_cuda")`` for sglang. Returns a function undoing it."""
    orig = getattr(owner, method)

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with layer_scope(_layer_of_call(args, kwargs, layer_arg, position)):
            return orig(*args, **kwargs)

    setattr(owner, method, wrapper)
    return lambda: setattr(owner, method, orig)


# ---- the wrapper ----
def _nbytes(x: Any) -> int:
    if x is None:
        return 0
    if _dt.is_torch_tensor(x):
        return int(x.numel()) * int(x.element_size())
    if isinstance(x, _dt.Bits):
        return int(np.asarray(x.array).nbytes)
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 0


def _snapshot(x: Any) -> Any:
    """A CPU copy of a tensor argument (taken before the kernel runs, so in-place kernels do not alter it)."""
    if _dt.is_torch_tensor(x):
        return x.detach().to("cpu", copy=True)
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, tuple):
        return tuple(_snapshot(v) for v in x)
    if isinstance(x, list):
        return [_snapshot(v) for v in x]
    return x


class Capture:
    """A kernel wrapped by ``capture``: calls go through unchanged; every `every`-th call (after `skip`) that
    passes the layer filter and the size cap is dumped to ``out_dir/<prefix>_<layer>_<n>.h5`` (one atomic file
    per call). Stops after `max_cases` files. Attributes: calls, captured, skipped_size, errors (dump errors are
    recorded and warned about, never raised into the engine unless strict=True)."""

    def __init__(self, fn: Callable[..., Any], stage: str, map_args: Callable[..., Dict[str, Any]], out_dir: str,
                 every: int = 1, skip: int = 0, layers: Optional[Iterable[int]] = None, max_cases: Optional[int] = 16,
                 max_bytes: Optional[int] = 256 << 20, prefix: Optional[str] = None, snapshot: bool = True,
                 strict: bool = False, enabled: bool = True, layer_only: bool = False):
        if stage not in STAGE_HELPERS:
            raise ValueError(f"unknown stage '{stage}' (one of {', '.join(STAGE_HELPERS)})")
        if every < 1:
            raise ValueError("every must be >= 1")
        self.fn, self.stage, self.map_args = fn, stage, map_args
        self.out_dir, self.every, self.skip = os.fspath(out_dir), int(every), int(skip)
        self.layers = None if layers is None else set(int(x) for x in layers)
        self.max_cases, self.max_bytes = max_cases, max_bytes
        self.prefix = prefix or stage.replace(".", "_")
        self.snapshot, self.strict, self.enabled, self.layer_only = snapshot, strict, enabled, layer_only
        self.calls = 0
        self.captured = 0
        self.skipped_size = 0
        self.errors: list = []
        self.files: list = []
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def _want(self) -> bool:
        if not self.enabled or (self.max_cases is not None and self.captured >= self.max_cases):
            return False
        lid = _layer.get()
        if self.layers is not None and lid not in self.layers:
            return False
        n = self.calls - self.skip  # calls counted before this one
        return n >= 0 and n % self.every == 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            take = self._want()
            self.calls += 1
        if take and self.max_bytes is not None:
            size = _nbytes(args) + sum(_nbytes(v) for v in kwargs.values())
            if size > self.max_bytes:
                take = False
                self.skipped_size += 1
        layer = _active_layer.get()
        if layer is None and self.layer_only:
            take = False
        if not take:
            return self.fn(*args, **kwargs)
        a = tuple(_snapshot(x) for x in args) if self.snapshot else args
        kw = {k: _snapshot(v) for k, v in kwargs.items()} if self.snapshot else kwargs
        result = self.fn(*args, **kwargs)
        try:
            with self._lock:
                n = self.captured
                self.captured += 1
            lid = _layer.get()
            helper_kwargs = self.map_args(*a, result=result, **kw)
            helper_kwargs.setdefault("name", f"{self.prefix}_{n}")
            attrs = dict(helper_kwargs.pop("attrs", None) or {})
            if lid is not None and layer is None:  # (a LayerCapture writes its own layer attr)
                attrs.setdefault("layer", lid)  # the provenance attr dsa-check reads (layer checks, consistency keys)
            if layer is not None:  # inside a LayerCapture: the case joins the layer's file
                layer.add(STAGE_HELPERS[self.stage](out=None, attrs=attrs, **helper_kwargs))
            else:
                path = os.path.join(self.out_dir, f"{self.prefix}_L{'x' if lid is None else lid}_{n:05d}.h5")
                os.makedirs(self.out_dir, exist_ok=True)
                STAGE_HELPERS[self.stage](out=path, attrs=attrs, **helper_kwargs)
                self.files.append(path)
        except Exception as e:  # noqa: BLE001 - a dump failure must not take the engine down
            self.errors.append(e)
            if self.strict:
                raise
            import warnings

            warnings.warn(f"dsa_dump: capture of {self.stage} call failed: {e}")
        return result


def capture(fn: Optional[Callable[..., Any]] = None, *, stage: str, map_args: Callable[..., Dict[str, Any]],
            out_dir: str = "dsa_dumps", **kw: Any) -> Any:
    """Wraps a kernel function (or decorates one): ``deep_gemm.fp8_mqa_logits = capture(deep_gemm.fp8_mqa_logits,
    stage="indexer.logits_ragged", map_args=lambda q, kv, w, ks, ke, clean_logits=True, result=None, **_:
    dict(q=q, kv=kv, weights=w, ks=ks, ke=ke, logits=result, clean_logits=clean_logits))``.

    map_args receives the call's (snapshotted) arguments plus ``result=`` (the kernel's return value) and returns
    the keyword arguments of the stage's capture_* helper (without out=). Options: every=N (sample every Nth
    call), skip=N (ignore the first N calls, e.g. warm-up / CUDA-graph capture), layers={...} (with layer_scope /
    track_layer), max_cases, max_bytes (skip calls whose tensor arguments exceed it), snapshot (copy inputs
    before the call; keep True for in-place kernels), strict (raise dump errors)."""
    if fn is None:
        return lambda f: Capture(f, stage, map_args, out_dir, **kw)
    return Capture(fn, stage, map_args, out_dir, **kw)


# ---- whole layers ----
_active_layer: contextvars.ContextVar[Optional["LayerCapture"]] = contextvars.ContextVar("dsa_dump_layer_capture",
                                                                                         default=None)


def _stored(x: Any, logical: Optional[str]) -> Tuple[np.ndarray, str]:
    return _dt.to_storage(x, logical)


class LayerCapture:
    """The kernel calls of one layer (one forward, one step) in ONE file, the stages joined by links, for
    ``dsa-check check`` to judge as a chain (local and end-to-end verdicts, first divergence)::

        with dsa_dump.LayerCapture("dumps/layer3_step7.h5", layer=3, step=7):
            indexer.forward_cuda(...)   # every capture()-wrapped kernel called inside adds its case here

    Cases can also be added by hand (``lc.add(capture_topk(...))``). An input whose bits equal an earlier case's
    output (same logical dtype and element count) is linked to it: an HDF5 hard link when the shapes agree, else
    the bytes plus attr ``from:<input>`` (e.g. top-k indices [B*next_n, k] read by the attention as [B, next_n, k]).
    Explicit ``case.links`` win. The file is written atomically when the block ends (nothing when no case was
    added or the block raised)."""

    def __init__(self, path: str, *, layer: Any = None, step: Any = None, link_by_value: bool = True,
                 validate: bool = True):
        self.path = os.fspath(path)
        self.layer, self.step = layer, step
        self.link_by_value, self.validate = link_by_value, validate
        self.cases: list = []
        self._outputs: Dict[Tuple[str, int, bytes], str] = {}
        self._tok = None
        self._lock = threading.Lock()

    def add(self, case: Case) -> Case:
        with self._lock:
            names = {c.name for c in self.cases}
            base, n = case.name, 0
            while case.name in names:
                n += 1
                case.name = f"{base}_{n}"
            if self.layer is not None:
                case.attrs.setdefault("layer", str(self.layer))
            if self.step is not None:
                case.attrs.setdefault("step", str(self.step))
            if self.link_by_value:
                for tn, t in case.inputs.items():
                    if tn in case.links or t is None:
                        continue
                    arr, logical = _stored(t, case.dtypes.get(f"inputs/{tn}"))
                    src = self._outputs.get((logical, int(arr.size), np.ascontiguousarray(arr).tobytes()))
                    if src is not None:
                        case.links[tn] = src
                for tn, t in case.outputs.items():
                    if t is None:
                        continue
                    arr, logical = _stored(t, case.dtypes.get(f"outputs/{tn}"))
                    if arr.size:
                        self._outputs.setdefault((logical, int(arr.size), np.ascontiguousarray(arr).tobytes()),
                                                 f"{case.name}/outputs/{tn}")
            self.cases.append(case)
        return case

    def __enter__(self) -> "LayerCapture":
        self._tok = _active_layer.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _active_layer.reset(self._tok)
        if exc_type is None and self.cases:
            from .h5 import write_dump

            d = os.path.dirname(self.path)
            if d:
                os.makedirs(d, exist_ok=True)
            write_dump(self.path, self.cases, validate=self.validate)


@contextlib.contextmanager
def capture_layers(owner: Any, method: str, out_dir: str = "dsa_dumps", *, kernels: Iterable[Tuple[Any, str, str,
                   Callable[..., Dict[str, Any]]]] = (), layer_arg: str = "layer_id", position: Optional[int] = None,
                   layers: Optional[Iterable[int]] = None, every: int = 1, skip: int = 0, max_files: Optional[int] = 8,
                   validate: bool = True):
    """One context manager over an engine module: every call of ``owner.method`` (a layer's forward: sglang
    ``Indexer.forward_cuda``, vLLM-Ascend ``AscendDSAImpl.forward``) whose layer (argument `layer_arg`, or the
    positional argument `position`) is in `layers` becomes one layer file ``out_dir/layer<L>_call<N>.h5``
    (a LayerCapture), holding the cases of the kernels listed in `kernels` -- (owner, attribute, stage, map_args),
    wrapped like ``capture()`` for the duration and dumped only inside a layer. Samples every `every`-th call
    after `skip`, stops after `max_files`. Yields the list of files written; everything is restored at exit::

        with capture_layers(Indexer, "forward_cuda", "dumps", layers={3}, kernels=[
                (deep_gemm, "fp8_paged_mqa_logits", "indexer.logits_paged", map_logits),
                (sgl_kernel, "fast_topk_v2", "indexer.topk", map_topk)]) as files:
            engine.generate(prompts)
    """
    want = None if layers is None else {int(x) for x in layers}
    files: list = []
    undo = []
    state = {"calls": 0}
    for kowner, attr, stage, map_args in kernels:
        orig = getattr(kowner, attr)
        setattr(kowner, attr, Capture(orig, stage, map_args, out_dir, max_cases=None, layer_only=True))
        undo.append((kowner, attr, orig))
    orig_method = getattr(owner, method)

    @functools.wraps(orig_method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        lid = _layer_of_call(args, kwargs, layer_arg, position)
        take = want is None or (lid is not None and int(lid) in want)
        if take:
            n = state["calls"]
            state["calls"] += 1
            take = n >= skip and (n - skip) % every == 0 and (max_files is None or len(files) < max_files)
        if not take:
            return orig_method(*args, **kwargs)
        path = os.path.join(out_dir, f"layer{'x' if lid is None else lid}_call{state['calls'] - 1:05d}.h5")
        with layer_scope(lid), LayerCapture(path, layer=lid, step=state["calls"] - 1, validate=validate) as lc:
            result = orig_method(*args, **kwargs)
        if lc.cases:
            files.append(path)
        return result

    setattr(owner, method, wrapper)
    try:
        yield files
    finally:
        setattr(owner, method, orig_method)
        for kowner, attr, orig in reversed(undo):
            setattr(kowner, attr, orig)
