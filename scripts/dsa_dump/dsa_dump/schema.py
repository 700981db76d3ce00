"""The stage table's schema (``dsa-check stages --json``) and case validation with the C++ message text.

One source of truth: the CLI. ``validate_file`` runs ``dsa-check validate --json`` (every rule ``check`` applies,
the stages' value rules included), and ``DumpWriter`` runs it on the finished file before it is renamed into place.
Before that, each case is checked as it is added by ``validate``: an interpreter of the declarations in
``stages --json`` (attr types and choices, missing / unknown tensors, dtypes, ranks, symbolic dims), with no
per-stage code, so a case that breaks the declared schema never reaches the file; without a binary it is the only
check. The schema comes from the binary when one is found (env ``DSA_CHECK_BIN``, else ``dsa-check`` on PATH),
otherwise from the copy shipped in this package (``stages.json``, refreshed by ``python -m dsa_dump.sync_schema``).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

SHIPPED_SCHEMA = Path(__file__).with_name("stages.json")

_cache: Dict[str, Any] = {}


def find_dsa_check(binary: Optional[str] = None) -> Optional[str]:
    """Path of the dsa-check binary: `binary`, env DSA_CHECK_BIN, dsa-check on PATH, or the one beside this Python
    (a virtual environment's bin/ where `pip install dsa-check` put it, when that environment is not activated);
    None if none exists."""
    for cand in (binary, os.environ.get("DSA_CHECK_BIN")):
        if cand:
            return cand if os.path.isfile(cand) and os.access(cand, os.X_OK) else None
    found = shutil.which("dsa-check")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "dsa-check")
    return beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else None


def schema_from_cli(binary: str) -> Dict[str, Any]:
    """Runs `binary stages --json` and parses it (raises RuntimeError with the binary's stderr on failure)."""
    r = subprocess.run([binary, "stages", "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{binary} stages --json exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def validate_file(path: str, binary: Optional[str] = None, shown_as: Optional[str] = None) -> Optional[List["Problem"]]:
    """Problems ``dsa-check validate`` finds in a file (empty list = valid), or None when no binary is found.
    ``shown_as`` replaces ``path`` in the messages (a temp file shown under its final name)."""
    b = find_dsa_check(binary)
    if b is None:
        return None
    r = subprocess.run([b, "validate", "--json", path], capture_output=True, text=True, timeout=600)
    try:
        items = json.loads(r.stdout)
    except ValueError:
        raise RuntimeError(f"{b} validate exited {r.returncode}: {r.stderr.strip()}") from None
    out = []
    for p in items:
        f = shown_as if (shown_as and p["file"] == path) else p["file"]
        out.append(Problem(f, p["case"], p["tensor"], p["expected"], p["found"]))
    return out


def load_schema(binary: Optional[str] = None, source: str = "auto") -> Dict[str, Any]:
    """The registry schema. source: "auto" (the CLI when found, else the shipped copy), "cli" or "shipped"."""
    key = f"{source}:{binary}"
    if key in _cache:
        return _cache[key]
    schema = None
    if source in ("auto", "cli"):
        b = find_dsa_check(binary)
        if b is None and source == "cli":
            raise RuntimeError("dsa-check binary not found (set DSA_CHECK_BIN or put dsa-check on PATH)")
        if b is not None:
            try:
                schema = schema_from_cli(b)
                schema["_source"] = b
            except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                if source == "cli":
                    raise
                warnings.warn(f"dsa_dump: {e}; using the shipped schema {SHIPPED_SCHEMA}")
    if schema is None:
        with open(SHIPPED_SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
        schema["_source"] = str(SHIPPED_SCHEMA)
    _cache[key] = schema
    return schema


def find_stage(schema: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    for s in schema["stages"]:
        if s["name"] == name:
            return s
    return None


# ---- messages (src/tensor/case.cpp Problem::str, attr_to_string) ----
@dataclass
class Problem:
    file: str
    case_name: str
    tensor: str
    expected: str
    found: str

    def __str__(self) -> str:
        s = self.file or "<memory>"
        if self.case_name:
            s += f": case '{self.case_name}'"
        if self.tensor:
            s += f": {self.tensor}"
        if self.expected:
            s += f": expected {self.expected}"
        if self.found:
            s += (", found " if self.expected else ": ") + self.found
        return s


class SchemaError(ValueError):
    """A case does not match its stage's schema. `problems` holds every problem; str() is one line each, the
    same text as dsa-check prints for the equivalent file (without its "error: " prefix)."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def _fmt_double(v: float) -> str:
    """std::ostream with precision(17), default float format (= printf %.17g, inf / nan spelled as glibc)."""
    return "%.17g" % v


def attr_to_string(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _fmt_double(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attr_to_string(x) for x in v) + "]"
    return str(v)


def shape_str(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _split(s: str, sep: str) -> List[str]:
    return ["".join(ch for ch in part if not ch.isspace()) for part in s.split(sep)]


def _eval_dim(tok: str, bind: Dict[str, int]) -> Optional[int]:
    if tok == "?":
        return None
    prod = 1
    for f in _split(tok, "*"):
        if f.isdigit():
            prod *= int(f)
        elif f in bind:
            prod *= bind[f]
        else:
            return None
    return prod


def _dtype_list(ds: Sequence[str]) -> str:
    out = ""
    for i, d in enumerate(ds):
        out += ("" if i == 0 else (" or " if i + 1 == len(ds) else ", ")) + d
    return out


def _attr_type_ok(typ: str, v: Any) -> bool:
    if typ == "int":
        return isinstance(v, int)
    if typ == "float":
        return isinstance(v, (int, float))
    if typ == "string":
        return isinstance(v, str)
    if typ == "bool":
        if isinstance(v, int):
            return v in (0, 1)
        if isinstance(v, str):
            return v in ("true", "false", "True", "False")
        return False
    return False


def _choice_value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    return attr_to_string(v)


def apply_attr_defaults(stage: Dict[str, Any], attrs: Dict[str, Any]) -> Dict[str, Any]:
    """attrs plus the stage's defaults for attrs not given (as the C++ reader does before validating)."""
    out = dict(attrs)
    for a in stage["attrs"]:
        if a["name"] not in out and a.get("default") is not None:
            d = a["default"]
            out[a["name"]] = int(d) if isinstance(d, bool) else d
    return out


class _Binder:
    def __init__(self, file: str, case: str, problems: List[Problem]):
        self.file, self.case, self.problems = file, case, problems
        self.bind: Dict[str, int] = {}
        self.bound_by: Dict[str, str] = {}

    def match(self, path: str, shape: Tuple[int, ...], alt: str) -> Tuple[bool, str]:
        toks = _split(alt, ",")
        rank = 0 if alt == "" else len(toks)
        if len(shape) != rank:
            return False, f"rank {rank} [{alt}], found rank {len(shape)} {shape_str(shape)}"
        local = dict(self.bind)
        local_by = dict(self.bound_by)
        for i in range(rank):
            tok, d = toks[i], int(shape[i])
            v = _eval_dim(tok, local)
            if v is not None:
                if v != d:
                    frm = f" (from {local_by[tok]})" if tok in local_by else ""
                    return False, (f"dim {i} = {tok} = {v}{frm} of shape [{alt}], found {d} in {shape_str(shape)}")
            elif tok != "?" and "*" not in tok:
                local[tok] = d
                local_by[tok] = f"{path} dim {i}"
        self.bind, self.bound_by = local, local_by
        return True, ""

    def check(self, group: str, spec: Dict[str, Any], t: Optional[Tuple[str, Tuple[int, ...]]]) -> None:
        path = f"{group}/{spec['name']}"
        if t is None:
            if not spec["optional"]:
                self.problems.append(Problem(self.file, self.case, path, f"a {_dtype_list(spec['dtypes'])} tensor", "none"))
            return
        dtype, shape = t
        # Outputs / expected of another dtype are judged by check (verdict DTYPE, exit 1), as the CLI's validation does.
        if dtype not in spec["dtypes"] and group == "inputs":
            self.problems.append(Problem(self.file, self.case, path, f"dtype {_dtype_list(spec['dtypes'])}", dtype))
        why = ""
        for alt in spec["dims"]:
            ok, w = self.match(path, shape, alt)
            if ok:
                return
            why += ("" if not why else "; or ") + w
        self.problems.append(Problem(self.file, self.case, path, why, ""))


TensorInfo = Dict[str, Tuple[str, Tuple[int, ...]]]  # name -> (logical dtype, shape)


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[len(b)]


def validate(schema: Dict[str, Any], file: str, case: str, stage_name: str, attrs: Dict[str, Any],
             inputs: TensorInfo, outputs: Optional[TensorInfo] = None,
             expected: Optional[TensorInfo] = None) -> List[Problem]:
    """Problems of a case, in the order and wording of the C++ validate_case (attrs given with defaults
    applied, values as stored: int, float, str, lists). The stage's extra value checks are not run here."""
    problems: List[Problem] = []
    st = find_stage(schema, stage_name)
    if st is None:
        names = ", ".join(s["name"] for s in schema["stages"])
        problems.append(Problem(file, case, "attr stage", f"one of {names}", f"'{stage_name}'"))
        return problems
    for a in st["attrs"]:
        if a["name"] not in attrs:
            if a["required"]:
                problems.append(Problem(file, case, f"attr {a['name']}", f"a {a['type']}", "none"))
            continue
        v = attrs[a["name"]]
        if not _attr_type_ok(a["type"], v):
            problems.append(Problem(file, case, f"attr {a['name']}", a["type"], attr_to_string(v)))
            continue
        if a["choices"]:
            cv = _choice_value(v)
            if cv not in a["choices"]:
                problems.append(Problem(file, case, f"attr {a['name']}", "one of " + "|".join(a["choices"]), f"'{cv}'"))
    # An attr the stage does not read is an error unless it is provenance or user metadata (src/schema/schema.cpp).
    declared = [a["name"] for a in st["attrs"]]
    prov = {p["name"] for p in schema.get("provenance_attrs", [])}
    prefix = schema.get("user_attr_prefix", "meta.")
    for k in sorted(attrs):
        if k in declared or k in prov or (k.startswith(prefix) and len(k) > len(prefix)):
            continue
        best = min(declared, key=lambda n: _edit_distance(k, n)) if declared else None
        near = best is not None and (_edit_distance(k, best) * 3 <= max(len(best), len(k)) or best in k or k in best)
        exp = (f"an attr of stage {stage_name}" + (f" (did you mean {best}?)" if near else "") + ": " +
               (", ".join(declared) if declared else "it has none") +
               f"; or provenance (layer, step, request_ids, ...: docs/dump-format.md); or user metadata under {prefix}*")
        problems.append(Problem(file, case, f"attr {k}", exp, "an attr the stage does not read"))
    b = _Binder(file, case, problems)
    for k in sorted(attrs):  # std::map order
        v = attrs[k]
        if isinstance(v, int) and not isinstance(v, bool):
            b.bind[k] = v
            b.bound_by[k] = f"attr {k}"

    def check_group(group: str, m: TensorInfo, specs: List[Dict[str, Any]]) -> None:
        for s in specs:
            b.check(group, s, m.get(s["name"]))
        names = ", ".join(s["name"] for s in specs)
        for name in sorted(m):  # std::map order
            if not any(s["name"] == name for s in specs):
                problems.append(Problem(file, case, f"{group}/{name}", f"one of the stage's tensors ({names})",
                                        "an unknown tensor"))

    check_group("inputs", inputs, st["inputs"])
    relaxed = [dict(o, optional=True) for o in st["outputs"]]
    if outputs:
        check_group("outputs", outputs, relaxed)
    if expected:
        check_group("expected", expected, relaxed)
    return problems
