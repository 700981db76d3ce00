"""Runs dsa-check over the hostile-input corpus (tests/hostile/corpus, built by make_corpus.py) and over hostile
filesystem situations made at run time (FIFOs, symlink loops, outputs aimed at inputs). Every run must end within
its time limit with the expected exit code and message, never crash, never report a sanitizer error, never modify
an input, and (outside sanitizer builds) stay under an address-space limit.

    python3 tests/hostile/run_corpus.py --bin build/dsa-check [--asan]

Prints one line per check and closes with 'N passed, M failed'; exit 1 on any failure."""
import argparse
import hashlib
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
FUZZ_FOUND = os.path.join(HERE, "fuzz_found")  # inputs scripts/fuzz.sh found (kept as found; expected.json beside)
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def digest(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else None


class Runner:
    def __init__(self, binary, asan):
        self.bin, self.asan = binary, asan
        self.passed, self.failed = 0, 0

    def run(self, args, cwd, timeout=120):
        def limit():
            if not self.asan:  # ASan reserves terabytes of address space: no RLIMIT_AS there
                resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        try:
            p = subprocess.run([self.bin, *args], cwd=cwd, capture_output=True, timeout=timeout, preexec_fn=limit)
            return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout} s (hang)"

    def check(self, label, args, cwd, rc, contains, inputs=()):
        before = {p: digest(os.path.join(cwd, p)) for p in inputs}
        got, out = self.run(args, cwd)
        why = []
        if got != rc:
            why.append(f"exit {got}, wanted {rc}")
        if contains not in out:
            why.append(f"output lacks {contains!r}")
        why += [f"sanitizer report ({m})" for m in SANITIZER_MARKS if m in out]
        for p, d in before.items():
            if digest(os.path.join(cwd, p)) != d:
                why.append(f"input {p} was modified")
        if why:
            self.failed += 1
            print(f"FAIL {label}: {'; '.join(why)}\n     {out.strip()[:600]}")
        else:
            self.passed += 1
            print(f"ok   {label}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--asan", action="store_true", help="sanitizer build: no address-space limit")
    a = ap.parse_args()
    r = Runner(os.path.abspath(a.bin), a.asan)
    expected = {}
    work = tempfile.mkdtemp(prefix="dsa_hostile_")
    try:
        for d in (CORPUS, FUZZ_FOUND):
            with open(os.path.join(d, "expected.json")) as f:
                e = json.load(f)
            assert not set(e) & set(expected), "a file name in both corpus/ and fuzz_found/"
            expected.update(e)
            for name in os.listdir(d):
                if name != "expected.json":
                    shutil.copy(os.path.join(d, name), work)
        for name, e in sorted(expected.items()):
            r.check(name, [e["cmd"], name], work, e["rc"], e["contains"], inputs=[name])
        # ---- the filesystem around the files ---------------------------------------------------------------
        good = "other.h5"
        os.mkfifo(os.path.join(work, "fifo.h5"))
        r.check("input is a FIFO", ["check", "fifo.h5"], work, 2, "a FIFO, not a regular file")
        os.symlink("loop_b.h5", os.path.join(work, "loop_a.h5"))
        os.symlink("loop_a.h5", os.path.join(work, "loop_b.h5"))
        r.check("input is a symlink loop", ["check", "loop_a.h5", good], work, 2, "a symlink loop", inputs=[good])
        r.check("--json onto the input", ["check", good, "--json", good], work, 2, "refusing to overwrite an input", inputs=[good])
        r.check("--junit onto the input", ["check", good, "--junit", good], work, 2, "refusing to overwrite an input", inputs=[good])
        os.symlink(good, os.path.join(work, "alias.json"))
        r.check("--json onto a symlink to the input", ["check", good, "--json", "alias.json"], work, 2,
                "refusing to overwrite an input", inputs=[good])
        os.link(os.path.join(work, good), os.path.join(work, "hard.json"))
        r.check("--json onto a hard link of the input", ["check", good, "--json", "hard.json"], work, 2,
                "refusing to overwrite an input", inputs=[good])
        r.check("inspect --json onto the input", ["inspect", good, "--json", good], work, 2, "refusing to overwrite an input",
                inputs=[good])
        r.check("cut --out onto the input", ["cut", good, "--case", "t", "--out", good], work, 2, "the input file itself",
                inputs=[good])
        r.check("--json to /dev/null (written through, not replaced)", ["check", good, "--json", "/dev/null"], work, 0,
                "1 passed, 0 failed")
        if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            r.failed += 1
            print("FAIL /dev/null is no longer a character device")
        os.mkfifo(os.path.join(work, "report.fifo"))
        r.check("--json to a FIFO nobody reads (no hang)", ["check", good, "--json", "report.fifo"], work, 2,
                "a FIFO with no reader")
        r.check("--junit into a directory", ["check", good, "--junit", "."], work, 2, "a directory")
        r.check("--html into a directory", ["check", good, "--html", "."], work, 2, "a directory")
        r.check("--html over the checked file", ["check", good, "--html", good], work, 2, "refusing to overwrite an input",
                inputs=[good])
        r.check("report from a file that is no JSON report", ["report", good, "--html", "r.html"], work, 2,
                "expected a report written by dsa-check check --json")
        os.symlink("report_target.json", os.path.join(work, "report_link.json"))
        r.check("--json through a dangling symlink", ["check", good, "--json", "report_link.json"], work, 2, "a dangling symlink")
        os.symlink("real_report.json", os.path.join(work, "ok_link.json"))
        open(os.path.join(work, "real_report.json"), "w").close()
        r.check("--json through a symlink to a report", ["check", good, "--json", "ok_link.json"], work, 0, "1 passed")
        if not os.path.islink(os.path.join(work, "ok_link.json")) or os.path.getsize(os.path.join(work, "real_report.json")) == 0:
            r.failed += 1
            print("FAIL the symlink was replaced instead of its target written")
        r.check("check --max-memory below one tensor", ["check", good, "--max-memory", "8"], work, 2,
                "within the memory budget")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{r.passed} passed, {r.failed} failed")
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
