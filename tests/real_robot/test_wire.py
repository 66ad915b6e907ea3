"""The wire format: every allowed dtype round-trips into writeable arrays; nothing else passes."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from robocompose.real_robot.wire import WireError, pack, unpack

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", ">f8", ">i4",
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0, 3), (5,), (2, 3, 4)])
def test_arrays_round_trip_writeable(dtype, shape):
    rng = np.random.default_rng(0)
    array = np.asarray(rng.standard_normal(shape) * 50).astype(dtype)
    back = unpack(pack({"x": array}))["x"]
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)
    assert back.flags.writeable and back.flags.owndata
    back[...] = 0  # the caller may write into what it received


def test_image_history_and_views():
    images = np.random.default_rng(1).integers(0, 256, (2, 96, 96, 3), dtype=np.uint8)
    view = np.arange(24.0).reshape(4, 6)[:, ::2].T  # neither C- nor F-contiguous
    back = unpack(pack({"image": images, "view": view}))
    np.testing.assert_array_equal(back["image"], images)
    np.testing.assert_array_equal(back["view"], view)
    assert back["image"].dtype == np.uint8


def test_strings_scalars_and_nesting():
    message = {
        "names": np.array(["cube", "bin"]),
        "raw": np.array([b"ab", b"c"]),
        "seed": np.int64(7),
        "flag": np.bool_(True),
        "gain": np.float32(0.5),
        "nested": {"list": [1, 2.5, "text", None, np.arange(3)]},
    }
    back = unpack(pack(message))
    np.testing.assert_array_equal(back["names"], message["names"])
    np.testing.assert_array_equal(back["raw"], message["raw"])
    for key in ("seed", "flag", "gain"):
        assert type(back[key]) is type(message[key]) and back[key] == message[key]
    assert back["nested"]["list"][:4] == [1, 2.5, "text", None]
    np.testing.assert_array_equal(back["nested"]["list"][4], np.arange(3))


@pytest.mark.parametrize(
    "value",
    [np.array([{"a": 1}], dtype=object), np.zeros(2, dtype="V4"), np.zeros(2, np.complex64),
     np.complex128(1j), np.array(["2020-01-01"], dtype="datetime64[D]")],
)  # fmt: skip
def test_unsupported_dtypes_are_refused_when_packing(value):
    with pytest.raises(WireError, match="cannot travel on the wire"):
        pack({"x": value})


def test_plain_python_objects_are_refused():
    with pytest.raises(WireError, match="cannot encode a object"):
        pack({"x": object()})


def _raw(**fields) -> bytes:
    array = {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "<f8", b"shape": [1]}
    return msgpack.packb({"x": array | {k.encode(): v for k, v in fields.items()}})


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"dtype": "|O"}, "dtype object cannot travel"),  # pickle would be needed to read it
        ({"dtype": "|V8"}, "cannot travel"),
        ({"dtype": "no-such-type"}, "not a numpy dtype"),
        ({"dtype": 3}, "`dtype` must be a string"),
        ({"shape": [2]}, r"shape \(2,\) and dtype float64 needs 16 bytes. Got 8"),
        ({"shape": [-1]}, "`shape` must be a list of sizes"),
        ({"data": "text"}, "`data` must be bytes"),
    ],
)
def test_malformed_arrays_are_named(fields, named):
    with pytest.raises(WireError, match=named):
        unpack(_raw(**fields))


def test_undecodable_bytes():
    for junk in (b"\xc1", b"\x92\x01", pack({"a": 1}) + b"trailing"):
        with pytest.raises(WireError, match="undecodable message"):
            unpack(junk)


def test_same_bytes_as_openpi():
    """openpi's own codec reads ours and we read its (the installed package, not a copy)."""
    openpi = pytest.importorskip("openpi_client.msgpack_numpy", reason="no openpi-client")
    message = {"state": np.arange(6.0).reshape(2, 3), "image": np.zeros((2, 4, 4, 3), np.uint8),
               "seed": np.int64(3)}  # fmt: skip
    assert openpi.packb(message) == pack(message)
    theirs = openpi.unpackb(pack(message))
    np.testing.assert_array_equal(theirs["state"], message["state"])
    ours = unpack(openpi.packb(message))
    np.testing.assert_array_equal(ours["image"], message["image"])
    assert ours["seed"] == 3 and ours["image"].flags.writeable
