#!/usr/bin/env python3
"""The measured MUFU tables of the flashmla-sm90 profile (src/profiles/flashmla_sm90/sm90_mufu.bin; read by
reference/flashmla_sm90.py and embedded in the C++ emulation).

    scripts/flashmla_mufu_tables.py list [BLOB]
    scripts/flashmla_mufu_tables.py add NAME DUMP [BLOB]

`add` stores a device dump (DUMP: int32 little-endian, the first value then the differences of consecutive values,
optionally .xz) as table NAME, replacing a table of that name. Blob format: "DSAMUFU1", u32 count, per table: name
(24 bytes), u32 width (8 / 32: the differences' width), u64 count n, i32 first value, u64 length z, z bytes of zlib
holding the n - 1 differences. The blob is written to a temp file and renamed."""
import lzma
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from reference.flashmla_sm90 import read_tables  # noqa: E402

BLOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "profiles", "flashmla_sm90", "sm90_mufu.bin")


def read(path):
    """[(name, int64 values)] in file order (reference/flashmla_sm90.py read_tables: one reader of the format)."""
    return read_tables(path)


def write(path, tables):
    parts = [b"DSAMUFU1", struct.pack("<I", len(tables))]
    for name, v in tables:
        d = np.diff(v.astype(np.int64))
        width = 8 if d.size == 0 or (d.min() >= -128 and d.max() <= 127) else 32
        if width == 32 and (d.min() < -2 ** 31 or d.max() >= 2 ** 31):
            raise ValueError(f"table {name}: differences beyond int32")
        z = zlib.compress(d.astype({8: np.int8, 32: np.int32}[width]).tobytes(), 9)
        parts += [name.encode().ljust(24, b"\0"), struct.pack("<IQiQ", width, len(v), int(v[0]), len(z)), z]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(parts))
    os.replace(tmp, path)


def main(argv):
    if len(argv) >= 1 and argv[0] == "list":
        for name, v in read(argv[1] if len(argv) > 1 else BLOB):
            print(f"{name:24s} {len(v):9d} values, first {v[0]:#010x}")
        return 0
    if len(argv) in (3, 4) and argv[0] == "add":
        name, dump = argv[1], argv[2]
        blob = argv[3] if len(argv) > 3 else BLOB
        raw = (lzma.open if dump.endswith(".xz") else open)(dump, "rb").read()
        d = np.frombuffer(raw, "<i4").astype(np.int64)
        v = (np.cumsum(d) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(np.int64)
        tables = [(n, t) for n, t in read(blob) if n != name] + [(name, v)]
        write(blob, tables)
        print(f"{blob}: table {name}, {len(v)} values")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
