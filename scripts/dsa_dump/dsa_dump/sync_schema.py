"""Refresh the shipped schema copy (dsa_dump/stages.json) from `dsa-check stages --json`.

    python -m dsa_dump.sync_schema [--bin PATH/TO/dsa-check] [--check]

--check compares without writing: exit 0 when the shipped copy equals the CLI's output, 1 when it differs
(re-run without --check), 2 when the binary cannot be run. Run it whenever the stage registry changes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from .schema import SHIPPED_SCHEMA, find_dsa_check, schema_from_cli


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dsa_dump.sync_schema", description=__doc__.splitlines()[0])
    ap.add_argument("--bin", help="dsa-check binary (default: $DSA_CHECK_BIN, else dsa-check on PATH)")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 if the shipped copy is stale")
    ap.add_argument("--out", default=str(SHIPPED_SCHEMA), help="where to write (default: the package copy)")
    a = ap.parse_args(argv)
    b = find_dsa_check(a.bin)
    if b is None:
        print("error: dsa-check binary not found (pass --bin or set DSA_CHECK_BIN)", file=sys.stderr)
        return 2
    try:
        cli = schema_from_cli(b)
    except Exception as e:  # noqa: BLE001 - report any failure of the binary as a usage error
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        with open(a.out, encoding="utf-8") as f:
            shipped = json.load(f)
    except (OSError, ValueError):
        shipped = None
    if a.check:
        if shipped == cli:
            print(f"{a.out}: up to date with {b}")
            return 0
        print(f"{a.out}: differs from `{b} stages --json`; run python -m dsa_dump.sync_schema", file=sys.stderr)
        return 1
    d = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(prefix=".stages.json.", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(cli, f, indent=2, sort_keys=False)
            f.write("\n")
        os.replace(tmp, a.out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(f"{a.out}: {'unchanged' if shipped == cli else 'updated'} from {b} ({len(cli['stages'])} stages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
