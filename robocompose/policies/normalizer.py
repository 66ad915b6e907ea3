"""Per-key affine normalisers fitted on a dataset, stored with the checkpoint as JSON.

Low-dim keys and actions map their dataset [min, max] to [-1, 1] per dimension (diffusion_policy's
"limits" mode): the diffusion noise then has the same scale in every action dimension. Images are
left to the image encoder (uint8 -> [-1, 1] there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robocompose.sim.windows import Stats

MIN_RANGE = 1e-4  # a constant dimension maps to 0 instead of dividing by ~0


@dataclass
class AffineNormalizer:
    """y = x * scale + offset, per dimension."""

    scale: np.ndarray
    offset: np.ndarray

    @classmethod
    def from_stats(cls, stats: Stats) -> AffineNormalizer:
        low, high = stats.min.astype(np.float64), stats.max.astype(np.float64)
        span = high - low
        constant = span < MIN_RANGE
        scale = np.where(constant, 1.0, 2.0 / np.where(constant, 1.0, span))
        offset = np.where(constant, -low, -1.0 - low * scale)
        return cls(scale.astype(np.float32), offset.astype(np.float32))

    @classmethod
    def identity(cls, dim: int) -> AffineNormalizer:
        return cls(np.ones(dim, np.float32), np.zeros(dim, np.float32))

    def tensors(
        self, dtype: torch.dtype, device: torch.device | str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(scale, offset) in `dtype` on `device`. Read in float64, which holds the stored float32
        values exactly, so a float64 policy never sees them pass through a float32 tensor."""
        arrays = (np.asarray(a, dtype=np.float64) for a in (self.scale, self.offset))
        scale, offset = (torch.from_numpy(a) for a in arrays)
        return scale.to(device=device, dtype=dtype), offset.to(device=device, dtype=dtype)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        scale, offset = self.tensors(x.dtype, x.device)
        return x * scale + offset

    def unnormalize(self, y: torch.Tensor) -> torch.Tensor:
        scale, offset = self.tensors(y.dtype, y.device)
        return (y - offset) / scale

    def to_dict(self) -> dict[str, list[float]]:
        return {"scale": self.scale.tolist(), "offset": self.offset.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, list[float]]) -> AffineNormalizer:
        return cls(np.asarray(d["scale"], np.float32), np.asarray(d["offset"], np.float32))

    def allclose(self, other: AffineNormalizer, rtol: float = 1e-5) -> bool:
        return bool(
            self.scale.shape == other.scale.shape
            and np.allclose(self.scale, other.scale, rtol=rtol)
            and np.allclose(self.offset, other.offset, rtol=rtol, atol=1e-6)
        )
