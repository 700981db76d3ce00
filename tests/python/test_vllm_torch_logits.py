"""Kernel profile vllm-torch (issue #34 item 3): vLLM's torch logits fallbacks, modelled independently in numpy
(reference/indexer.py mqa_logits_torch / paged_logits_torch), against dsa-check's indexer.logits_ragged /
indexer.logits_paged with attr kernel=vllm-torch. The fixed-order emulation's logits (the
model in that order is the emulation bit for bit: BITEXACT; the goldens' expected/ hold the exact values); a torch-like output with another head-sum order, and one bf16 ulp on
head scores of many rows, pass by the derived bound (WITHIN_BOUND); planted bugs FAIL; an unknown profile name is
an input error listing the profiles that serve the stage; the capture kit records the producer."""
import shutil

import h5py
import numpy as np
import pytest

import dsa_dump
from reference import indexer as ref

RAGGED = "ragged_vllm_torch.h5"
PAGED = "paged_vllm_torch.h5"


def load(path):
    with h5py.File(path, "r") as f:
        g = f[next(iter(f))]
        return ({k: g["inputs"][k][()] for k in g["inputs"]}, {k: g["expected"][k][()] for k in g["expected"]},
                dict(g.attrs))


def with_logits(repo_root, tmp_path, golden, logits, name="out.h5", **attrs):
    """A copy of a committed golden whose outputs/logits are `logits` (fp32) and whose attrs are updated."""
    dst = tmp_path / name
    shutil.copy(repo_root / "golden" / golden, dst)
    with h5py.File(dst, "r+") as f:
        g = f[next(iter(f))]
        dt = g["expected"]["logits"].attrs["dtype"]
        del g["expected"]
        d = g.create_dataset("outputs/logits", data=np.asarray(logits, np.float32))
        d.attrs["dtype"] = dt
        for k, v in attrs.items():
            if v is None:
                if k in g.attrs:
                    del g.attrs[k]
            else:
                g.attrs[k] = v
    return dst


def ragged_model(ins, **kw):
    return ref.mqa_logits_torch(ins["q"], ins["kv"], ins["kv_scale"], ins["weights"], ins["ks"], ins["ke"], **kw)


def test_ragged_model_is_the_emulation_bitexact(repo_root, run_cli, tmp_path):
    # The golden's expected/ is the exact value; the numpy model in the fixed order is the emulation, bit for bit.
    ins, exp, attrs = load(repo_root / "golden" / RAGGED)
    assert attrs["kernel"] == "vllm-torch"
    model = ragged_model(ins)
    fin = np.isfinite(exp["logits"])
    assert np.count_nonzero(model[fin] != exp["logits"][fin]) > 0  # the producer is not the exact value
    r = run_cli("check", with_logits(repo_root, tmp_path, RAGGED, model), check_rc=0)
    assert "bit-exact vs vllm-torch emulation" in r.stdout, r.stdout


def test_ragged_other_head_sum_order_within_bound(repo_root, run_cli, tmp_path):
    ins, _, _ = load(repo_root / "golden" / RAGGED)
    model = ragged_model(ins, order="pairwise")
    fixed = ragged_model(ins)
    fin = np.isfinite(model)
    differ = int(np.count_nonzero(model[fin] != fixed[fin]))
    assert differ > 0  # the order matters on this data: the bound, not the emulation, accepts it
    r = run_cli("check", "-v", with_logits(repo_root, tmp_path, RAGGED, model), check_rc=0)
    assert r.stdout.startswith("WITHIN_BOUND"), r.stdout
    assert "not bit-exact vs vllm-torch emulation" in r.stdout, r.stdout


def test_ragged_one_bf16_ulp_on_many_rows_passes(repo_root, run_cli, tmp_path):
    ins, _, _ = load(repo_root / "golden" / RAGGED)

    def ulp_up(score):  # every even query row: head h = row % H moved one bf16 ulp away from zero
        s = score.astype(ref.num.BF16).copy()
        bits = s.view(np.uint16)
        H, M, _ = s.shape
        for m in range(0, M, 2):
            bits[m % H, m, :] = np.where(np.isfinite(score[m % H, m, :]), bits[m % H, m, :] + 1, bits[m % H, m, :])
        return s.astype(np.float32)

    model = ragged_model(ins, perturb=ulp_up, order="pairwise")
    r = run_cli("check", with_logits(repo_root, tmp_path, RAGGED, model), check_rc=0)
    assert "1 passed, 0 failed" in r.stdout, r.stdout


def test_ragged_fp32_scores_are_admitted(repo_root, run_cli, tmp_path):
    # Not rounding the head scores to bf16 is closer to the exact value than the producer: inside its bound. The
    # emulation tells the difference (not bit-exact), the verdict does not (documented in the stage README).
    ins, _, _ = load(repo_root / "golden" / RAGGED)
    r = run_cli("check", "-v", with_logits(repo_root, tmp_path, RAGGED, ragged_model(ins, round_bf16=False)), check_rc=0)
    assert r.stdout.startswith("WITHIN_BOUND") and "not bit-exact vs vllm-torch emulation" in r.stdout, r.stdout


