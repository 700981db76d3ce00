"""`dsa-check check` end to end: exit codes 0/1/2, the console summary line, the JSON report (parsed) and the JUnit
report (parsed with xml.etree), filters, -j determinism of the report, --deterministic, expected/ groups and
first-divergence lines. Input files come from `dsa-check selftest --write` and are edited here with h5py."""
import json
import re
import shutil
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

PASSING = {"BITEXACT", "WITHIN_BOUND"}
FAILING = {"FAIL", "NONFINITE", "MASK_MISMATCH", "STRUCTURE", "SHAPE", "DTYPE"}


@pytest.fixture(scope="module")
def files(tmp_path_factory, dsa_check_bin):
    import subprocess

    d = tmp_path_factory.mktemp("check")
    p = subprocess.run([str(dsa_check_bin), "selftest", "--write", str(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mutation score: " in p.stdout and "(100.0 %)" in p.stdout
    return d


def summary_line(stdout):
    last = stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed(?:: kernel outputs \d+ passed, \d+ failed; the files' expected/ "
                     r"\(reference self-check\) \d+ passed, \d+ failed)?", last)
    assert m, f"last line is not the summary: {last!r}"
    return int(m.group(1)), int(m.group(2))


def check_junit(path, results):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == int(root.get("tests"))
    for tc in cases:
        assert tc.get("classname") and tc.get("name")
        for child in tc:
            assert child.tag in {"failure", "error", "system-out"}
    by_name = {(tc.get("classname"), tc.get("name")): tc for tc in cases}
    for r in results:
        tc = by_name[(f"{r['stage']}.{r['case']}", f"{r['group']}/{r['tensor']}")]
        fail = tc.find("failure")
        if r["pass"]:
            assert fail is None and tc.find("error") is None
        elif r["verdict"] == "ERROR":
            assert tc.find("error") is not None
        else:
            assert fail is not None
            assert fail.get("type") == r["verdict"]
            assert fail.get("message") == r["message"]
    return root


def test_check_pass_file_reports(files, run_cli, tmp_path):
    js, xml = tmp_path / "r.json", tmp_path / "r.xml"
    p = run_cli("check", files / "selftest_pass.h5", "--json", js, "--junit", xml, check_rc=0)
    passed, failed = summary_line(p.stdout)
    rep = json.loads(js.read_text())
    # An across-call line that compared nothing (consistency, numel 0) is shown but not counted as a pass.
    counted = [r for r in rep["results"] if not (r["group"] == "consistency" and r["numel"] == 0)]
    assert rep["summary"]["passed"] == passed == len(counted) and failed == 0
    assert rep["summary"]["exit_code"] == 0
    assert {r["verdict"] for r in rep["results"]} <= PASSING
    stages = {r["stage"] for r in rep["results"]}
    assert {"indexer.quant", "indexer.prolog", "indexer.kcache_store", "indexer.logits_ragged", "indexer.logits_paged",
            "indexer.topk"} <= stages
    for r in rep["results"]:
        if r["kind"] == "bounded" and r["verdict"] == "WITHIN_BOUND":
            b = r["bounded"]
            assert r["tolerance"]["atol"] == 0  # then the minimum passing rtol is exactly the worst err/M
            assert b["min_rtol"] == b["max_err_over_m"] <= r["tolerance"]["rtol"]
            # bf16 outputs judged by a derived bound (attention) sit further from the reference than fp32 logits
            tight = r["tolerance"]["profile"] != "derived-bound"
            assert 0 <= b["calc_diff"] < (1e-5 if tight else 1e-3) and b["cosine"] > (0.99999 if tight else 0.999)
        if r["kind"] == "topk_set":
            assert r["topk"]["hard_misses"] == 0 and r["topk"]["hard_extras"] == 0
    root = check_junit(xml, rep["results"])
    assert int(root.get("failures")) == 0
    assert "no divergence in" in p.stdout
    assert not list(tmp_path.glob(".*tmp*")), "temp files left behind"


def test_check_mutants_fail_with_kinds(files, run_cli, tmp_path):
    js, xml = tmp_path / "m.json", tmp_path / "m.xml"
    p = run_cli("check", files / "selftest_mutants.h5", "--json", js, "--junit", xml, check_rc=1)
    passed, failed = summary_line(p.stdout)
    rep = json.loads(js.read_text())
    assert failed == rep["summary"]["failed"] > 0 and passed == rep["summary"]["passed"]
    by_case = {}
    for r in rep["results"]:
        if r["group"] != "consistency":  # across-call lines (0 repeated rows compared) belong to no mutant
            by_case.setdefault(r["case"], set()).add(r["verdict"])
    assert "NONFINITE" in by_case["ragged_nan_logit"]
    assert "MASK_MISMATCH" in by_case["ragged_causal_off_by_one"]
    assert "STRUCTURE" in by_case["topk_duplicate"]
    assert "FAIL" in by_case["topk_out_of_band_swap"]
    assert all(v & FAILING for v in by_case.values()), by_case
    check_junit(xml, rep["results"])
    assert "first divergence in" in p.stdout


def test_check_filters_jobs_and_quiet(files, run_cli, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    run_cli("check", files / "selftest_mutants.h5", "-j", "1", "--json", a, check_rc=1)
    run_cli("check", files / "selftest_mutants.h5", "-j", "3", "--threads", "1", "--json", b, check_rc=1)
    assert json.loads(a.read_text())["results"] == json.loads(b.read_text())["results"]

    p = run_cli("check", files / "selftest_mutants.h5", "--stage", "indexer.topk", "--case", "topk_d*", "--json", a, check_rc=1)
    rep = json.loads(a.read_text())
    assert {(r["stage"], r["case"]) for r in rep["results"]} == {("indexer.topk", "topk_duplicate")}
    q = run_cli("check", files / "selftest_mutants.h5", "--quiet", check_rc=1)
    assert all(not line.startswith(("BITEXACT", "WITHIN_BOUND")) for line in q.stdout.splitlines())
    assert "\x1b[" not in q.stdout  # no colour when stdout is not a TTY
    v = run_cli("check", files / "selftest_pass.h5", "--case", "ragged", "-v", check_rc=0)
    assert "calc_diff" in v.stdout and "max ulp" in v.stdout


def test_check_usage_and_io_errors(files, run_cli, tmp_path):
    p = run_cli("check", tmp_path / "missing.h5", check_rc=2)
    assert "missing.h5: no such file" in p.stderr
    (tmp_path / "text.h5").write_text("not hdf5\n")
    p = run_cli("check", tmp_path / "text.h5", check_rc=2)
    assert "text.h5" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    run_cli("check", "--profile", "nope", files / "selftest_pass.h5", check_rc=2)
    run_cli("check", "--atol", "logits:x", files / "selftest_pass.h5", check_rc=2)
    run_cli("check", "--stage", "nothing*", files / "selftest_pass.h5", check_rc=2)
    # A case with neither outputs/ nor expected/ is a usage problem.
    f = tmp_path / "bare.h5"
    shutil.copy(files / "selftest_pass.h5", f)
    with h5py.File(f, "a") as h:
        del h["quant/outputs"]
    p = run_cli("check", f, "--case", "quant", check_rc=2)
    assert "nothing to check" in p.stdout + p.stderr
    # JSON to an unwritable place: exit 2, and no report half-written.
    p = run_cli("check", files / "selftest_pass.h5", "--json", tmp_path / "no" / "r.json", check_rc=2)
    assert "r.json" in p.stderr


def test_check_expected_group_and_exact_location(files, run_cli, tmp_path):
    f = tmp_path / "q.h5"
    shutil.copy(files / "selftest_pass.h5", f)
    with h5py.File(f, "a") as h:
        g = h["quant"]
        y = g["outputs/y"][...]
        g.create_group("expected")
        for n in ("y", "scale"):
            src = g["outputs/" + n]
            d = g["expected"].create_dataset(n, data=src[...])
            for k, v in src.attrs.items():
                d.attrs[k] = v
        # Corrupt one fp8 code of the kernel output at token 2, dim 130 (flat 2*256+130).
        y2 = y.copy()
        y2[2, 130] ^= 0x01
        g["outputs/y"][...] = y2
    js = tmp_path / "q.json"
    run_cli("check", f, "--case", "quant", "--json", js, check_rc=1)
    res = {(r["group"], r["tensor"]): r for r in json.loads(js.read_text())["results"]}
    assert res[("expected", "y")]["verdict"] == "BITEXACT" and res[("expected", "scale")]["verdict"] == "BITEXACT"
    bad = res[("outputs", "y")]
    assert bad["verdict"] == "FAIL" and bad["mismatches"] == 1
    assert bad["first"]["flat"] == 2 * 256 + 130
    assert bad["first"]["where"].startswith("token 2 dim 130")


def test_check_deterministic_across_dumps(files, run_cli, tmp_path):
    f = tmp_path / "again.h5"
    shutil.copy(files / "selftest_pass.h5", f)
    js = tmp_path / "d.json"
    run_cli("check", files / "selftest_pass.h5", f, "--deterministic", "--case", "topk_rel", "--json", js, check_rc=0)
    det = [r for r in json.loads(js.read_text())["results"] if r["group"] == "determinism"]
    assert len(det) == 1 and det[0]["verdict"] == "BITEXACT"
    # Same set, different order in one row: the set check passes, the determinism gate does not.
    with h5py.File(f, "a") as h:
        idx = h["topk_rel/outputs/indices"][...]
        assert idx[0, 0] != idx[0, 1]
        idx[0, [0, 1]] = idx[0, [1, 0]]  # row 0 has len 48 > k: any order is a valid top-k
        h["topk_rel/outputs/indices"][...] = idx
    p = run_cli("check", files / "selftest_pass.h5", f, "--deterministic", "--case", "topk_rel", "--json", js, check_rc=1)
    rep = json.loads(js.read_text())
    assert all(r["pass"] for r in rep["results"] if r["group"] == "outputs")
    det = [r for r in rep["results"] if r["group"] == "determinism"]
    assert det[0]["verdict"] == "FAIL" and str(f) in det[0]["message"]


def test_check_first_divergence_by_step(files, run_cli, tmp_path):
    # Put a passing quant case and a failing topk mutant into one file as one `step`: topk diverges first.
    f = tmp_path / "step.h5"
    with h5py.File(files / "selftest_pass.h5", "r") as a, h5py.File(files / "selftest_mutants.h5", "r") as b, \
            h5py.File(f, "w") as o:
        a.copy("quant", o)
        b.copy("topk_duplicate", o)
        b.copy("ragged_nan_logit", o)
        for n in ("quant", "topk_duplicate", "ragged_nan_logit"):
            o[n].attrs["step"] = 7
    p = run_cli("check", f, check_rc=1)
    assert f"first divergence in {f} (step 7): stage indexer.logits_ragged (case 'ragged_nan_logit')" in p.stdout


def test_shards_partition_the_cases_and_merge_gives_one_run(repo_root, run_cli, tmp_path):
    """check --shard i/N: every case in exactly one shard, the same partition on every run; merge of the shard
    reports: the counts, first divergence and exit code of one run over all the cases."""
    files = sorted(str(p) for p in (repo_root / "golden").glob("*.h5")) + [str(repo_root / "golden/demo/demo_fail.h5")]
    full = run_cli("check", "-q", *files, "--json", tmp_path / "full.json")
    assert full.returncode == 1
    full_rep = json.loads((tmp_path / "full.json").read_text())
    names = lambda rep: sorted(r["case"] + "/" + r["group"] + "/" + r["tensor"] for r in rep["results"])
    seen = []
    for i in range(3):
        for attempt in range(2):  # stable across runs
            p = run_cli("check", "-q", "--shard", f"{i}/3", *files, "--json", tmp_path / f"s{i}_{attempt}.json")
            assert p.returncode in (0, 1), p.stderr
        a = json.loads((tmp_path / f"s{i}_0.json").read_text())
        b = json.loads((tmp_path / f"s{i}_1.json").read_text())
        assert names(a) == names(b)
        seen += names(a)
    assert sorted(seen) == names(full_rep)  # a partition: nothing lost, nothing twice
    # The shards in any order (which file lands in which shard depends on the path: the checkout's place), merged:
    # the full run's results in the full run's order, and its first-divergence lines.
    ordered = lambda rep: [(r["file"], r["case"], r["group"], r["tensor"], r.get("informational", False))
                           for r in rep["results"] if "run_pos" in r]
    for shard_order in ((0, 1, 2), (2, 1, 0), (1, 2, 0)):
        m = run_cli("merge", *[tmp_path / f"s{i}_0.json" for i in shard_order], "--json", tmp_path / "m.json",
                    "--junit", tmp_path / "m.xml")
        assert m.returncode == full.returncode
        merged = json.loads((tmp_path / "m.json").read_text())
        assert names(merged) == names(full_rep)
        assert ordered(merged) == ordered(full_rep) and len(ordered(full_rep)) > 100
        assert merged["summary"]["passed"] == full_rep["summary"]["passed"]
        assert merged["summary"]["failed"] == full_rep["summary"]["failed"]
        assert merged["first_divergence"] == full_rep["first_divergence"], shard_order
    assert run_cli("check", "--shard", "3/3", *files).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert run_cli("merge", bad).returncode == 2


def test_dsa_timing_prints_one_line_per_phase(repo_root, dsa_check_bin):
    """DSA_TIMING=1: stderr names the file read, each case's reference (with its backend) and comparison, and the
    whole check, each with seconds; without it, no timing line."""
    import os
    import re
    import subprocess

    f = repo_root / "golden/quant_subnormal.h5"
    with_t = subprocess.run([str(dsa_check_bin), "check", "-q", str(f)], capture_output=True, text=True,
                            env=dict(os.environ, DSA_TIMING="1"), timeout=120)
    assert with_t.returncode == 0, with_t.stderr
    lines = [x for x in with_t.stderr.splitlines() if x.startswith("timing: ")]
    assert re.fullmatch(rf"timing: read {re.escape(str(f))}: \d+\.\d{{3}} s", lines[0])
    assert any(re.fullmatch(r"timing: case '[^']+': reference on the cpu: \d+\.\d{3} s", x) for x in lines)
    assert any(re.fullmatch(r"timing: case '[^']+': comparison: \d+\.\d{3} s", x) for x in lines)
    assert lines[-1].startswith("timing: check in all (reads, references, comparisons, reports): ")
    env = {k: v for k, v in os.environ.items() if k != "DSA_TIMING"}
    without = subprocess.run([str(dsa_check_bin), "check", "-q", str(f)], capture_output=True, text=True, env=env,
                             timeout=120)
    assert "timing:" not in without.stderr
