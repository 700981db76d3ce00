"""Reading tensor files that engines write -- torch ``.pt`` (zip format), safetensors and ``.npy`` -- without torch,
safetensors or any pickle global outside a short whitelist.

Tensors come back as numpy arrays for native dtypes and as ``dsa_dump.Bits(raw, logical)`` for bf16 / fp16 / fp8
(raw uint16 / uint8 bits with the kit's logical dtype name), always C-contiguous copies. Every failure is a
``TensorFileError`` naming the file (and the tensor or pickle global at fault); nothing here executes code from
the file.

Layouts (public sources):
- torch ``.pt`` (``torch.save``, torch >= 1.6 default ``_use_new_zipfile_serialization=True``): a zip archive of
  records under one top-level folder (``<archive>/data.pkl``, ``<archive>/data/<key>``, ``<archive>/byteorder``,
  ``<archive>/version``, ``<archive>/.format_version``, ``<archive>/.storage_alignment``); the pickle (protocol 2)
  rebuilds each tensor with ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
  requires_grad, backward_hooks[, metadata])`` or, for the dtypes of ``torch.storage._new_dtypes()`` (fp8, uint16,
  ...), ``torch._utils._rebuild_tensor_v3(..., dtype[, metadata])``, whose storages are persistent ids
  ``('storage', storage_type, key, location, numel)`` (numel in elements for typed ``torch.<X>Storage``, in bytes
  for ``torch.storage.UntypedStorage``); nn.Parameter goes through ``torch._utils._rebuild_parameter``.
  pytorch/pytorch torch/serialization.py (``_save``: persistent_id, ``write_record`` of the records above,
  ``DEFAULT_PROTOCOL = 2``, ``MAGIC_NUMBER`` of the legacy format), torch/_utils.py (``_rebuild_tensor_v2``,
  ``_rebuild_tensor_v3``, ``_rebuild_parameter``), torch/_tensor.py (``_reduce_ex_internal``: v3 for
  ``_new_dtypes``, v2 with a TypedStorage otherwise).
- safetensors: 8-byte little-endian header length N, N bytes of JSON ``{name: {"dtype", "shape", "data_offsets":
  [begin, end]}, "__metadata__": {str: str}}``, then the byte buffer (offsets relative to its start).
  huggingface/safetensors README.md ("Format") and safetensors/src/tensor.rs (``Dtype``).
- ``.npy``: numpy's format (numpy/lib/format.py), read with ``allow_pickle=False``.
"""
from __future__ import annotations

import collections
import io
import json
import os
import pickle
import struct
import zipfile
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .dtypes import Bits

# Bounds (generous for kernel dumps; a file beyond them is refused, never read into memory).
MAX_TENSOR_BYTES = 1 << 34        # 16 GiB for one storage or one tensor
MAX_PICKLE_BYTES = 1 << 26        # 64 MiB of data.pkl
MAX_HEADER_BYTES = 100 << 20      # safetensors JSON header (the format's own limit is 100 MB)
MAX_NDIM = 16


class TensorFileError(ValueError):
    """A tensor file that cannot be read: the message names the file and what is wrong."""


