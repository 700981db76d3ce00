"""v4.compressor end to end through the capture kit and the CLI, against an independent float64 numpy model of the
Ascend `compressor` op written from spec v4 §2 (closed form: 8-row overlap windows, per-channel softmax over rows,
RMSNorm, interleaved RoPE at the group start, one bf16 rounding), never from the C++ reference. A correct model
passes (exit 0), seeded bugs fail (exit 1), a step whose state rows are missing from the block table is an input
error (exit 2)."""
import subprocess

import ml_dtypes
import numpy as np
import pytest

import dsa_dump

CLI_STAGES = ("v4.compressor",)  # the `cli` fixture (conftest.py) skips the module when the binary lacks it
BF16 = ml_dtypes.bfloat16
D, H, R_, COFF, BS, NB = 128, 32, 4, 2, 8, 8


def bf16_rne(x):
    """Round float64 values to bf16 (RNE) exactly, returned as float64 (no double rounding through float32)."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)
    scale = np.ldexp(1.0, e - 8)
    return np.where(x == 0, x, np.round(x / scale) * scale)


def rope_row(pos):
    """V4 compressed-layer table (YaRN base 160000, factor 16, original 65536), interleave-duplicated, fp32."""
    base, dim = 160000.0, 64
    f = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    low = max(np.floor(dim * np.log(65536 / (32 * 2 * np.pi)) / (2 * np.log(base))), 0)
    high = min(np.ceil(dim * np.log(65536 / (1 * 2 * np.pi)) / (2 * np.log(base))), dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    f = f / 16 * ramp + f * (1 - ramp)
    ang = pos * f
    return np.repeat(np.cos(ang), 2).astype(np.float32), np.repeat(np.sin(ang), 2).astype(np.float32)


def make(seed, starts, lens, bug=None):
    rng = np.random.default_rng(seed)
    C2 = COFF * D
    B = len(starts)
    wkv = bf16_rne(rng.standard_normal((C2, H)) / np.sqrt(H))
    wg = bf16_rne(rng.standard_normal((C2, H)) / np.sqrt(H))
    ape = rng.standard_normal((R_, C2)).astype(np.float32) * 0.5
    gamma = bf16_rne(1 + 0.1 * rng.standard_normal(D))
    xs = [bf16_rne(rng.standard_normal((32, H)))[:s + n] for s, n in zip(starts, lens)]  # independent of the split
    kv = [x @ wkv.T for x in xs]                                   # float64: the exact projections
    sc = [(x @ wg.T).astype(np.float32) + ape[np.arange(len(x)) % R_] for x in xs]
    kv = [k.astype(np.float32) for k in kv]
    table = np.zeros((B, NB), np.int32)
    for b in range(B):
        table[b] = 1 + b * NB + np.arange(NB)
    state = np.full((1 + B * NB, BS, 2 * C2), np.nan, np.float32)
    after = state.copy()
    for b, (s, n) in enumerate(zip(starts, lens)):
        for p in range(s + n):
            blk, off = table[b][p // BS], p % BS
            row = np.concatenate([kv[b][p], sc[b][p]])
            if p < s:
                state[blk, off] = row
            after[blk, off] = row
    rows, cos, sin = [], [], []
    for b, (s, n) in enumerate(zip(starts, lens)):
        for j in range(s // R_, (s + n) // R_):
            prev = [(j * R_ - R_ + i, slice(0, D)) for i in range(R_)]
            cur = [(j * R_ + i, slice(D, 2 * D)) for i in range(R_)]
            if bug == "halves":
                prev = [(p, slice(D, 2 * D)) for p, _ in prev]
                cur = [(p, slice(0, D)) for p, _ in cur]
            kvw = np.array([kv[b][p][h] if p >= 0 else np.zeros(D) for p, h in prev + cur], np.float64)
            scw = np.array([sc[b][p][h] if p >= 0 else np.full(D, -np.inf) for p, h in prev + cur], np.float64)
            w = np.exp(scw - scw.max(axis=0))
            w /= w.sum(axis=0)
            c = (w * kvw).sum(axis=0)
            y = c / np.sqrt((c * c).sum() / D + 1e-6) * gamma
            pos = j * R_ + (R_ - 1 if bug == "rope_pos" else 0)
            cs, sn = rope_row(pos)
            a, e = y[D - 64::2].copy(), y[D - 63::2].copy()
            y[D - 64::2] = a * cs[0::2] - e * sn[0::2]
            y[D - 63::2] = e * cs[1::2] + a * sn[1::2]
            rows.append(bf16_rne(y))
            c0, s0 = rope_row(j * R_)
            cos.append(c0)
            sin.append(s0)
    T = sum(lens)
    Rr = max(len(rows), min(T, T // R_ + B))
    out = np.zeros((Rr, D))
    cos_t = np.ones((Rr, 64), np.float32)
    sin_t = np.zeros((Rr, 64), np.float32)
    if rows:
        out[:len(rows)] = rows
        cos_t[:len(rows)] = cos
        sin_t[:len(rows)] = sin
    x = np.concatenate([x[s:] for x, s in zip(xs, starts)])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return dict(x=x.astype(BF16), wkv=wkv.astype(BF16), wgate=wg.astype(BF16), state_cache=state, ape=ape,
                norm_weight=gamma.astype(BF16), rope_sin=sin_t, rope_cos=cos_t, output=out.astype(BF16),
                state_cache_after=after, state_block_table=table, cu_seqlens=cu,
                start_pos=np.array(starts, np.int32))


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
