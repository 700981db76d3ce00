"""Independent numpy models of dsa-check's stages: the executable specification (see reference/README.md).

One module per stage family, written from the stage definitions (the DeepSeek specs, the kernels' sources), never
from the C++ reference or the capture kit:

  reference.numerics   number formats and roundings (bf16, fp16, fp8 e4m3 / e5m2, ue8m0 scales, the exact oracle)
  reference.indexer    V3.2 lightning indexer: act_quant, K-cache page layouts, paged logits, top-k order, the Ascend
                       npu_lightning indexer
  reference.mla        the 656-byte MLA cache writer, sparse MLA prefill / decode, the V4 MODEL1 584-byte cache
  reference.v4         V4 compressor, indexer prolog, indexer, sparse attention, attention output
  reference.fp4_codecs V4.1 block codecs: MXFP8, NVFP4, MXFP4 (e2m1 / e4m3 / ue8m0), their exact dequant
  reference.kv_records  FP4 / FP8 KV records in circulation: the two V4.1 records plus sglang 368, FlashMLA/vLLM 352,
                        FlashInfer 384, local-inference-lab 432 (writer and exact reader, both page orders)

tests/python imports them (`from reference import mla as ref`); the repo root's pytest.ini puts the repo root on
sys.path. Needs numpy and ml_dtypes only.
"""
from . import fp4_codecs, indexer, kv_records, mla, numerics, v4  # noqa: F401