# ---- dtypes ----
# torch dtype name -> (numpy storage dtype, kit logical dtype or None for native)
_TORCH_DTYPES: Dict[str, Tuple[str, Optional[str]]] = {
    "float32": ("<f4", None), "float": ("<f4", None), "float64": ("<f8", None), "double": ("<f8", None),
    "float16": ("<u2", "fp16"), "half": ("<u2", "fp16"), "bfloat16": ("<u2", "bf16"),
    "float8_e4m3fn": ("u1", "fp8_e4m3fn"), "float8_e5m2": ("u1", "fp8_e5m2"),
    "int8": ("i1", None), "uint8": ("u1", None), "int16": ("<i2", None), "short": ("<i2", None),
    "int32": ("<i4", None), "int": ("<i4", None), "int64": ("<i8", None), "long": ("<i8", None),
    "uint16": ("<u2", None), "uint32": ("<u4", None), "uint64": ("<u8", None), "bool": ("?", None),
}
# legacy typed storage class (torch.<X>Storage) -> torch dtype name
_STORAGE_TYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "CharStorage": "int8", "ByteStorage": "uint8", "ShortStorage": "int16", "IntStorage": "int32",
    "LongStorage": "int64", "BoolStorage": "bool",
}
# safetensors dtype -> torch dtype name (huggingface/safetensors safetensors/src/tensor.rs Dtype)
_ST_DTYPES = {
    "BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
    "I32": "int32", "I64": "int64", "U8": "uint8", "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


def _finish(raw: np.ndarray, torch_dtype: str) -> Any:
    """A loaded tensor as the kit takes it: Bits for bf16 / fp16 / fp8, a native array otherwise."""
    logical = _TORCH_DTYPES[torch_dtype][1]
    raw = raw if raw.flags.c_contiguous else raw.copy()  # (np.ascontiguousarray would make a 0-d array 1-d)
    return Bits(raw, logical) if logical else raw


def logical_dtype(t: Any) -> str:
    """The kit's dtype name of a loaded tensor (bf16, fp16, fp8_e4m3fn, float32, int32, bool, int16, ...)."""
    if isinstance(t, Bits):
        return t.dtype
    a = np.asarray(t)
    return {"float32": "float32", "float64": "float64", "bool": "bool"}.get(a.dtype.name, a.dtype.name)


def shape_of(t: Any) -> Tuple[int, ...]:
    return tuple(int(d) for d in (t.array.shape if isinstance(t, Bits) else np.asarray(t).shape))


# ---- torch .pt (zip) ----
class _StorageRef:
    """A storage named by a persistent id; its bytes are read from the zip when a tensor uses it."""

    def __init__(self, key: str, dtype: str, numel: int, untyped: bool):
        self.key, self.dtype, self.numel, self.untyped = key, dtype, numel, untyped


class _TensorSpec:
    """What _rebuild_tensor_v2 / v3 was asked for; materialised after unpickling."""

    def __init__(self, storage: _StorageRef, offset: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                 dtype: Optional[str]):
        self.storage, self.offset, self.size, self.stride, self.dtype = storage, offset, size, stride, dtype


def _ints(x: Any, what: str, path: str) -> Tuple[int, ...]:
    if not isinstance(x, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in x):
        raise TensorFileError(f"{path}: {what}: expected a tuple of ints, found {type(x).__name__} {x!r:.80}")
    return tuple(x)


class _Dtype:
    def __init__(self, name: str):
        self.name = name


def _make_unpickler(path: str, data: bytes, storages: Dict[str, _StorageRef]) -> pickle.Unpickler:
    def rebuild_v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                   backward_hooks: Any = None, metadata: Any = None) -> _TensorSpec:
        if not isinstance(storage, _StorageRef):
            raise TensorFileError(f"{path}: _rebuild_tensor_v2: the storage argument is not a storage")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise TensorFileError(f"{path}: _rebuild_tensor_v2: storage offset {offset!r:.40} is not an int")
        return _TensorSpec(storage, offset, _ints(size, "tensor size", path), _ints(stride, "tensor stride", path), None)

    def rebuild_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any,
                   dtype: Any, metadata: Any = None) -> _TensorSpec:
        spec = rebuild_v2(storage, offset, size, stride)
        if not isinstance(dtype, _Dtype):
            raise TensorFileError(f"{path}: _rebuild_tensor_v3: the dtype argument is not a torch dtype")
        spec.dtype = dtype.name
        return spec

    def rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None, state: Any = None) -> Any:
        return data

    class Storage:  # stand-in class object for torch.<X>Storage / UntypedStorage in persistent ids
        def __init__(self, dtype: Optional[str]):
            self.dtype = dtype

    allowed: Dict[Tuple[str, str], Any] = {
        ("torch._utils", "_rebuild_tensor_v2"): rebuild_v2,
        ("torch._utils", "_rebuild_tensor_v3"): rebuild_v3,
        ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch.storage", "UntypedStorage"): Storage(None),
        ("torch", "UntypedStorage"): Storage(None),
    }
    for cls, dt in _STORAGE_TYPES.items():
        allowed[("torch", cls)] = Storage(dt)
    for dt in _TORCH_DTYPES:
        allowed[("torch", dt)] = _Dtype(dt)

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            obj = allowed.get((module, name))
            if obj is None:
                raise TensorFileError(f"{path}: refused pickle global '{module}.{name}' (a torch .pt file of tensors "
                                      "uses only torch._utils._rebuild_tensor_v2/_v3, _rebuild_parameter, torch "
                                      "storage and dtype names and collections.OrderedDict)")
            return obj

        def persistent_load(self, pid: Any) -> Any:
            if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage" or not isinstance(pid[1], Storage)
                    or not isinstance(pid[2], str) or not isinstance(pid[4], int) or isinstance(pid[4], bool)
                    or pid[4] < 0):
                raise TensorFileError(f"{path}: unsupported persistent id {pid!r:.120} (expected ('storage', "
                                      "torch.<X>Storage, key, location, numel))")
            _, st, key, _location, numel = pid
            ref = storages.get(key)
            if ref is None:
                ref = storages[key] = _StorageRef(key, st.dtype or "uint8", numel, st.dtype is None)
            return ref

    return Restricted(io.BytesIO(data))


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, need: int, path: str) -> bytes:
    """Exactly `need` bytes of a member, refusing a member that is shorter (or declares a size beyond the bounds)
    before reading it; reads at most `need` bytes however the member is compressed."""
    if info.file_size < need:
        raise TensorFileError(f"{path}: storage '{info.filename}' holds {info.file_size} bytes, the tensor declares "
                              f"{need} (truncated or corrupt file)")
    try:
        with zf.open(info) as f:
            data = f.read(need)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:  # CRC errors, truncated data, bad compression
        raise TensorFileError(f"{path}: member '{info.filename}': {e}") from None
    except Exception as e:  # zlib.error and friends
        raise TensorFileError(f"{path}: member '{info.filename}': {type(e).__name__}: {e}") from None
    if len(data) != need:
        raise TensorFileError(f"{path}: storage '{info.filename}' ends after {len(data)} of {need} bytes (truncated)")
    return data


