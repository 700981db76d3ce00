"""v4.compressor with model v41 (DeepSeek-V4.1, spec v41 §4) against the independent numpy model reference/v41.py
(written from the spec, never from the C++ reference): the committed goldens recomputed bit for bit, and end to end
through the capture kit and the CLI: the model's output passes for every producer (ref NVFP4, vLLM NVFP4 from fp32,
the Ascend compressor_v2's bf16 with its 32-row ring), in one prefill and in chunks; seeded bugs fail (exit 1); a gate
at ratio 1 is an input error (exit 2)."""
import subprocess

import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import numerics as num
from reference import v4
from reference import v41

CLI_STAGES = ("v4.compressor",)
D, H, BS, NB = 128, 32, 8, 8
GOLDENS = ["v41c2_ref_nvfp4", "v41c1_vllm_nvfp4", "v41c2_ascend_ring32"]


def load(path):
    """The golden's inputs and expected tensors (bf16 as float32 values) and attrs, through the kit's reader."""
    c = dsa_dump.read_dump(str(path))[0]
    val = lambda t: t.astype(np.float32) if t.dtype == ml_dtypes.bfloat16 else t  # noqa: E731
    return {k: val(v) for k, v in c.inputs.items()}, {k: val(v) for k, v in c.expected.items()}, dict(c.attrs)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_is_the_numpy_models(repo_root, name):
    ins, exp, at = load(repo_root / "golden" / f"{name}.h5")
    assert at["model"] == "v41"
    out, after = v41.compressor(ins, int(at["cmp_ratio"]), variant=at.get("variant", "ascend-a3"),
                                ring_rows=at.get("ring_rows"), cache_mode=int(at["cache_mode"]))
    rows = ~np.all(np.isnan(out), axis=1) | np.any(np.isnan(exp["cmp_kv"]), axis=1)
    emitted = int(sum((s + n) // int(at["cmp_ratio"]) - s // int(at["cmp_ratio"])
                      for s, n in zip(ins["start_pos"], np.diff(ins["cu_seqlens"]))))
    assert emitted > 0
    got, want = out[:emitted], exp["cmp_kv"][:emitted].astype(np.float64)
    bad = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))
    assert len(bad) == 0, f"{len(bad)} cmp_kv values differ, first {bad[0]}: numpy {got[tuple(bad[0])]}, golden {want[tuple(bad[0])]}"
    assert rows[:emitted].all()
    assert np.array_equal(after, exp["state_cache"], equal_nan=True)


