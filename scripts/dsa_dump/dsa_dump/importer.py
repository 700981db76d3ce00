"""``dsa-check import``: turn dumps that engines already write into one schema-v1 file, without re-running anything.

Formats (``--format``, detected by default):
- ``msprobe``: Ascend msprobe (PyPI ``mindstudio-probe``) ``task: tensor`` dumps -- ``dump.json`` plus
  ``dump_tensor_data/<file>`` (``.pt`` or ``.npy``, named by each argument's ``data_name``). Every call of a mapped
  op (API name ``<Prefix>.<op>.<n>.forward``, any prefix) becomes one case named after the API.
- ``sglang``: ``--debug-tensor-dump-output-folder`` dumps, one ``Pass{id:05d}.pt`` dict (module path -> output
  tensor, or a list of tensors) per forward pass; each mapping group becomes one case per pass (and per layer when
  its tensor names hold ``{layer}``), with attrs ``step`` = pass id and ``layer``.
- ``dict``: one ``.pt`` (a dict of named tensors; nested dicts joined with ".") or ``.safetensors`` file.

A mapping (JSON, see ``--list-mappings`` and scripts/dsa_dump/README.md) says which op argument or dict tensor is
which argument of a kit capture helper (``capture_ascend_li``, ...); the helper builds and validates the case, so
the schema rules live in one place. The tensor files are read without torch (dsa_dump.tensorfile).
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from . import dtypes as _dt
from .h5 import DumpWriter
from .schema import SchemaError
from .tensorfile import TensorFileError, load_npy, load_pt, load_safetensors, load_tensor_file, logical_dtype, shape_of

MAPPING_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mappings")
MAPPING_VERSION = 1
_SOURCE_KEYS = {"arg", "kwarg", "output", "tensor", "index", "value", "optional", "dtype"}
_MAX_WALK_DEPTH = 5

EPILOG = """Example:
  dsa-check import dump/step0/rank0 --mapping ascend -o ascend.h5 && dsa-check check ascend.h5
  (the same as: python3 -m dsa_dump.importer dump/step0/rank0 --mapping ascend -o ascend.h5)

mappings: a shipped name (--list-mappings) or a JSON file; exit 0 on success, 2 on any bad input."""


class DumpImportError(ValueError):
    """Bad input to the importer (the CLI prints it and exits 2)."""


# ---- helpers and mappings ----
def helpers() -> Dict[str, Callable[..., Any]]:
    """The kit's capture helpers a mapping may name (capture_* taking name=, out= and attrs=)."""
    mod = importlib.import_module("dsa_dump.capture")
    out = {}
    for n, fn in vars(mod).items():
        if n.startswith("capture_") and callable(fn):
            try:
                p = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if {"name", "out", "attrs"} <= set(p):
                out[n] = fn
    return out


def shipped_mappings() -> Dict[str, str]:
    """{name: description} of the mappings shipped in dsa_dump/mappings."""
    out = {}
    for fn in sorted(os.listdir(MAPPING_DIR)) if os.path.isdir(MAPPING_DIR) else []:
        if fn.endswith(".json"):
            try:
                with open(os.path.join(MAPPING_DIR, fn), encoding="utf-8") as f:
                    out[fn[:-5]] = json.load(f).get("description", "")
            except (OSError, ValueError):
                out[fn[:-5]] = "(unreadable)"
    return out


def _mapping_path(spec: str) -> str:
    if os.path.isfile(spec):
        return spec
    if spec.endswith(".json") or os.sep in spec or "/" in spec:
        raise DumpImportError(f"mapping file {spec} not found")
    p = os.path.join(MAPPING_DIR, spec + ".json")
    if not os.path.isfile(p):
        raise DumpImportError(f"unknown mapping '{spec}': shipped mappings are " + ", ".join(shipped_mappings())
                              + " (or give a JSON file)")
    return p


