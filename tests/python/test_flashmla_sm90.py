"""Real FlashMLA sm90 output (tests/data/flashmla_sm90.h5: flash_mla_sparse_fwd and the sparse fp8 decode, captured on
an H100 with FlashMLA @9241ae3, converted by scripts/convert_flashmla_sm90.py; provenance in each case's meta.*
attrs) against dsa-check and against the kernel model reference/flashmla_sm90.py (issue #39)."""
import json

import h5py
import numpy as np
import pytest

from reference import flashmla_sm90 as fm

DATA = "tests/data/flashmla_sm90.h5"


def bf16_values(u16):
    return (np.asarray(u16).astype(np.uint32) << 16).view(np.float32)


@pytest.fixture(scope="module")
def acc(repo_root):
    return repo_root / DATA


def test_real_flashmla_output_passes_under_its_profile(acc, run_cli, tmp_path):
    out = tmp_path / "r.json"
    p = run_cli("check", "-q", acc, "--json", out)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(out.read_text())["results"]
    with h5py.File(acc) as f:
        stages = {c: f[c].attrs["stage"] for c in f}
        assert all(f[c].attrs["kernel"] == "flashmla-sm90" and f[c].attrs["meta.flashmla_commit"].startswith("9241ae3") for c in f)
    assert {r["case"] for r in res} == set(stages)
    assert set(stages.values()) == {"attn.sparse_mla_prefill", "attn.sparse_mla_decode"}
    assert all(r["verdict"] in ("BITEXACT", "WITHIN_BOUND") for r in res)


def test_a_scaled_output_fails(acc, run_cli, tmp_path):
    """out x (1 + 2^-6) on one case: beyond what the kernel's rounding explains, the bound catches it."""
    bad = tmp_path / "bad.h5"
    with h5py.File(acc) as f, h5py.File(bad, "w") as g:
        f.copy(f["pf_v32_h64_t512_s0"], g, "pf_v32_h64_t512_s0")
        o = g["pf_v32_h64_t512_s0/outputs/out"]
        v = bf16_values(o[()]) * np.float32(1 + 2 ** -6)
        o[...] = (v.view(np.uint32) >> 16).astype(np.uint16)
    p = run_cli("check", "-q", bad)
    assert p.returncode == 1, p.stdout + p.stderr


@pytest.mark.parametrize("case", ["pf_v32_h64_t512_s0", "pf_m1_h64_t512_s1", "pf_v32_h128_t2048_pad_lonely_sink_s0",
                                  "pf_m1_h128_t2048_topklen_sink_s0", "pf_v32_h128_t2048_realscale_s0"])
