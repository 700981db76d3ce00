"""v4.compressor end to end through the capture kit and the CLI, against the independent float64 numpy model of the
Ascend `compressor` op in reference/v4.py, written from spec v4 §2 (closed form: 8-row overlap windows, per-channel
softmax over rows, RMSNorm, interleaved RoPE at the group start, one bf16 rounding), never from the C++ reference. A
correct model passes (exit 0), seeded bugs fail (exit 1), a step whose state rows are missing from the block table is
an input error (exit 2)."""
import subprocess

import numpy as np
import pytest

import dsa_dump
from reference import numerics as num
from reference import v4 as ref

CLI_STAGES = ("v4.compressor",)  # the `cli` fixture (conftest.py) skips the module when the binary lacks it
D, H, R_, COFF, BS, NB = 128, 32, 4, 2, 8, 8


def make(seed, starts, lens, bug=None):
    """Random weights and per-request token histories (bf16 values), and the op's tensors from reference.v4.compressor:
    requests with `starts` tokens already in the state cache and `lens` new tokens."""
    rng = np.random.default_rng(seed)
    C2 = COFF * D
    wkv = num.bf16_rne(rng.standard_normal((C2, H)) / np.sqrt(H))
    wg = num.bf16_rne(rng.standard_normal((C2, H)) / np.sqrt(H))
    ape = rng.standard_normal((R_, C2)).astype(np.float32) * 0.5
    gamma = num.bf16_rne(1 + 0.1 * rng.standard_normal(D))
    xs = [num.bf16_rne(rng.standard_normal((32, H)))[:s + n] for s, n in zip(starts, lens)]  # independent of the split
    return ref.compressor(xs, wkv, wg, ape, gamma, starts, lens, ratio=R_, coff=COFF, block_size=BS,
                          blocks_per_request=NB, bug=bug)


