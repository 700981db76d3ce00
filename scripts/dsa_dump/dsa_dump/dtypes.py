"""Logical dtypes of schema v1 and the conversion of numpy / ml_dtypes / torch arrays to what is stored.

Schema v1 stores bf16 and fp16 as raw uint16 bits, fp8 (e4m3fn, e5m2) as raw uint8 bits, each with a string
attribute ``dtype``; int8 and everything else are native HDF5 types. Names follow the C++ side
(``src/numerics/dtype.cpp``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

# Canonical name -> (storage numpy dtype, stored as raw bits?)
STORAGE = {
    "bf16": (np.dtype("<u2"), True),
    "fp16": (np.dtype("<u2"), True),
    "fp8_e4m3fn": (np.dtype("u1"), True),
    "fp8_e5m2": (np.dtype("u1"), True),
    "int8": (np.dtype("i1"), False),
    "uint8": (np.dtype("u1"), False),
    "uint16": (np.dtype("<u2"), False),
    "int32": (np.dtype("<i4"), False),
    "int64": (np.dtype("<i8"), False),
    "float32": (np.dtype("<f4"), False),
    "float64": (np.dtype("<f8"), False),
}
BITS_DTYPES = tuple(k for k, (_, bits) in STORAGE.items() if bits)

# Aliases accepted by the C++ parse_dtype (lower-cased).
_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "f16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fn": "fp8_e4m3fn", "f8_e4m3": "fp8_e4m3fn", "e4m3fn": "fp8_e4m3fn",
    "fp8_e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "f8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "int8": "int8", "i8": "int8", "uint8": "uint8", "u8": "uint8", "uint16": "uint16", "u16": "uint16",
    "int32": "int32", "i32": "int32", "int64": "int64", "i64": "int64", "float32": "float32", "f32": "float32",
    "fp32": "float32", "float": "float32", "float64": "float64", "fp64": "float64", "f64": "float64",
    "double": "float64",
}

# numpy dtype name (incl. ml_dtypes' names) -> logical dtype.
_NUMPY_NAMES = {
    "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2",
    "int8": "int8", "uint8": "uint8", "uint16": "uint16", "int32": "int32", "int64": "int64",
    "float32": "float32", "float64": "float64", "bool": "uint8",
}

# torch dtype name (str(torch.xxx) without "torch.") -> logical dtype.
_TORCH_NAMES = {
    "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2",
    "int8": "int8", "uint8": "uint8", "uint16": "uint16", "int32": "int32", "int64": "int64",
    "float32": "float32", "float64": "float64", "bool": "uint8",
}


def parse_dtype(name: str) -> Optional[str]:
    """Canonical dtype name for `name` (aliases as the C++ parse_dtype), or None."""
    return _ALIASES.get(str(name).lower())


@dataclass
class Bits:
    """Raw bits that already hold a logical dtype: ``Bits(uint16_array, "bf16")``."""

    array: Any
    dtype: str


def is_torch_tensor(x: Any) -> bool:
    t = type(x)
    return t.__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype")


def _torch_to_numpy(t: Any) -> Tuple[np.ndarray, str]:
    name = str(t.dtype).replace("torch.", "")
    logical = _TORCH_NAMES.get(name)
    if logical is None:
        raise TypeError(f"torch dtype {t.dtype} has no schema-v1 dtype (supported: "
                        + ", ".join(sorted(_TORCH_NAMES)) + ")")
    import torch  # present, since we were handed a torch tensor

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if logical in ("bf16", "fp16"):
        return t.view(torch.int16).numpy().view(np.uint16).copy(), logical
    if logical in ("fp8_e4m3fn", "fp8_e5m2"):
        return t.view(torch.uint8).numpy().copy(), logical
    if name == "bool":
        return t.to(torch.uint8).numpy().copy(), logical
    if name == "uint16":  # numpy() of uint16 needs a recent torch; go through int16 bits
        return t.view(torch.int16).numpy().view(np.uint16).copy(), logical
    return t.numpy().copy(), logical


def to_storage(x: Any, dtype: Optional[str] = None) -> Tuple[np.ndarray, str]:
    """(C-contiguous little-endian storage array, canonical logical dtype) for a torch tensor, a numpy /
    ml_dtypes array, a ``Bits`` wrapper or a Python scalar / list. ``dtype`` reinterprets raw integer bits: a
    uint16 (or int16) array with dtype="bf16" is taken as bf16 bits; a value array must already have that dtype."""
    if isinstance(x, Bits):
        return to_storage(x.array, x.dtype)
    want = None
    if dtype is not None:
        want = parse_dtype(dtype)
        if want is None:
            raise TypeError(f"unknown dtype '{dtype}' (one of {', '.join(STORAGE)})")
    if is_torch_tensor(x):
        if want is not None and STORAGE[want][1] and str(x.dtype) in ("torch.int16", "torch.uint8", "torch.int8"):
            import torch

            x = x.view(torch.int16) if STORAGE[want][0].itemsize == 2 else x.view(torch.uint8)
            arr = x.detach().cpu().contiguous().numpy()
            logical = "int8" if arr.dtype == np.int8 else "uint8"
        else:
            arr, logical = _torch_to_numpy(x)
    else:
        arr = np.asarray(x)
        name = arr.dtype.name
        logical = _NUMPY_NAMES.get(name)
        if logical is None and not (want is not None and arr.dtype.kind in "iu"):
            raise TypeError(f"numpy dtype {arr.dtype} has no schema-v1 dtype (supported: "
                            + ", ".join(sorted(_NUMPY_NAMES)) + "; wrap raw bits as dsa_dump.Bits(array, 'bf16'))")
        if name == "bool":
            arr = arr.astype(np.uint8)
    if want is not None and want != logical:
        st = STORAGE[want][0]
        if not (STORAGE[want][1] and arr.dtype.kind in "iu" and arr.dtype.itemsize == st.itemsize):
            raise TypeError(f"cannot store {arr.dtype} data as dtype {want}: pass its raw bits as a "
                            f"{st.itemsize}-byte integer array")
        logical = want
    st = STORAGE[logical][0]
    arr = np.ascontiguousarray(arr)
    if arr.dtype != st:
        if STORAGE[logical][1]:  # raw bits are reinterpreted, never value-converted
            if arr.dtype.kind in "iuf" and arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            arr = arr.view(st)
        else:  # same logical dtype, other byte order
            arr = arr.astype(st)
    return arr, logical


def from_storage(raw: np.ndarray, logical: str, as_ml_dtypes: bool = True) -> np.ndarray:
    """A numpy array with the logical dtype: float16 for fp16, ml_dtypes bfloat16 / float8 for bf16 / fp8 when
    ml_dtypes is importable (else the raw bits), native arrays otherwise."""
    if logical == "fp16":
        return raw.view(np.float16)
    if logical in ("bf16", "fp8_e4m3fn", "fp8_e5m2") and as_ml_dtypes:
        try:
            import ml_dtypes
        except ImportError:
            return raw
        return raw.view({"bf16": ml_dtypes.bfloat16, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
                         "fp8_e5m2": ml_dtypes.float8_e5m2}[logical])
    return raw


def to_torch(raw: np.ndarray, logical: str, device: str = "cpu") -> Any:
    """A torch tensor with the logical dtype from stored raw bits (torch must be importable)."""
    import torch

    raw = np.ascontiguousarray(raw)
    if logical in ("bf16", "fp16"):
        t = torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16 if logical == "bf16" else torch.float16)
    elif logical in ("fp8_e4m3fn", "fp8_e5m2"):
        t = torch.from_numpy(raw.copy()).view(torch.float8_e4m3fn if logical == "fp8_e4m3fn" else torch.float8_e5m2)
    elif logical == "uint16":
        t = torch.from_numpy(raw.view(np.int16).copy())
        t = t.view(torch.uint16) if hasattr(torch, "uint16") else t.to(torch.int32) & 0xFFFF
    else:
        t = torch.from_numpy(raw.copy())
    return t.to(device) if device != "cpu" else t


def to_float64(raw: np.ndarray, logical: str) -> np.ndarray:
    """Values as float64 (for statistics and comparisons), decoding bf16/fp16/fp8 bits without ml_dtypes."""
    if logical == "fp16":
        return raw.view(np.float16).astype(np.float64)
    if logical == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if logical in ("fp8_e4m3fn", "fp8_e5m2"):
        table = _fp8_table(logical)
        return table[raw]
    return raw.astype(np.float64)


def _fp8_table(logical: str) -> np.ndarray:
    """All 256 fp8 code values, decoded from the format definition (OCP e4m3fn / e5m2)."""
    e_bits, m_bits, bias = (4, 3, 7) if logical == "fp8_e4m3fn" else (5, 2, 15)
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> m_bits) & ((1 << e_bits) - 1)
        m = code & ((1 << m_bits) - 1)
        if logical == "fp8_e4m3fn" and e == 15 and m == 7:
            v = float("nan")
        elif logical == "fp8_e5m2" and e == 31:
            v = float("inf") if m == 0 else float("nan")
        elif e == 0:
            v = m * 2.0 ** (1 - bias - m_bits)
        else:
            v = (1.0 + m / (1 << m_bits)) * 2.0 ** (e - bias)
        out[code] = sign * v
    return out
