"""Tests of the kit's pytest plugin (scripts/dsa_dump/dsa_dump/pytest_plugin.py), run through pytest's own
`pytester`: a correct numpy kernel (the shipped example scripts/examples/pytest_torch_kernel/
test_logits_topk_numpy.py) passes over the goldens of indexer.logits_ragged and indexer.topk, kernels with planted
bugs fail with dsa-check's verdict lines, and the configuration errors are clear. numpy + h5py + ml_dtypes; the
xdist test skips without pytest-xdist, the torch example's test without torch."""
import json
import os
import pathlib
import shutil
import subprocess
import xml.etree.ElementTree as ET

import h5py
import pytest

from dsa_dump import pytest_plugin

ROOT = pathlib.Path(__file__).resolve().parents[2]
KIT = ROOT / "scripts" / "dsa_dump"
EXAMPLES = ROOT / "scripts" / "examples" / "pytest_torch_kernel"

pytest_plugins = ["pytester"]
PLUGIN = ("-p", "dsa_dump.pytest_plugin", "-W", "ignore::pytest.PytestAssertRewriteWarning")  # in-process: imported


LOGITS_CASES = ("ragged_all_negative_bf16", "ragged_chunked_prefill", "ragged_cp_split", "ragged_h32_compressed")
TOPK_CASES = ("topk_absolute_sorted", "topk_constant_rows", "topk_lengths_sparse", "topk_near_ties",
              "topk_page_slot_mtp", "topk_ragged_offset_chunked", "topk_ties_at_kth")


@pytest.fixture(scope="module")
def goldens(dsa_check_bin, tmp_path_factory):
    """The committed catalogue, generated once for this module."""
    d = tmp_path_factory.mktemp("goldens")
    subprocess.run([str(dsa_check_bin), "golden", "--committed", "--out", str(d)], check=True, capture_output=True,
                   timeout=120)
    return d


@pytest.fixture(scope="module")
def subset(goldens, tmp_path_factory):
    """The 11 logits_ragged / top-k goldens the example is run on here (counts stay put as the catalogue grows)."""
    d = tmp_path_factory.mktemp("subset")
    for name in LOGITS_CASES + TOPK_CASES:
        (d / f"{name}.h5").write_bytes((goldens / f"{name}.h5").read_bytes())
    return d


