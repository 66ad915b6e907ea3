"""A single-writer, single-reader ring buffer of fixed-size float64 records in shared memory.

The policy process writes timestamped waypoints into one; the control process writes its
per-tick telemetry into another. Neither side ever blocks or takes a lock: each record carries a
sequence counter, odd while its slot is being written and 2 * (write index + 1) once complete, so
the reader can tell a torn read (odd, or changed while copying) and an overwritten slot (a later
lap's counter) from a good record. A reader that falls more than `capacity` records behind skips
to the oldest record still in the buffer and counts the records it lost (an overrun).

    ring = RingBuffer.create(capacity=1024, width=11)   # owner; ring.name goes to the other side
    other = RingBuffer.attach(ring.name)                 # in the other process
    ring.write(values)                                   # (width,) floats
    batch = other.read_new()                             # ReadBatch: records (n, width), lost, torn
    last = other.latest()                                # the newest complete record, or None
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

HEADER_WORDS = 4  # [head (records written), capacity, width, spare], uint64


@dataclass(frozen=True)
class ReadBatch:
    """What one `read_new` found: the complete records in write order, and what it could not
    read (records overwritten before they were read; records caught mid-write)."""

    records: np.ndarray  # (n, width) float64
    lost: int
    torn: int


class RingBuffer:
    """See the module docstring. `create` owns the segment (and unlinks it on `close`);
    `attach` maps an existing one."""

    def __init__(self, shm: shared_memory.SharedMemory, *, owner: bool) -> None:
        self.shm, self.owner = shm, owner
        header = np.ndarray((HEADER_WORDS,), dtype=np.uint64, buffer=shm.buf)
        self.capacity, self.width = int(header[1]), int(header[2])
        self._head = header[0:1]
        offset = HEADER_WORDS * 8
        self._seq = np.ndarray((self.capacity,), dtype=np.uint64, buffer=shm.buf, offset=offset)
        offset += self.capacity * 8
        self._data = np.ndarray(
            (self.capacity, self.width), dtype=np.float64, buffer=shm.buf, offset=offset
        )
        self._next = int(self._head[0])  # the reader's position: the next write index to read

    @classmethod
    def create(cls, capacity: int, width: int) -> RingBuffer:
        if capacity < 1 or width < 1:
            raise ValueError(f"`capacity` and `width` must be >= 1. Got {capacity}, {width}.")
        size = 8 * (HEADER_WORDS + capacity + capacity * width)
        shm = shared_memory.SharedMemory(create=True, size=size)
        header = np.ndarray((HEADER_WORDS,), dtype=np.uint64, buffer=shm.buf)
        header[:] = (0, capacity, width, 0)
        np.ndarray((capacity,), dtype=np.uint64, buffer=shm.buf, offset=HEADER_WORDS * 8)[:] = 0
        return cls(shm, owner=True)

    @classmethod
    def attach(cls, name: str) -> RingBuffer:
        # A spawned child shares its parent's resource tracker, so registering the segment
        # again is a no-op there and the creator alone unlinks it.
        return cls(shared_memory.SharedMemory(name=name), owner=False)

    @property
    def name(self) -> str:
        return self.shm.name

    @property
    def written(self) -> int:
        """Records written so far."""
        return int(self._head[0])

    def write(self, values: np.ndarray) -> None:
        """Append one record of `width` floats (the oldest is overwritten when full)."""
        i = int(self._head[0])
        slot = i % self.capacity
        self._seq[slot] = 2 * i + 1  # being written
        self._data[slot] = values
        self._seq[slot] = 2 * i + 2  # complete
        self._head[0] = i + 1

    def read_new(self) -> ReadBatch:
        """Every complete record written since the last call, in order."""
        head = int(self._head[0])
        lost = torn = 0
        if head - self._next > self.capacity:
            lost = head - self.capacity - self._next
            self._next = head - self.capacity
        rows = []
        for i in range(self._next, head):
            record = self._read(i)
            if record is None:
                torn += 1
            else:
                rows.append(record)
        self._next = head
        records = np.stack(rows) if rows else np.empty((0, self.width))
        return ReadBatch(records, lost, torn)

    def latest(self) -> np.ndarray | None:
        """The newest complete record (retried if caught mid-write), or None if none is."""
        for _ in range(4):
            head = int(self._head[0])
            if head == 0:
                return None
            record = self._read(head - 1)
            if record is not None:
                return record
        return None

    def skip_to_end(self) -> None:
        """Forget everything written so far (a reader starting afresh)."""
        self._next = int(self._head[0])

    def close(self) -> None:
        """Unmap; the owner also removes the segment."""
        self._head = self._seq = self._data = None  # type: ignore[assignment]
        self.shm.close()
        if self.owner:
            with contextlib.suppress(FileNotFoundError):
                self.shm.unlink()

    def _read(self, i: int) -> np.ndarray | None:
        slot, expected = i % self.capacity, 2 * i + 2
        if int(self._seq[slot]) != expected:
            return None
        record = self._data[slot].copy()
        return record if int(self._seq[slot]) == expected else None
