"""One kernel identity (issue #33 item 2): a dump names its producer with attr `kernel` or its older spelling
`variant`; both are resolved against the profile table (src/profiles/) for the case's stage. An unknown name, a known
profile that does not serve the stage, or the two attrs naming different producers are input errors (exit 2) that
list the profiles serving the stage; the same producer under either attr gives the same verdict."""
import json
import shutil

import h5py
import pytest


def _with_attrs(repo_root, tmp_path, golden, **attrs):
    """A copy of a committed golden whose single case has `attrs` set (None deletes one)."""
    dst = tmp_path / golden
    shutil.copy(repo_root / "golden" / golden, dst)
    with h5py.File(dst, "r+") as f:
        (case,) = list(f)
        for k, v in attrs.items():
            if v is None:
                if k in f[case].attrs:
                    del f[case].attrs[k]
            else:
                f[case].attrs[k] = v
    return dst


def test_a_profile_serving_the_stage_is_accepted(run_cli, repo_root, tmp_path):
    # FlashMLA's sm90 kernels produce attn.sparse_mla_decode output: judged by the stage's derived bound, as without it.
    p = _with_attrs(repo_root, tmp_path, "mla_decode_v32_mtp.h5", kernel="flashmla-sm90")
    r = run_cli("check", "-q", p, check_rc=0)
    assert "2 passed, 0 failed" in r.stdout


@pytest.mark.parametrize("name, why", [("deepgemm-sm90", "serves indexer.logits_ragged"), ("flashmla-sm91", "unknown profile")])
def test_a_profile_not_serving_the_stage_is_an_input_error(run_cli, repo_root, tmp_path, name, why):
    p = _with_attrs(repo_root, tmp_path, "mla_decode_v32_mtp.h5", kernel=name)
    r = run_cli("check", "-q", p, check_rc=2)
    assert "attr kernel" in r.stderr and "a profile serving attn.sparse_mla_decode (flashmla-sm90)" in r.stderr, r.stderr
    assert f"'{name}'" in r.stderr and why in r.stderr, r.stderr


def test_a_stage_no_profile_serves_refuses_the_attr(run_cli, repo_root, tmp_path):
    p = _with_attrs(repo_root, tmp_path, "quant_subnormal.h5", kernel="deepgemm-sm90")
    r = run_cli("check", "-q", p, check_rc=2)
    assert "a profile serving indexer.quant (none)" in r.stderr, r.stderr


def test_kernel_and_variant_are_one_attr(run_cli, repo_root, tmp_path):
    # The committed golden carries the older spelling (variant=ascend-a3); kernel= names the same producer.
    same = _with_attrs(repo_root, tmp_path, "linpu_ties_fp16.h5", kernel="ascend-a3", variant=None)
    run_cli("check", "-q", same, check_rc=0)
    both = _with_attrs(repo_root, tmp_path, "linpu_ties_fp16.h5", kernel="ascend-a3")
    run_cli("check", "-q", both, check_rc=0)
    clash = _with_attrs(repo_root, tmp_path, "linpu_ties_fp16.h5", kernel="ascend-950")
    r = run_cli("check", "-q", clash, check_rc=2)
    assert "kernel names ascend-950, variant names ascend-a3" in r.stderr, r.stderr


def test_an_older_profile_name_is_read_as_its_profile(run_cli, repo_root, tmp_path):
    # v4.indexer's `ref-bf16` is the `ref` profile (the DeepSeek reference code): same arithmetic, same verdict.
    old = _with_attrs(repo_root, tmp_path, "v4i_ref_bf16.h5")
    with h5py.File(old, "r") as f:
        (case,) = list(f)
        assert f[case].attrs["variant"] == "ref-bf16"
    run_cli("check", "-q", old, check_rc=0)
    new = _with_attrs(repo_root, tmp_path, "v4i_ref_bf16.h5", variant=None, kernel="ref")
    run_cli("check", "-q", new, check_rc=0)
    # ... while a3 arithmetic on the same bf16 inputs is a schema error (its operands are int8), not a silent pass.
    a3 = _with_attrs(repo_root, tmp_path, "v4i_ref_bf16.h5", variant=None, kernel="ascend-a3")
    run_cli("check", "-q", a3, check_rc=2)


def test_the_profile_table_is_described(run_cli):
    d = json.loads(run_cli("stages", "--json", check_rc=0).stdout)
    profiles = {p["name"]: p for p in d["kernel_profiles"]}
    assert {"deepgemm-sm90", "flashmla-sm90", "ascend-a3", "ascend-950", "vllm-cuda", "ref"} <= set(profiles)
    served = {s["stage"] for s in profiles["deepgemm-sm90"]["serves"] if s["emulation"]}
    assert served == {"indexer.logits_ragged", "indexer.logits_paged"}
    assert "ref-bf16" in profiles["ref"]["aliases"]
    stages = {s["name"]: s for s in d["stages"]}
    kernel = next(a for a in stages["v4.indexer"]["attrs"] if a["name"] == "kernel")
    assert set(kernel["choices"]) == {"ascend-a3", "vllm-cuda", "ref", "ref-bf16"}
    assert not any(a["name"] == "kernel" for a in stages["indexer.quant"]["attrs"])
    text = run_cli("stages", check_rc=0).stdout
    assert "flashmla-sm90" in text and "serves attn.sparse_mla_prefill" in text
