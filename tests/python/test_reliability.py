"""Reliability (issue #35 items 3 and 4): the machine failing under us, and saved reports as hostile input.

* A signal (SIGINT / SIGTERM) while golden / check --json / --html / cut / expect / merge writes: no temp or partial
  file remains and the process dies of the signal. Deterministic: DSA_CHECK_TEST_HOLD_BEFORE_RENAME=1 makes every
  writer print "dsa-check: test hold before rename: TEMP" on stderr and wait just before its rename (temp complete
  on disk); the signal is sent then.
* A full disk (a 64 KiB tmpfs) and a read-only output folder (a tmpfs remounted ro): exit 2, the message names the
  file, nothing partial left. Both need root and mount(2); elsewhere they are skipped with the reason.
* 8 concurrent `check` of one golden file all pass; 100 dumps in one `check` keep the open fd count flat (scripts/measure_many_dumps.py measures 1000+).
* Malformed, truncated, wrongly typed, deeply nested and oversized JSON reports given to merge / report: exit 2,
  a message naming the file and what was expected / found, no crash.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

CASE = "topk_constant_rows"  # one of the smallest goldens (a few KiB; golden/check take well under a second)
HOLD = "dsa-check: test hold before rename: "


@pytest.fixture(scope="module")
def golden(dsa_check_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("rel_golden")
    p = subprocess.run([str(dsa_check_bin), "golden", "--case", CASE, "--out", str(d)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return d / f"{CASE}.h5"


@pytest.fixture(scope="module")
def report(dsa_check_bin, golden, tmp_path_factory):
    out = tmp_path_factory.mktemp("rel_report") / "r.json"
    p = subprocess.run([str(dsa_check_bin), "check", str(golden), "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


def _hold_and_signal(bin_, args, sig):
    """Runs dsa-check with the hold hook, sends `sig` at the hold; returns (returncode, the temp path it held at)."""
    env = dict(os.environ, DSA_CHECK_TEST_HOLD_BEFORE_RENAME="1")
    p = subprocess.Popen([str(bin_), *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    tmp = None
    try:
        for line in p.stderr:
            if line.startswith(HOLD):
                tmp = line[len(HOLD):].strip()
                break
        assert tmp, f"{args}: never reached the rename (rc {p.poll()})"
        assert os.path.exists(tmp), f"the temp file {tmp} should exist at the hold"
        p.send_signal(sig)
        p.stderr.read()
        return p.wait(timeout=30), tmp
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _names(d):
    return sorted(x.name for x in pathlib.Path(d).iterdir())


@pytest.mark.parametrize("what,sig", [
    ("golden", signal.SIGTERM), ("golden", signal.SIGINT), ("check_json", signal.SIGINT), ("check_html", signal.SIGTERM),
    ("cut", signal.SIGTERM), ("expect", signal.SIGINT), ("merge", signal.SIGTERM),
])
def test_signal_mid_write_leaves_nothing(dsa_check_bin, golden, report, tmp_path, what, sig):
    out = tmp_path / "out"
    out.mkdir()
    args = {
        "golden": ["golden", "--case", CASE, "--out", out],
        "check_json": ["check", golden, "--json", out / "r.json"],
        "check_html": ["check", golden, "--html", out / "r.html"],
        "cut": ["cut", golden, "--case", "*", "--out", out / "c.h5"],
        "expect": ["expect", golden, "--out", out / "e.h5"],
        "merge": ["merge", report, "--json", out / "m.json"],
    }[what]
    rc, tmp = _hold_and_signal(dsa_check_bin, args, sig)
    assert rc == -sig, f"expected death by signal {sig}, got rc {rc}"
    assert str(out) in tmp
    assert _names(out) == [], f"left behind: {_names(out)}"


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs (root and mount(2) needed), unmounted afterwards."""
    d = tmp_path / "fs"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (ENOSPC / read-only tests)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _fill(d):
    fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_enospc_golden(run_cli, small_fs):
    p = run_cli("golden", "--case", "fused_decode_mtp", "--out", small_fs)  # a 660 KB golden into 64 KiB
    assert p.returncode == 2, p.stderr
    assert "fused_decode_mtp.h5" in p.stderr and "no space left" in p.stderr.lower(), p.stderr
    assert _names(small_fs) == []


def test_enospc_check_json_and_html(run_cli, golden, small_fs):
    _fill(small_fs)
    for opt, name in (("--json", "r.json"), ("--html", "r.html")):
        p = run_cli("check", golden, opt, small_fs / name)
        assert p.returncode == 2, p.stderr
        assert str(small_fs / name) in p.stderr and "No space left on device" in p.stderr, p.stderr
    assert _names(small_fs) == ["filler"]


def test_enospc_cut(run_cli, golden, small_fs):
    _fill(small_fs)
    p = run_cli("cut", golden, "--case", "*", "--out", small_fs / "c.h5")
    assert p.returncode == 2, p.stderr
    assert "c.h5" in p.stderr, p.stderr
    assert _names(small_fs) == ["filler"]


def test_read_only_output_dir(run_cli, golden, report, small_fs):
    r = subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {r.stderr.strip()}")
    runs = [
        (("check", golden, "--json", small_fs / "r.json"), "r.json"),
        (("merge", report, "--json", small_fs / "m.json"), "m.json"),
        (("golden", "--case", CASE, "--out", small_fs), str(small_fs)),
        (("cut", golden, "--case", "*", "--out", small_fs / "c.h5"), "c.h5"),
        (("expect", golden, "--out", small_fs / "e.h5"), "e.h5"),
    ]
    for args, name in runs:
        p = run_cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert name in p.stderr and ("Read-only file system" in p.stderr or "not writable" in p.stderr), (args, p.stderr)
        assert "terminate" not in p.stderr
    assert _names(small_fs) == []


