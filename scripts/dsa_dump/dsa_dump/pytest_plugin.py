"""pytest plugin: gate a kernel repository's CI on dsa-check goldens.

Installed with the kit (entry point ``pytest11``), or loaded with ``pytest -p dsa_dump.pytest_plugin``::

    import pytest

    @pytest.mark.dsa_golden(stages="indexer.topk")
    def test_topk(dsa_case):
        ins, a = dsa_case.inputs(framework="torch"), dsa_case.attrs
        idx = my_topk(ins["logits"], ins["lengths"], k=a["k"])
        dsa_case.check({"indices": idx})          # fails the test with dsa-check's verdict lines

The marker ``dsa_golden(stages=..., cases=..., files=...)`` parametrizes the ``dsa_case`` fixture over every
matching golden case (ids ``<file stem>::<case name>``, sorted, so xdist workers collect the same ids); a marker
that matches nothing is a collection error that lists what exists. Goldens: the bundled catalogue (``dsa-check
golden --committed``, run once into pytest's cache directory, keyed by the binary's path, size and mtime; written to
a temp dir and renamed, so concurrent xdist workers are safe) plus your own from ``--dsa-goldens DIR`` (repeatable;
a directory of .h5 files or one file), else the ini option ``dsa_goldens``, else the env ``DSA_GOLDENS``
(os.pathsep-separated). ``--dsa-no-bundled-goldens`` (ini ``dsa_bundled_goldens = false``, env
``DSA_NO_BUNDLED_GOLDENS=1``) leaves the bundled catalogue out: only your goldens. The
binary: ``--dsa-check-bin``, ini ``dsa_check_bin``, env ``DSA_CHECK_BIN``, else ``dsa-check`` on PATH.
``dsa_case.check(outputs)`` writes a one-case file (the golden's inputs bit for bit, the given outputs, no
expected/) under the test's tmp_path, runs ``dsa-check check FILE --json REPORT`` and raises ``DsaCheckFailure``
(an AssertionError) with the verdict lines and the first divergence when the check fails (exit 1), or
``DsaCheckInputError`` with the CLI's error lines on exit 2 (schema / input problem). ``--dsa-keep DIR`` copies
every checked file and its report to ``DIR/<test id>/``.
"""
from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import pytest

from . import dtypes as _dt
from .golden import case_inputs
from .h5 import Case, DumpWriter, _read_attr, read_dump
from .schema import apply_attr_defaults, find_dsa_check, find_stage, load_schema

MARKER = "dsa_golden"
FIXTURE = "dsa_case"
CHECK_TIMEOUT_S = 600
_STASH_KEY = pytest.StashKey["_State"]()


class DsaCheckFailure(AssertionError):
    """dsa-check judged the kernel's outputs wrong (exit 1). ``results`` holds the report's results, ``report``
    the whole JSON report, ``dump`` the checked file."""

    def __init__(self, message: str, report: Optional[Dict[str, Any]] = None, dump: Optional[str] = None):
        super().__init__(message)
        self.report = report or {}
        self.results = list(self.report.get("results", []))
        self.dump = dump


class DsaCheckInputError(DsaCheckFailure):
    """dsa-check could not judge the file (exit 2: wrong output name / dtype / shape, bad option, I/O)."""


class DsaCheckUsageError(pytest.UsageError, pytest.Collector.CollectError):
    """A configuration problem (no binary, no goldens). A pytest.UsageError; raised while collecting it is shown
    as a collection error with just its message (no traceback)."""