@pytest.fixture
def kit(pytester, monkeypatch, dsa_check_bin):
    """A pytester dir with the numpy example copied in; subprocess runs find the kit and the binary."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(KIT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("DSA_CHECK_BIN", str(dsa_check_bin))
    monkeypatch.delenv("DSA_GOLDENS", raising=False)
    example = (EXAMPLES / "test_logits_topk_numpy.py").read_text()
    pytester.makepyfile(test_logits_topk_numpy=example)
    pytester.makeini("[pytest]\n")  # rootdir (node ids, .pytest_cache) = this dir
    return pytester


BUGS = '''
import numpy as np
import pytest
from test_logits_topk_numpy import mqa_logits, topk_indices


def logits_without_relu(q, kv, kv_scale, weights, ks, ke):
    S, H, D = q.shape
    s = (np.asarray(q, np.float64).reshape(S * H, D) @ np.asarray(kv, np.float64).T).reshape(S, H, -1)
    full = np.einsum("shn,sh->sn", s, np.asarray(weights, np.float64)) * np.asarray(kv_scale, np.float64)
    out = np.full(full.shape, -np.inf)
    for i in range(len(ks)):
        out[i, ks[i]:ke[i]] = full[i, ks[i]:ke[i]]
    return out.astype(np.float32)


@pytest.mark.dsa_golden(stages="indexer.logits_ragged", cases="ragged_chunked_prefill")
def test_relu_missing(dsa_case):
    i = dsa_case.inputs(framework="numpy")
    dsa_case.check({"logits": logits_without_relu(i["q"], i["kv"], i["kv_scale"], i["weights"], i["ks"], i["ke"])})


@pytest.mark.dsa_golden("indexer.logits_ragged", cases=["ragged_chunked_prefill"])
def test_key_range_off_by_one(dsa_case):
    i, a = dsa_case.inputs(framework="numpy"), dsa_case.attrs
    dsa_case.check({"logits": mqa_logits(i["q"], i["kv"], i["kv_scale"], i["weights"], i["ks"] + 1, i["ke"],
                                         a["clean_logits"], a["max_seqlen_k"], a["logits_dtype"])})


@pytest.mark.dsa_golden(stages="indexer.topk", cases="topk_lengths_*")
def test_positional_topk(dsa_case):
    i = dsa_case.inputs(framework="numpy")
    n = np.minimum(i["lengths"], 2048)
    dsa_case.check({"indices": np.where(np.arange(2048) < n[:, None], np.arange(2048), -1).astype(np.int32)})
'''


def _outcomes(result):
    return {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "errors", "error", "skipped")}


def test_correct_numpy_kernel_passes_the_logits_and_topk_goldens(kit, subset, dsa_check_bin):
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(subset), "-v")
    r.assert_outcomes(passed=11)
    out = r.stdout.str()
    for case in LOGITS_CASES:
        assert f"test_mqa_logits[{case}::{case}] PASSED" in out
    for case in TOPK_CASES:
        assert f"test_topk[{case}::{case}] PASSED" in out
    assert f"dsa-check: {dsa_check_bin}; goldens: {subset}" in out  # the report header


def test_planted_bugs_fail_with_verdict_and_divergence_location(kit, goldens):
    kit.makepyfile(test_bugs=BUGS)
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(goldens), "test_bugs.py")
    r.assert_outcomes(failed=3)
    out = r.stdout.str()
    # missing ReLU: values outside the bound, first at the first key of the first row
    assert "FAIL           ragged_chunked_prefill/outputs/logits  [indexer.logits_ragged]  2426 of 2436" in out
    assert ("first divergence: stage indexer.logits_ragged (case 'ragged_chunked_prefill') outputs/logits at row 0 "
            "key 0 (out 22.459476, ref 19.956215)") in out
    # ks + 1: the first key of every row is missing from the -inf mask
    assert "MASK_MISMATCH  ragged_chunked_prefill/outputs/logits" in out
    assert "24 element(s) break the -inf mask; first at row 0 key 0 (out -inf, ref 19.956215)" in out
    # a positional top-k: hard misses, with dsa-check's B22 hint
    assert "FAIL           topk_lengths_sparse/outputs/indices  [indexer.topk]" in out
    assert "hint: B22: 3 row(s) with len > k select exactly the first k positions" in out
    assert "DsaCheckFailure: dsa-check: FAIL topk_lengths_sparse/outputs/indices [indexer.topk] at row 4 col 0" in out
    assert "dump: " in out and "golden: " + str(goldens) in out


def test_junitxml_holds_the_failure_text(kit, goldens):
    kit.makepyfile(test_bugs=BUGS)
    xml = kit.path / "report.xml"
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(goldens), "test_bugs.py", "-k", "relu", f"--junitxml={xml}")
    r.assert_outcomes(failed=1)
    cases = ET.parse(xml).getroot().iter("testcase")
    failures = {c.get("name"): c.find("failure") for c in cases}
    f = failures["test_relu_missing[ragged_chunked_prefill::ragged_chunked_prefill]"]
    assert f is not None
    assert f.get("message").startswith("dsa_dump.pytest_plugin.DsaCheckFailure: dsa-check: FAIL "
                                       "ragged_chunked_prefill/outputs/logits [indexer.logits_ragged] at row 0 key 0")
    assert "FAIL           ragged_chunked_prefill/outputs/logits" in f.text
    assert "outputs/logits at row 0 key 0 (out 22.459476, ref 19.956215)" in f.text


def test_xdist_two_workers(kit, subset, goldens):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (scripts/setup.sh installs it)")
    kit.makepyfile(test_bugs=BUGS)
    r = kit.runpytest_subprocess(*PLUGIN, "-n", "2", "--dsa-no-bundled-goldens", "--dsa-goldens", str(subset), timeout=300)
    out = r.stdout.str()
    assert "2 workers [14 items]" in out, out
    r.assert_outcomes(passed=11, failed=3)
    assert "hint: B22" in out and "MASK_MISMATCH  ragged_chunked_prefill/outputs/logits" in out
    # both workers need the generated goldens at once: one cache entry, no temp dir left behind
    r = kit.runpytest_subprocess(*PLUGIN, "-n", "2", "test_bugs.py", timeout=300)
    r.assert_outcomes(failed=3)
    entries = list((kit.path / ".pytest_cache" / "d" / "dsa_check_goldens").iterdir())
    assert len(entries) == 1 and (entries[0] / "MANIFEST").is_file(), entries
    assert sorted(p.name for p in entries[0].glob("*.h5")) == sorted(p.name for p in goldens.glob("*.h5"))


def test_generated_goldens_are_cached_per_binary_and_reused(kit, dsa_check_bin):
    kit.makepyfile(test_one='''
import pytest
@pytest.mark.dsa_golden(stages="indexer.quant", cases="quant_subnormal")
def test_q(dsa_case):
    assert dsa_case.file.endswith("quant_subnormal.h5") and dsa_case.attrs["block_size"] == 128
''')
    r = kit.runpytest(*PLUGIN, "test_one.py")
    r.assert_outcomes(passed=1)
    base = kit.path / ".pytest_cache" / "d" / "dsa_check_goldens"
    (entry,) = base.iterdir()
    assert entry.name == pytest_plugin._binary_key(str(dsa_check_bin))
    stamp = (entry / "MANIFEST").stat().st_mtime_ns
    kit.runpytest(*PLUGIN, "test_one.py").assert_outcomes(passed=1)
    assert (entry / "MANIFEST").stat().st_mtime_ns == stamp  # reused, not regenerated
    # without the cache plugin: generated into a temp dir that is removed at the end
    kit.runpytest(*PLUGIN, "-p", "no:cacheprovider", "test_one.py").assert_outcomes(passed=1)


def test_own_goldens_are_added_to_the_bundled_ones(kit, repo_root):
    """New-user trial: --dsa-goldens DIR adds the user's goldens to the bundled catalogue (it used to replace it);
    --dsa-no-bundled-goldens keeps only the user's."""
    mine = kit.path / "mine"
    mine.mkdir()
    shutil.copy(repo_root / "golden" / "topk_ties_at_kth.h5", mine / "my_topk.h5")
    kit.makepyfile(test_one='''
import pytest
@pytest.mark.dsa_golden(stages="indexer.topk")
def test_t(dsa_case):
    pass
''')
    r = kit.runpytest(*PLUGIN, "--dsa-goldens", str(mine), "test_one.py", "--collect-only", "-q")
    ids = [x for x in r.stdout.lines if "test_t[" in x]
    assert any("my_topk::" in x for x in ids) and any("topk_lengths_sparse::" in x for x in ids), r.stdout.str()
    r = kit.runpytest(*PLUGIN, "--dsa-goldens", str(mine), "--dsa-no-bundled-goldens", "test_one.py", "--collect-only", "-q")
    ids = [x for x in r.stdout.lines if "test_t[" in x]
    assert ids and all("my_topk::" in x for x in ids), r.stdout.str()


