"""The CI action's logic (scripts/ci/dsa_check_ci.py, wired by .github/actions/dsa-check/action.yml) run locally:
a dump folder checked as a 2-shard matrix, the shards merged into one JSON / JUnit / HTML report with the exit code
one run would give, one GitHub annotation per failing check, a Markdown step summary; usage problems are exit 2."""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

SCRIPT = ["scripts", "ci", "dsa_check_ci.py"]


def run(repo_root, dsa_check_bin, *args, env=None):
    e = dict(os.environ, DSA_CHECK_BIN=str(dsa_check_bin), **(env or {}))
    return subprocess.run([sys.executable, str(repo_root.joinpath(*SCRIPT)), *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=e)


def test_matrix_merge_annotations_and_exit_code(repo_root, dsa_check_bin, tmp_path):
    dumps = tmp_path / "dumps" / "nested"
    dumps.mkdir(parents=True)
    for n in ("demo_pass.h5", "demo_fail.h5"):
        shutil.copy(repo_root / "golden" / "demo" / n, dumps / n)
    shutil.copy(repo_root / "golden" / "topk_lengths_sparse.h5", dumps.parent / "topk.h5")
    reports = tmp_path / "reports"
    for i in range(2):  # each shard in its own artifact folder, as upload/download-artifact lays them out
        p = run(repo_root, dsa_check_bin, "shard", "--dumps", tmp_path / "dumps", "--shard", f"{i}/2", "--out",
                reports / f"dsa-shard-{i}", "--html")
        assert p.returncode == 0, p.stdout + p.stderr  # a failing check is the merge job's verdict
        assert (reports / f"dsa-shard-{i}" / f"shard-{i}-of-2.json").is_file()
    summary = tmp_path / "summary.md"
    p = run(repo_root, dsa_check_bin, "merge", "--reports", reports, "--out", tmp_path / "merged",
            env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert p.returncode == 1, p.stdout + p.stderr
    rep = json.loads((tmp_path / "merged" / "report.json").read_text())
    # The merged report gives what one run over all the files gives (but the across-call lines, which need the
    # repeated calls in one run: each shard has its own).
    one = tmp_path / "one.json"
    files = sorted(str(f) for f in (tmp_path / "dumps").rglob("*.h5"))
    subprocess.run([str(dsa_check_bin), "check", *files, "--json", one], capture_output=True)
    whole = json.loads(one.read_text())["summary"]
    assert [rep["summary"][k] for k in ("passed", "failed", "exit_code")] == [whole[k] for k in ("passed", "failed", "exit_code")]
    failing = [r for r in rep["results"] if not r["pass"]]
    ann = [x for x in p.stdout.splitlines() if x.startswith("::error ")]
    assert len(ann) == len(failing) == 2, p.stdout
    assert any("file=" in a and "demo_fail.h5" in a and "title=indexer.logits_ragged ragged_chunked_prefill__ragged_relu_missing/outputs/logits%3A FAIL" in a
               for a in ann), ann
    assert "%0A" not in "".join(a.split("::", 2)[1] for a in ann)  # properties escaped, one line each
    root = ET.parse(tmp_path / "merged" / "report.xml").getroot()
    assert int(root.get("failures")) + int(root.get("errors", 0)) >= 2
    html = (tmp_path / "merged" / "report.html").read_text()
    assert 'class="plot ' in html and 'id="noplots"' not in html  # the shards computed the plots
    s = summary.read_text()
    assert s.startswith(f"### dsa-check: {rep['summary']['passed']} passed, 2 failed") and "| FAIL | indexer.topk |" in s


def test_usage_problems_are_exit_2(repo_root, dsa_check_bin, tmp_path):
    (tmp_path / "empty").mkdir()
    p = run(repo_root, dsa_check_bin, "shard", "--dumps", tmp_path / "empty", "--shard", "0/1", "--out", tmp_path / "r")
    assert p.returncode == 2 and "no *.h5 file found" in p.stderr
    p = run(repo_root, dsa_check_bin, "shard", "--dumps", tmp_path, "--shard", "3/2", "--out", tmp_path / "r")
    assert p.returncode == 2 and "expected I/N with 0 <= I < N" in p.stderr
    p = run(repo_root, dsa_check_bin, "merge", "--reports", tmp_path / "empty", "--out", tmp_path / "m")
    assert p.returncode == 2 and "no shard-*.json report found" in p.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.h5").write_bytes(b"not hdf5")
    p = run(repo_root, dsa_check_bin, "shard", "--dumps", bad, "--shard", "0/1", "--out", tmp_path / "r")
    assert p.returncode == 2 and "::error title=dsa-check shard 0/1::check exited 2" in p.stdout, p.stdout + p.stderr
