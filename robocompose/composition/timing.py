"""What each parent of a composed policy costs per chunk, measured on the calls a run makes.

A `ComposedPolicy` keeps one `ParentTimes`: the wall time of each parent's observation encoder
and denoiser calls (or of its whole native sample, for the mixture), and of every chunk end to
end. Timing wraps calls that run anyway (no extra inference) and reads only the clock, so the
actions are those of an untimed run. Parents fused into one stacked network share their
denoiser time, which is reported for the pair; parents on concurrent threads overlap in time.
On a GPU the clock sees kernel launches, which may finish later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ParentTimes:
    """Seconds and call counts per parent; `summary()` says it per chunk in milliseconds."""

    names: list[str]
    encode_s: list[float] = field(default_factory=list)
    denoise_s: list[float] = field(default_factory=list)
    denoise_calls: list[int] = field(default_factory=list)
    chunks_of: list[int] = field(default_factory=list)  # chunks each parent worked on
    fused_s: float = 0.0  # the stacked network of fused parents, all of them at once
    fused_calls: int = 0
    total_s: float = 0.0  # whole chunks: parents, operator and sampler
    chunks: int = 0
    parallel: bool = False
    enabled: bool = True  # False: nothing is timed or counted
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        k = len(self.names)
        for name in ("encode_s", "denoise_s", "denoise_calls", "chunks_of"):
            if not getattr(self, name):
                setattr(self, name, [0] * k)

    @contextmanager
    def encoding(self, i: int, rows: int) -> Iterator[None]:
        """Parent i encodes the observations of `rows` chunks."""
        start = time.perf_counter()
        yield
        self._record(start, "encode_s", "chunks_of", i, rows)

    @contextmanager
    def sampling(self, i: int, rows: int) -> Iterator[None]:
        """Parent i samples `rows` chunks alone with its own sampler (the mixture)."""
        start = time.perf_counter()
        yield
        self._record(start, "denoise_s", "chunks_of", i, rows)

    @contextmanager
    def denoising(self, i: int) -> Iterator[None]:
        """One denoiser call of parent i (parallel parents call it from their threads)."""
        start = time.perf_counter()
        yield
        self._record(start, "denoise_s", "denoise_calls", i)

    @contextmanager
    def fused(self) -> Iterator[None]:
        """One call of the fused parents' stacked network."""
        start = time.perf_counter()
        yield
        self._record(start, "fused_s", "fused_calls")

    @contextmanager
    def chunk(self, rows: int) -> Iterator[None]:
        """`rows` chunks inferred in one call, end to end."""
        start = time.perf_counter()
        yield
        self._record(start, "total_s", "chunks", count=rows)

    def _record(
        self, start: float, seconds: str, counter: str, i: int | None = None, count: int = 1
    ) -> None:
        """The time since `start` onto field `seconds`, `count` onto field `counter` (their
        element i when given)."""
        if not self.enabled:
            return
        took = time.perf_counter() - start
        with self._lock:
            for name, value in ((seconds, took), (counter, count)):
                if i is None:
                    setattr(self, name, getattr(self, name) + value)
                else:
                    getattr(self, name)[i] += value

    def add(self, other: ParentTimes) -> None:
        """Fold in another policy's times over the same parents (a search's candidates)."""
        if other.names != self.names:
            raise ValueError(f"parent times of {other.names} cannot add to {self.names}.")
        for name in ("encode_s", "denoise_s", "denoise_calls", "chunks_of"):
            mine = getattr(self, name)
            for i, value in enumerate(getattr(other, name)):
                mine[i] += value
        self.fused_s += other.fused_s
        self.fused_calls += other.fused_calls
        self.total_s += other.total_s
        self.chunks += other.chunks
        self.parallel = self.parallel or other.parallel

    def per_chunk_ms(self) -> dict[str, float]:
        """Each parent's milliseconds per chunk it worked on (encoder and its own denoiser
        calls), then "fused" (the stacked network, per chunk) and "total" per chunk."""
        ms = {
            name: 1000 * (self.encode_s[i] + self.denoise_s[i]) / self.chunks_of[i]
            for i, name in enumerate(self.names)
            if self.chunks_of[i]
        }
        if self.fused_calls and self.chunks:
            ms["fused"] = 1000 * self.fused_s / self.chunks
        if self.chunks:
            ms["total"] = 1000 * self.total_s / self.chunks
        return ms

    def summary(self) -> str:
        """One line for a user: which parent is the expensive one."""
        if not self.chunks:
            return "inference per chunk: none inferred in this run (every episode was resumed)"
        ms = self.per_chunk_ms()
        parts = []
        for i, name in enumerate(self.names):
            if name not in ms:
                parts.append(f"{name} not run")
                continue
            encoder = 1000 * self.encode_s[i] / self.chunks_of[i]
            parts.append(
                f"{name} {ms[name]:.2f} ms" + (f" (encoder {encoder:.2f})" if encoder else "")
            )
        if "fused" in ms:
            parts.append(f"their fused networks {ms['fused']:.2f} ms together (not separable)")
        notes = ["; parents on concurrent threads: their times overlap"] if self.parallel else []
        return (
            f"inference per chunk ({self.chunks} chunks this run): {', '.join(parts)}; "
            f"total {ms['total']:.2f} ms with the operator and sampler{''.join(notes)}"
        )


def sum_times(times: Sequence[ParentTimes]) -> ParentTimes | None:
    """The times of several policies over the same parents added up (None for none)."""
    if not times:
        return None
    total = ParentTimes(list(times[0].names))
    for one in times:
        total.add(one)
    return total