def _read_json(path: Any, label: str) -> Any:
    """The parsed JSON file at `path`; DumpImportError "LABEL: cannot read: ..." / "LABEL: not JSON: ..." otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise DumpImportError(f"{label}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise DumpImportError(f"{label}: not JSON: {e}") from None


def load_mapping(spec: str, _depth: int = 0) -> Dict[str, Any]:
    """A mapping by shipped name or path: {"ops": [...], "groups": [...], "sources": [...]}, validated."""
    if _depth > 8:
        raise DumpImportError(f"mapping {spec}: includes nest deeper than 8")
    path = _mapping_path(spec)
    m = _read_json(path, f"mapping {path}")
    if not isinstance(m, dict):
        raise DumpImportError(f"mapping {path}: expected a JSON object")
    if m.get("mapping_version", MAPPING_VERSION) != MAPPING_VERSION:
        raise DumpImportError(f"mapping {path}: mapping_version {m.get('mapping_version')!r}, this importer reads "
                              f"{MAPPING_VERSION}")
    unknown = sorted(set(m) - {"mapping_version", "description", "ops", "groups", "include", "source"})
    if unknown:
        raise DumpImportError(f"mapping {path}: unknown key(s) {', '.join(unknown)} (expected mapping_version, "
                              "description, ops, groups, include)")
    out: Dict[str, Any] = {"ops": [], "groups": [], "sources": [path]}
    for inc in m.get("include", []):
        sub = load_mapping(str(inc), _depth + 1)
        for k in ("ops", "groups", "sources"):
            out[k] += sub[k]
    known = helpers()
    for kind in ("ops", "groups"):
        entries = m.get(kind, [])
        if not isinstance(entries, list):
            raise DumpImportError(f"mapping {path}: '{kind}' must be a list")
        for i, e in enumerate(entries):
            out[kind].append(_check_entry(path, kind, i, e, known))
    if not out["ops"] and not out["groups"]:
        raise DumpImportError(f"mapping {path}: no ops or groups")
    return out


def _check_entry(path: str, kind: str, i: int, e: Any, known: Dict[str, Callable[..., Any]]) -> Dict[str, Any]:
    key = "op" if kind == "ops" else "name"
    where = f"mapping {path}: {kind}[{i}]"
    if not isinstance(e, dict) or not isinstance(e.get(key), str) or not e[key]:
        raise DumpImportError(f"{where}: expected an object with a '{key}' string")
    where = f"mapping {path}: {kind[:-1]} '{e[key]}'"
    allowed = {key, "helper", "args", "attrs", "description"} | ({"aliases"} if kind == "ops" else set())
    extra = sorted(set(e) - allowed)
    if extra:
        raise DumpImportError(f"{where}: unknown key(s) {', '.join(extra)} (expected {', '.join(sorted(allowed))})")
    h = e.get("helper")
    if h not in known:
        raise DumpImportError(f"{where}: unknown helper {h!r}: known helpers are " + ", ".join(sorted(known)))
    params = inspect.signature(known[h]).parameters
    args = e.get("args")
    if not isinstance(args, dict) or not args:
        raise DumpImportError(f"{where}: 'args' must map {h} arguments to sources")
    has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    for a, src in args.items():
        if a in ("name", "out", "attrs") or (a not in params and not has_var_kw):
            raise DumpImportError(f"{where}: {a!r} is not an argument of {h} (its arguments: "
                                  + ", ".join(p for p in params if p not in ("name", "out", "attrs")) + ")")
        if not isinstance(src, dict) or not set(src) <= _SOURCE_KEYS:
            raise DumpImportError(f"{where}: argument {a}: a source is an object with keys among "
                                  + ", ".join(sorted(_SOURCE_KEYS)))
        picks = [k for k in ("arg", "kwarg", "output", "tensor", "value") if k in src]
        if not picks:
            raise DumpImportError(f"{where}: argument {a}: give one of arg, kwarg, output, tensor or value")
        if kind == "ops" and "tensor" in src or kind == "groups" and ({"arg", "kwarg", "output"} & set(src)):
            raise DumpImportError(f"{where}: argument {a}: " + ("op calls take arg / kwarg / output sources"
                                                                if kind == "ops" else "groups take tensor sources"))
    attrs = e.get("attrs", {})
    if not isinstance(attrs, dict):
        raise DumpImportError(f"{where}: 'attrs' must be an object")
    return dict(e, kind=kind, mapping=path)


def _dtype_ok(want: Any, found: str) -> bool:
    alts = want if isinstance(want, list) else str(want).split("|")
    norm = {(_dt.parse_dtype(a) or str(a).lower()) for a in alts}
    return found in norm


def _to_kit(t: Any) -> Any:
    """A loaded tensor in the form the capture helpers take: fp16 as numpy float16, bf16 / fp8 as ml_dtypes arrays
    when ml_dtypes is importable (else Bits, which the kit stores as the same bits), native arrays as they are."""
    if isinstance(t, _dt.Bits):
        if t.dtype == "fp16":
            return t.array.view(np.float16)
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            return t
        return _dt.from_storage(t.array, t.dtype)
    return t


def _check_tensor(src: Dict[str, Any], t: Any, what: str) -> Any:
    is_tensor = isinstance(t, (np.ndarray, _dt.Bits))
    if "dtype" in src:
        if not is_tensor:
            raise DumpImportError(f"{what}: expected a tensor of dtype {src['dtype']}, found {type(t).__name__} {t!r:.60}")
        lg = logical_dtype(t)
        if not _dtype_ok(src["dtype"], lg):
            raise DumpImportError(f"{what}: dtype mismatch: the mapping expects {src['dtype']}, found {lg} "
                                  f"{list(shape_of(t))}")
    return _to_kit(t) if is_tensor else t


def _call(entry: Dict[str, Any], kwargs: Dict[str, Any], name: str, attrs: Dict[str, Any], w: DumpWriter,
          where: str) -> None:
    fn = helpers()[entry["helper"]]
    a = dict(entry.get("attrs") or {})
    a.update(attrs)
    try:
        fn(**kwargs, name=name, out=w, attrs=a)
    except SchemaError as e:
        raise DumpImportError(f"{where}: {entry['helper']}: the case does not match its stage:\n{e}") from None
    except (TypeError, ValueError) as e:
        raise DumpImportError(f"{where}: {entry['helper']}: {e}") from None


# ---- msprobe ----
_API_RE = re.compile(r"^(?P<prefix>.+)\.(?P<op>[^.]+)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")


def _walk_files(root: str, match: Callable[[str], bool]) -> List[str]:
    out = []
    root = os.path.abspath(root)
    base = root.rstrip(os.sep).count(os.sep)
    for d, dirs, files in os.walk(root):
        if d.count(os.sep) - base >= _MAX_WALK_DEPTH:
            dirs[:] = []
        dirs.sort()
        out += [os.path.join(d, f) for f in sorted(files) if match(f)]
    return out


class _MsprobeCall:
    def __init__(self, dump_json: str, tensor_dir: str, api: str, entry: Dict[str, Any], task: str):
        self.dump_json, self.tensor_dir, self.api, self.entry, self.task = dump_json, tensor_dir, api, entry, task

    def _load(self, item: Any, what: str) -> Any:
        if item is None:
            return None
        if isinstance(item, list):
            return [self._load(x, f"{what}[{i}]") for i, x in enumerate(item)]
        if not isinstance(item, dict):
            raise DumpImportError(f"{self.dump_json}: {self.api}: {what}: unexpected entry {item!r:.80}")
        if "data_name" not in item:
            if "value" in item:
                return item["value"]
            if self.task == "statistics":
                raise DumpImportError(f"{self.dump_json}: {self.api}: {what}: this is a 'task: statistics' dump (no "
                                      "tensor files, only statistics); re-dump with task 'tensor'")
            raise DumpImportError(f"{self.dump_json}: {self.api}: {what}: the tensor was not saved (no data_name; "
                                  f"type {item.get('type')!r})")
        dn = item["data_name"]
        if not isinstance(dn, str) or not dn or "/" in dn or "\\" in dn or dn in (".", ".."):
            raise DumpImportError(f"{self.dump_json}: {self.api}: {what}: bad data_name {dn!r}")
        fpath = os.path.join(self.tensor_dir, dn)
        if not os.path.isfile(fpath):
            raise DumpImportError(f"{self.dump_json}: {self.api}: {what}: tensor file {fpath} is missing")
        try:
            t = load_npy(fpath) if dn.endswith(".npy") else load_pt(fpath)
        except TensorFileError as e:
            raise DumpImportError(f"{self.api}: {what}: {e}") from None
        if not isinstance(t, (np.ndarray, _dt.Bits)):
            raise DumpImportError(f"{fpath}: {self.api}: {what}: expected one tensor, found {type(t).__name__}")
        decl_dt, decl_shape = item.get("dtype"), item.get("shape")
        if isinstance(decl_dt, str) and decl_dt.startswith("torch."):
            want = decl_dt[len("torch."):]
            lg = logical_dtype(t)
            want_lg = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3fn",
                       "float8_e5m2": "fp8_e5m2"}.get(want, want)
            if want_lg != lg:
                raise DumpImportError(f"{fpath}: {self.api}: {what}: dtype mismatch: dump.json declares {decl_dt}, "
                                      f"the file holds {lg}")
        if isinstance(decl_shape, list) and list(decl_shape) != list(shape_of(t)):
            raise DumpImportError(f"{fpath}: {self.api}: {what}: shape mismatch: dump.json declares {decl_shape}, "
                                  f"the file holds {list(shape_of(t))}")
        return t

    def source(self, arg: str, src: Dict[str, Any]) -> Tuple[bool, Any]:
        """(found, value) of a mapping source in this call."""
        e = self.entry
        args = e.get("input_args") or []
        kwargs = e.get("input_kwargs") or {}
        if "value" in src:
            return True, src["value"]
        if "kwarg" in src and src["kwarg"] in kwargs:
            return True, self._load(kwargs[src["kwarg"]], f"kwarg {src['kwarg']}")
        if "arg" in src and isinstance(src["arg"], int) and 0 <= src["arg"] < len(args):
            return True, self._load(args[src["arg"]], f"positional argument {src['arg']}")
        if "output" in src:
            outs = e.get("output") or []
            if not isinstance(outs, list):
                outs = [outs]
            i = src["output"]
            if isinstance(i, int) and 0 <= i < len(outs) and outs[i] is not None:
                return True, self._load(outs[i], f"output {i}")
        return False, None

    @staticmethod
    def describe(src: Dict[str, Any]) -> str:
        parts = [f"positional argument {src['arg']}" if "arg" in src else "",
                 f"kwarg {src['kwarg']}" if "kwarg" in src else "", f"output {src['output']}" if "output" in src else ""]
        return " or ".join(p for p in parts if p)


def _msprobe_files(path: str) -> List[str]:
    if os.path.isfile(path):
        if os.path.basename(path) != "dump.json":
            raise DumpImportError(f"{path}: an msprobe dump is a dump.json (or a folder holding one)")
        return [path]
    files = _walk_files(path, lambda f: f == "dump.json")
    if not files:
        raise DumpImportError(f"{path}: no dump.json under it (is it an msprobe dump folder?)")
    return files


def import_msprobe(path: str, mapping: Dict[str, Any], w: DumpWriter, ops: Optional[List[str]] = None) -> Dict[str, Any]:
    by_op: Dict[str, Dict[str, Any]] = {}
    for e in mapping["ops"]:
        for n in [e["op"]] + list(e.get("aliases", [])):
            by_op[n] = e
    if ops:
        bad = [o for o in ops if o not in by_op]
        if bad:
            raise DumpImportError(f"unknown op {', '.join(bad)}: the mapping knows " + ", ".join(sorted(by_op)))
    files = _msprobe_files(path)
    skipped: Dict[str, int] = {}
    made: List[str] = []
    multi = len(files) > 1
    for dj in files:
        doc = _read_json(dj, str(dj))
        if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
            raise DumpImportError(f"{dj}: not an msprobe dump.json (no 'data' object)")
        task = str(doc.get("task", ""))
        fw = doc.get("framework", "pytorch")
        if fw not in ("pytorch", None):
            raise DumpImportError(f"{dj}: framework {fw!r}: only pytorch msprobe dumps are read")
        tdir = os.path.join(os.path.dirname(os.path.abspath(dj)), "dump_tensor_data")
        if not os.path.isdir(tdir) and isinstance(doc.get("dump_data_dir"), str) and os.path.isdir(doc["dump_data_dir"]):
            tdir = doc["dump_data_dir"]
        rel = os.path.relpath(os.path.dirname(os.path.abspath(dj)), os.path.abspath(path) if os.path.isdir(path)
                              else os.path.dirname(os.path.abspath(path)))
        for api, entry in doc["data"].items():
            m = _API_RE.match(api)
            op = m.group("op") if m else None
            e = by_op.get(op) if (m and m.group("dir") == "forward") else None
            if e is not None and ops and op not in ops:
                e = None
            if e is None:
                key = op or api
                skipped[key] = skipped.get(key, 0) + 1
                continue
            if not isinstance(entry, dict):
                raise DumpImportError(f"{dj}: {api}: not an object")
            call = _MsprobeCall(dj, tdir, api, entry, task)
            kwargs: Dict[str, Any] = {}
            for a, src in e["args"].items():
                found, v = call.source(a, src)
                if not found or (v is None and "value" not in src):
                    if src.get("optional"):
                        continue
                    if task == "statistics":
                        raise DumpImportError(f"{dj}: {api}: this is a 'task: statistics' dump (no tensor files, only "
                                              "statistics); re-dump with task 'tensor'")
                    raise DumpImportError(f"{dj}: {api}: missing tensor for {e['helper']} argument '{a}' (op "
                                          f"{call.describe(src)})")
                kwargs[a] = _check_tensor(src, v, f"{dj}: {api}: argument '{a}'")
            name = (rel.replace(os.sep, "_") + "_" + api) if multi and rel != "." else api
            _call(e, kwargs, name, {"meta.source": api}, w, f"{dj}: {api}")
            made.append(name)
    return {"cases": made, "skipped": skipped}


# ---- tensor dicts (sglang passes, plain .pt / safetensors) ----
def _flatten(obj: Any, prefix: str = "", depth: int = 0) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if isinstance(obj, dict) and depth < 16:
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(_flatten(v, key, depth + 1))
            else:
                out[key] = v
    return out


def _pattern(name: str) -> "re.Pattern[str]":
    return re.compile("^" + re.escape(name).replace(re.escape("{layer}"), r"(?P<layer>\d+)") + "$")


def _group_cases(group: Dict[str, Any], tensors: Dict[str, Any], file: str) -> List[Tuple[Optional[int], Dict[str, Any]]]:
    """[(layer or None, helper kwargs)] of one group over one dict; [] when none of its required tensors is there."""
    req = [(a, s) for a, s in group["args"].items() if "tensor" in s and not s.get("optional")]
    if not req:
        raise DumpImportError(f"mapping {group['mapping']}: group '{group['name']}': no required tensor argument")
    layered = "{layer}" in req[0][1]["tensor"]
    if layered:
        pat = _pattern(req[0][1]["tensor"])
        layers: List[Optional[int]] = sorted({int(m.group("layer")) for k in tensors for m in [pat.match(k)] if m})
    else:
        layers = [None]
    out = []
    for layer in layers:
        present = [a for a, s in req if s["tensor"].replace("{layer}", str(layer)) in tensors]
        if not present and not layered:
            return []
        kwargs: Dict[str, Any] = {}
        for a, s in group["args"].items():
            if "value" in s:
                kwargs[a] = s["value"]
                continue
            tn = s["tensor"].replace("{layer}", str(layer)) if layer is not None else s["tensor"]
            where = f"{file}: group '{group['name']}'" + (f" layer {layer}" if layer is not None else "")
            if tn not in tensors:
                if s.get("optional"):
                    continue
                near = sorted(tensors)[:8]
                raise DumpImportError(f"{where}: missing tensor '{tn}' (for {group['helper']} argument '{a}'); the file "
                                      f"has {len(tensors)} tensors: " + ", ".join(near) + (" ..." if len(tensors) > 8 else ""))
            v = tensors[tn]
            if isinstance(v, (list, tuple)):
                if "index" not in s:
                    raise DumpImportError(f"{where}: tensor '{tn}' is a list of {len(v)} values: give \"index\" in the "
                                          "mapping")
                if not isinstance(s["index"], int) or not 0 <= s["index"] < len(v):
                    raise DumpImportError(f"{where}: tensor '{tn}': index {s['index']} out of its {len(v)} values")
                v = v[s["index"]]
            if not isinstance(v, (np.ndarray, _dt.Bits)) and "dtype" not in s and v is not None:
                raise DumpImportError(f"{where}: '{tn}' is {type(v).__name__}, not a tensor")
            kwargs[a] = _check_tensor(s, v, f"{where}: tensor '{tn}'")
        out.append((layer, kwargs))
    return out


_PASS_RE = re.compile(r"^Pass(\d+)\.pt$")


def import_sglang(path: str, mapping: Dict[str, Any], w: DumpWriter, groups: Optional[List[str]] = None) -> Dict[str, Any]:
    gs = _select_groups(mapping, groups)
    files = [path] if os.path.isfile(path) else _walk_files(path, lambda f: bool(_PASS_RE.match(f)))
    if not files:
        raise DumpImportError(f"{path}: no Pass<id>.pt files under it (is it an sglang --debug-tensor-dump-output-folder?)")
    root = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    dirs = {os.path.dirname(os.path.abspath(f)) for f in files}
    made: List[str] = []
    counts = {g["name"]: 0 for g in gs}
    for f in files:
        m = _PASS_RE.match(os.path.basename(f))
        if not m:
            raise DumpImportError(f"{f}: not a Pass<id>.pt file")
        pass_id = int(m.group(1))
        obj = _load_dict(f)
        rel = os.path.relpath(os.path.dirname(os.path.abspath(f)), root)
        pre = (rel.replace(os.sep, "_") + "_") if len(dirs) > 1 and rel != "." else ""
        for g in gs:
            for layer, kwargs in _group_cases(g, obj, f):
                name = f"{pre}{g['name']}_pass{pass_id:05d}" + (f"_layer{layer}" if layer is not None else "")
                attrs: Dict[str, Any] = {"step": pass_id}
                if layer is not None:
                    attrs["layer"] = layer
                _call(g, kwargs, name, attrs, w, f"{f}: group '{g['name']}'")
                made.append(name)
                counts[g["name"]] += 1
    _require_groups(gs, counts, path)
    return {"cases": made, "skipped": {}}


def _load_dict(f: str) -> Dict[str, Any]:
    try:
        obj = load_tensor_file(f)
    except TensorFileError as e:
        raise DumpImportError(str(e)) from None
    if isinstance(obj, (np.ndarray, _dt.Bits)) or not isinstance(obj, dict):
        raise DumpImportError(f"{f}: expected a dict of named tensors, found {type(obj).__name__}")
    return _flatten(obj)


def _select_groups(mapping: Dict[str, Any], groups: Optional[List[str]]) -> List[Dict[str, Any]]:
    gs = mapping["groups"]
    if not gs:
        raise DumpImportError("the mapping has no 'groups' (tensor-dict formats need groups; 'ops' are for msprobe "
                              "dumps)")
    if groups:
        names = {g["name"] for g in gs}
        bad = [g for g in groups if g not in names]
        if bad:
            raise DumpImportError(f"unknown group {', '.join(bad)}: the mapping has " + ", ".join(sorted(names)))
        gs = [g for g in gs if g["name"] in groups]
    return gs


def _require_groups(gs: List[Dict[str, Any]], counts: Dict[str, int], path: str) -> None:
    for g in gs:
        if counts[g["name"]] == 0:
            first = next(s["tensor"] for s in g["args"].values() if "tensor" in s and not s.get("optional"))
            raise DumpImportError(f"{path}: group '{g['name']}': missing tensor '{first}' (no file holds it)")


def import_dict(path: str, mapping: Dict[str, Any], w: DumpWriter, groups: Optional[List[str]] = None) -> Dict[str, Any]:
    gs = _select_groups(mapping, groups)
    obj = _load_dict(path)
    made: List[str] = []
    counts = {g["name"]: 0 for g in gs}
    for g in gs:
        for layer, kwargs in _group_cases(g, obj, path):
            name = g["name"] + (f"_layer{layer}" if layer is not None else "")
            _call(g, kwargs, name, {"layer": layer} if layer is not None else {}, w, f"{path}: group '{g['name']}'")
            made.append(name)
            counts[g["name"]] += 1
    _require_groups(gs, counts, path)
    return {"cases": made, "skipped": {}}


# ---- driver ----
def detect_format(path: str) -> str:
    if os.path.isfile(path):
        b = os.path.basename(path)
        if b == "dump.json":
            return "msprobe"
        if _PASS_RE.match(b):
            return "sglang"
        return "dict"
    if os.path.isdir(path):
        if _walk_files(path, lambda f: f == "dump.json"):
            return "msprobe"
        if _walk_files(path, lambda f: bool(_PASS_RE.match(f))):
            return "sglang"
        raise DumpImportError(f"{path}: neither an msprobe dump (no dump.json) nor an sglang tensor dump (no "
                              "Pass<id>.pt); give --format")
    raise DumpImportError(f"{path}: no such file or directory")


def _inputs_under(path: str) -> List[str]:
    if os.path.isfile(path):
        return [os.path.realpath(path)]
    return [os.path.realpath(p) for p in _walk_files(path, lambda f: True)]


def run_import(path: str, out: str, mapping_specs: Iterable[str], fmt: str = "auto",
               select: Optional[List[str]] = None, validate: bool = True) -> Dict[str, Any]:
    """Imports `path` into the schema-v1 file `out`; returns {"cases", "skipped", "format"}. DumpImportError on bad
    input (no file is written then)."""
    if not os.path.exists(path):
        raise DumpImportError(f"{path}: no such file or directory")
    fmt = detect_format(path) if fmt == "auto" else fmt
    specs = list(mapping_specs) or (["ascend"] if fmt == "msprobe" else [])
    if not specs:
        raise DumpImportError(f"format {fmt} needs --mapping (a JSON file naming the tensors; see --list-mappings)")
    mapping: Dict[str, Any] = {"ops": [], "groups": [], "sources": []}
    for s in specs:
        sub = load_mapping(s)
        for k in mapping:
            mapping[k] += sub[k]
    out_real = os.path.realpath(out)
    if os.path.exists(out) and not os.path.isfile(out):
        raise DumpImportError(f"{out}: exists and is not a regular file; refusing to replace it")
    if out_real in _inputs_under(path) or out_real in {os.path.realpath(p) for p in mapping["sources"]}:
        raise DumpImportError(f"{out}: is one of the inputs; refusing to overwrite it")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise DumpImportError(f"{out}: output directory does not exist")
    w = DumpWriter(out, validate=validate)
    try:
        if fmt == "msprobe":
            res = import_msprobe(path, mapping, w, select)
        elif fmt == "sglang":
            res = import_sglang(path, mapping, w, select)
        elif fmt == "dict":
            res = import_dict(path, mapping, w, select)
        else:
            raise DumpImportError(f"unknown format {fmt!r} (msprobe, sglang, dict)")
        if not res["cases"]:
            sk = res.get("skipped") or {}
            raise DumpImportError(f"{path}: no case produced: no call of the mapped ops ("
                                  + ", ".join(sorted({e['op'] for e in mapping['ops']})) + ")"
                                  + (f"; the dump has {sum(sk.values())} calls of other ops: " + _fmt_skipped(sk)
                                     if sk else ""))
        try:
            w.close()
        except SchemaError as e:
            raise DumpImportError(f"{out}: the imported file does not pass validation:\n{e}") from None
    except BaseException:
        w.abort()
        raise
    res["format"] = fmt
    return res


def _fmt_skipped(sk: Dict[str, int]) -> str:
    items = sorted(sk.items(), key=lambda kv: (-kv[1], kv[0]))
    s = ", ".join(f"{k} ({n})" for k, n in items[:12])
    return s + (f", ... ({len(items) - 12} more)" if len(items) > 12 else "")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="dsa-check import",
        description="Turn dumps that engines already write (Ascend msprobe dump.json + tensor files, sglang "
                    "--debug-tensor-dump-output-folder Pass files, plain .pt / safetensors dicts) into one schema-v1 "
                    "file through a mapping, without re-running anything. Reads .pt files without torch.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", help="msprobe dump folder or dump.json; sglang dump folder or Pass<id>.pt; "
                                            ".pt / .safetensors file")
    p.add_argument("-o", "--output", help="the schema-v1 HDF5 file to write (atomically; never an input)")
    p.add_argument("-m", "--mapping", action="append", default=[],
                   help="shipped mapping name or JSON file (repeatable; msprobe default: ascend)")
    p.add_argument("-f", "--format", default="auto", choices=["auto", "msprobe", "sglang", "dict"],
                   help="input format (default: detected)")
    p.add_argument("--only", action="append", default=[], metavar="OP_OR_GROUP",
                   help="import only this mapped op (msprobe) or group (sglang / dict); repeatable")
    p.add_argument("--list-mappings", action="store_true", help="list the shipped mappings and exit")
    args = p.parse_args(argv)
    if args.list_mappings:
        for n, d in shipped_mappings().items():
            print(f"{n:24s} {d}")
        return 0
    if not args.input or not args.output:
        p.print_usage(sys.stderr)
        print("dsa-check import: error: INPUT and -o OUTPUT are required", file=sys.stderr)
        return 2
    try:
        res = run_import(args.input, args.output, args.mapping, args.format, args.only or None)
    except (DumpImportError, TensorFileError) as e:
        print(f"dsa-check import: error: {e}", file=sys.stderr)
        return 2
    except SchemaError as e:
        print(f"dsa-check import: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError) as e:
        print(f"dsa-check import: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(res['cases'])} case(s) from a {res['format']} dump")
    if res.get("skipped"):
        print(f"skipped {sum(res['skipped'].values())} calls of unmapped ops: {_fmt_skipped(res['skipped'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
