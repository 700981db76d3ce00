"""Writers of engine dump formats for tests, without torch: each follows the format's documented layout exactly.

torch ``.pt`` (zip, torch >= 1.6): pytorch/pytorch torch/serialization.py ``_save`` -- records under one archive
folder named after the file stem (``<stem>/data.pkl``, ``<stem>/.format_version`` "1", ``<stem>/.storage_alignment``
"64", ``<stem>/byteorder`` "little", ``<stem>/data/<key>`` the raw storage bytes, ``<stem>/version`` "3",
``<stem>/.data/serialization_id``); the pickle is protocol 2 (``DEFAULT_PROTOCOL = 2``), each storage a BINPERSID of
``('storage', storage_type, key, location, numel)`` (persistent_id in ``_save``: typed ``torch.<X>Storage`` with numel
in elements, or ``torch.storage.UntypedStorage`` with numel in bytes), each tensor
``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
collections.OrderedDict())`` -- or ``_rebuild_tensor_v3(..., dtype)`` for the dtypes of ``torch.storage._new_dtypes()``
(fp8, uint16/32/64): torch/_tensor.py ``_reduce_ex_internal``, torch/_utils.py. The opcode sequence below is the one
``pickletools.dis`` shows for a real ``torch.save`` (torch 2.15.0), minus the memo (BINPUT/BINGET) opcodes, which do
not change what is built. The writer stores records without torch's 64-byte alignment padding (the reader does not
depend on it; the committed real torch.save files in tests/data/import cover padded archives).

msprobe (PyPI mindstudio-probe 26.2.0): ``<dump>/step<N>/<proc>/dump.json`` = {"task", "level", "framework",
"dump_data_dir", "data": {API_NAME: {"input_args": [...], "input_kwargs": {...}, "output": [...]}}}, tensors as
{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape", "Max", "Min", "Mean", "Norm", "requires_grad",
"data_name"}, other values as {"type": "int", "value": ...}, None as null; tensor files
``dump_tensor_data/<API_NAME>.<input|kwargs|output>.<key>.pt`` (msprobe/core/dump/data_dump/data_processor/base.py
``get_save_file_path``, ``analyze_forward_input``: api_data_category "input" for args, "kwargs" for kwargs, key = the
position or the kwarg name; pytorch_processor.py ``_analyze_tensor`` / ``_analyze_builtin``), ``torch.save``'d.

sglang ``--debug-tensor-dump-output-folder``: ``<dir>/TP{tp}_PP{pp}_Rank{rank}_pid{pid}/Pass{id:05d}.pt`` = torch.save
of {module path: output tensor, or a list of tensors for a tuple output} (sgl-project/sglang
python/sglang/srt/debug_utils/tensor_dump_forward_hook.py ``TensorDumper``).

safetensors: huggingface/safetensors README.md "Format": u64 little-endian header size, JSON header
{name: {"dtype", "shape", "data_offsets"}, "__metadata__"}, then the data buffer.
"""
import json
import os
import struct
import zipfile

import numpy as np

# torch dtype -> (typed storage class or None for v3, numpy storage dtype)
TORCH = {
    "float32": ("FloatStorage", "<f4"), "float64": ("DoubleStorage", "<f8"), "float16": ("HalfStorage", "<u2"),
    "bfloat16": ("BFloat16Storage", "<u2"), "int8": ("CharStorage", "i1"), "uint8": ("ByteStorage", "u1"),
    "int16": ("ShortStorage", "<i2"), "int32": ("IntStorage", "<i4"), "int64": ("LongStorage", "<i8"),
    "bool": ("BoolStorage", "?"), "float8_e4m3fn": (None, "u1"), "float8_e5m2": (None, "u1"),
}
KIT_TO_TORCH = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


