#!/usr/bin/env python3
"""The streamed logits check at DeepGEMM's prefill test shape, end to end (issue #40 item 4).

Writes one indexer.logits_ragged dump (S queries x N keys, H heads x D dims, causal ranges ks = 0, ke = N - S + i + 1,
fp32 logits stored like a capture: 4-row chunks, shuffle + gzip 1), its logits the exact reference (`dsa-check
expect`) with one fp32 ulp added to a tenth of them (an fp32 reassociation's error), then times

    dsa-check check DUMP -q --profile fp32-reassoc --json R.json [--stream-over ...]

with GNU time (wall, peak RSS) and prints one line per run. Usage:

    python3 bench/stream_logits.py --bin build/dsa-check --dir /tmp/stream [--S 8192 --N 65536] [--runs 1]
        [--check-args "--stream-over 100000"]

The dump is written once per shape and reused (delete --dir to rebuild it)."""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import h5py
import ml_dtypes
import numpy as np


def e4m3(rng, shape, scale):
    return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def write_inputs(path, S, N, H, D, seed):
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    with h5py.File(tmp, "w") as f:
        g = f.create_group("stream_logits")
        g.attrs.update({"schema_version": 1, "stage": "indexer.logits_ragged", "clean_logits": 1})
        inp = g.create_group("inputs")

        def put(name, a, dtype):
            d = inp.create_dataset(name, data=a, chunks=True, compression="gzip", compression_opts=1, shuffle=True)
            d.attrs["dtype"] = dtype

        put("q", e4m3(rng, (S, H, D), 4.0), "fp8_e4m3fn")
        put("kv", e4m3(rng, (N, D), 4.0), "fp8_e4m3fn")
        put("kv_scale", rng.uniform(0.5, 1.5, N).astype(np.float32) / 448, "float32")
        put("weights", (rng.standard_normal((S, H)) * 0.1).astype(np.float32), "float32")
        put("ks", np.zeros(S, np.int32), "int32")
        put("ke", (N - S + 1 + np.arange(S)).astype(np.int32), "int32")
    os.replace(tmp, path)


def write_dump(bin_, d, S, N, H, D, seed):
    inputs, expected, dump = d / "inputs.h5", d / "expected.h5", d / "stream_logits.h5"
    if dump.exists():
        return dump
    d.mkdir(parents=True, exist_ok=True)
    t = time.time()
    write_inputs(inputs, S, N, H, D, seed)
    print(f"inputs written in {time.time() - t:.1f} s", flush=True)
    t = time.time()
    subprocess.run([bin_, "expect", str(inputs), "--out", str(expected)], check=True)
    print(f"expect (the exact reference) in {time.time() - t:.1f} s", flush=True)
    t = time.time()
    rng = np.random.default_rng(seed + 1)
    tmp = dump.with_suffix(".tmp")
    with h5py.File(expected, "r") as fe, h5py.File(tmp, "w") as fo:
        ge = fe["stream_logits"]
        go = fo.create_group("stream_logits")
        go.attrs.update(dict(ge.attrs))
        fe.copy(ge["inputs"], go, "inputs")
        src = ge["expected/logits"]
        out = go.create_group("outputs").create_dataset("logits", shape=src.shape, dtype=np.float32, chunks=(4, N),
                                                         compression="gzip", compression_opts=1, shuffle=True)
        out.attrs["dtype"] = "float32"
        for r0 in range(0, S, 256):
            x = src[r0:r0 + 256]
            bump = np.isfinite(x) & (rng.random(x.shape) < 0.1)
            x[bump] = np.nextafter(x[bump], np.float32(np.inf))
            out[r0:r0 + 256] = x
    os.replace(tmp, dump)
    print(f"outputs written in {time.time() - t:.1f} s; {dump.stat().st_size / 2**30:.2f} GiB on disk", flush=True)
    inputs.unlink()
    expected.unlink()
    return dump


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--S", type=int, default=8192)
    ap.add_argument("--N", type=int, default=65536)
    ap.add_argument("--H", type=int, default=64)
    ap.add_argument("--D", type=int, default=128)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--check-args", default="")
    a = ap.parse_args()
    dump = write_dump(a.bin, pathlib.Path(a.dir) / f"S{a.S}_N{a.N}_H{a.H}_D{a.D}", a.S, a.N, a.H, a.D, a.seed)
    macs = sum(min(a.N - a.S + 1 + i, a.N) for i in range(a.S)) * a.H * a.D
    for run in range(a.runs):
        rj = pathlib.Path(a.dir) / "r.json"
        cmd = ["/usr/bin/time", "-v", a.bin, "check", str(dump), "-q", "--profile", "fp32-reassoc", "--json", str(rj)]
        cmd += a.check_args.split()
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, DSA_TIMING="1"))
        wall = time.time() - t
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 2**20
        res = json.loads(rj.read_text())["results"]
        verdicts = sorted({r["verdict"] for r in res})
        print(f"run {run}: rc {p.returncode}, {wall:.1f} s wall, {rss:.2f} GiB peak RSS, {macs / wall / 1e9:.1f} G MAC/s, "
              f"verdicts {verdicts}", flush=True)
        for line in p.stderr.splitlines():
            if "time" in line.lower() and "Maximum" not in line and ":" in line and "[" in line:
                print("   ", line)
        if p.returncode not in (0, 1):
            sys.exit(p.stdout + p.stderr)


if __name__ == "__main__":
    main()
