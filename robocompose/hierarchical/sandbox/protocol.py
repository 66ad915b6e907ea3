"""Framing of the pipe between parent and child: a 4-byte big-endian length, then the payload.

The child's messages are JSON (never pickle: the parent must not run code because of what an
untrusted child sent) and are bounded in size; the parent kills a child that breaks the framing.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

_LENGTH = struct.Struct(">I")


class ProtocolError(Exception):
    """The other side broke the framing or sent a message that is too large."""


def frame_bytes(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


def send_frame(fd: int, payload: bytes) -> None:
    """Blocking write of one whole frame."""
    data = memoryview(frame_bytes(payload))
    while data:
        data = data[os.write(fd, data) :]


def send_json(fd: int, message: dict[str, Any]) -> None:
    send_frame(fd, json.dumps(message).encode())


def read_frame(fd: int, max_bytes: int) -> bytes:
    """Blocking read of one whole frame (the child's side)."""
    (length,) = _LENGTH.unpack(_read_exactly(fd, _LENGTH.size))
    if length > max_bytes:
        raise ProtocolError(f"a frame of {length} bytes is larger than {max_bytes}")
    return _read_exactly(fd, length)


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise ProtocolError("the pipe closed in the middle of a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Non-blocking side (the parent's): feed bytes as they arrive, take whole frames out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames = []
        while len(self.buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self.buffer)
            if length > self.max_bytes:
                raise ProtocolError(
                    f"the child sent a message of {length} bytes; at most {self.max_bytes} "
                    "are allowed"
                )
            end = _LENGTH.size + length
            if len(self.buffer) < end:
                break
            frames.append(bytes(self.buffer[_LENGTH.size : end]))
            del self.buffer[:end]
        return frames
