"""v4.compressor_cache end to end through the capture kit and the CLI, against the independent numpy float32 model of
vLLM's CUDA compressor kernels in reference/v4.py (compressor_vllm, written from spec v4 §10 and the kernels'
definitions, never from the C++ reference). Inputs are built here (not by the C++ generator). A correct model passes
(exit 0) for the D 128 indexer store (rotate = 1 accepted with a note), the D 512 MODEL1 store and C128; seeded bugs
and a write into the null block fail (exit 1); two emitting tokens on one KV slot are an input error (exit 2)."""
import subprocess

import numpy as np
import pytest

import dsa_dump
from reference import numerics as num
from reference import v4 as ref

CLI_STAGES = ("v4.compressor_cache",)


def make(seed, D, ratio, starts, lens, pads=2, sbs=4, kbs=4):
    """The kernels' tensors of one step: B requests with `starts` positions already saved and `lens` new tokens, then
    `pads` pad tokens (slot -1); state rows before the step written as vLLM would, every other state row NaN; the KV
    cache random canary bytes."""
    rng = np.random.default_rng(seed)
    coff = 2 if ratio == 4 else 1
    C2, W, B = coff * D, 2 * coff * D, len(starts)
    cap = max(s + n for s, n in zip(starts, lens))
    hist = rng.standard_normal((B, cap, W)).astype(np.float32)
    ape = (0.5 * rng.standard_normal((ratio, C2))).astype(np.float32)
    gamma = num.bf16_rne(1 + 0.1 * rng.standard_normal(D))
    per = -(-cap // sbs)
    kper = -(-(-(-cap // ratio)) // kbs)
    bt = (1 + np.arange(B * per).reshape(B, per)[:, ::-1]).astype(np.int32)  # descending ids: not the identity
    kt = (1 + np.arange(B * kper).reshape(B, kper)).astype(np.int64)
    st = np.full((1 + B * per, sbs, W), np.nan, np.float32)
    for b, s in enumerate(starts):
        for p in range(s):
            st[bt[b, p // sbs], p % sbs] = np.concatenate([hist[b, p, :C2], hist[b, p, C2:] + ape[p % ratio]])
    rec = 584 if D == 512 else D + 4
    kc = rng.integers(0, 256, (1 + B * kper, kbs, rec), dtype=np.uint8)
    cs = np.zeros((cap, 64), np.float32)
    for p in range(cap):
        c, s_ = ref.rope_row(p)
        cs[p, :32], cs[p, 32:] = c[0::2], s_[0::2]
    ks, pos, req, sm, km = [], [], [], [], []
    for b, (s, n) in enumerate(zip(starts, lens)):
        for p in range(s, s + n):
            ks.append(hist[b, p])
            pos.append(p), req.append(b), sm.append(int(bt[b, p // sbs]) * sbs + p % sbs)
            j = p // ratio
            km.append(int(kt[b, j // kbs]) * kbs + j % kbs)
    for _ in range(pads):
        ks.append(rng.standard_normal(W).astype(np.float32))
        pos.append(0), req.append(0), sm.append(-1), km.append(-1)
    return dict(kv_score=np.array(ks, np.float32), ape=ape, norm_weight=gamma.astype(ref.BF16), cos_sin_cache=cs,
                positions=np.array(pos, np.int64), token_to_req_indices=np.array(req, np.int32),
                slot_mapping=np.array(sm, np.int64), block_table=bt, kv_slot_mapping=np.array(km, np.int64),
                state_cache_in=st, kv_cache_in=kc)


def capture(path, t, ratio, bug=None, rotate=False, edit=None):
    st, kc = ref.compressor_vllm(t, ratio=ratio, bug=bug)
    if edit:
        edit(st, kc)
    dsa_dump.capture_vllm_v4_compressor(
        t["kv_score"], t["ape"], t["norm_weight"], t["cos_sin_cache"], t["positions"], t["token_to_req_indices"],
        t["slot_mapping"], t["block_table"], t["kv_slot_mapping"], t["state_cache_in"], t["kv_cache_in"], st, kc,
        compress_ratio=ratio, rotate=rotate, out=str(path))


def run_check(cli, path, *extra):
    p = subprocess.run([cli, "check", *extra, str(path)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


CASES = {"indexer_c4": (128, 4, [0, 5, 10], [9, 4, 2]), "main_c4": (512, 4, [3, 11], [6, 1]),
         "main_c128": (512, 128, [0, 250], [130, 7])}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_model_of_the_vllm_kernels_passes(cli, tmp_path, case):
    D, ratio, starts, lens = CASES[case]
    t = make(11, D, ratio, starts, lens, sbs=4 if ratio == 4 else 8)
    path = tmp_path / f"{case}.h5"
    capture(path, t, ratio, rotate=D == 128)
    rc, txt = run_check(cli, path, "-v")
    assert rc == 0, txt
    assert "kv_cache" in txt and "state_cache" in txt
    if D == 128:
        assert "applies no Hadamard" in txt


@pytest.mark.parametrize("bug,D", [("hadamard", 128), ("pad_written", 128), ("kv_slot_next", 128),
                                   ("scale_fp32", 128), ("no_ape", 512)])
def test_seeded_bugs_fail(cli, tmp_path, bug, D):
    t = make(12, D, 4, [0, 6], [8, 3])
    path = tmp_path / f"{bug}.h5"
    capture(path, t, 4, bug=bug)
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "FAIL" in txt or "NONFINITE" in txt


def test_write_into_the_null_block_fails(cli, tmp_path):
    t = make(13, 128, 4, [0], [8])

    def edit(st, kc):
        kc[0, 1, 7] ^= 0x10

    path = tmp_path / "null.h5"
    capture(path, t, 4, edit=edit)
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "null block 0" in txt


def test_two_records_on_one_slot_are_an_input_error(cli, tmp_path):
    t = make(14, 128, 4, [0], [8])
    t["kv_slot_mapping"][7] = t["kv_slot_mapping"][3]  # entries 0 and 1 on one slot
    path = tmp_path / "dup.h5"
    with pytest.raises(dsa_dump.SchemaError, match="inputs/kv_slot_mapping"):  # the kit refuses to write it
        capture(path, t, 4)
    w = dsa_dump.DumpWriter(str(path), validate=False)
    st, kc = ref.compressor_vllm(t, ratio=4)
    dsa_dump.capture_vllm_v4_compressor(
        t["kv_score"], t["ape"], t["norm_weight"], t["cos_sin_cache"], t["positions"], t["token_to_req_indices"],
        t["slot_mapping"], t["block_table"], t["kv_slot_mapping"], t["state_cache_in"], t["kv_cache_in"], st, kc,
        compress_ratio=4, out=w)
    w.close()
    rc, txt = run_check(cli, path)
    assert rc == 2, txt
    assert "inputs/kv_slot_mapping" in txt


def test_one_written_code_off_by_one_fails(cli, tmp_path):
    """The candidate bytes are per element and only where the bound reaches a rounding boundary: a written code one
    step off (element 5 of entry 0's record, token 3's slot) is a FAIL naming the slot."""
    t = make(15, 128, 4, [0], [8])
    k = int(t["kv_slot_mapping"][3])

    def edit(st, kc):
        kc.reshape(-1)[(k // kc.shape[1]) * kc.shape[1] * kc.shape[2] + (k % kc.shape[1]) * 128 + 5] ^= 1

    path = tmp_path / "code.h5"
    capture(path, t, 4, edit=edit)
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert f"slot {k}, written by token 3" in txt


def _capture_approx(path, t, ratio, approx):
    st, kc = ref.compressor_vllm(t, ratio=ratio, approx=approx)
    dsa_dump.capture_vllm_v4_compressor(
        t["kv_score"], t["ape"], t["norm_weight"], t["cos_sin_cache"], t["positions"], t["token_to_req_indices"],
        t["slot_mapping"], t["block_table"], t["kv_slot_mapping"], t["state_cache_in"], t["kv_cache_in"], st, kc,
        compress_ratio=ratio, out=str(path))


def test_approximate_kernel_passes_at_a_candidate_byte(cli, tmp_path):
    """A kernel whose weighted sums carry a relative error of 2^-21 (Triton's approximate exp / divide are of that
    order): 60 entries, one e4m3 code lands on the neighbouring bf16 rounding's code; it is an accepted candidate
    (WITHIN_BOUND), every other byte bit-exact."""
    t = make(3, 128, 4, [0] * 6, [40] * 6, kbs=16)
    path = tmp_path / "approx.h5"
    _capture_approx(path, t, 4, 2.0 ** -21)
    rc, txt = run_check(cli, path)
    assert rc == 0, txt
    line = [x for x in txt.splitlines() if "kv_cache" in x][0]
    assert line.startswith("WITHIN_BOUND") and "1 element(s) at an accepted candidate pattern" in line


def test_error_beyond_the_approximations_fails(cli, tmp_path):
    """The same with a relative error of 2^-12 (far beyond any fp32 approximation): rope bytes and codes differ."""
    t = make(2, 512, 4, [0, 7], [64, 40], kbs=16)
    path = tmp_path / "coarse.h5"
    _capture_approx(path, t, 4, 2.0 ** -12)
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "FAIL" in txt and "kv_cache" in txt