class T:
    """A tensor to write: raw storage values (numpy, any layout) + torch dtype name; `view` = (offset, size, stride)
    in elements over the flattened storage, default the contiguous whole."""

    def __init__(self, storage, dtype, view=None):
        self.storage = np.ascontiguousarray(storage).reshape(-1).view(np.dtype(TORCH[dtype][1]))
        self.dtype = dtype
        self.shape = tuple(np.asarray(storage).shape)
        if view is None:
            st, acc = [], 1
            for d in reversed(self.shape):
                st.append(acc)
                acc *= d
            view = (0, self.shape, tuple(reversed(st)))
        self.view = view


def tensor(a, kit_dtype=None):
    """T from a numpy array (native dtype) or raw bits with a kit dtype (bf16 / fp16 / fp8)."""
    a = np.asarray(a)
    if kit_dtype:
        return T(a, KIT_TO_TORCH[kit_dtype])
    return T(a, {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64", "int8": "int8",
                 "uint8": "uint8", "bool": "bool", "int16": "int16"}[a.dtype.name])


class _P:
    """Protocol-2 pickle opcodes, as torch's pickler emits them."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")  # PROTO 2

    def glob(self, mod, name):
        self.b += b"c" + f"{mod}\n{name}\n".encode()

    def s(self, v):
        e = v.encode("utf-8")
        self.b += b"X" + struct.pack("<I", len(e)) + e  # BINUNICODE

    def i(self, v):
        if 0 <= v < 256:
            self.b += b"K" + bytes([v])  # BININT1
        elif -(2 ** 31) <= v < 2 ** 31:
            self.b += b"J" + struct.pack("<i", v)  # BININT
        else:
            n = (v.bit_length() + 8) // 8
            self.b += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)  # LONG1

    def ints(self, vs):
        if len(vs) == 0:
            self.b += b")"
            return
        if len(vs) <= 3:
            for v in vs:
                self.i(v)
            self.b += {1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(vs)]  # TUPLE1/2/3
            return
        self.b += b"("
        for v in vs:
            self.i(v)
        self.b += b"t"

    def value(self, v, storages):
        if v is None:
            self.b += b"N"
        elif isinstance(v, bool):
            self.b += b"\x88" if v else b"\x89"
        elif isinstance(v, int):
            self.i(v)
        elif isinstance(v, str):
            self.s(v)
        elif isinstance(v, T):
            self.tensor(v, storages)
        elif isinstance(v, dict):
            self.b += b"}("  # EMPTY_DICT MARK
            for k, x in v.items():
                self.s(k)
                self.value(x, storages)
            self.b += b"u"  # SETITEMS
        elif isinstance(v, (list, tuple)):
            self.b += b"]("  # EMPTY_LIST MARK
            for x in v:
                self.value(x, storages)
            self.b += b"e"  # APPENDS
        else:
            raise TypeError(type(v))

    def tensor(self, t, storages):
        cls, _ = TORCH[t.dtype]
        key = str(len(storages))
        storages.append((key, t.storage.tobytes()))
        v3 = cls is None
        self.glob("torch._utils", "_rebuild_tensor_v3" if v3 else "_rebuild_tensor_v2")
        self.b += b"(("  # MARK MARK
        self.s("storage")
        if v3:
            self.glob("torch.storage", "UntypedStorage")
        else:
            self.glob("torch", cls)
        self.s(key)
        self.s("cpu")
        self.i(t.storage.nbytes if v3 else t.storage.size)
        self.b += b"tQ"  # TUPLE BINPERSID
        off, size, stride = t.view
        self.i(off)
        self.ints(size)
        self.ints(stride)
        self.b += b"\x89"  # NEWFALSE (requires_grad)
        self.glob("collections", "OrderedDict")
        self.b += b")R"  # EMPTY_TUPLE REDUCE
        if v3:
            self.glob("torch", t.dtype)
        self.b += b"tR"  # TUPLE REDUCE


def pt_bytes_pickle(obj):
    p = _P()
    storages = []
    p.value(obj, storages)
    p.b += b"."
    return bytes(p.b), storages


def write_pt(path, obj, pickle_bytes=None, storages=None, compress=False):
    """torch.save(obj, path) layout; pickle_bytes / storages override what is written (hostile files)."""
    pk, st = pt_bytes_pickle(obj) if pickle_bytes is None else (pickle_bytes, storages or [])
    stem = os.path.splitext(os.path.basename(path))[0]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        z.writestr(f"{stem}/data.pkl", pk)
        z.writestr(f"{stem}/.format_version", "1")
        z.writestr(f"{stem}/.storage_alignment", "64")
        z.writestr(f"{stem}/byteorder", "little")
        for key, data in st:
            z.writestr(f"{stem}/data/{key}", data)
        z.writestr(f"{stem}/version", "3")
        z.writestr(f"{stem}/.data/serialization_id", "0" * 40)


def write_safetensors(path, tensors, metadata=None):
    names = {"float32": "F32", "float64": "F64", "bfloat16": "BF16", "float16": "F16", "int8": "I8",
             "uint8": "U8", "int16": "I16", "int32": "I32", "int64": "I64", "bool": "BOOL",
             "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        data = np.ascontiguousarray(t.storage).tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.view[1]), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # the header is padded with spaces to 8 bytes (safetensors serialize)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- msprobe ----
def _tensor_json(t, data_name):
    vals = t.storage.astype(np.float64) if t.dtype in ("float32", "float64", "int32", "int64") else None
    return {"type": "torch.Tensor", "dtype": f"torch.{t.dtype}", "shape": list(t.view[1]),
            "Max": float(vals.max()) if vals is not None and vals.size else None,
            "Min": float(vals.min()) if vals is not None and vals.size else None, "Mean": None, "Norm": None,
            "requires_grad": False, "data_name": data_name}


def _value_json(v):
    if v is None:
        return None
    return {"type": type(v).__name__, "value": v}


class MsprobeDump:
    """Builds <root>/step0/proc<pid>/{dump.json, stack.json, construct.json, dump_tensor_data/}."""

    def __init__(self, root, task="tensor", pid=4242):
        self.dir = os.path.join(root, "step0", f"proc{pid}")
        self.tdir = os.path.join(self.dir, "dump_tensor_data")
        os.makedirs(self.tdir, exist_ok=True)
        self.task = task
        self.data = {}

    def _item(self, api, category, key, v, npy=False):
        if isinstance(v, T):
            dn = f"{api}.{category}.{key}." + ("npy" if npy else "pt")
            if self.task == "tensor":
                if npy:
                    off, size, stride = v.view
                    np.save(os.path.join(self.tdir, dn), np.lib.stride_tricks.as_strided(
                        v.storage[off:], size, [s * v.storage.itemsize for s in stride]).copy())
                else:
                    write_pt(os.path.join(self.tdir, dn), v)
            j = _tensor_json(v, dn)
            if self.task != "tensor":
                del j["data_name"]
            return j
        return _value_json(v)

    def call(self, op, args=(), kwargs=None, outputs=(), prefix="NPU", n=None, npy=()):
        """One forward call; returns its API name. npy: argument keys written as .npy instead of .pt."""
        if n is None:
            n = sum(1 for a in self.data if a.startswith(f"{prefix}.{op}."))
        api = f"{prefix}.{op}.{n}.forward"
        self.data[api] = {
            "input_args": [self._item(api, "input", i, v, i in npy) for i, v in enumerate(args)],
            "input_kwargs": {k: self._item(api, "kwargs", k, v, k in npy) for k, v in (kwargs or {}).items()},
            "output": [self._item(api, "output", i, v) for i, v in enumerate(outputs)],
        }
        return api

    def write(self):
        doc = {"task": self.task, "level": "L1", "framework": "pytorch", "dump_data_dir": self.tdir if self.task == "tensor" else None,
               "data": self.data}
        with open(os.path.join(self.dir, "dump.json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(self.dir, "stack.json"), "w") as f:
            json.dump([[list(self.data), ["File test.py, line 1, in <module>, \n call()"]]], f)
        with open(os.path.join(self.dir, "construct.json"), "w") as f:
            json.dump({}, f)
        return self.dir
