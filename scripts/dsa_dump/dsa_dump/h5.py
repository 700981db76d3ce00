"""Schema-v1 HDF5 files: ``DumpWriter`` (validated, atomic) and ``read_dump``.

A file holds cases: top-level groups with attrs ``schema_version`` = 1 and ``stage`` (plus the stage's attrs)
and subgroups ``inputs/``, ``outputs/``, ``expected/`` of datasets. bf16 / fp16 / fp8 are raw uint16 / uint8
bits with a string attr ``dtype``; datasets are chunked with shuffle + gzip. See ``src/io/h5io.hpp``.
"""
from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import h5py
import numpy as np

from . import dtypes as _dt
from .schema import Problem, SchemaError, apply_attr_defaults, find_stage, load_schema, validate, validate_file

SCHEMA_VERSION = 1
GROUPS = ("inputs", "outputs", "expected")
LINK_ATTR = "from:"  # attr from:<input> = "CASE/outputs/TENSOR" (src/io/h5io.hpp kLinkAttrPrefix)
_counter = itertools.count()
_counter_lock = threading.Lock()


@dataclass
class Case:
    """One case. Tensors are numpy arrays with their logical dtype: float16, ml_dtypes bfloat16 / float8 (raw
    uint16 / uint8 bits when ml_dtypes is missing), native otherwise; ``dtypes`` maps "inputs/q" to the logical
    dtype name. ``attrs`` are as stored in the file (no defaults applied)."""

    name: str
    stage: str
    attrs: Dict[str, Any] = field(default_factory=dict)
    inputs: Dict[str, Any] = field(default_factory=dict)
    outputs: Dict[str, Any] = field(default_factory=dict)
    expected: Dict[str, Any] = field(default_factory=dict)
    dtypes: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, np.ndarray] = field(default_factory=dict)  # "inputs/q" -> stored bits
    auto_name: bool = False  # the name is a helper's default: a DumpWriter suffixes it (_1, _2, ...) when taken
    # Layer dumps: input name -> "CASE/outputs/TENSOR" of another case of the file it was taken from (written as an
    # HDF5 hard link when the shapes and bytes agree, else as the bytes plus attr ``from:<input>``).
    links: Dict[str, str] = field(default_factory=dict)

    def group(self, g: str) -> Dict[str, Any]:
        return {"inputs": self.inputs, "outputs": self.outputs, "expected": self.expected}[g]


def normalize_attr(name: str, v: Any) -> Any:
    """An attr value as stored (int, float, str, list of int / float); bools become 0/1."""
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, str):
        return v
    if _dt.is_torch_tensor(v):
        v = v.detach().cpu().numpy()
    if isinstance(v, (list, tuple, np.ndarray)):
        a = np.asarray(v)
        if a.ndim == 0:
            return normalize_attr(name, a.item())
        if a.ndim == 1 and a.dtype.kind in "iub":
            return [int(x) for x in a]
        if a.ndim == 1 and a.dtype.kind == "f":
            return [float(x) for x in a]
    raise TypeError(f"attr {name}: expected an int, float, bool, string or 1-D numeric list, found {type(v).__name__} {v!r}")


def _write_attr(obj: Any, name: str, v: Any) -> None:
    if isinstance(v, str):
        obj.attrs.create(name, v, dtype=h5py.string_dtype("utf-8"))
    elif isinstance(v, int):
        obj.attrs.create(name, np.int64(v), dtype="<i8")
    elif isinstance(v, float):
        obj.attrs.create(name, np.float64(v), dtype="<f8")
    elif isinstance(v, list):
        if all(isinstance(x, int) for x in v):
            obj.attrs.create(name, np.asarray(v, dtype="<i8"), dtype="<i8")
        else:
            obj.attrs.create(name, np.asarray(v, dtype="<f8"), dtype="<f8")
    else:
        raise TypeError(f"attr {name}: unsupported value {v!r}")