def test_missing_binary_is_a_usage_error(kit, monkeypatch):
    kit.makepyfile(test_one='''
import pytest
@pytest.mark.dsa_golden(stages="indexer.topk")
def test_t(dsa_case):
    pass
''')
    # named on the command line: refused at startup (exit 4)
    r = kit.runpytest(*PLUGIN, "--dsa-check-bin", "no/such/dsa-check", "test_one.py")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "dsa-check binary not found (--dsa-check-bin = " in r.stderr.str()
    # nowhere to be found when the goldens must be generated: a collection error with just the message
    monkeypatch.delenv("DSA_CHECK_BIN")
    monkeypatch.setenv("PATH", str(kit.path))
    r = kit.runpytest(*PLUGIN, "test_one.py")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    r.stdout.fnmatch_lines(["*ERROR collecting test_one.py*",
                            "dsa_dump.pytest_plugin: dsa-check binary not found (no dsa-check on PATH); pass "
                            "--dsa-check-bin PATH, set DSA_CHECK_BIN*"])
    assert "Traceback" not in r.stdout.str()


def test_marker_without_matching_cases_is_a_collection_error(kit, goldens):
    kit.makepyfile(test_one='''
import pytest
@pytest.mark.dsa_golden(stages=["indexer.flash_mla*", "indexer.nope"])
def test_t(dsa_case):
    pass
''')
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(goldens), "test_one.py")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    out = r.stdout.str()
    names = []  # every case of every golden file (a layer golden holds several)
    for p in goldens.glob("*.h5"):
        with h5py.File(p, "r") as f:
            names += list(f)
    assert ("@pytest.mark.dsa_golden on test_one.py::test_t: no golden case matches stages=['indexer.flash_mla*', "
            f"'indexer.nope'] cases=None in --dsa-goldens {goldens} ({len(names)} case(s) there: ") in out
    listing = out.split("case(s) there: ")[1].split(")\n")[0]
    stages = sorted({"attn.sparse_mla_decode", "attn.sparse_mla_prefill", "indexer.kcache_store", "indexer.logits_paged",
                     "indexer.logits_ragged", "indexer.prolog", "indexer.quant", "indexer.topk", "mla.kcache_store",
                     "v4.compressor"})
    assert listing.startswith(stages[0] + ": ")  # grouped by stage, in name order
    for stage in stages[1:]:
        assert f"; {stage}: " in listing
    assert all(n in listing for n in names)
    assert "0 passed" not in out and "no tests ran" not in out


def test_marker_misuse_is_reported(kit, goldens):
    kit.makepyfile(test_one='''
import pytest
@pytest.mark.dsa_golden(stages="indexer.topk", case="x")
def test_typo(dsa_case):
    pass
''', test_two='''
import pytest
@pytest.mark.dsa_golden(stages="indexer.topk")
def test_no_fixture():
    pass
''', test_three='''
def test_fixture_without_marker(dsa_case):
    pass
''')
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(goldens), "test_one.py", "test_two.py")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    r.stdout.fnmatch_lines([
        "@pytest.mark.dsa_golden on test_one.py::test_typo: unknown argument(s) case (takes stages=, cases=, files=)",
        "@pytest.mark.dsa_golden on test_two.py::test_no_fixture: the test must take the `dsa_case` fixture"],
        consecutive=False)
    assert "During handling" not in r.stdout.str()
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(goldens), "test_three.py")
    r.assert_outcomes(errors=1)
    assert "the `dsa_case` fixture needs @pytest.mark.dsa_golden(stages=...) on the test" in r.stdout.str()