def run_check(cli, path):
    p = subprocess.run([cli, "check", str(path)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_numpy_model_of_the_ascend_op_passes(cli, tmp_path):
    a = make(1, [5, 0, 11], [7, 9, 2])
    path = tmp_path / "c4.h5"
    dsa_dump.capture_ascend_compressor(**a, cmp_ratio=4, coff=2, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 0, txt
    assert "cmp_kv" in txt and "state_cache" in txt


@pytest.mark.parametrize("bug", ["halves", "rope_pos"])
def test_seeded_bugs_fail(cli, tmp_path, bug):
    a = make(2, [5, 1], [7, 8], bug=bug)
    path = tmp_path / f"{bug}.h5"
    dsa_dump.capture_ascend_compressor(**a, cmp_ratio=4, coff=2, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "FAIL" in txt and "cmp_kv" in txt


def test_state_written_under_block_zero_fails(cli, tmp_path):
    a = make(3, [5], [7])
    a["state_cache_after"][0, 3] = a["state_cache_after"][1, 0]  # a row lands in block 0
    path = tmp_path / "blk0.h5"
    dsa_dump.capture_ascend_compressor(**a, cmp_ratio=4, coff=2, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "state_cache" in txt and "block 0 offset 3" in txt


def test_missing_state_table_entry_is_an_input_error(cli, tmp_path):
    a = make(4, [5], [7])
    a["state_block_table"] = a["state_block_table"][:, :1].copy()  # positions 8..11 have no block
    path = tmp_path / "short_table.h5"
    dsa_dump.write_dump(str(path), [dsa_dump.Case(name="short", stage="v4.compressor", inputs={
        "x": a["x"], "wkv": a["wkv"], "wgate": a["wgate"], "ape": a["ape"], "norm_weight": a["norm_weight"],
        "rope_sin": a["rope_sin"], "rope_cos": a["rope_cos"], "state_cache_in": a["state_cache"],
        "state_block_table": a["state_block_table"], "cu_seqlens": a["cu_seqlens"], "start_pos": a["start_pos"]},
        outputs={"cmp_kv": a["output"]}, attrs={"cmp_ratio": 4, "coff": 2})], validate=False)
    rc, txt = run_check(cli, path)
    assert rc == 2, txt
    assert "inputs/state_block_table" in txt


def test_prefill_chunked_and_decode_calls_must_agree(cli, tmp_path):
    """One request (id 7) as one 12-token prefill, as chunks 5 + 7, and token by token: with request_ids recorded,
    check adds a consistency result over the repeated (request, entry) rows; a flipped bit in one call fails it."""
    calls = [(0, 12)] + [(0, 5), (5, 7)] + [(p, 1) for p in range(12)]

    def write(path, flip):
        with dsa_dump.DumpWriter(str(path)) as w:
            for k, (s, n) in enumerate(calls):
                a = make(5, [s], [n])
                if flip and k == 2:  # the second chunk emits entries 1 and 2: change one bit of entry 2
                    o = np.asarray(a["output"]).copy()
                    o.view(np.uint16)[1, 3] ^= 1
                    a["output"] = o
                dsa_dump.capture_ascend_compressor(**a, cmp_ratio=4, coff=2, request_ids=[7], layer=2,
                                                   name=f"call{k}", out=w)

    good, bad = tmp_path / "good.h5", tmp_path / "bad.h5"
    write(good, False)
    rc, txt = run_check(cli, good)
    assert rc == 0, txt
    assert "requests/consistency/cmp_kv" in txt and "identical across calls" in txt
    write(bad, True)
    rc, txt = run_check(cli, bad)
    assert rc == 1, txt
    line = [x for x in txt.splitlines() if "requests/consistency/cmp_kv" in x][0]
    assert line.startswith("FAIL") and "request 7 entry 2 (layer 2)" in line


def test_repeated_rows_are_compared_only_with_identical_inputs(cli, tmp_path):
    """Rows of one (layer, request, entry) key whose inputs differ (another prompt under a reused request id) are not
    compared and not counted; the line always says how many were compared, 0 included."""

    def dump(path, specs):
        with dsa_dump.DumpWriter(str(path)) as w:
            for k, (seed, s, n) in enumerate(specs):
                dsa_dump.capture_ascend_compressor(**make(seed, [s], [n]), cmp_ratio=4, coff=2, request_ids=[7], layer=0,
                                                   name=f"call{k}", out=w)

    def line(path):
        rc, txt = run_check(cli, path)
        assert rc == 0, txt
        return [x for x in txt.splitlines() if "requests/consistency/cmp_kv" in x][0]

    # Same request id, other tokens: 3 repeated rows (entries 0..2), none compared although the outputs differ.
    dump(tmp_path / "other.h5", [(5, 0, 12), (6, 0, 12)])
    got = line(tmp_path / "other.h5")
    assert got.startswith("BITEXACT") and "0 repeated row(s) compared" in got and "3 repeated row(s) not compared" in got, got
    # No key repeats: still one line, 0 compared.
    dump(tmp_path / "disjoint.h5", [(5, 0, 4), (5, 4, 4)])
    got = line(tmp_path / "disjoint.h5")
    assert "0 repeated row(s) compared" in got and "not compared" not in got, got
    # Identical inputs: a rerun of the prefill (3 pairs) and a decode of the last token, whose earlier tokens are the
    # state rows the prefill wrote (1 pair).
    dump(tmp_path / "same.h5", [(5, 0, 12), (5, 0, 12), (5, 11, 1)])
    got = line(tmp_path / "same.h5")
    assert got.startswith("BITEXACT") and " 4 repeated (request, entry) row(s) with identical inputs identical" in got, got
    assert "not compared" not in got, got


def _fp8_roundtrip(rows, block):
    """vLLM's FP8 store read back: per block of `block` dims of each bf16 row, the ue8m0 scale and e4m3 codes
    (reference.v4._e4m3_block), dequantized (exact in bf16)."""
    out = np.array(rows, np.float64)
    for r in range(out.shape[0]):
        for b0 in range(0, out.shape[1], block):
            codes, s = ref._e4m3_block(out[r, b0:b0 + block].astype(np.float32))
            out[r, b0:b0 + block] = [(-1.0 if c & 0x80 else 1.0) * num.decode("e4m3", int(c) & 0x7F) * float(s) for c in codes]
    return out


def test_vllm_cuda_indexer_store_is_one_block_over_all_128_dims(cli, tmp_path):
    """vLLM's CUDA indexer compressor (D 128, spec v4 §10): the fp32 pipeline, RoPE, bf16, then ONE FP8 ue8m0 block
    over all 128 dims and no Hadamard: rotate=1 with vllm-cuda passes (with a note); the main store's rule (blocks of
    64 over the nope dims only) fails."""
    a = make(6, [5, 0], [7, 9])
    n = sum((s + q) // 4 - s // 4 for s, q in [(5, 7), (0, 9)])
    rows = np.asarray(a["output"]).astype(np.float64)
    good, nope_only = rows.copy(), rows.copy()
    good[:n] = _fp8_roundtrip(rows[:n], 128)
    nope_only[:n, :64] = _fp8_roundtrip(rows[:n, :64], 64)
    for name, o, rc_want in [("good", good, 0), ("nope_only", nope_only, 1)]:
        b = dict(a, output=o.astype(ref.BF16))
        path = tmp_path / f"{name}.h5"
        dsa_dump.capture_ascend_compressor(**b, cmp_ratio=4, coff=2, variant="vllm-cuda", rotate=True, out=str(path))
        p = subprocess.run([cli, "check", "-v", str(path)], capture_output=True, text=True, timeout=120)
        assert p.returncode == rc_want, p.stdout + p.stderr
        if rc_want == 0:
            assert "applies no Hadamard" in p.stdout
