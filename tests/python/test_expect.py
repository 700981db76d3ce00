"""`dsa-check expect IN --out OUT`: expected/ for inputs captured from an engine. Round trip: every committed golden
with its expected/ removed gets back the same expected/ bytes, and `check OUT` is BITEXACT; kernel outputs/ are kept
and judged; IN is never modified (not even through a symlink or hard link to it); an invalid case writes nothing."""
import hashlib
import os
import shutil

import h5py
import pytest

GOLDENS = ["ragged_chunked_prefill", "paged_mtp_n2_2d", "topk_ties_at_kth", "mla_decode_model1_extra", "v4c4_ascend_midgroup",
           "v4i_flash_decode_mtp", "v4sa_c128_prefill", "v4out_small_groups", "mla_kcache_model1_pow2"]


def digest(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def strip_expected(src, dst):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for name in f:
            if "expected" in f[name]:
                del f[name]["expected"]


@pytest.mark.parametrize("name", GOLDENS)
def test_expect_round_trip(name, repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / f"{name}.h5"
    inp, out = tmp_path / "in.h5", tmp_path / "out.h5"
    strip_expected(src, inp)
    before = digest(inp)
    p = run_cli("expect", inp, "--out", out, "-j", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert digest(inp) == before
    with h5py.File(src, "r") as a, h5py.File(out, "r") as b:
        for case in a:
            assert set(a[case]["expected"]) == set(b[case]["expected"])
            for t in a[case]["expected"]:
                assert a[case]["expected"][t][()].tobytes() == b[case]["expected"][t][()].tobytes(), (case, t)
            assert "expected_by" in b[case].attrs
    p = run_cli("check", out)
    assert p.returncode == 0 and "BITEXACT" in p.stdout, p.stdout + p.stderr


def test_expect_keeps_kernel_outputs(repo_root, run_cli, tmp_path):
    src = repo_root / "golden" / "demo" / "demo_fail.h5"
    out = tmp_path / "out.h5"
    p = run_cli("expect", src, "--out", out)
    assert p.returncode == 0, p.stderr
    assert run_cli("check", out).returncode == 1  # the demo's buggy outputs are still there and still fail


def test_expect_never_writes_over_its_input(repo_root, run_cli, tmp_path):
    inp = tmp_path / "in.h5"
    strip_expected(repo_root / "golden" / "topk_ties_at_kth.h5", inp)
    before = digest(inp)
    os.symlink(inp, tmp_path / "link.h5")
    os.link(inp, tmp_path / "hard.h5")
    for target in (inp, tmp_path / "link.h5", tmp_path / "hard.h5"):
        p = run_cli("expect", inp, "--out", target)
        assert p.returncode == 2 and "nothing written" in p.stderr, p.stderr
    assert digest(inp) == before


def test_expect_invalid_case_writes_nothing(repo_root, run_cli, tmp_path):
    inp, out = tmp_path / "in.h5", tmp_path / "out.h5"
    strip_expected(repo_root / "golden" / "v4sa_swa_only.h5", inp)
    with h5py.File(inp, "r+") as f:
        g = f[next(iter(f))]
        g.attrs["cmp_ratio"] = 7
    p = run_cli("expect", inp, "--out", out)
    assert p.returncode == 2 and "cmp_ratio" in p.stderr and not out.exists(), p.stderr