def test_check_returns_the_report_and_passes_tolerance_keep_and_exit_2(kit, goldens):
    kit.makepyfile(test_more='''
import json, os
import numpy as np
import pytest
from dsa_dump.pytest_plugin import DsaCheckFailure, DsaCheckInputError
from test_logits_topk_numpy import mqa_logits


def logits(dsa_case, scale=1.0):
    i, a = dsa_case.inputs(framework="numpy"), dsa_case.attrs
    out = mqa_logits(i["q"], i["kv"], i["kv_scale"], i["weights"], i["ks"], i["ke"], a["clean_logits"])
    return (out * np.float32(scale)).astype(np.float32)


@pytest.mark.dsa_golden(files=["g/ragged_cp_split.h5"])
def test_tolerances(dsa_case):
    res = dsa_case.check({"logits": logits(dsa_case)}, tolerance="exact")
    assert [r["verdict"] for r in res] == ["BITEXACT"] and res.report["summary"]["exit_code"] == 0
    assert os.path.isfile(res.dump)
    near = logits(dsa_case, 1 + 2e-4)  # inside sm90-fp8 (2^-10), outside fp32-reassoc (2^-16)
    assert dsa_case.check({"logits": near})[0]["verdict"] == "WITHIN_BOUND"
    assert dsa_case.check({"logits": near}, tolerance={"rtol": 1e-3})[0]["tolerance"]["rtol"] == 1e-3
    with pytest.raises(DsaCheckFailure, match="min passing rtol") as e:
        dsa_case.check({"logits": near}, tolerance="fp32-reassoc")
    assert e.value.results[0]["verdict"] == "FAIL" and e.value.results[0]["tolerance"]["profile"] == "fp32-reassoc"


@pytest.mark.dsa_golden(files="g/ragged_cp_*.h5", cases="ragged_cp_split")
def test_exit_2(dsa_case):
    with pytest.raises(DsaCheckInputError) as e:
        dsa_case.check({"logits": np.zeros((3, 4), np.float32)})
    msg = str(e.value)
    assert "input/schema error (exit 2)" in msg
    assert "outputs/logits: expected dim 0 = S = 16 (from inputs/q dim 0)" in msg
    with pytest.raises(DsaCheckInputError, match="tolerance profile|--profile"):
        dsa_case.check({"logits": logits(dsa_case)}, tolerance="no-such-profile")
''')
    (kit.path / "g").mkdir()
    (kit.path / "g" / "ragged_cp_split.h5").write_bytes((goldens / "ragged_cp_split.h5").read_bytes())
    r = kit.runpytest(*PLUGIN, "test_more.py", "--dsa-keep", "kept", "-v")
    r.assert_outcomes(passed=2)
    kept = sorted(p.relative_to(kit.path / "kept").as_posix() for p in (kit.path / "kept").rglob("*"))
    d = "test_more.py_test_tolerances_ragged_cp_split_ragged_cp_split_"
    assert f"{d}/ragged_cp_split.h5" in kept and f"{d}/ragged_cp_split.4.report.json" in kept, kept
    rep = json.loads((kit.path / "kept" / d / "ragged_cp_split.report.json").read_text())
    assert rep["results"][0]["verdict"] == "BITEXACT"


def test_tolerance_arguments():
    t = pytest_plugin._tolerance_args
    assert t(None) == []
    assert t("sm90-fp8") == ["--profile", "sm90-fp8"]
    assert t(1e-3) == ["--rtol", "0.001"]
    assert t({"profile": "exact", "rtol": [1e-3, "logits:2e-3"], "atol": 0}) == [
        "--profile", "exact", "--rtol", "0.001", "--rtol", "logits:2e-3", "--atol", "0.0"]
    assert t(["fp32-reassoc", {"atol": 1e-6}]) == ["--profile", "fp32-reassoc", "--atol", "1e-06"]
    with pytest.raises(ValueError):
        t({"rtoll": 1})


def test_torch_example_passes(kit, subset):
    pytest.importorskip("torch", reason="torch is not installed: the torch example is not run")
    kit.makepyfile(test_logits_topk=(EXAMPLES / "test_logits_topk.py").read_text())
    r = kit.runpytest(*PLUGIN, "--dsa-no-bundled-goldens", "--dsa-goldens", str(subset), "test_logits_topk.py")
    r.assert_outcomes(passed=11)
