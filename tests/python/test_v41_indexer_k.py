"""v41.indexer_k (vLLM's DeepSeek-V4.1 indexer K store, spec v41 §5) against the independent numpy model
reference/v41.py `indexer_k` (float32 as the Triton kernel computes, written from the kernel's definition, never from
the C++ reference): the committed goldens' caches are the model's byte for byte; the model's cache passes the CLI on
generated cases of both records and ratios (BITEXACT, or WITHIN_BOUND where a rounding flips within the bound);
seeded bugs fail (exit 1) with their hint named; broken inputs are exit 2."""
import shutil
import subprocess

import h5py
import ml_dtypes
import numpy as np
import pytest

import dsa_dump
from reference import v41

GOLDENS = ["v41k_mxfp4_c2", "v41k_fp8_c1"]


def load(path):
    c = dsa_dump.read_dump(str(path))[0]
    val = lambda t: t.astype(np.float32) if t.dtype == ml_dtypes.bfloat16 else t  # noqa: E731
    return {k: val(v) for k, v in c.inputs.items()}, dict(c.expected), dict(c.attrs)


def model(ins, at, **kw):
    return v41.indexer_k(ins, ratio=int(at.get("cmp_ratio", 2)), eps=float(at.get("norm_eps", 1e-6)), **kw)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_cache_is_the_numpy_models(repo_root, name):
    ins, exp, at = load(repo_root / "golden" / f"{name}.h5")
    got = model(ins, at)
    bad = np.nonzero(got.reshape(-1) != exp["k_cache"].reshape(-1))[0]
    assert bad.size == 0, f"{bad.size} bytes differ, first at {bad[:4]}"


def with_output(src, dst, cache):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        og = g.require_group("outputs")
        if "k_cache" in og:
            del og["k_cache"]
        d = og.create_dataset("k_cache", data=cache)
        d.attrs["dtype"] = "u8"
    return dst


def generate(cli, tmp_path, case, seed):
    d = tmp_path / f"{case}_{seed}"
    d.mkdir()
    subprocess.run([cli, "golden", "--case", case, "--seed", str(seed), "--out", str(d)], check=True, capture_output=True, timeout=120)
    return d / f"{case}.h5"


