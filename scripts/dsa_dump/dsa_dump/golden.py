"""Feed a golden file's inputs to a user's kernel and write its outputs next to them for `dsa-check check`."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import dtypes as _dt
from .h5 import Case, DumpWriter, read_dump


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def case_inputs(case: Case, framework: str = "auto", device: str = "cpu") -> Dict[str, Any]:
    """A case's inputs as torch tensors with their logical dtypes (bf16, float8_e4m3fn, ...) on `device`, or as
    numpy arrays (ml_dtypes for bf16/fp8 when available) when torch is missing or framework="numpy"."""
    use_torch = framework == "torch" or (framework == "auto" and _torch_available())
    out = {}
    for name in case.inputs:
        key = f"inputs/{name}"
        if use_torch:
            out[name] = _dt.to_torch(case.raw[key], case.dtypes[key], device)
        else:  # a copy: a kernel writing into its inputs must not reach the case
            out[name] = case.inputs[name].copy()
    return out


def run_golden(golden_path: str, kernel_fn: Callable[..., Mapping[str, Any]], out_path: str, device: str = "cpu",
               cases: Optional[Sequence[str]] = None, framework: str = "auto", keep_expected: bool = True) -> str:
    """For each case of `golden_path` (or only those named in `cases`): calls
    ``kernel_fn(inputs, attrs, case)`` — inputs a dict of torch tensors on `device` (numpy when torch is missing),
    attrs the case's attrs, case the read Case — which returns a dict of output tensors ({"logits": t}); then
    writes a copy of the file with those tensors under outputs/ to `out_path` (atomic). Inputs are copied
    bit-for-bit and never modified (a kernel writing into its inputs does not change the copy); expected/ is
    kept unless keep_expected=False. Then run ``dsa-check check out_path``. Returns out_path."""
    if os.path.abspath(golden_path) == os.path.abspath(out_path):
        raise ValueError(f"{out_path}: refusing to overwrite the golden file itself")
    all_cases: List[Case] = read_dump(golden_path)
    with DumpWriter(out_path) as w:
        for c in all_cases:
            if cases is not None and c.name not in cases:
                continue
            inputs = {n: _dt.Bits(c.raw[f"inputs/{n}"].copy(), c.dtypes[f"inputs/{n}"]) for n in c.inputs}
            ins = case_inputs(c, framework, device)
            result = kernel_fn(ins, dict(c.attrs), c)
            if not isinstance(result, Mapping):
                raise TypeError(f"{golden_path}: case '{c.name}': kernel_fn must return a dict of output tensors, "
                                f"found {type(result).__name__}")
            expected = ({n: _dt.Bits(c.raw[f"expected/{n}"], c.dtypes[f"expected/{n}"]) for n in c.expected}
                        if keep_expected else {})
            w.add_case(c.name, c.stage, inputs, dict(result), expected, c.attrs)
    return out_path
