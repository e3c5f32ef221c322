"""What hy saves and loads: tensors, numpy arrays, Shards and plain values.

A state dict is a (nested) dict. Its leaves are torch tensors (CPU), numpy
arrays, hystate.Shard (a rank's box of a larger tensor) or JSON values (numbers,
strings, booleans, None, lists of them). Nested keys join with "/": the
tensor sd["optim"]["exp_avg"] is named "optim/exp_avg".

Memory: save hands hy views of the values' own memory (numpy views of torch
tensors, bf16 viewed as int16); load writes into them in place. Only a
non-contiguous tensor is copied on save, and refused as a load target.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, List, Sequence, Tuple

import numpy as np

from . import _hy

_NUMPY = {
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.float64): "F64",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}
_TORCH = {
    "float32": "F32",
    "bfloat16": "BF16",
    "float16": "F16",
    "float64": "F64",
    "int64": "I64",
    "int32": "I32",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}


class Shard:
    """A rank's piece of a larger tensor: `tensor` holds the box that starts
    at `offsets` in a tensor of `global_shape` (row-major, like a
    torch.distributed ShardedTensor's local shard). The box is checked
    when saved or loaded: one that does not fit the global shape raises
    InvalidArgument naming the rank, before anything is written."""

    def __init__(self, tensor: Any, offsets: Sequence[int],
                 global_shape: Sequence[int]):
        self.tensor = tensor
        self.offsets = [int(o) for o in offsets]
        self.global_shape = [int(d) for d in global_shape]

    def __repr__(self) -> str:
        return (f"hystate.Shard(shape={list(_shape(self.tensor))}, "
                f"offsets={self.offsets}, global_shape={self.global_shape})")


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(
        value, "data_ptr")


def _shape(value: Any) -> Tuple[int, ...]:
    return tuple(int(d) for d in value.shape)


def is_tensor_like(value: Any) -> bool:
    return isinstance(value, (Shard, np.ndarray)) or _is_torch(value)


def as_array(value: Any, name: str, writable: bool) -> Tuple[np.ndarray, str]:
    """A numpy view of `value`'s memory and hy's dtype name for it."""
    if _is_torch(value):
        import torch

        if value.device.type != "cpu":
            raise _hy.InvalidArgument(
                f"{name}: on {value.device}; hystate.save and load take CPU "
                "tensors (.cpu() them, or save through hystate.dcp, whose writer "
                "copies CUDA tensors and DTensor shards to the host)")
        kind = str(value.dtype).replace("torch.", "")
        if kind not in _TORCH:
            raise _hy.InvalidArgument(f"{name}: dtype {value.dtype} unsupported")
        t = value.detach()
        if not t.is_contiguous():
            if writable:
                raise _hy.InvalidArgument(
                    f"{name}: not contiguous; load needs a contiguous target")
            t = t.contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy(), _TORCH[kind]
    if isinstance(value, np.ndarray):
        if value.dtype not in _NUMPY:
            raise _hy.InvalidArgument(f"{name}: dtype {value.dtype} unsupported")
        if writable:
            if not value.flags.c_contiguous or not value.flags.writeable:
                raise _hy.InvalidArgument(
                    f"{name}: load needs a writable C-contiguous array")
            return value, _NUMPY[value.dtype]
        return np.ascontiguousarray(value), _NUMPY[value.dtype]
    raise _hy.InvalidArgument(f"{name}: {type(value).__name__} is not a tensor")


class Piece:
    """One tensor leaf, ready for the C++ side."""

    def __init__(self, name: str, value: Any, writable: bool):
        self.name = name
        if isinstance(value, Shard):
            self.array, self.dtype = as_array(value.tensor, name, writable)
            self.global_shape = list(value.global_shape)
            sizes = list(_shape(value.tensor))
            if len(sizes) != len(value.offsets) or len(sizes) != len(
                    self.global_shape):
                raise _hy.InvalidArgument(
                    f"{name}: a Shard of a {len(sizes)}-d tensor needs "
                    f"{len(sizes)} offsets and global dimensions, got "
                    f"{value.offsets} and {value.global_shape}")
            try:
                self.runs = _hy.box_runs(value.offsets, sizes,
                                         self.global_shape)
            except _hy.InvalidArgument as e:
                raise _hy.InvalidArgument(
                    f"{name}: Shard at {value.offsets} of shape {sizes} does "
                    f"not fit the global shape {self.global_shape}: {e}"
                ) from None
            self.geometry = _hy.box_geometry(value.offsets, sizes)
        else:
            self.array, self.dtype = as_array(value, name, writable)
            self.global_shape = list(_shape(value))
            n = int(np.prod(self.global_shape)) if self.global_shape else 1
            self.runs = [(0, n)] if n > 0 else []
            self.geometry = _hy.box_geometry([0] * len(self.global_shape),
                                             self.global_shape)

    def for_save(self) -> tuple:
        return (self.name, self.dtype, self.global_shape, self.geometry,
                self.array.reshape(-1).view(np.uint8))


def leaves(state: dict, prefix: str = "") -> Iterator[Tuple[dict, Any, str, Any]]:
    """(parent, key, name, value) for every leaf, depth first."""
    if not isinstance(state, dict):
        raise _hy.InvalidArgument(
            f"a state dict is a dict, not {type(state).__name__}")
    for key, value in state.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            yield from leaves(value, name + "/")
        else:
            yield state, key, name, value


def check_plain(name: str, value: Any) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise _hy.InvalidArgument(
            f"{name}: {type(value).__name__} is neither a tensor nor a JSON "
            "value") from None


def split(state: dict, writable: bool) -> Tuple[List[Piece], dict]:
    """The tensor leaves (checked) and the plain values by name."""
    pieces, plain = [], {}
    for _, _, name, value in leaves(state):
        if is_tensor_like(value):
            pieces.append(Piece(name, value, writable))
        else:
            check_plain(name, value)
            plain[name] = value
    return pieces, plain