def _read_attr(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        if v.ndim == 0:
            return _read_attr(v.item())
        if v.dtype.kind in "iub":
            return [int(x) for x in v]
        if v.dtype.kind == "f":
            return [float(x) for x in v]
        if v.size == 1:
            return _read_attr(v.reshape(-1)[0])
    return normalize_attr("?", v)


def _chunks(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    """About 1 MiB chunks cut along the leading dims (as the C++ writer)."""
    chunk = list(shape)

    def nbytes() -> int:
        b = itemsize
        for c in chunk:
            b *= c
        return b

    for i in range(len(chunk)):
        if nbytes() <= (1 << 20):
            break
        inner = nbytes() // chunk[i]
        chunk[i] = max(1, min(shape[i], (1 << 20) // max(inner, 1)))
    return tuple(chunk)


class DumpWriter:
    """Writes schema-v1 cases to `path` through a temp file in the same directory, renamed onto `path` by
    close() (or at the end of a ``with`` block); abort() leaves no file. What was captured is never lost: an
    exception inside the block still writes the cases added before it (a note on the exception says so), and a
    case the CLI's value rules refuse at close() is left out while the valid ones are written (SchemaError).

        with DumpWriter("dump.h5") as w:
            w.add_case("call0", "indexer.quant", inputs={"x": x}, outputs={"y": y, "scale": s},
                       attrs={"scale_fmt": "ue8m0"})

    Every case is validated against the declared stage schema before anything of it is written, and the finished
    file by ``dsa-check validate`` (when a binary is found) before it is renamed into place: a file the CLI would
    reject is never written (SchemaError with the C++ message text). ``validate=False`` skips both (for writing
    deliberately broken test files)."""

    def __init__(self, path: str, schema: Optional[Dict[str, Any]] = None, validate: bool = True,
                 compression: int = 4):
        self.path = os.fspath(path)
        self._schema = schema
        self._validate = validate
        self._compression = compression
        d = os.path.dirname(self.path) or "."
        if not os.path.isdir(d):
            raise FileNotFoundError(f"{self.path}: output directory does not exist")
        with _counter_lock:
            n = next(_counter)
        self._tmp = os.path.join(d, f".{os.path.basename(self.path)}.tmp-{os.getpid()}-{n}")
        self._f: Optional[h5py.File] = h5py.File(self._tmp, "w-")
        self.case_names: List[str] = []

    @property
    def schema(self) -> Dict[str, Any]:
        if self._schema is None:
            self._schema = load_schema()
        return self._schema

    def __enter__(self) -> "DumpWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif self.case_names and isinstance(exc, Exception):
            # Never lose what was captured: the cases added before the error are complete and validated.
            try:
                self.close()
                note = f"dsa_dump: the {len(self.case_names)} case(s) added before this error were written to {self.path}"
            except Exception as e:  # pragma: no cover - the cases were validated when added
                note = f"dsa_dump: the cases added before this error could not be written either: {e}"
            if hasattr(exc, "add_note"):
                exc.add_note(note)
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            if self._f is not None:
                self.abort()
        except Exception:
            pass

    def unique_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... when that case name is already in this file."""
        name, n = base, 0
        while name in self.case_names:
            n += 1
            name = f"{base}_{n}"
        return name

    def add(self, case: Case) -> None:
        """Adds a Case (as returned by the capture_* helpers or read_dump). A helper's default name (no name= given)
        is suffixed _1, _2, ... when it is taken, so repeated captures into one writer all land; an explicit name
        must be unique (ValueError, raised before anything of the case is written: the cases already added stay)."""
        name = self.unique_name(case.name) if case.auto_name else case.name
        self.add_case(name, case.stage, case.inputs, case.outputs, case.expected, case.attrs, dtypes=case.dtypes,
                      links=case.links)

    def add_case(self, name: str, stage: str, inputs: Mapping[str, Any], outputs: Optional[Mapping[str, Any]] = None,
                 expected: Optional[Mapping[str, Any]] = None, attrs: Optional[Mapping[str, Any]] = None,
                 dtypes: Optional[Mapping[str, str]] = None, links: Optional[Mapping[str, str]] = None) -> None:
        """Validates and writes one case. Tensors: torch tensors (any device), numpy / ml_dtypes arrays,
        ``Bits(raw, "bf16")``. ``dtypes`` ({"inputs/x": "bf16"}) marks raw-bit arrays as in read_dump's Case.
        ``links`` ({"logits": "topk_case/outputs/logits"}) names inputs taken from another case's output (layer
        dumps): an input equal to its already-written source (shape and bits) becomes an HDF5 hard link to it, any
        other is written with attr ``from:<input>``; the CLI checks that the bytes agree."""
        if self._f is None:
            raise RuntimeError(f"{self.path}: writer is closed")
        if not name or "/" in name or name in (".", "..") or name in self.case_names:
            raise ValueError(f"{self.path}: case name {name!r} must be non-empty, unique and without '/'")
        dtypes = dict(dtypes or {})
        groups: Dict[str, Dict[str, Tuple[np.ndarray, str]]] = {}
        for g, m in zip(GROUPS, (inputs, outputs or {}, expected or {})):
            conv = {}
            for tn, t in m.items():
                if not tn or "/" in tn:
                    raise ValueError(f"{self.path}: case '{name}': tensor name {tn!r} is empty or has a '/'")
                if t is None:
                    continue
                try:
                    conv[tn] = _dt.to_storage(t, dtypes.get(f"{g}/{tn}"))
                except TypeError as e:
                    raise TypeError(f"{self.path}: case '{name}': {g}/{tn}: {e}") from None
            groups[g] = conv
        stored_attrs = {k: normalize_attr(k, v) for k, v in (attrs or {}).items() if v is not None}
        for reserved in ("stage", "schema_version"):
            stored_attrs.pop(reserved, None)
        if self._validate:
            st = find_stage(self.schema, stage)
            full = apply_attr_defaults(st, stored_attrs) if st else stored_attrs
            info = {g: {tn: (lg, tuple(a.shape)) for tn, (a, lg) in m.items()} for g, m in groups.items()}
            problems = validate(self.schema, self.path, name, stage, full, info["inputs"], info["outputs"],
                                info["expected"])
            if problems:
                raise SchemaError(problems)
        links = dict(links or {})
        for tn, src in links.items():
            if tn not in groups["inputs"] or src.count("/") != 2 or src.split("/")[1] not in ("outputs", "expected"):
                raise ValueError(f"{self.path}: case '{name}': link {tn!r} -> {src!r}: expected an input of the case "
                                 f"and 'CASE/outputs/TENSOR'")
        g = self._f.create_group(name)
        _write_attr(g, "schema_version", SCHEMA_VERSION)
        _write_attr(g, "stage", stage)
        for k in sorted(stored_attrs):
            _write_attr(g, k, stored_attrs[k])
        for gname in GROUPS:
            m = groups[gname]
            if not m and gname != "inputs":
                continue
            sub = g.create_group(gname)
            for tn in sorted(m):
                arr, logical = m[tn]
                if gname == "inputs" and tn in links:
                    src = self._f.get("/" + links[tn])
                    if (isinstance(src, h5py.Dataset) and src.shape == arr.shape and src.dtype == arr.dtype
                            and _read_attr(src.attrs.get("dtype", "")) == logical and np.array_equal(src[()], arr)):
                        sub[tn] = src  # a hard link: one dataset, two names
                        continue
                    _write_attr(g, LINK_ATTR + tn, links[tn])
                kw: Dict[str, Any] = {}
                if arr.ndim > 0 and arr.size > 0 and self._compression:
                    kw = dict(chunks=_chunks(arr.shape, arr.dtype.itemsize), shuffle=True, compression="gzip",
                              compression_opts=self._compression)
                ds = sub.create_dataset(tn, data=arr, dtype=arr.dtype, **kw)
                ds.attrs.create("dtype", logical, dtype=h5py.string_dtype("utf-8"))
        self.case_names.append(name)

    def close(self) -> str:
        """Flushes, closes and renames the temp file onto path; returns path."""
        if self._f is None:
            return self.path
        try:
            if not self.case_names:
                raise ValueError(f"{self.path}: no case was added (a dump needs at least one case)")
            self._f.flush()
            self._f.close()
            self._f = None
            if self._validate:
                problems = validate_file(self._tmp, shown_as=self.path)
                if problems:
                    kept = self._drop_cases({p.case_name for p in problems})
                    err = SchemaError(problems)
                    if kept and hasattr(err, "add_note"):
                        err.add_note(f"dsa_dump: the {len(kept)} valid case(s) ({', '.join(kept)}) were written to "
                                     f"{self.path}; the case(s) named above were left out")
                    raise err
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        return self.path

    def _drop_cases(self, bad: set) -> List[str]:
        """After a failed whole-file validation: the temp file rewritten without the cases named in `bad`, validated
        again and renamed onto path when any case remains (the good cases are never lost); returns their names."""
        keep = [n for n in self.case_names if n not in bad]
        if not keep or "" in bad or len(keep) == len(self.case_names):
            return []  # nothing left, or a problem of the whole file
        d = os.path.dirname(self.path) or "."
        with _counter_lock:
            n = next(_counter)
        tmp2 = os.path.join(d, f".{os.path.basename(self.path)}.keep-{os.getpid()}-{n}")
        try:
            with h5py.File(self._tmp, "r") as src, h5py.File(tmp2, "w-") as dst:
                for n in keep:
                    src.copy(src[n], dst, name=n)
            if validate_file(tmp2, shown_as=self.path):
                os.remove(tmp2)
                return []
            os.replace(tmp2, self.path)
        except Exception:
            try:
                os.remove(tmp2)
            except FileNotFoundError:
                pass
            return []
        return keep

    def abort(self) -> None:
        """Discards everything written (removes the temp file)."""
        if self._f is not None:
            try:
                self._f.close()
            except Exception:
                pass
            self._f = None
        try:
            os.remove(self._tmp)
        except FileNotFoundError:
            pass


def write_dump(path: str, cases: Iterable[Case], **kw: Any) -> str:
    """Writes cases to path atomically (see DumpWriter)."""
    with DumpWriter(path, **kw) as w:
        for c in cases:
            w.add(c)
    return path


def read_dump(path: str, as_ml_dtypes: bool = True, load_outputs: bool = True) -> List[Case]:
    """Every case of a schema-v1 file (no validation; run `dsa-check inspect` for that). Tensors come back with
    their logical dtype (see Case); ``case.raw`` holds the stored bits."""
    cases: List[Case] = []
    with h5py.File(path, "r") as f:
        # Layer links: an input that is the same HDF5 object as another case's output (hard or soft link).
        sources: Dict[int, str] = {}
        for name, g in f.items():
            if isinstance(g, h5py.Group):
                for gname in ("outputs", "expected"):
                    if isinstance(g.get(gname), h5py.Group):
                        for tn, ds in g[gname].items():
                            sources.setdefault(h5py.h5o.get_info(ds.id).addr, f"{name}/{gname}/{tn}")
        for name, g in f.items():
            if not isinstance(g, h5py.Group) or "stage" not in g.attrs:
                continue
            attrs = {k: _read_attr(v) for k, v in g.attrs.items() if k not in ("stage", "schema_version")}
            links = {k[len(LINK_ATTR):]: attrs.pop(k) for k in list(attrs) if k.startswith(LINK_ATTR)}
            sv = _read_attr(g.attrs.get("schema_version", -1))
            if sv != SCHEMA_VERSION:
                raise ValueError(f"{path}: case '{name}': attr schema_version: expected {SCHEMA_VERSION}, found {sv}")
            c = Case(name=name, stage=_read_attr(g.attrs["stage"]), attrs=attrs, links=links)
            if isinstance(g.get("inputs"), h5py.Group):
                for tn, ds in g["inputs"].items():
                    src = sources.get(h5py.h5o.get_info(ds.id).addr)
                    if src is not None and not src.startswith(name + "/"):
                        c.links.setdefault(tn, src)
            for gname in GROUPS:
                if gname not in g or (gname != "inputs" and not load_outputs):
                    continue
                for tn, ds in g[gname].items():
                    raw = ds[()]
                    raw = np.asarray(raw)
                    logical = None
                    if "dtype" in ds.attrs:
                        logical = _dt.parse_dtype(_read_attr(ds.attrs["dtype"]))
                    if logical is None:
                        logical = _dt._NUMPY_NAMES.get(raw.dtype.name)
                    if logical is None:
                        raise ValueError(f"{path}: case '{name}': {gname}/{tn}: unsupported storage {raw.dtype}")
                    st = _dt.STORAGE[logical][0]
                    if raw.dtype != st:
                        raw = raw.view(st) if _dt.STORAGE[logical][1] else raw.astype(st)
                    c.raw[f"{gname}/{tn}"] = raw
                    c.dtypes[f"{gname}/{tn}"] = logical
                    c.group(gname)[tn] = _dt.from_storage(raw, logical, as_ml_dtypes)
            cases.append(c)
    return cases