def test_kernel_model_reproduces_the_prefill_bits(acc, case):
    """The model's bits against the real output: every out, max_logits and lse value (measured over all 17 captured
    prefill cases: 8,912,896 out, 17,408 max_logits and 17,408 lse values, 100 %)."""
    with h5py.File(acc) as f:
        g = f[case]
        ins = {k: g["inputs"][k][()] for k in g["inputs"]}
        outs = {k: g["outputs"][k][()] for k in g["outputs"]}
        scale = float(g.attrs["softmax_scale"])
    out, ml, lse = fm.sparse_prefill(bf16_values(ins["q"]), bf16_values(ins["kv"]), ins["indices"], scale,
                                     ins.get("attn_sink"), ins.get("topk_length"))
    got = (out.view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(ml.view(np.uint32), outs["max_logits"].view(np.uint32)), case
    assert np.array_equal(lse.view(np.uint32), outs["lse"].view(np.uint32)), case
    assert np.array_equal(got, outs["out"]), (case, int(np.sum(got != outs["out"])))


DECODE = ["dec_v32_h64_b2_sq1_t512_partials_s0", "dec_v32_h128_b2_sq2_t576_bs61_lonely_s0", "dec_m1_h128_b2_sq2_t576_bs2_topklen_s0",
          "dec_m1_h64_b2_sq1_t512_extra_partials_s0", "dec_m1_h64_b4_sq1_t64_extra64_lonely_s0",
          "dec_m1_h128_b2_sq2_t128_extra1024_etl_tl_s0"]


def decode_inputs(g):
    """The case's inputs as reference/flashmla_sm90.sparse_decode takes them (the caches dequantized as the kernel)."""
    ins = {k: g["inputs"][k][()] for k in g["inputs"]}
    model1 = ins["q"].shape[-1] == 512

    def deq(kc):
        return fm.dequant_model1_584(kc.reshape(kc.shape[0], -1), kc.shape[1]) if model1 else fm.dequant_v32_656(kc.reshape(-1, 656))
    return dict(q=bf16_values(ins["q"]), k_main=deq(ins["k_cache"]), indices=ins["indices"],
                sm_scale=float(g.attrs["softmax_scale"]), attn_sink=ins.get("attn_sink"), topk_length=ins.get("topk_length"),
                k_extra=deq(ins["extra_k_cache"]) if "extra_k_cache" in ins else None,
                extra_indices=ins.get("extra_indices_in_kvcache"), extra_topk_length=ins.get("extra_topk_length"),
                num_sms=int(g.attrs["num_sms"]))


@pytest.mark.parametrize("case", DECODE)
def test_kernel_model_reproduces_the_decode_bits(acc, case):
    """The model's bits (scheduler, split CTAs, combine) against the real output: every out and lse value (measured over
    all 24 captured decode cases, and their split partials o_accum / lse_accum, 100 %)."""
    with h5py.File(acc) as f:
        g = f[case]
        kw = decode_inputs(g)
        outs = {k: g["outputs"][k][()] for k in g["outputs"]}
    out, lse, _, _, ns = fm.sparse_decode(**kw, partials=True)
    assert ns[-1] > len(ns) - 1, "the case splits some request (the combine kernel runs)"
    got = (out.view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal(np.transpose(lse, (0, 2, 1)).view(np.uint32), outs["lse"].view(np.uint32)), case
    assert np.array_equal(got, outs["out"]), (case, int(np.sum(got != outs["out"])))


def test_the_decode_schedule_follows_the_sm_count(acc):
    """get_decoding_sched_meta's split count per request depends on the GPU: 132 SMs (H100 SXM) and 16 (an H100 MIG
    1g slice) split the same call differently, and the bits of a split request follow its split."""
    with h5py.File(acc) as f:
        kw = decode_inputs(f["dec_v32_h64_b2_sq1_t512_partials_s0"])
    a = fm.sparse_decode(**kw, partials=True)
    kw["num_sms"] = 16
    b = fm.sparse_decode(**kw, partials=True)
    assert list(a[4]) == [0, 8, 16] and list(b[4]) == [0, 4, 8]
    assert not np.array_equal(a[0], b[0])


def test_the_profile_emulation_is_bitexact_on_every_case(acc, run_cli, tmp_path):
    """The C++ emulations (src/profiles/flashmla_sm90/prefill_emu.cpp, decode_emu.cpp) on the real output: every
    tensor BITEXACT, zero mismatches; with --no-emulation the same outputs are judged by the bound."""
    out = tmp_path / "r.json"
    run_cli("check", "-q", acc, "--json", out, check_rc=0)
    res = json.loads(out.read_text())["results"]
    assert len(res) == 15 + 2 * len(DECODE)
    for r in res:
        assert r["verdict"] == "BITEXACT" and r["emulation"]["profile"] == "flashmla-sm90" and r["emulation"]["mismatches"] == 0, r
    run_cli("check", "-q", acc, "--no-emulation", "--json", out, check_rc=0)
    assert {r["verdict"] for r in json.loads(out.read_text())["results"]} == {"WITHIN_BOUND"}


def test_a_wrong_sm_count_fails_the_split_bits(acc, run_cli, tmp_path):
    """A dump claiming another GPU (num_sms 16) than the one that ran it: the emulated schedule splits elsewhere, so
    the combined requests' bits differ (FAIL under the profile) while the bound still holds."""
    bad = tmp_path / "bad.h5"
    case = "dec_v32_h64_b2_sq1_t512_partials_s0"
    with h5py.File(acc) as f, h5py.File(bad, "w") as g:
        f.copy(f[case], g, case)
        g[case].attrs["num_sms"] = np.int64(16)
    out = tmp_path / "r.json"
    p = run_cli("check", "-q", bad, "--json", out)
    assert p.returncode == 1, p.stdout + p.stderr
    r = next(x for x in json.loads(out.read_text())["results"] if x["tensor"] == "out")
    assert r["verdict"] == "FAIL" and r["emulation"]["mismatches"] > 0, r
    assert r["bounded"]["max_err_over_m"] < 1, r


def test_an_emulation_the_kernel_cannot_run_says_why(acc, run_cli, tmp_path):
    """A V3.2 decode with topk_length (the sm90 kernel refuses it): no emulation, and the report says why."""
    bad = tmp_path / "tl.h5"
    case = "dec_v32_h64_b2_sq1_t512_partials_s0"
    with h5py.File(acc) as f, h5py.File(bad, "w") as g:
        f.copy(f[case], g, case)
        d = g[case]["inputs"].create_dataset("topk_length", data=np.array([512, 512], np.int32))
        d.attrs["dtype"] = "int32"
    out = tmp_path / "r.json"
    run_cli("check", "-q", bad, "--json", out)
    r = next(x for x in json.loads(out.read_text())["results"] if x["tensor"] == "out")
    assert any("not provided by the reference (a V3.2 (576) call with topk_length" in n for n in r["notes"]), r


@pytest.mark.parametrize("case, tensor, change", [("pf_v32_h128_t2048_realscale_s0", "out", "ulp"),
                                                  ("pf_v32_h128_t2048_realscale_s0", "lse", 1e-6),
                                                  ("pf_v32_h128_t2048_realscale_s0", "max_logits", "ulp"),
                                                  ("dec_v32_h64_b2_sq1_t512_partials_s0", "out", "ulp"),
                                                  ("dec_m1_h64_b2_sq1_t512_extra_partials_s0", "lse", 1e-6)])
def test_one_changed_value_fails_under_the_profile(acc, run_cli, tmp_path, case, tensor, change):
    """One bf16 ulp in one out element, 1e-6 in one lse value, one fp32 ulp in one max_logits value (prefill and
    decode): within every bound, yet not what FlashMLA computes -- FAIL, naming the element."""
    bad = tmp_path / "bad.h5"
    with h5py.File(acc) as f, h5py.File(bad, "w") as g:
        f.copy(f[case], g, case)
        d = g[f"{case}/outputs/{tensor}"]
        a = d[()]
        flat = a.reshape(-1)
        k = 1000 % flat.size
        if change == "ulp":
            flat[k] = flat[k] + 1 if a.dtype == np.uint16 else (flat[k:k + 1].view(np.uint32) + 1).view(np.float32)[0]
        else:
            flat[k] = np.float32(flat[k] + np.float32(change))
        d[...] = a
    out = tmp_path / "r.json"
    p = run_cli("check", "-q", bad, "--json", out)
    assert p.returncode == 1, p.stdout + p.stderr
    r = next(x for x in json.loads(out.read_text())["results"] if x["tensor"] == tensor)
    assert r["verdict"] == "FAIL" and r["emulation"]["mismatches"] == 1, r
    assert "not bit-exact vs flashmla-sm90 emulation (1 elements" in r["message"], r["message"]


def test_the_model_sees_a_one_ulp_change(acc):
    """The numpy model, the profile's specification, tells the same one-ulp change apart."""
    with h5py.File(acc) as f:
        g = f["pf_v32_h64_t512_s0"]
        ins = {k: g["inputs"][k][()] for k in g["inputs"]}
        outs = {k: g["outputs"][k][()] for k in g["outputs"]}
        scale = float(g.attrs["softmax_scale"])
    out, _, lse = fm.sparse_prefill(bf16_values(ins["q"]), bf16_values(ins["kv"]), ins["indices"], scale)
    got = (out.view(np.uint32) >> 16).astype(np.uint16)
    mut = outs["out"].copy()
    mut[0, 7, 100] += 1
    assert np.sum(got != mut) == 1 and np.sum(got != outs["out"]) == 0


def test_ex2_table_reproduces_the_measured_structure():
    """ex2.approx on the grid: T[0] = 1, T decreasing, within 2 ulps of the correctly rounded 2^x; rcp within 1."""
    T = fm.ex2_table()
    assert len(T) == 2 ** 23 + 1 and T[0] == 1.0 and np.all(np.diff(T.astype(np.float64)) <= 0)
    x = -np.arange(len(T)) * 2.0 ** -23
    assert np.abs(T.view(np.int32).astype(np.int64) - np.exp2(x).astype(np.float32).view(np.int32)).max() <= 2
    assert fm.ex2_approx(np.float32(-0.5)) == T[2 ** 22] and fm.ex2_approx(np.float32(-3.5)) == np.float32(T[2 ** 22] / 8)
    assert fm.ex2_approx(np.float32(-np.inf)) == 0 and fm.ex2_approx(np.float32(-200)) == 0
    R = fm.rcp_table()
    assert R[0] == 1.0 and fm.rcp_approx(np.float32(8.0)) == np.float32(0.125)


def test_the_cpp_emulations_follow_the_numpy_spec_on_generated_cases(dsa_check_bin, tmp_path):
    """The selftest's flashmla-sm90 cases (their plausible output is the C++ emulation: the 32- and 16-SM schedules
    split requests, peaked heads give row sums in (0, 1)) against reference/flashmla_sm90.py, bit for bit."""
    import subprocess
    subprocess.run([str(dsa_check_bin), "selftest", "--only", "*flashmla*", "--write", str(tmp_path)], check=True,
                   capture_output=True, text=True)
    seen = 0
    with h5py.File(tmp_path / "selftest_pass.h5") as f:
        for name in f:
            g = f[name]
            if g.attrs["stage"] == "attn.sparse_mla_decode":
                kw = decode_inputs(g)
                out, lse, _, _, ns = fm.sparse_decode(**kw, partials=True)
                assert ns[-1] > len(ns) - 1, name
                outs = {k: g["outputs"][k][()] for k in g["outputs"]}
                assert np.array_equal((out.view(np.uint32) >> 16).astype(np.uint16), outs["out"]), name
                assert np.array_equal(np.transpose(lse, (0, 2, 1)).view(np.uint32), outs["lse"].view(np.uint32)), name
                seen += 1
            elif g.attrs["stage"] == "attn.sparse_mla_prefill":
                ins = {k: g["inputs"][k][()] for k in g["inputs"]}
                outs = {k: g["outputs"][k][()] for k in g["outputs"]}
                out, ml, lse = fm.sparse_prefill(bf16_values(ins["q"]), bf16_values(ins["kv"]), ins["indices"],
                                                 float(g.attrs["softmax_scale"]), ins.get("attn_sink"), ins.get("topk_length"))
                assert np.array_equal((out.view(np.uint32) >> 16).astype(np.uint16), outs["out"]), name
                assert np.array_equal(lse.view(np.uint32), outs["lse"].view(np.uint32)), name
                seen += 1
    assert seen == 3


@pytest.mark.parametrize("where, rc", [("past", 0), ("inside", 2)])
def test_indices_past_topk_length_are_never_read(acc, run_cli, tmp_path, where, rc):
    """FlashMLA masks the positions past a batch's topk_length (extra_topk_length) whatever they hold -- its MODEL1
    kernel guards against INT_MAX there. Garbage past the length: the same real output is still BITEXACT; the same
    garbage inside the length is an input error (exit 2) naming batch, token and position."""
    bad = tmp_path / "tl.h5"
    case = "dec_m1_h128_b2_sq2_t128_extra1024_etl_tl_s0"
    with h5py.File(acc) as f, h5py.File(bad, "w") as g:
        f.copy(f[case], g, case)
        gi = g[case]["inputs"]
        tl, idx = gi["topk_length"][()], gi["indices"][()]
        xl, xi = gi["extra_topk_length"][()], gi["extra_indices_in_kvcache"][()]
        for b in range(idx.shape[0]):
            if where == "past":
                idx[b, :, tl[b]:] = 2 ** 31 - 1
                xi[b, :, xl[b]:] = 2 ** 31 - 1
            elif tl[b] > 0:
                idx[b, :, 0] = 2 ** 31 - 1
        gi["indices"][...], gi["extra_indices_in_kvcache"][...] = idx, xi
    out = tmp_path / "r.json"
    p = run_cli("check", "-q", bad, "--json", out)
    assert p.returncode == rc, p.stdout + p.stderr
    if rc == 0:
        assert {r["verdict"] for r in json.loads(out.read_text())["results"]} == {"BITEXACT"}
    else:
        assert "inputs/indices" in p.stderr and "position 0: 2147483647" in p.stderr, p.stderr