def _materialize(spec: _TensorSpec, zf: zipfile.ZipFile, prefix: str, cache: Dict[str, np.ndarray], path: str,
                 name: str) -> Any:
    st = spec.storage
    torch_dtype = spec.dtype if spec.dtype is not None else st.dtype
    if torch_dtype not in _TORCH_DTYPES:
        raise TensorFileError(f"{path}: tensor {name}: unsupported torch dtype {torch_dtype}")
    np_dt = np.dtype(_TORCH_DTYPES[torch_dtype][0])
    if spec.dtype is not None and not st.untyped and st.dtype != spec.dtype:
        raise TensorFileError(f"{path}: tensor {name}: dtype {spec.dtype} over a {st.dtype} storage")
    nbytes = st.numel if st.untyped else st.numel * np_dt.itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise TensorFileError(f"{path}: tensor {name}: storage '{st.key}' declares {nbytes} bytes (limit {MAX_TENSOR_BYTES})")
    if len(spec.size) > MAX_NDIM or len(spec.size) != len(spec.stride):
        raise TensorFileError(f"{path}: tensor {name}: size {list(spec.size)} / stride {list(spec.stride)}: rank over "
                              f"{MAX_NDIM} or size and stride of different ranks")
    if any(d < 0 for d in spec.size) or any(s < 0 for s in spec.stride) or spec.offset < 0:
        raise TensorFileError(f"{path}: tensor {name}: negative size, stride or offset ({list(spec.size)}, "
                              f"{list(spec.stride)}, {spec.offset})")
    count = 1
    for d in spec.size:
        count *= d
    if count * np_dt.itemsize > MAX_TENSOR_BYTES:
        raise TensorFileError(f"{path}: tensor {name}: shape {list(spec.size)} is {count * np_dt.itemsize} bytes "
                              f"(limit {MAX_TENSOR_BYTES})")
    key = f"{st.key}"
    if key not in cache:
        member = f"{prefix}data/{st.key}"
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise TensorFileError(f"{path}: tensor {name}: storage record '{member}' is missing") from None
        cache[key] = np.frombuffer(_read_member(zf, info, nbytes, path), dtype=np.uint8)
    buf = cache[key]
    if buf.size % np_dt.itemsize:
        raise TensorFileError(f"{path}: tensor {name}: storage of {buf.size} bytes is not a whole number of {torch_dtype}")
    elems = buf.view(np_dt)
    if count == 0:
        return _finish(np.zeros(spec.size, dtype=np_dt), torch_dtype)
    last = spec.offset + sum((d - 1) * s for d, s in zip(spec.size, spec.stride))
    if last >= elems.size:
        raise TensorFileError(f"{path}: tensor {name}: size {list(spec.size)}, stride {list(spec.stride)}, offset "
                              f"{spec.offset} reach element {last} of a storage of {elems.size} elements")
    view = np.lib.stride_tricks.as_strided(elems[spec.offset:], shape=spec.size,
                                           strides=tuple(s * np_dt.itemsize for s in spec.stride), writeable=False)
    return _finish(np.array(view, copy=True), torch_dtype)


