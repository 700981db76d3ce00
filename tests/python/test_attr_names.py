"""One name per concept, defaults derived as engines derive them, and strict attrs (issue #34 items 2 and 8): the
committed goldens edited with h5py (inputs and expected/ kept) and judged by `dsa-check check`."""
import shutil
import subprocess

import h5py
import numpy as np

GOLDEN = __import__("pathlib").Path(__file__).resolve().parents[2] / "golden"


def edited(tmp_path, name, fn):
    p = tmp_path / name
    shutil.copy(GOLDEN / name, p)
    with h5py.File(p, "r+") as f:
        for g in f.values():
            fn(g)
    return p


def run(bin_, p):
    r = subprocess.run([str(bin_), "check", str(p)], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_decode_scale_default_is_d_qk_to_the_minus_half(tmp_path, dsa_check_bin):
    # The MODEL1 goldens were made with 512^-0.5 (= float(512 ** -0.5) in Python): without the attr, the stage must
    # derive the same value from q's head dim (576^-0.5 would fail them).
    for name in ("mla_decode_model1_extra.h5", "mla_decode_model1_short_blocks.h5"):
        def drop(g):
            assert g.attrs["softmax_scale"] == 512 ** -0.5
            del g.attrs["softmax_scale"]
        rc, text = run(dsa_check_bin, edited(tmp_path, name, drop))
        assert rc == 0, text


def test_sm_scale_is_an_alias_and_two_spellings_must_agree(tmp_path, dsa_check_bin):
    def alias(g):
        v = g.attrs["softmax_scale"]
        del g.attrs["softmax_scale"]
        g.attrs["sm_scale"] = v
    rc, text = run(dsa_check_bin, edited(tmp_path, "mla_decode_v32_mtp.h5", alias))
    assert rc == 0, text

    def both(g):
        g.attrs["sm_scale"] = 576 ** -0.5  # the other spelling, another value: an input error, never a silent pick
    rc, text = run(dsa_check_bin, edited(tmp_path, "mla_decode_v32_mtp.h5", both))
    assert rc == 2 and "attr sm_scale: expected the same value as softmax_scale" in text, text


def test_prefill_scale_has_no_default(tmp_path, dsa_check_bin):
    def drop(g):
        for k in ("softmax_scale", "sm_scale"):
            if k in g.attrs:
                del g.attrs[k]
    rc, text = run(dsa_check_bin, edited(tmp_path, "mla_prefill_v32.h5", drop))
    assert rc == 2 and "flash_mla_sparse_fwd takes sm_scale without a default" in text, text


def test_v4_attention_scale_default_is_head_dim_to_the_minus_half(tmp_path, dsa_check_bin):
    def drop(g):
        if "softmax_scale" in g.attrs:
            assert abs(g.attrs["softmax_scale"] - 512 ** -0.5) < 1e-18
            del g.attrs["softmax_scale"]
    rc, text = run(dsa_check_bin, edited(tmp_path, "v4sa_c128_prefill.h5", drop))
    assert rc == 0, text


def test_unknown_attrs_are_input_errors_and_meta_is_free(tmp_path, dsa_check_bin):
    def misspelt(g):
        g.attrs["scale_format"] = "fp32_div"
    rc, text = run(dsa_check_bin, edited(tmp_path, "mla_kcache_pow2.h5", misspelt))
    assert rc == 2, text
    assert "attr scale_format: expected an attr of stage mla.kcache_store (did you mean scale_fmt?)" in text, text
    assert "meta.*" in text and "an attr the stage does not read" in text, text

    def meta(g):
        g.attrs["meta.engine"] = "vllm 0.11"
        g.attrs["meta.commit"] = np.int64(7)
        g.attrs["layer"] = np.int64(3)  # provenance
    rc, text = run(dsa_check_bin, edited(tmp_path, "mla_kcache_pow2.h5", meta))
    assert rc == 0, text


def test_mask_off_by_one_is_named(tmp_path, dsa_check_bin):
    # The clean logits of a chunked-prefill golden, with each row's window end moved one column late (ke + 1): the
    # -inf pattern differs and the message must say where, not only that it differs.
    def late_end(g):
        e = g["expected/logits"][...]
        out = e.copy()
        for r in range(out.shape[0]):
            fin = np.flatnonzero(~np.isneginf(out[r]))
            if fin.size and fin[-1] + 1 < out.shape[1]:
                out[r, fin[-1] + 1] = out[r, fin[-1]]
        g.create_dataset("outputs/logits", data=out)
    rc, text = run(dsa_check_bin, edited(tmp_path, "ragged_chunked_prefill.h5", late_end))
    assert rc == 1 and "MASK_MISMATCH" in text, text
    assert "mask off by one: the window's end (ke / the causal limit) one column late" in text, text