@pytest.mark.parametrize("bug", ["no_relu", "k_scale_twice", "k_scale_dropped", "mask_off_by_one"])
def test_ragged_planted_bugs_fail(repo_root, run_cli, tmp_path, bug):
    ins, _, _ = load(repo_root / "golden" / RAGGED)
    ins = dict(ins)
    if bug == "no_relu":
        qf = ref.num.E4M3_VALUES[ins["q"]]
        kf = ref.num.E4M3_VALUES[ins["kv"]]
        s = np.einsum("mhd,nd->hmn", qf, kf).astype(np.float32).astype(ref.num.BF16).astype(np.float64)
        v = (s * ins["kv_scale"][None, None, :] * ins["weights"].T[:, :, None]).sum(0).astype(np.float32)
        n = np.arange(v.shape[1])[None, :]
        model = np.where((n >= ins["ks"][:, None]) & (n < ins["ke"][:, None]), v, np.float32(-np.inf))
    else:
        if bug == "k_scale_twice":
            ins["kv_scale"] = (ins["kv_scale"] * ins["kv_scale"]).astype(np.float32)
        elif bug == "k_scale_dropped":
            ins["kv_scale"] = np.ones_like(ins["kv_scale"])
        else:
            ins["ke"] = np.minimum(ins["ke"] + 1, ins["kv"].shape[0]).astype(np.int32)
        model = ragged_model(ins, order="pairwise")
    r = run_cli("check", with_logits(repo_root, tmp_path, RAGGED, model), check_rc=1)
    assert "0 passed, 1 failed" in r.stdout, r.stdout


def test_ragged_same_output_judged_as_deepgemm_fails(repo_root, run_cli, tmp_path):
    # Why the profile exists: the torch fallback's bf16 head scores exceed DeepGEMM's sm90-fp8 bound (issue #34 item 3).
    ins, _, _ = load(repo_root / "golden" / RAGGED)
    p = with_logits(repo_root, tmp_path, RAGGED, ragged_model(ins, order="pairwise"), kernel=None)
    r = run_cli("check", p, check_rc=1)
    assert "sm90-fp8" in r.stdout, r.stdout


def test_unknown_profile_lists_the_known_ones(repo_root, run_cli, tmp_path):
    ins, outs, _ = load(repo_root / "golden" / RAGGED)
    p = with_logits(repo_root, tmp_path, RAGGED, outs["logits"], kernel="vllm-torchy")
    r = run_cli("check", p, check_rc=2)
    assert "a profile serving indexer.logits_ragged (deepgemm-sm90, vllm-torch)" in r.stderr, r.stderr
    assert "'vllm-torchy' (unknown profile)" in r.stderr, r.stderr


def test_paged_model_equals_golden_and_other_order_passes(repo_root, run_cli, tmp_path):
    ins, _, attrs = load(repo_root / "golden" / PAGED)
    assert attrs["kernel"] == "vllm-torch"
    width = int(attrs["max_context_len"])
    fixed = ref.paged_logits_torch(ins, width)
    r = run_cli("check", with_logits(repo_root, tmp_path, PAGED, fixed), check_rc=0)
    assert "bit-exact vs vllm-torch emulation" in r.stdout, r.stdout
    pair = ref.paged_logits_torch(ins, width, order="pairwise")
    r = run_cli("check", with_logits(repo_root, tmp_path, PAGED, pair, name="pair.h5"), check_rc=0)
    assert "1 passed, 0 failed" in r.stdout, r.stdout
    halved = dict(ins, weights=(ins["weights"] * np.float32(0.5)).astype(np.float32))
    bad = ref.paged_logits_torch(halved, width, order="pairwise")
    run_cli("check", with_logits(repo_root, tmp_path, PAGED, bad, name="bad.h5"), check_rc=1)


def test_kit_records_the_torch_producer(repo_root, run_cli, tmp_path):
    ins, _, _ = load(repo_root / "golden" / RAGGED)
    model = ragged_model(ins, order="pairwise")
    f = tmp_path / "kit.h5"
    q = ins["q"].view(ref.num.E4M3)
    kv = ins["kv"].view(ref.num.E4M3)
    dsa_dump.capture_fp8_mqa_logits(q, (kv, ins["kv_scale"]), ins["weights"], ins["ks"], ins["ke"], model,
                                    clean_logits=True, kernel="vllm-torch", out=str(f))
    with h5py.File(f, "r") as h:
        assert h[next(iter(h))].attrs["kernel"] == "vllm-torch"
    r = run_cli("check", f, check_rc=0)
    assert "1 passed, 0 failed" in r.stdout, r.stdout
