"""Real engine cache writers run on a Hopper GPU (tests/data/real_sm90_writers.h5): vLLM's Triton V4.1 indexer K
store (FP8 132-byte records, compress ratios 1 and 2), rope_quant_insert (V4 584-byte and V4.1 MXFP8 528-byte
records, ratios 1 and 2), quantize_and_insert_k_cache (584 / 528) and sglang's DSV4 MXFP4 368-byte codec, captured
by scripts/examples/h200_v41_writers/run_capture.py on an NVIDIA H100 80GB HBM3 (sm_90, torch 2.11.0+cu130,
2026-12-05; upstream commits in docs/research_fp4_records.md §7) and converted by to_dumps.py. Every case must check
BITEXACT; one flipped byte in any writer's output must fail (exit 1) and name that case."""
import shutil
import subprocess

import h5py
import pytest

DATA = "tests/data/real_sm90_writers.h5"
CASES = ["vllm_v41_indexer_k_fp8_cr1", "vllm_v41_indexer_k_fp8_cr2", "vllm_v41_rope_quant_insert_584_cr1",
         "vllm_v41_rope_quant_insert_584_cr2", "vllm_v41_rope_quant_insert_528_cr1", "vllm_v41_rope_quant_insert_528_cr2",
         "vllm_quantize_and_insert_k_cache_584", "vllm_quantize_and_insert_k_cache_528", "sglang_dsv4_mxfp4_368"]


def run(bin_, path):
    p = subprocess.run([str(bin_), "check", str(path)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def test_real_writers_are_bitexact(repo_root, dsa_check_bin):
    with h5py.File(repo_root / DATA, "r") as f:
        assert sorted(f.keys()) == sorted("h100_" + c for c in CASES)
        for c in CASES:
            prov = f["h100_" + c].attrs["meta.provenance"]
            assert "H100" in (prov.decode() if isinstance(prov, bytes) else str(prov))
    rc, txt = run(dsa_check_bin, repo_root / DATA)
    assert rc == 0, txt
    assert txt.count("BITEXACT") == len(CASES), txt
    assert f"{len(CASES)} passed, 0 failed" in txt


@pytest.mark.parametrize("case", ["vllm_v41_indexer_k_fp8_cr2", "vllm_v41_rope_quant_insert_528_cr1", "sglang_dsv4_mxfp4_368"])
def test_one_flipped_byte_fails(repo_root, dsa_check_bin, tmp_path, case):
    f = tmp_path / "flipped.h5"
    shutil.copy(repo_root / DATA, f)
    with h5py.File(f, "r+") as h:
        g = h["h100_" + case]["outputs"]
        name = next(iter(g.keys()))
        v = g[name][...]
        flat = v.reshape(-1)
        written = (flat != 0xEE).nonzero()[0]  # a byte the writer wrote (the canary fill is 0xEE)
        flat[written[len(written) // 2]] ^= 0x01
        g[name][...] = v
    rc, txt = run(dsa_check_bin, f)
    assert rc == 1, txt
    assert f"FAIL           h100_{case}/" in txt or f"h100_{case}/outputs" in txt, txt
