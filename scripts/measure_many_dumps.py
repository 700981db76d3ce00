#!/usr/bin/env python3
"""Peak RSS and open file descriptors of one `dsa-check check` over many small dumps (issue #35 item 3).

    scripts/measure_many_dumps.py --bin build/dsa-check [--counts 1000,10000] [--case topk_constant_rows]

Writes one small golden, copies it N times into a temp directory, runs `check -q` over all N copies in one
invocation, samples /proc/PID/fd and VmRSS every 5 ms while it runs, and takes the peak RSS from wait4's rusage.
Prints one line per N; docs/checking.md quotes the numbers (machine and date).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def measure(bin_, files):
    t0 = time.monotonic()
    p = subprocess.Popen([bin_, "check", "-q", *files], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_fd = 0
    while True:
        try:
            peak_fd = max(peak_fd, len(os.listdir(f"/proc/{p.pid}/fd")))
        except (FileNotFoundError, ProcessLookupError):
            pass
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.005)
    err = p.stderr.read().decode(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    return rc, peak_fd, ru.ru_maxrss, time.monotonic() - t0, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/dsa-check")
    ap.add_argument("--counts", default="1000,10000")
    ap.add_argument("--case", default="topk_constant_rows")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dsa_many_")
    try:
        r = subprocess.run([a.bin, "golden", "--case", a.case, "--out", work], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"golden failed: {r.stderr}")
        src = os.path.join(work, f"{a.case}.h5")
        size = os.path.getsize(src)
        ok = True
        for n in [int(x) for x in a.counts.split(",")]:
            d = os.path.join(work, f"n{n}")
            os.mkdir(d)
            files = []
            for i in range(n):
                f = os.path.join(d, f"d{i:05d}.h5")
                shutil.copyfile(src, f)
                files.append(f)
            rc, fds, rss_kib, sec, err = measure(a.bin, files)
            print(f"N={n} dumps of {size} B ({a.case}): rc {rc}, peak open fds {fds}, peak RSS {rss_kib / 1024:.1f} MiB "
                  f"({rss_kib / n:.1f} KiB/dump), {sec:.1f} s")
            if rc != 0:
                print(err[-2000:])
                ok = False
            shutil.rmtree(d)
        sys.exit(0 if ok else 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
