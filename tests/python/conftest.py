"""Shared pytest fixtures: where the dsa-check binary and its build directory are.

DSA_CHECK_BIN (default build/dsa-check, relative to the repo root) names the CLI; the build directory is the
binary's directory (or DSA_BUILD_DIR). Helper tools built by tests/CMakeLists.txt sit beside the CLI.
"""
import os
import pathlib
import subprocess

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
