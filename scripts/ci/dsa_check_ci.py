#!/usr/bin/env python3
"""The logic of the dsa-check CI action (.github/actions/dsa-check, .github/workflows/dsa-check.yml), runnable
anywhere (the test suite runs it locally: tests/python/test_ci_action.py; no network).

    dsa_check_ci.py shard --dumps DIR --shard I/N --out REPORTS [--bin dsa-check] [--html]
        checks shard I of N of every *.h5 under DIR (dsa-check check --shard I/N --json --junit [--html]) into
        REPORTS/shard-I-of-N.{json,xml,html}; exit 0 even when a check fails (the merge job decides), 2 on a usage or
        I/O problem of the run itself
    dsa_check_ci.py merge --reports REPORTS --out MERGED [--bin dsa-check]
        merges every REPORTS/**/shard-*.json (dsa-check merge --json --junit --html) into MERGED/report.{json,xml,html},
        prints one GitHub annotation per failing check (::error file=DUMP,title=STAGE CASE/GROUP/TENSOR::message),
        appends a Markdown summary to $GITHUB_STEP_SUMMARY when set, and exits with merge's code (0 pass, 1 a check
        failed, 2 usage / input problem)
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys


def die(msg):
    """A usage or input problem of the run itself: the message on stderr, exit 2 (as dsa-check's own)."""
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def _bin(path):
    b = path or os.environ.get("DSA_CHECK_BIN") or shutil.which("dsa-check")
    if not b or not os.path.exists(b):
        die("dsa-check binary not found (--bin, env DSA_CHECK_BIN, or dsa-check on PATH)")
    return b


def _escape(s, prop=False):
    """GitHub workflow-command escaping (data: % CR LF; properties also : and ,)."""
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return s.replace(":", "%3A").replace(",", "%2C") if prop else s


def shard(a):
    i, _, n = a.shard.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        die(f"--shard {a.shard!r}: expected I/N with 0 <= I < N")
    files = sorted(glob.glob(os.path.join(a.dumps, "**", "*.h5"), recursive=True))
    if not files:
        die(f"--dumps {a.dumps}: no *.h5 file found")
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"shard-{i}-of-{n}")
    cmd = [_bin(a.bin), "check", *files, "--shard", a.shard, "--json", base + ".json", "--junit", base + ".xml", "-q"]
    if a.html:
        cmd += ["--html", base + ".html"]
    print("+", " ".join(cmd[:2]), f"<{len(files)} files>", *cmd[2 + len(files):], flush=True)
    rc = subprocess.run(cmd).returncode
    if rc not in (0, 1) or not os.path.exists(base + ".json"):
        print(f"::error title=dsa-check shard {a.shard}::check exited {rc} (a usage, I/O or schema problem)")
        return 2
    return 0


def merge(a):
    reports = sorted(glob.glob(os.path.join(a.reports, "**", "shard-*.json"), recursive=True))
    if not reports:
        die(f"--reports {a.reports}: no shard-*.json report found")
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, "report")
    p = subprocess.run([_bin(a.bin), "merge", *reports, "--json", base + ".json", "--junit", base + ".xml",
                        "--html", base + ".html", "-q"], capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if not os.path.exists(base + ".json"):
        print(f"::error title=dsa-check merge::merge exited {p.returncode}: {_escape(p.stderr.strip())}")
        return 2
    rep = json.loads(open(base + ".json").read())
    failing = [r for r in rep["results"] if not r["pass"] and not r.get("informational")]
    for r in failing:
        title = f"{r['stage']} {r['case']}/{r['group']}/{r['tensor']}: {r['verdict']}"
        print(f"::error file={_escape(r['file'], True)},title={_escape(title, True)}::{_escape(r['message'])}")
    for prob in rep.get("problems", []):
        print(f"::error title=dsa-check input problem::{_escape(prob)}")
    s = rep["summary"]
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as f:
            f.write(f"### dsa-check: {s['passed']} passed, {s['failed']} failed, {s['problems']} input problem(s)\n\n")
            if failing:
                f.write("| verdict | stage | check | message |\n|---|---|---|---|\n")
                for r in failing[:50]:
                    msg = r["message"].replace("|", "\\|")[:300]
                    f.write(f"| {r['verdict']} | {r['stage']} | {r['case']}/{r['group']}/{r['tensor']} | {msg} |\n")
    return p.returncode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shard", help="check one shard of a dump folder")
    s.add_argument("--dumps", required=True)
    s.add_argument("--shard", required=True, help="I/N")
    s.add_argument("--out", required=True)
    s.add_argument("--bin")
    s.add_argument("--html", action="store_true", help="also compute the plots (the merged HTML has them only then)")
    m = sub.add_parser("merge", help="merge the shard reports, annotate the failing checks")
    m.add_argument("--reports", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--bin")
    a = ap.parse_args(argv)
    return shard(a) if a.cmd == "shard" else merge(a)


if __name__ == "__main__":
    sys.exit(main())
