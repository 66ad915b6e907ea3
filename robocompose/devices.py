"""Which torch device a verb runs on: `device=auto|cpu|cuda|cuda:N|mps` in every verb config,
and how many CPU threads torch uses for a block (`torch_threads_set`).

`auto` takes CUDA when present, then Apple's MPS, else the CPU, so the same command runs on a
laptop, a GPU box and a cluster node. Naming a device that is absent is an error, not a silent
fallback: a run that believes it used the GPU and did not is worse than one that stops.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?|mps|meta")


def check_device(name: str, field: str = "device") -> str:
    """`name` if it is a device this project knows how to ask for; importing torch is not needed."""
    if not DEVICE_PATTERN.fullmatch(name):
        raise ValueError(f"`{field}` must be auto, cpu, cuda, cuda:N or mps. Got {name!r}.")
    return name


def resolve_device(name: str = "auto", field: str = "device"):
    """The `torch.device` for `name`; an absent accelerator is named with what is present."""
    import torch

    check_device(name, field)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count()
        index = device.index or 0
        if index >= count:
            raise ValueError(
                f"`{field}`={name!r}: this machine has {count} CUDA device(s); "
                "use device=auto or device=cpu."
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"`{field}`='mps': MPS is not available here; use device=auto or cpu.")
    return device


@contextmanager
def torch_threads_set(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to `threads` (None: unchanged) for the block."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"`torch_threads` must be >= 1 or None. Got {threads}.")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def unpin_cpu_kernels() -> None:
    """Undo the package's AVX2 pins of torch, MKL and oneDNN (`robocompose.CPU_KERNEL_PINS`; a
    user's own settings stay) for work that needs the widest kernels and not the same bits on
    every CPU: LoRA training in bfloat16, which under the pins falls back to a one-thread
    reference matmul. Call it before torch runs its first kernel in the process."""
    import os

    import robocompose

    for name in robocompose.CPU_KERNEL_PINNED:
        os.environ.pop(name, None)
    robocompose.CPU_KERNEL_PINNED.clear()