def make(seed, starts, lens, ratio, variant="ascend-a3", ring=None, projections=False, bug=None):
    """Random bf16 weights and token histories; the state rows before the step as a correct earlier step wrote them
    (a ring keeps the last `ring` positions); the kit's arguments with the numpy model's output."""
    rng = np.random.default_rng(seed)
    wkv = num.bf16_rne(rng.standard_normal((D, H)) / np.sqrt(H))
    wg = num.bf16_rne(rng.standard_normal((D, H)) / np.sqrt(H)) if ratio != 1 else None
    gamma = num.bf16_rne(1 + 0.1 * rng.standard_normal(D))
    B = len(starts)
    xs = [num.bf16_rne(rng.standard_normal((s + n, H))) for s, n in zip(starts, lens)]
    table = np.zeros((B, NB), np.int32)
    for b in range(B):
        table[b] = 1 + b * NB + np.arange(NB)
    state = np.full((1 + B * NB, BS, 2 * D), np.nan, np.float32)
    for b, s in enumerate(starts):
        for p in range(s):
            q = p % ring if ring else p
            kv = (xs[b][p] @ wkv.T).astype(np.float32)
            sc = (xs[b][p] @ wg.T).astype(np.float32) if wg is not None else np.zeros(D, np.float32)
            state[table[b, q // BS], q % BS] = np.concatenate([kv, sc])
    cos, sin = [], []
    for b, (s, n) in enumerate(zip(starts, lens)):
        for j in range(s // ratio, (s + n) // ratio):
            c, si = v4.rope_row(j * ratio)
            cos.append(c), sin.append(si)
    R = max(len(cos), 1)
    rope_cos, rope_sin = np.ones((R, 64), np.float32), np.zeros((R, 64), np.float32)
    if cos:
        rope_cos[:len(cos)], rope_sin[:len(sin)] = cos, sin
    x = np.concatenate([h[s:] for h, s in zip(xs, starts)])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    ins = dict(x=x, wkv=wkv, norm_weight=gamma, rope_cos=rope_cos, rope_sin=rope_sin, state_cache_in=state,
               state_block_table=table, cu_seqlens=cu, start_pos=np.array(starts, np.int32))
    if wg is not None:
        ins["wgate"] = wg
    out, after = v41.compressor(ins, ratio, variant=variant, ring_rows=ring, cache_mode=2 if ring else 1, bug=bug)
    bf = ml_dtypes.bfloat16
    a = dict(x=None if projections else x.astype(bf), wkv=None if projections else wkv.astype(bf),
             wgate=None if projections or wg is None else wg.astype(bf), state_cache=state, ape=None,
             norm_weight=gamma.astype(bf), rope_sin=rope_sin, rope_cos=rope_cos,
             output=np.nan_to_num(out, nan=0.0).astype(bf), state_cache_after=after, state_block_table=table,
             cu_seqlens=cu, start_pos=np.array(starts, np.int32), cmp_ratio=ratio, coff=1, variant=variant,
             model="v41", cache_mode=2 if ring else 1)
    if ring:
        a["ring_rows"] = ring
    if projections:
        a["kv_proj"] = (x @ wkv.T).astype(np.float32)
        if wg is not None:
            a["score_proj"] = (x @ wg.T).astype(np.float32)
    return a


def run_check(cli, path):
    p = subprocess.run([cli, "check", str(path)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("ratio,variant,ring,proj", [(2, "ref", None, False), (1, "ref", None, False),
                                                     (2, "vllm-cuda", 16, False), (1, "vllm-cuda", None, True),
                                                     (2, "ascend-a3", 32, False), (2, "ascend-a3", None, True)])
def test_numpy_model_passes(cli, tmp_path, ratio, variant, ring, proj):
    a = make(10 + ratio, [3, 0, 41], [8, 5, 6], ratio, variant, ring, proj)
    path = tmp_path / "v41.h5"
    dsa_dump.capture_ascend_compressor(**a, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 0, txt
    assert "cmp_kv" in txt and "state_cache" in txt


def test_chunks_and_prefill_agree_across_calls(cli, tmp_path):
    """One prefill and the same request in two calls (an odd split: the second call reads the pair's first row back)
    carry request ids: the consistency line compares the shared entries bit for bit."""
    whole = make(21, [0], [12], 2, "ref")
    first = make(21, [0], [5], 2, "ref")
    second = make(21, [5], [7], 2, "ref")
    path = tmp_path / "calls.h5"
    w = dsa_dump.DumpWriter(str(path))
    for i, a in enumerate((whole, first, second)):
        dsa_dump.capture_ascend_compressor(**a, request_ids=[7], layer=3, name=f"call{i}", out=w)
    w.close()
    rc, txt = run_check(cli, path)
    assert rc == 0, txt
    assert "requests/consistency/cmp_kv" in txt and "6 repeated" in txt, txt


@pytest.mark.parametrize("bug,ratio,variant", [("ape", 2, "ref"), ("fp32_source", 2, "ref"), ("no_ring", 2, "ascend-a3")])
def test_seeded_bugs_fail(cli, tmp_path, bug, ratio, variant):
    if bug == "ape":
        a = make(31, [3, 0], [8, 6], ratio, variant, bug="ape")
    elif bug == "fp32_source":  # B49: the vLLM writer's rounding source under the reference's profile
        a = make(32, [3, 0], [8, 6], ratio, "vllm-cuda")
        b = make(32, [3, 0], [8, 6], ratio, "ref")
        b["output"] = a["output"]
        a = b
    else:  # the ring indexed p mod 2 (coff r) instead of p mod 32: the state rows land elsewhere
        starts, lens = [37, 65], [6, 5]
        a = make(33, starts, lens, ratio, variant, ring=32)
        tab, good, bad = a["state_block_table"], a["state_cache_after"], a["state_cache"].copy()
        for b, (s, n) in enumerate(zip(starts, lens)):
            for p in range(s, s + n):
                q, w = p % 32, p % 2
                bad[tab[b, w // BS], w % BS] = good[tab[b, q // BS], q % BS]
        a["state_cache_after"] = bad
    path = tmp_path / f"{bug}.h5"
    dsa_dump.capture_ascend_compressor(**a, out=str(path))
    rc, txt = run_check(cli, path)
    assert rc == 1, txt
    assert "FAIL" in txt


def test_a_gate_at_ratio_one_is_an_input_error(cli, tmp_path):
    a = make(41, [0], [4], 1, "ref")
    a["wgate"] = a["wkv"]
    path = tmp_path / "gate.h5"
    with pytest.raises(dsa_dump.SchemaError, match="inputs/wgate"):  # the kit validates what it writes
        dsa_dump.capture_ascend_compressor(**a, out=str(path))
    w = dsa_dump.DumpWriter(str(path), validate=False)
    dsa_dump.capture_ascend_compressor(**a, out=w)
    w.close()
    rc, txt = run_check(cli, path)
    assert rc == 2, txt
    assert "inputs/wgate" in txt and "cmp_ratio 1" in txt