@pytest.mark.parametrize("case", GOLDENS)
def test_model_output_passes_generated_cases(dsa_check_bin, tmp_path, case):
    verdicts = []
    for seed in range(1, 9):
        f = generate(dsa_check_bin, tmp_path, case, seed)
        ins, _, at = load(f)
        g = with_output(f, tmp_path / f"out_{seed}.h5", model(ins, at))
        p = subprocess.run([str(dsa_check_bin), "check", str(g)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        verdicts += [v for v in ("BITEXACT", "WITHIN_BOUND") if f"{v} " in p.stdout.split("outputs/k_cache")[0].splitlines()[-1] + " "]
    assert verdicts, "no verdict line found"


@pytest.mark.parametrize("bug,kw,case,hint", [
    ("halves", dict(rope="halves"), "v41k_mxfp4_c2", "B58"),
    ("position", dict(group_rope=False), "v41k_fp8_c1", None),  # ratio 1: the group start is the position (no bug)
    ("position2", dict(group_rope=False), "v41k_mxfp4_c2", "v41 §5"),
])
def test_seeded_bugs_fail_with_their_hint(dsa_check_bin, repo_root, tmp_path, bug, kw, case, hint):
    src = repo_root / "golden" / f"{case}.h5"
    ins, _, at = load(src)
    g = with_output(src, tmp_path / f"{bug}.h5", model(ins, at, **kw))
    p = subprocess.run([str(dsa_check_bin), "check", str(g)], capture_output=True, text=True, timeout=120)
    if hint is None:
        assert p.returncode == 0, p.stdout
        return
    assert p.returncode == 1, p.stdout
    assert hint in p.stdout, p.stdout


def test_perturbed_byte_fails_naming_the_slot(dsa_check_bin, repo_root, tmp_path):
    src = repo_root / "golden" / "v41k_fp8_c1.h5"
    ins, exp, at = load(src)
    cache = exp["k_cache"].copy()
    s = int(ins["kv_slot_mapping"][4])
    page, t = divmod(s, cache.shape[1])
    cache[page].reshape(-1)[cache.shape[1] * 128 + 4 * t + 3] ^= 0x01  # the fp32 scale's top byte
    g = with_output(src, tmp_path / "bad.h5", cache)
    p = subprocess.run([str(dsa_check_bin), "check", str(g)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and f"slot {s}, written by token 4" in p.stdout and "scale 0 byte 3" in p.stdout, p.stdout


@pytest.mark.parametrize("edit,want", [
    (lambda g: g.attrs.__setitem__("cmp_ratio", 3), "cmp_ratio"),
    (lambda g: g.attrs.__setitem__("layout", "v41_idx_fp8_132"), "dim 2 = 132"),
    (lambda g: g["inputs/kv_slot_mapping"].__setitem__(slice(1, 4, 2), np.array([200, 200])), "repeats slot 200"),  # p 1, 3
    (lambda g: g["inputs/kv_slot_mapping"].__setitem__(slice(3, 4), np.array([2 * 128])), "a slot in [0, 256)"),
])
def test_input_errors_exit_2(dsa_check_bin, repo_root, tmp_path, edit, want):
    f = tmp_path / "e.h5"
    shutil.copy(repo_root / "golden" / "v41k_mxfp4_c2.h5", f)
    with h5py.File(f, "r+") as h:
        edit(h[next(iter(h))])
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and want in p.stdout + p.stderr, p.stdout + p.stderr


def test_kit_capture_round_trip(dsa_check_bin, repo_root, tmp_path):
    ins, exp, at = load(repo_root / "golden" / "v41k_mxfp4_c2.h5")
    raw = dsa_dump.read_dump(str(repo_root / "golden" / "v41k_mxfp4_c2.h5"))[0].inputs
    f = tmp_path / "kit.h5"
    c = dsa_dump.capture_vllm_v41_indexer_k(raw["k_pre"], raw["positions"], raw["cos_sin_cache"], raw["norm_weight"],
                                            raw["k_cache_in"], raw["kv_slot_mapping"], model(ins, at), compress_ratio=2,
                                            use_fp4_cache=True, out=str(f))
    assert c.attrs["layout"] == "v41_idx_mxfp4_68"
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    with pytest.raises(ValueError, match="132"):
        dsa_dump.capture_vllm_v41_indexer_k(raw["k_pre"], raw["positions"], raw["cos_sin_cache"], raw["norm_weight"],
                                            raw["k_cache_in"], raw["kv_slot_mapping"], compress_ratio=2, use_fp4_cache=False)


def test_mxfp4_q_path_is_the_numpy_models(repo_root, dsa_check_bin, tmp_path):
    """v4.indexer_prolog kernel vllm-cuda q_format mxfp4 (the V4.1 q path): the golden's bytes are the numpy model's;
    swapped nibbles fail; vLLM's two-step weight fold of 32 heads is within fp32 ulps of the REF's exact 2^-6."""
    src = repo_root / "golden" / "v41ip_vllm_q_mxfp4.h5"
    ins, exp, at = load(src)
    q4, qs, wo = v41.indexer_q_mxfp4(ins)
    assert np.array_equal(q4, exp["q_fp4"]) and np.array_equal(qs, exp["q_fp4_scale"])
    assert np.array_equal(wo.view(np.uint32), exp["weights_out"].view(np.uint32))
    # vLLM multiplies by fl32(128^-0.5) and then by fl32(32^-0.5): a few fp32 ulps from the REF's exact w * 2^-6
    w6 = np.asarray(ins["index_weights"], np.float32) * np.float32(2.0 ** -6)
    np.testing.assert_allclose(wo, w6, rtol=2.0 ** -21)
    assert not np.array_equal(wo, w6)
    f = tmp_path / "q.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))].require_group("outputs")
        for n, v in (("q_fp4", ((q4 >> 4) | (q4 << 4)).astype(np.uint8)), ("q_fp4_scale", qs), ("weights_out", wo)):
            d = g.create_dataset(n, data=v)
            d.attrs["dtype"] = "u8" if v.dtype == np.uint8 else "f32"
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "q_fp4" in p.stdout, p.stdout


def test_hint_paths_survive_hostile_mid_group_tokens(dsa_check_bin, repo_root, tmp_path):
    """A failing cache whose mid-group tokens (which write nothing, so parse does not check them) carry a slot past the
    cache and a position past the RoPE table: the bug hypotheses that make them write must neither crash nor read out
    of bounds; the verdict is FAIL (exit 1)."""
    src = repo_root / "golden" / "v41k_mxfp4_c2.h5"
    f = tmp_path / "h.h5"
    shutil.copy(src, f)
    with h5py.File(f, "r+") as h:
        g = h[next(iter(h))]
        km = g["inputs/kv_slot_mapping"][()]
        pos = g["inputs/positions"][()]
        mid = [t for t in range(len(km)) if km[t] >= 0 and (pos[t] + 1) % 2 != 0][:2]
        km[mid[0]] = 10 ** 9
        pos[mid[1]] = 10 ** 6
        g["inputs/kv_slot_mapping"][...] = km
        g["inputs/positions"][...] = pos
        out = g["expected/k_cache"][()].copy()
        out.reshape(-1)[out.size // 2 + 5] ^= 0x5A
        d = g.require_group("outputs").create_dataset("k_cache", data=out)
        d.attrs["dtype"] = "u8"
    p = subprocess.run([str(dsa_check_bin), "check", str(f)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
