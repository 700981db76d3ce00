"""Shared pytest fixtures: where the dsa-check binary and its build directory are.

DSA_CHECK_BIN (default build/dsa-check, relative to the repo root) names the CLI; the build directory is the
binary's directory (or DSA_BUILD_DIR). Helper tools built by tests/CMakeLists.txt sit beside the CLI.

Import paths are set once, by the repo root's pytest.ini (pythonpath = . scripts/dsa_dump scripts/examples): the
tests import `reference` (the numpy models), `dsa_dump` (the capture kit) and the examples directly.
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _abs(p: str) -> pathlib.Path:
    path = pathlib.Path(p)
    return path if path.is_absolute() else (REPO_ROOT / path)


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def dsa_check_bin() -> pathlib.Path:
    path = _abs(os.environ.get("DSA_CHECK_BIN", "build/dsa-check"))
    if not path.is_file():
        pytest.fail(f"dsa-check binary not found at {path}: build first (scripts/build.sh) or set DSA_CHECK_BIN")
    return path


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    env = os.environ.get("DSA_BUILD_DIR")
    return _abs(env) if env else _abs(os.environ.get("DSA_CHECK_BIN", "build/dsa-check")).parent


@pytest.fixture(scope="session")
def numerics_tables_bin(build_dir) -> pathlib.Path:
    path = _abs(os.environ["DSA_NUMERICS_TABLES"]) if "DSA_NUMERICS_TABLES" in os.environ else build_dir / "dsa_numerics_tables"
    if not path.is_file():
        pytest.fail(f"dsa_numerics_tables not found at {path} (built by tests/CMakeLists.txt); set DSA_NUMERICS_TABLES")
    return path


@pytest.fixture(scope="session")
def fp4_tool(numerics_tables_bin, tmp_path_factory):
    """`dsa_numerics_tables fp4 ARGS... IN OUT` on fp32 values x: returns the bytes it writes (uint8). The C++ FP4 /
    MXFP8 codecs and KV records, for the tests against the numpy models (test_fp4_codecs, test_kv_records)."""
    d = tmp_path_factory.mktemp("fp4")

    def run(*args, x):
        src, dst = d / "in.bin", d / "out.bin"
        np.ascontiguousarray(x, dtype="<f4").tofile(src)
        p = subprocess.run([str(numerics_tables_bin), "fp4", *map(str, args), str(src), str(dst)], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
        return np.fromfile(dst, dtype=np.uint8)

    return run


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return _abs(os.environ.get("DSA_SHARED_DIR", str(REPO_ROOT.parent / "shared")))


@pytest.fixture
def run_cli(dsa_check_bin):
    """Runs dsa-check with arguments; returns CompletedProcess (text)."""

    def run(*args, check_rc=None):
        p = subprocess.run([str(dsa_check_bin), *map(str, args)], capture_output=True, text=True, timeout=120)
        if check_rc is not None:
            assert p.returncode == check_rc, f"rc {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        return p

    return run


@pytest.fixture(scope="module")
def cli(dsa_check_bin, request):
    """The built CLI's path (str), also the capture kit's schema source and validator for the module: DSA_CHECK_BIN
    is set to it and the kit's schema cache cleared, both restored afterwards. A module that sets
    CLI_STAGES = (stage names, ...) is skipped when the binary does not have all of them."""
    from dsa_dump import schema as dsa_schema

    wanted = getattr(request.module, "CLI_STAGES", ())
    if wanted:
        r = subprocess.run([str(dsa_check_bin), "stages", "--json"], capture_output=True, text=True, timeout=60)
        have = {s["name"] for s in json.loads(r.stdout)["stages"]} if r.returncode == 0 else set()
        missing = [s for s in wanted if s not in have]
        if missing:
            pytest.skip(f"{dsa_check_bin} has no stage(s) {', '.join(missing)} yet")
    old = os.environ.get("DSA_CHECK_BIN")
    os.environ["DSA_CHECK_BIN"] = str(dsa_check_bin)
    dsa_schema._cache.clear()
    yield str(dsa_check_bin)
    dsa_schema._cache.clear()
    if old is None:
        os.environ.pop("DSA_CHECK_BIN", None)
    else:
        os.environ["DSA_CHECK_BIN"] = old
