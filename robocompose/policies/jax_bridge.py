"""Arrays across torch and JAX through DLPack, and a JAX network called on torch tensors.

On the CPU both directions share the buffer (no copy) when it is dense and aligned as XLA wants
it: torch's own allocations are, a view starting off a 64-byte boundary (`x.flatten()[1:]`) is
copied by JAX. `shares_memory` tells whether a crossing shared. A strided torch view is made
contiguous first (a copy, in torch). Devices must match: JAX runs here on its CPU backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import torch

# (params, x (B, H, A), timestep (B,), cond (B, C)) -> (B, H, A), jitted
JaxNetFn = Callable[[Any, jax.Array, jax.Array, jax.Array], jax.Array]

TORCH_DTYPES = {
    np.dtype("float16"): torch.float16,
    np.dtype("float32"): torch.float32,
    np.dtype("float64"): torch.float64,
}


def to_jax(tensor: torch.Tensor) -> jax.Array:
    """A torch tensor as a JAX array on the same memory where possible (CPU only)."""
    if tensor.device.type != "cpu":
        raise ValueError(
            f"JAX runs on its CPU backend here; got a tensor on {tensor.device}. Keep the JAX "
            "policy and what it composes with on device=cpu."
        )
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return jax.dlpack.from_dlpack(tensor)


def to_torch(array: jax.Array) -> torch.Tensor:
    """A JAX array as a torch tensor on the same memory (waits for it to be computed)."""
    return torch.from_dlpack(array)


def shares_memory(tensor: torch.Tensor, array: jax.Array) -> bool:
    """Whether `tensor` and `array` are one buffer (a crossing made no copy)."""
    return tensor.data_ptr() == array.unsafe_buffer_pointer()


def torch_dtype(array: jax.Array) -> torch.dtype:
    return TORCH_DTYPES[np.dtype(array.dtype)]


class JaxBoundNet:
    """A jitted JAX network with its weights and one observation batch bound: a `BoundNet`
    (torch x (B, H, A), torch timestep (B,) -> torch (B, H, A)) that any torch Denoiser adapter
    (e.g. `FlowDenoiser`) drives. Each call crosses in and out by DLPack."""

    def __init__(self, fn: JaxNetFn, params: Any, cond: jax.Array | None) -> None:
        self.fn, self.params, self.cond = fn, params, cond

    def __call__(self, x: torch.Tensor, timestep: torch.Tensor) -> torch.Tensor:
        if self.cond is None:
            raise ValueError("this denoiser was made without an observation (cond=None).")
        return to_torch(self.fn(self.params, to_jax(x), to_jax(timestep), self.cond))