def _walk(obj: Any, fn: Any, name: str, depth: int = 0) -> Any:
    if depth > 32:
        raise TensorFileError(f"{name}: nesting deeper than 32 levels")
    if isinstance(obj, _TensorSpec):
        return fn(obj, name)
    if isinstance(obj, dict):
        return type(obj)((k, _walk(v, fn, f"{name}[{k!r}]" if name else repr(k), depth + 1)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_walk(v, fn, f"{name}[{i}]", depth + 1) for i, v in enumerate(obj))
    return obj


def load_pt(path: str) -> Any:
    """The object a torch ``.pt`` file holds (a tensor, or dicts / lists / tuples of tensors and plain values), with
    tensors as numpy arrays or Bits. Only the zip format (torch >= 1.6) is read."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise TensorFileError(f"{path}: cannot read: {e.strerror or e}") from None
    if not zipfile.is_zipfile(path):
        if head[:2] == b"\x80\x02" or head[:1] == b"\x80":
            raise TensorFileError(f"{path}: unsupported legacy (non-zip) torch.save format: re-save it with torch>=1.6 "
                                  "(torch.save(torch.load(f), f))")
        if head[:2] == b"PK":
            raise TensorFileError(f"{path}: truncated or corrupt zip archive (no central directory)")
        raise TensorFileError(f"{path}: not a torch .pt file (neither a zip archive nor a legacy torch pickle)")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise TensorFileError(f"{path}: truncated or corrupt zip archive: {e}") from None
    with zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1] or \
              [n for n in names if n == "data.pkl"]
        if len(pkl) != 1:
            raise TensorFileError(f"{path}: not a torch zip archive: expected one '<archive>/data.pkl' record, found "
                                  f"{len(pkl)}")
        prefix = pkl[0][: -len("data.pkl")]
        bo = prefix + "byteorder"
        if bo in names:
            order = _read_member(zf, zf.getinfo(bo), min(zf.getinfo(bo).file_size, 16), path).decode("ascii", "replace")
            if order.strip() != "little":
                raise TensorFileError(f"{path}: byteorder record '{order.strip()}': only little-endian files are supported")
        info = zf.getinfo(pkl[0])
        if info.file_size > MAX_PICKLE_BYTES:
            raise TensorFileError(f"{path}: data.pkl of {info.file_size} bytes (limit {MAX_PICKLE_BYTES})")
        data = _read_member(zf, info, info.file_size, path)
        storages: Dict[str, _StorageRef] = {}
        try:
            obj = _make_unpickler(path, data, storages).load()
        except TensorFileError:
            raise
        except RecursionError:
            raise TensorFileError(f"{path}: data.pkl nests too deeply") from None
        except Exception as e:  # malformed pickle (UnpicklingError, EOFError, TypeError from a bad call ...)
            raise TensorFileError(f"{path}: data.pkl is not a readable torch pickle: {type(e).__name__}: {e}") from None
        cache: Dict[str, np.ndarray] = {}
        return _walk(obj, lambda spec, name: _materialize(spec, zf, prefix, cache, path, name or "<root>"), "")


# ---- safetensors ----
def load_safetensors(path: str) -> Dict[str, Any]:
    """{name: tensor} of a safetensors file (``__metadata__`` dropped)."""
    path = os.fspath(path)
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as e:
        raise TensorFileError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        if size < 8:
            raise TensorFileError(f"{path}: not a safetensors file ({size} bytes, shorter than the 8-byte header length)")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > MAX_HEADER_BYTES or n > size - 8:
            raise TensorFileError(f"{path}: safetensors header length {n} exceeds the file ({size} bytes) or the "
                                  f"{MAX_HEADER_BYTES}-byte limit (truncated or not a safetensors file)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise TensorFileError(f"{path}: safetensors header is not JSON: {e}") from None
        if not isinstance(header, dict):
            raise TensorFileError(f"{path}: safetensors header is not a JSON object")
        base, data_len = 8 + n, size - 8 - n
        out: Dict[str, Any] = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
                raise TensorFileError(f"{path}: tensor {name}: header entry lacks dtype, shape or data_offsets")
            dt = _ST_DTYPES.get(e["dtype"])
            if dt is None:
                raise TensorFileError(f"{path}: tensor {name}: unsupported safetensors dtype {e['dtype']!r} (supported: "
                                      + ", ".join(_ST_DTYPES) + ")")
            shape, offs = e["shape"], e["data_offsets"]
            if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                    or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
                raise TensorFileError(f"{path}: tensor {name}: bad shape {shape!r:.80}")
            if (not isinstance(offs, list) or len(offs) != 2
                    or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)
                    or not 0 <= offs[0] <= offs[1]):
                raise TensorFileError(f"{path}: tensor {name}: bad data_offsets {offs!r:.80}")
            np_dt = np.dtype(_TORCH_DTYPES[dt][0])
            count = 1
            for d in shape:
                count *= d
            if count * np_dt.itemsize > MAX_TENSOR_BYTES:
                raise TensorFileError(f"{path}: tensor {name}: shape {shape} over the {MAX_TENSOR_BYTES}-byte limit")
            if offs[1] - offs[0] != count * np_dt.itemsize:
                raise TensorFileError(f"{path}: tensor {name}: data_offsets {offs} span {offs[1] - offs[0]} bytes, "
                                      f"{e['dtype']} {shape} needs {count * np_dt.itemsize}")
            if offs[1] > data_len:
                raise TensorFileError(f"{path}: tensor {name}: data_offsets {offs} run past the data ({data_len} "
                                      "bytes; truncated file)")
            f.seek(base + offs[0])
            raw = np.frombuffer(f.read(offs[1] - offs[0]), dtype=np_dt).reshape(shape)
            out[name] = _finish(raw, dt)
        return out


# ---- npy ----
def load_npy(path: str) -> Any:
    """An ``.npy`` array (no pickled objects); bf16 / fp8 saved through ml_dtypes come back as Bits."""
    path = os.fspath(path)
    try:
        a = np.load(path, allow_pickle=False, mmap_mode="r")
    except FileNotFoundError:
        raise TensorFileError(f"{path}: file not found") from None
    except (ValueError, OSError, EOFError) as e:
        raise TensorFileError(f"{path}: not a readable .npy file: {e}") from None
    if a.nbytes > MAX_TENSOR_BYTES:
        raise TensorFileError(f"{path}: array of {a.nbytes} bytes (limit {MAX_TENSOR_BYTES})")
    name = a.dtype.name
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float16"):
        raw = np.array(a).view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)
        return _finish(raw, name)
    if a.dtype.kind not in "biuf":
        raise TensorFileError(f"{path}: unsupported .npy dtype {a.dtype}")
    return np.array(a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a)


def load_tensor_file(path: str) -> Any:
    """By extension: .pt / .pth / .bin (torch zip), .safetensors, .npy."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext == ".safetensors":
        return load_safetensors(path)
    if ext == ".npy":
        return load_npy(path)
    return load_pt(path)