def test_concurrent_checks_of_one_file(dsa_check_bin, golden):
    procs = [subprocess.Popen([str(dsa_check_bin), "check", "-q", str(golden)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (o, e) in zip(procs, outs):
        assert p.returncode == 0, e


def test_many_dumps_fd_count_flat(dsa_check_bin, golden, tmp_path):
    """100 dumps in one check: the open fd count stays flat (sampled from /proc while it runs)."""
    files = []
    for i in range(100):
        f = tmp_path / f"d{i:04d}.h5"
        os.link(golden, f)
        files.append(str(f))
    p = subprocess.Popen([str(dsa_check_bin), "check", "-q", *files], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    while p.poll() is None:
        try:
            peak = max(peak, len(os.listdir(f"/proc/{p.pid}/fd")))
        except FileNotFoundError:
            break
        time.sleep(0.005)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    assert peak < 32, f"{peak} fds open at once over 100 files"


# --- hostile JSON reports (merge / report) ---

def _variants(report: pathlib.Path):
    text = report.read_text()
    j = json.loads(text)
    assert j["results"], "the report should hold results"

    def with_(f):
        k = json.loads(text)
        f(k)
        return json.dumps(k)

    return {
        "truncated": (text[: len(text) // 2], "invalid JSON"),
        "empty": ("", "empty file"),
        "not_json": ("\x00\xff garbage", "invalid JSON"),
        "array_top": ("[1, 2]", "found a JSON array"),
        "tool_number": (with_(lambda k: k.__setitem__("tool", 5)), "\"tool\": 5"),
        "results_object": (with_(lambda k: k.__setitem__("results", {})), "results: expected an array, found a object"),
        "problems_missing": (with_(lambda k: k.pop("problems")), "problems: expected an array"),
        "result_number": (with_(lambda k: k["results"].__setitem__(0, 7)), "results[0]"),
        "numel_string": (with_(lambda k: k["results"][0].__setitem__("numel", "12")), "numel: expected an integer, found a string"),
        "numel_float": (with_(lambda k: k["results"][0].__setitem__("numel", 1e300)), "numel: expected an integer"),
        "numel_huge": (with_(lambda k: k["results"][0].__setitem__("numel", 2**64 - 1)), "numel: expected an integer"),
        "verdict_list": (with_(lambda k: k["results"][0].__setitem__("verdict", [])), "verdict: expected a string"),
        "tolerance_null": (with_(lambda k: k["results"][0].__setitem__("tolerance", None)), "tolerance: expected an object, found null"),
        "notes_mixed": (with_(lambda k: k["results"][0].__setitem__("notes", ["a", 1])), "notes[1]: expected a string"),
        "first_string": (with_(lambda k: k["results"][0].__setitem__("first", "x")), "first: expected an object"),
        "plot_heatmap_types": (with_(lambda k: k["results"][0].__setitem__("plot", {"heatmap": {"rows": 1, "cols": 1, "gh": "a"}})),
                               "plot.heatmap.gh: expected an integer"),
        "plot_marks": (with_(lambda k: k["results"][0].__setitem__("plot", {"rows": [{"row": 0, "len": 1, "k": 1, "tau": 0, "u_tau": 0,
                       "rank": [], "score": [], "marks": [[1, 2**40]], "zoom0": 0, "zoom": [], "zoom_flag": []}]})),
                       "plot.rows[0].marks[0][1]: expected a 32-bit integer"),
        "run_pos_nested": (with_(lambda k: k["results"][0].__setitem__("run_pos", [[[[0]]], 0])), "run_pos: expected [file index"),
        "deep_arrays": ("[" * 200000 + "]" * 200000, "nested at most 64 deep"),
        "deep_in_field": (text.replace('"results": [', '"results": [' + "{\"a\":" * 100 + "1" + "}" * 100 + ",", 1), "nested at most 64 deep"),
    }


@pytest.mark.parametrize("cmd", ["merge", "report"])
def test_hostile_reports(run_cli, report, tmp_path, cmd):
    for name, (body, want) in _variants(report).items():
        f = tmp_path / f"{name}.json"
        f.write_bytes(body.encode("utf-8", "surrogateescape") if isinstance(body, str) else body)
        args = [cmd, f] + (["--html", tmp_path / "out.html"] if cmd == "report" else [])
        p = run_cli(*args)
        assert p.returncode == 2, (name, p.returncode, p.stderr[-500:])
        assert str(f) in p.stderr and want in p.stderr, (name, p.stderr[-800:])
        assert "terminate" not in p.stderr and "Assertion" not in p.stderr, (name, p.stderr)
        assert not (tmp_path / "out.html").exists(), f"{name}: report written from an unreadable input"


def test_oversized_report_refused_before_reading(run_cli, report, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: 513 MiB apparent size, no disk used
        f.truncate((512 << 20) + (1 << 20))
    p = run_cli("merge", big)
    assert p.returncode == 2 and str(big) in p.stderr and "at most 536870912 bytes" in p.stderr, p.stderr
    # The limit is an option: a real report above a 1 MiB limit is refused too; under it, read.
    small_limit = tmp_path / "r.json"
    shutil.copy(report, small_limit)
    with open(small_limit, "a") as f:
        f.write(" " * (1 << 20))
    p = run_cli("merge", "--max-report-mib", "1", small_limit)
    assert p.returncode == 2 and "--max-report-mib" in p.stderr, p.stderr
    p = run_cli("merge", "--max-report-mib", "2", small_limit)
    assert p.returncode == 0, p.stderr