# ---------------------------------------------------------------------------------------------------------------
# options
def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("dsa_check", "dsa-check goldens (dsa_dump.pytest_plugin)")
    g.addoption("--dsa-goldens", action="append", default=None, metavar="PATH",
                help="golden directory (its *.h5) or file; repeatable. Default: ini dsa_goldens, env DSA_GOLDENS, "
                     "else `dsa-check golden --committed` generated once into the pytest cache")
    g.addoption("--dsa-check-bin", default=None, metavar="PATH",
                help="dsa-check binary (default: ini dsa_check_bin, env DSA_CHECK_BIN, dsa-check on PATH)")
    g.addoption("--dsa-keep", default=None, metavar="DIR",
                help="copy every file dsa_case.check() writes, and its JSON report, to DIR/<test id>/")
    parser.addini("dsa_goldens", type="paths", default=[],
                  help="golden directories or files (relative to the ini file) for @pytest.mark.dsa_golden")
    g.addoption("--dsa-no-bundled-goldens", action="store_true", default=False,
                help="only the goldens of --dsa-goldens / dsa_goldens / DSA_GOLDENS, without the bundled catalogue")
    parser.addini("dsa_bundled_goldens", type="bool", default=True,
                  help="add the bundled catalogue (dsa-check golden --committed) to your goldens (default true)")
    parser.addini("dsa_check_bin", default="", help="dsa-check binary (relative to the ini file)")


