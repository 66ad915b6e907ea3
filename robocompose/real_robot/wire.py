"""The wire format of the policy server: msgpack with numpy arrays as plain maps (openpi's format).

    ndarray    -> {b"__ndarray__": True, b"data": bytes (C order), b"dtype": "<f4", b"shape": [..]}
    np.generic -> {b"__npgeneric__": True, b"data": the Python value, b"dtype": "<i8"}

Nothing is ever pickled: only bool, integer, float, bytes and unicode dtypes travel, and a map
naming any other dtype (object, void, complex, datetime) is refused on both sides. Decoded arrays
own writeable memory (openpi's decoder returns read-only views of the message buffer).
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

WIRE_DTYPE_KINDS = "biufSU"  # bool, int, uint, float, bytes, unicode
_KIND_NAMES = "bool, integer, unsigned integer, float, bytes or unicode"


class WireError(ValueError):
    """A message that cannot be encoded or decoded; the text says which part and why."""


def _checked_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind not in WIRE_DTYPE_KINDS or dtype.hasobject:
        raise WireError(
            f"dtype {dtype} cannot travel on the wire (only {_KIND_NAMES} dtypes; never pickle)."
        )
    return dtype


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _checked_dtype(obj.dtype)
        return {
            b"__ndarray__": True,
            b"data": obj.tobytes(),  # C order whatever the strides
            b"dtype": obj.dtype.str,
            b"shape": list(obj.shape),
        }
    if isinstance(obj, np.generic):
        _checked_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise WireError(f"cannot encode a {type(obj).__name__} (msgpack types and numpy arrays only).")


def _dtype_from(value: Any) -> np.dtype:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        raise WireError(f"array `dtype` must be a string such as '<f4'. Got {value!r}.")
    try:
        dtype = np.dtype(value)
    except TypeError as e:
        raise WireError(f"array `dtype` {value!r} is not a numpy dtype ({e}).") from None
    return _checked_dtype(dtype)


def _decode_array(obj: dict) -> np.ndarray:
    data, shape = obj.get(b"data"), obj.get(b"shape")
    dtype = _dtype_from(obj.get(b"dtype"))
    if not isinstance(data, bytes | bytearray):
        raise WireError(f"array `data` must be bytes. Got {type(data).__name__}.")
    if not isinstance(shape, list | tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise WireError(f"array `shape` must be a list of sizes >= 0. Got {shape!r}.")
    expected = math.prod(shape) * dtype.itemsize
    if len(data) != expected:
        raise WireError(
            f"array of shape {tuple(shape)} and dtype {dtype} needs {expected} bytes. "
            f"Got {len(data)}."
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        return _decode_array(obj)
    if b"__npgeneric__" in obj:
        dtype = _dtype_from(obj.get(b"dtype"))
        try:
            return dtype.type(obj.get(b"data"))
        except (TypeError, ValueError, OverflowError) as e:
            raise WireError(f"numpy scalar of dtype {dtype} cannot hold its data ({e}).") from None
    return obj


def pack(obj: Any) -> bytes:
    """Encode a message (nested dicts/lists of msgpack types and numpy arrays)."""
    try:
        return msgpack.packb(obj, default=_encode)
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, WireError):
            raise
        raise WireError(f"cannot encode message: {e}") from None


def unpack(data: bytes) -> Any:
    """Decode a message; anything malformed raises `WireError` naming what is wrong."""
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except WireError:
        raise
    except (msgpack.UnpackException, ValueError, TypeError) as e:
        reason = f"{type(e).__name__} {e}".strip()
        raise WireError(f"undecodable message ({len(data)} bytes): {reason}") from None