@dataclass
class _State:
    config: pytest.Config
    binary: Optional[str] = None
    binary_looked_up: bool = False
    golden_paths: Optional[List[Path]] = None
    golden_source: str = ""
    index: Dict[Path, List["GoldenRef"]] = field(default_factory=dict)
    tempdirs: List[str] = field(default_factory=list)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(stages=None, cases=None, files=None): parametrize the `{FIXTURE}` fixture over the dsa-check "
        "golden cases of these stages (name or glob, or a list), case names (globs) and golden files")
    config.stash[_STASH_KEY] = _State(config)
    if config.getoption("dsa_check_bin"):  # given on this command line: wrong now is wrong for every test
        _require_binary(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = config.stash.get(_STASH_KEY, None)
    if st is not None:
        for d in st.tempdirs:
            shutil.rmtree(d, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> Optional[str]:
    st = config.stash.get(_STASH_KEY, None)
    if st is None:
        return None
    src = _configured_golden_paths(config)
    bundled = "the bundled catalogue (generated on first use: `dsa-check golden --committed`)"
    where = ", ".join(str(p) for p in src[0]) if src[0] else bundled
    if src[0] and _bundled_wanted(config):
        where = f"{bundled} + {where}"
    return f"dsa-check: {_lookup_binary(st) or 'not found'}; goldens: {where}"


def _state(config: pytest.Config) -> _State:
    return config.stash[_STASH_KEY]


def _invocation_dir(config: pytest.Config) -> Path:
    return Path(config.invocation_params.dir)


def _binary_candidates(config: pytest.Config) -> Tuple[Optional[str], str]:
    opt = config.getoption("dsa_check_bin")
    if opt:
        return str(_invocation_dir(config) / opt), "--dsa-check-bin"
    ini = config.getini("dsa_check_bin")
    if ini:
        base = config.inipath.parent if config.inipath else _invocation_dir(config)
        return str(base / ini), "ini dsa_check_bin"
    if os.environ.get("DSA_CHECK_BIN"):
        return os.environ["DSA_CHECK_BIN"], "DSA_CHECK_BIN"
    return None, "PATH"


def _lookup_binary(st: _State) -> Optional[str]:
    if not st.binary_looked_up:
        cand, _ = _binary_candidates(st.config)
        b = find_dsa_check(cand)
        st.binary = os.path.abspath(b) if b else None
        st.binary_looked_up = True
    return st.binary


def _require_binary(config: pytest.Config) -> str:
    st = _state(config)
    b = _lookup_binary(st)
    if b is None:
        cand, how = _binary_candidates(config)
        if cand:
            why = f"{how} = {cand} is not an executable file"
        else:
            why = "no dsa-check on PATH"
        raise DsaCheckUsageError(
            f"dsa_dump.pytest_plugin: dsa-check binary not found ({why}); pass --dsa-check-bin PATH, set "
            "DSA_CHECK_BIN or the ini option dsa_check_bin, or put dsa-check on PATH")
    return b


# ---------------------------------------------------------------------------------------------------------------
# goldens
def _configured_golden_paths(config: pytest.Config) -> Tuple[List[Path], str]:
    opt = config.getoption("dsa_goldens")
    if opt:
        return [(_invocation_dir(config) / p).resolve() for p in opt], "--dsa-goldens"
    ini = config.getini("dsa_goldens")
    if ini:
        return [Path(p).resolve() for p in ini], "ini dsa_goldens"
    env = os.environ.get("DSA_GOLDENS")
    if env:
        return [Path(p).resolve() for p in env.split(os.pathsep) if p], "DSA_GOLDENS"
    return [], ""


def _binary_key(binary: str) -> str:
    real = os.path.realpath(binary)
    s = os.stat(real)
    return hashlib.sha256(f"{real}\0{s.st_size}\0{s.st_mtime_ns}".encode()).hexdigest()[:20]


def _generate(binary: str, out: str) -> None:
    r = subprocess.run([binary, "golden", "--committed", "--out", out], capture_output=True, text=True,
                       timeout=CHECK_TIMEOUT_S)
    if r.returncode != 0:
        raise DsaCheckUsageError(f"dsa_dump.pytest_plugin: `{binary} golden --committed --out {out}` exited "
                                f"{r.returncode}: {(r.stderr or r.stdout).strip()}")


def _generated_goldens(config: pytest.Config) -> Path:
    """The committed catalogue of this binary, generated once per binary into the pytest cache (temp dir +
    rename: the first of concurrent workers wins, the others drop their copy), else into a temp dir."""
    st = _state(config)
    binary = _require_binary(config)
    key = _binary_key(binary)
    cache = getattr(config, "cache", None)
    base: Optional[Path] = None
    if cache is not None:
        try:
            base = Path(cache.mkdir("dsa_check_goldens"))
        except OSError:
            base = None
    if base is None:  # -p no:cacheprovider or an unwritable cache: a temp dir for this process
        d = tempfile.mkdtemp(prefix="dsa-goldens-")
        st.tempdirs.append(d)
        _generate(binary, d)
        return Path(d)
    final = base / key
    if (final / "MANIFEST").is_file():
        return final
    tmp = tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=str(base))
    try:
        _generate(binary, tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "MANIFEST").is_file():  # not a concurrent winner: a damaged entry
                raise DsaCheckUsageError(f"dsa_dump.pytest_plugin: cannot install generated goldens at {final} "
                                        "(remove it or run pytest --cache-clear)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


@dataclass(frozen=True)
class GoldenRef:
    """One case of a golden file, as collected (name, stage and attrs only; tensors are read by the fixture)."""

    file: str
    name: str
    stage: str
    attrs: Tuple[Tuple[str, Any], ...]

    @property
    def id(self) -> str:
        return f"{Path(self.file).stem}::{self.name}"


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _index_file(path: Path) -> List[GoldenRef]:
    import h5py

    refs = []
    try:
        with h5py.File(str(path), "r") as f:
            for name, g in f.items():
                if not isinstance(g, h5py.Group) or "stage" not in g.attrs:
                    continue
                attrs = tuple(sorted((k, _freeze(_read_attr(v))) for k, v in g.attrs.items()
                                     if k not in ("stage", "schema_version")))
                refs.append(GoldenRef(str(path), name, _read_attr(g.attrs["stage"]), attrs))
    except OSError as e:
        raise DsaCheckUsageError(f"dsa_dump.pytest_plugin: {path}: not a readable HDF5 golden file ({e})") from None
    return refs


def _expand(paths: Iterable[Path], what: str) -> List[Path]:
    files: List[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.glob("*.h5")))
        elif p.is_file():
            files.append(p)
        else:
            hits = sorted(Path(x) for x in _glob(str(p)))
            if not hits:
                raise DsaCheckUsageError(f"dsa_dump.pytest_plugin: {what}: {p} does not exist")
            files.extend(hits)
    return files


def _glob(pattern: str) -> List[str]:
    import glob

    return [x for x in glob.glob(pattern) if os.path.isfile(x)]


def _bundled_wanted(config: pytest.Config) -> bool:
    return not (config.getoption("dsa_no_bundled_goldens") or not config.getini("dsa_bundled_goldens")
                or os.environ.get("DSA_NO_BUNDLED_GOLDENS", "") not in ("", "0"))


def _default_goldens(config: pytest.Config) -> Tuple[List[Path], str]:
    """Your goldens (configured paths) plus, unless left out, the bundled catalogue."""
    st = _state(config)
    if st.golden_paths is None:
        paths, how = _configured_golden_paths(config)
        files: List[Path] = _expand(paths, how) if paths else []
        src = [f"{how} " + os.pathsep.join(str(p) for p in paths)] if paths else []
        if _bundled_wanted(config) or not paths:
            d = _generated_goldens(config)
            files = _expand([d], "generated goldens") + files
            src.insert(0, f"generated goldens {d}")
        st.golden_paths = files
        st.golden_source = " + ".join(src)
    return st.golden_paths, st.golden_source


def _refs(config: pytest.Config, files: Sequence[Path]) -> List[GoldenRef]:
    st = _state(config)
    out: List[GoldenRef] = []
    for f in files:
        f = f.resolve()
        if f not in st.index:
            st.index[f] = _index_file(f)
        out.extend(st.index[f])
    return sorted(out, key=lambda r: (Path(r.file).stem, r.name, r.file))


def _as_list(v: Any, what: str) -> Optional[List[str]]:
    if v is None:
        return None
    if isinstance(v, (str, os.PathLike)):
        return [os.fspath(v)]
    if isinstance(v, (list, tuple, set, frozenset)):
        items = sorted(v) if isinstance(v, (set, frozenset)) else list(v)
        if all(isinstance(x, (str, os.PathLike)) for x in items):
            return [os.fspath(x) for x in items]
    raise TypeError(f"{what}: expected a string or a list of strings, found {v!r}")


def _marker_args(mark: pytest.Mark) -> Tuple[Optional[List[str]], Optional[List[str]], Optional[List[str]]]:
    kw = dict(mark.kwargs)
    unknown = set(kw) - {"stages", "cases", "files"}
    if unknown:
        raise TypeError(f"unknown argument(s) {', '.join(sorted(unknown))} (takes stages=, cases=, files=)")
    if len(mark.args) > 1:
        raise TypeError("takes at most one positional argument (stages)")
    if mark.args:
        if "stages" in kw:
            raise TypeError("stages given both positionally and as stages=")
        kw["stages"] = mark.args[0]
    return (_as_list(kw.get("stages"), "stages"), _as_list(kw.get("cases"), "cases"),
            _as_list(kw.get("files"), "files"))


def _matches(value: str, patterns: Optional[List[str]]) -> bool:
    return patterns is None or any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _catalogue(refs: Sequence[GoldenRef]) -> str:
    by_stage: Dict[str, List[str]] = {}
    for r in refs:
        by_stage.setdefault(r.stage, []).append(r.name)
    return "; ".join(f"{s}: {', '.join(n)}" for s, n in sorted(by_stage.items())) or "no cases"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker(MARKER)
    if mark is None:
        return
    where = f"@pytest.mark.{MARKER} on {metafunc.definition.nodeid}"
    if FIXTURE not in metafunc.fixturenames:
        pytest.fail(f"{where}: the test must take the `{FIXTURE}` fixture", pytrace=False)
    try:
        stages, cases, files = _marker_args(mark)
        bad = ""
    except TypeError as e:
        bad = str(e)
    if bad:
        pytest.fail(f"{where}: {bad}", pytrace=False)
    config = metafunc.config
    if files is not None:
        base = Path(str(metafunc.definition.path)).parent
        paths = []
        for f in files:
            p = Path(f)
            if not p.is_absolute():
                here, root = base / p, Path(str(config.rootpath)) / p
                p = here if (here.exists() or _glob(str(here))) else root
            paths.append(p)
        golden_files = _expand(paths, f"{where}: files=")
        source = "files= " + ", ".join(files)
    else:
        golden_files, source = _default_goldens(config)
    refs = _refs(config, golden_files)
    chosen = [r for r in refs if _matches(r.stage, stages) and _matches(r.name, cases)]
    if not chosen:
        pytest.fail(f"{where}: no golden case matches stages={stages} cases={cases} in {source} "
                    f"({len(refs)} case(s) there: {_catalogue(refs)})", pytrace=False)
    metafunc.parametrize(FIXTURE, chosen, ids=[r.id for r in chosen], indirect=True)


# ---------------------------------------------------------------------------------------------------------------
# the fixture
_case_cache: Dict[Tuple[str, int, int], Dict[str, Case]] = {}


def _read_case(file: str, name: str) -> Case:
    s = os.stat(file)
    key = (file, s.st_size, s.st_mtime_ns)
    if key not in _case_cache:
        _case_cache[key] = {c.name: c for c in read_dump(file)}
    return copy.deepcopy(_case_cache[key][name])


def _tolerance_args(tol: Any) -> List[str]:
    """None: the stage's default; "sm90-fp8": --profile; 1e-3: --rtol for every bounded tensor;
    {"profile": .., "rtol": 1e-3 | "logits:1e-3" | [..], "atol": ..}; a list: several of these."""
    if tol is None:
        return []
    if isinstance(tol, str):
        return ["--profile", tol]
    if isinstance(tol, (int, float)) and not isinstance(tol, bool):
        return ["--rtol", repr(float(tol))]
    if isinstance(tol, Mapping):
        args: List[str] = []
        for k, v in tol.items():
            if k == "profile":
                args += ["--profile", str(v)]
            elif k in ("rtol", "atol"):
                for item in (v if isinstance(v, (list, tuple)) else [v]):
                    args += [f"--{k}", item if isinstance(item, str) else repr(float(item))]
            else:
                raise ValueError(f"tolerance: unknown key {k!r} (profile, rtol, atol)")
        return args
    if isinstance(tol, (list, tuple)):
        return [a for t in tol for a in _tolerance_args(t)]
    raise TypeError(f"tolerance: expected None, a profile name, a float, a dict or a list, found {tol!r}")


def _num(v: Any) -> str:
    if isinstance(v, float):
        import numpy as np

        f32 = np.float32(v)
        return str(f32) if float(f32) == v else repr(v)
    return str(v)


def _result_line(r: Mapping[str, Any]) -> str:
    return (f"{r.get('verdict', '?'):<14} {r.get('case', '?')}/{r.get('group', '?')}/{r.get('tensor', '?')}  "
            f"[{r.get('stage', '?')}]  {r.get('message', '')}")


def _failure_text(report: Mapping[str, Any], what: str, tail: str) -> str:
    """The first line stands alone (JUnit's failure message, CI annotations): the first failing tensor's verdict and
    location; then dsa-check's verdict lines, the first divergence, the golden and the checked file."""
    bad = [r for r in report.get("results", []) if not r.get("pass", False)]
    head = f"dsa-check check failed on {what}"
    if bad:
        r, first = bad[0], bad[0].get("first") or {}
        where = str(first.get("where", "")).split(": ")[0]  # top-k: "row 4 col 0: <why>" -> "row 4 col 0"
        more = f" (+{len(bad) - 1} more failing tensor(s))" if len(bad) > 1 else ""
        head = (f"dsa-check: {r.get('verdict')} {r.get('case')}/{r.get('group')}/{r.get('tensor')} [{r.get('stage')}]"
                + (f" at {where}" if where else "") + more)
    lines = [head]
    for r in bad:
        lines.append(_result_line(r))
        for n in r.get("notes", []) or []:
            if n not in r.get("message", ""):
                lines.append(f"    note: {n}")
    fd = list(report.get("first_divergence", []) or [])
    if not fd and bad:  # a one-case file: the CLI prints no first-divergence line; name the first failing element
        r = bad[0]
        first = r.get("first") or {}
        loc = f" at {first['where']}" if first.get("where") else ""
        vals = (f" (out {_num(first.get('out'))}, ref {_num(first.get('ref'))})"
                if loc and r.get("kind") != "topk_set" and "out" in first else "")
        fd = [f"first divergence: stage {r.get('stage')} (case '{r.get('case')}') {r.get('group')}/{r.get('tensor')}"
              f"{loc}{vals}"]
    lines.extend(fd)
    lines.append(tail)
    return "\n".join(lines)


class CheckResults(list):
    """The report's results (a list of dicts: verdict, pass, message, case, stage, tensor, group, first, notes,
    ...); ``.report`` is the whole JSON report, ``.dump`` the checked file, ``.stdout`` the console output."""

    report: Dict[str, Any]
    dump: str
    stdout: str


class CaseAttrs(dict):
    """A case's attrs (a dict); a missing name raises KeyError naming the case, its stage and the attrs it has."""

    def __init__(self, data: Mapping[str, Any], where: str):
        super().__init__(data)
        self._where = where

    def __missing__(self, key: Any) -> Any:
        raise KeyError(f"{self._where} has no attr {key!r}; its attrs: {', '.join(sorted(self)) or 'none'} "
                       f"(`dsa-check stages STAGE` lists what each attr means)")


class DsaCase:
    """One golden case, handed to a test by the ``dsa_case`` fixture."""

    def __init__(self, ref: GoldenRef, config: pytest.Config, tmp_path: Path, nodeid: str):
        self._ref = ref
        self._config = config
        self._tmp = Path(tmp_path)
        self._nodeid = nodeid
        self._case: Optional[Case] = None
        self._checks = 0
        self.name: str = ref.name
        self.stage: str = ref.stage
        self.file: str = ref.file

    def __repr__(self) -> str:
        return f"DsaCase({self.name!r}, stage={self.stage!r}, file={self.file!r})"

    @property
    def id(self) -> str:
        return self._ref.id

    @property
    def case(self) -> Case:
        """The dsa_dump Case (inputs, expected, raw bits, dtypes; a private copy)."""
        if self._case is None:
            self._case = _read_case(self.file, self.name)
        return self._case

    @property
    def stored_attrs(self) -> Dict[str, Any]:
        """The attrs as stored in the golden file."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self._ref.attrs}

    @property
    def attrs(self) -> Dict[str, Any]:
        """The attrs as dsa-check reads them: the stored ones plus the stage's defaults for the others
        (``kernel`` and ``short_rows`` have no default and are absent unless stored)."""
        st = _state(self._config)
        schema = load_schema(_lookup_binary(st))
        stage = find_stage(schema, self.stage)
        a = apply_attr_defaults(stage, self.stored_attrs) if stage else self.stored_attrs
        return CaseAttrs(a, f"case '{self.name}' of {self.file} (stage {self.stage})")

    @property
    def expected(self) -> Dict[str, Any]:
        """The golden's expected/ tensors (numpy, logical dtypes) — for debugging; check() judges against the
        CPU reference, not these."""
        return self.case.expected

    def inputs(self, framework: str = "auto", device: str = "cpu") -> Dict[str, Any]:
        """Fresh copies of the inputs: torch tensors with their logical dtypes on `device` (framework "torch", or
        "auto" when torch is importable), else numpy / ml_dtypes arrays."""
        return case_inputs(self.case, framework, device)

    def run(self, outputs: Mapping[str, Any], tolerance: Any = None, no_emulation: bool = False,
            extra_args: Sequence[str] = ()) -> Tuple[int, Optional[Dict[str, Any]], str, str, str]:
        """Writes the one-case file and runs dsa-check check on it without judging: (exit code, JSON report or
        None, stdout, stderr, dump path)."""
        if not isinstance(outputs, Mapping) or not outputs:
            raise TypeError(f"{self.name}: outputs must be a non-empty dict of output tensors, found {outputs!r}")
        binary = _require_binary(self._config)
        self._checks += 1
        stem = self.name if self._checks == 1 else f"{self.name}.{self._checks}"
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)
        dump = self._tmp / f"{stem}.h5"
        report_path = self._tmp / f"{stem}.report.json"
        c = self.case
        inputs = {n: _dt.Bits(c.raw[f"inputs/{n}"], c.dtypes[f"inputs/{n}"]) for n in c.inputs}
        # validate=False: dsa-check check itself reports a wrong name / dtype / shape (exit 2) with its message.
        with DumpWriter(str(dump), validate=False) as w:
            w.add_case(c.name, c.stage, inputs, dict(outputs), None, c.attrs)
        cmd = [binary, "check", str(dump), "--json", str(report_path), "--color", "never",
               *_tolerance_args(tolerance), *(["--no-emulation"] if no_emulation else []), *map(str, extra_args)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
        report = None
        if report_path.is_file():
            try:
                with open(report_path, encoding="utf-8") as f:
                    report = json.load(f)
            except ValueError:
                report = None
        keep = self._config.getoption("dsa_keep")
        if keep:
            d = _invocation_dir(self._config) / keep / re.sub(r"[^A-Za-z0-9_.-]+", "_", self._nodeid)
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dump, d / dump.name)
            if report_path.is_file():
                shutil.copy2(report_path, d / report_path.name)
            dump = d / dump.name
        return r.returncode, report, r.stdout, r.stderr, str(dump)

    def check(self, outputs: Mapping[str, Any], tolerance: Any = None, no_emulation: bool = False,
              extra_args: Sequence[str] = ()) -> CheckResults:
        """Judges `outputs` (a dict {"logits": tensor} of the stage's output names; torch tensors on any device,
        numpy / ml_dtypes arrays, dsa_dump.Bits) against dsa-check's CPU reference for this case's inputs.

        tolerance: None (the stage's default), a profile name ("sm90-fp8", "fp32-reassoc", "exact",
        "bf16-logits"), a float (rtol for every bounded tensor), {"profile": .., "rtol": .., "atol": ..} (values
        like 1e-3 or "logits:1e-3", or lists), or a list of these. no_emulation: judge a case whose `kernel`
        attr has a bit-exact emulation by its bound only. extra_args: more `dsa-check check` flags.

        Returns the report's results on a pass; raises DsaCheckFailure (exit 1: verdict lines + first
        divergence) or DsaCheckInputError (exit 2: the CLI's error lines)."""
        __tracebackhide__ = True
        rc, report, out, err, dump = self.run(outputs, tolerance, no_emulation, extra_args)
        what = f"golden case '{self.name}' [{self.stage}]"
        tail = f"golden: {self.file}\ndump: {dump}  (`dsa-check check -v` on it prints every metric)"
        if rc == 0 and report is not None:
            res = CheckResults(report.get("results", []))
            res.report, res.dump, res.stdout = report, dump, out
            return res
        if rc == 1 and report is not None:
            raise DsaCheckFailure(_failure_text(report, what, tail), report, dump)
        errs = [ln for ln in (err or "").strip().splitlines()] or ["(no error output)"]
        lines = [f"dsa-check check: input/schema error (exit {rc}) on {what}: {errs[0]}", *errs[1:]]
        lines += [ln for ln in (out or "").splitlines() if ln.startswith("ERROR")]
        lines.append(tail)
        raise DsaCheckInputError("\n".join(lines), report, dump)


@pytest.fixture
def dsa_case(request: pytest.FixtureRequest, tmp_path: Path) -> DsaCase:
    """One golden case of the test's @pytest.mark.dsa_golden(...) marker (see dsa_dump.pytest_plugin)."""
    ref = getattr(request, "param", None)
    if not isinstance(ref, GoldenRef):
        pytest.fail(f"{request.node.nodeid}: the `{FIXTURE}` fixture needs @pytest.mark.{MARKER}(stages=...) on "
                    "the test", pytrace=False)
    return DsaCase(ref, request.config, tmp_path, request.node.nodeid)
