"""Observation encoders: a dict of (B, T, ...) histories -> one (B, cond_dim) vector.

`ObservationEncoder` builds one encoder per observation key from the shapes alone: a key of
shape (H, W, 3) is an image (`ImageEncoder`), a key of shape (D,) is low-dim (`LowDimEncoder`).
Features are concatenated in sorted key order, so the layout does not depend on dict order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn


class LowDimEncoder(nn.Module):
    """(B, T, D) -> (B, out_dim): the flattened history, optionally through a 2-layer MLP.

    With `out_dim=None` it is a plain flatten and `out_dim` becomes T * D.
    """

    def __init__(self, input_dim: int, n_obs_steps: int, out_dim: int | None = None) -> None:
        super().__init__()
        self.input_dim, self.n_obs_steps = input_dim, n_obs_steps
        flat = input_dim * n_obs_steps
        if out_dim is None:
            self.mlp: nn.Module = nn.Identity()
            self.out_dim = flat
        else:
            self.mlp = nn.Sequential(
                nn.Linear(flat, out_dim), nn.Mish(), nn.Linear(out_dim, out_dim)
            )
            self.out_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        expected = (self.n_obs_steps, self.input_dim)
        if x.ndim != 3 or tuple(x.shape[1:]) != expected:
            raise ValueError(
                f"low-dim input must have shape (B, {expected[0]}, {expected[1]}). "
                f"Got {tuple(x.shape)}."
            )
        x = x.flatten(1)
        weight = next(self.mlp.parameters(), None)
        if weight is not None:
            return self.mlp(x.to(weight.dtype))
        return x if x.is_floating_point() else x.to(torch.get_default_dtype())


class SpatialSoftmax(nn.Module):
    """(N, C, h, w) feature maps -> (N, K, 2) keypoints, the expected (x, y) of each attention map.

    A 1x1 conv gives K logit maps, a softmax over the h*w positions turns each into a
    distribution, and the keypoint is its mean position on a grid spanning [-1, 1] (Levine et
    al. 2016; robomimic). A convex combination of grid points, so keypoints lie in [-1, 1]. No
    separate temperature: scaling the 1x1 conv's weights does the same.
    """

    def __init__(self, in_channels: int, num_keypoints: int) -> None:
        super().__init__()
        self.num_keypoints = num_keypoints
        self.logits = nn.Conv2d(in_channels, num_keypoints, 1)

    def forward(self, features: Tensor) -> Tensor:
        n, _, h, w = features.shape
        attn = self.logits(features).flatten(2).softmax(-1).view(n, self.num_keypoints, h, w)
        xs = torch.linspace(-1.0, 1.0, w, device=features.device, dtype=attn.dtype)
        ys = torch.linspace(-1.0, 1.0, h, device=features.device, dtype=attn.dtype)
        x = (attn.sum(2) * xs).sum(-1)
        y = (attn.sum(3) * ys).sum(-1)
        return torch.stack([x, y], dim=-1)


class _ConvStage(nn.Module):
    """Stride-2 3x3 conv -> GroupNorm -> Mish, then a residual 3x3 conv -> GroupNorm -> Mish."""

    def __init__(self, in_ch: int, out_ch: int, n_groups: int) -> None:
        super().__init__()
        self.down = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, 2, 1), nn.GroupNorm(n_groups, out_ch), nn.Mish()
        )
        self.res = nn.Sequential(
            nn.Conv2d(out_ch, out_ch, 3, 1, 1), nn.GroupNorm(n_groups, out_ch), nn.Mish()
        )

    def forward(self, x: Tensor) -> Tensor:
        h = self.down(x)
        return h + self.res(h)


class ImageEncoder(nn.Module):
    """(B, T, H, W, 3) images in [0, 255] -> (B, T * feature_dim); `out_dim` = T * feature_dim.

    Pixels (uint8 or float, both on the 0-255 scale) are mapped to [-1, 1]; a small CNN of
    stride-2 stages with GroupNorm (not BatchNorm: EMA weights and small batches) feeds a
    spatial softmax, whose 2 * num_keypoints coordinates go through a Linear to `feature_dim`
    per frame. Frames share weights.

    Augmentation, robomimic's CropRandomizer without resize: in train mode a random window of
    `round(crop_ratio * H) x round(crop_ratio * W)` pixels, one offset per sample shared by its T
    frames (so apparent motion between frames is kept); in eval mode the centred window of the
    same size. The CNN therefore always sees the same size. `crop_ratio=1` turns it off.
    """

    def __init__(
        self,
        image_size: int | tuple[int, int] = 96,
        n_obs_steps: int = 2,
        channels: tuple[int, ...] = (32, 64, 128),
        num_keypoints: int = 32,
        feature_dim: int = 64,
        crop_ratio: float = 0.9,
        n_groups: int = 8,
    ) -> None:
        super().__init__()
        h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if not 0.0 < crop_ratio <= 1.0:
            raise ValueError(f"`crop_ratio` must be in (0, 1]. Got {crop_ratio}.")
        bad = [c for c in channels if c % n_groups]
        if not channels or bad:
            raise ValueError(
                f"`channels` must be non-empty multiples of n_groups={n_groups}. "
                f"Got {tuple(channels)}."
            )
        self.image_hw = (h, w)
        self.crop_hw = (max(1, round(crop_ratio * h)), max(1, round(crop_ratio * w)))
        self.n_obs_steps = n_obs_steps
        self.feature_dim = feature_dim
        self.out_dim = n_obs_steps * feature_dim
        self.backbone = nn.Sequential(
            *(
                _ConvStage(i, o, n_groups)
                for i, o in zip((3, *channels[:-1]), channels, strict=True)
            )
        )
        self.keypoints = SpatialSoftmax(channels[-1], num_keypoints)
        self.proj = nn.Linear(2 * num_keypoints, feature_dim)

    def crop(self, images: Tensor) -> Tensor:
        """(B, T, H, W, C) -> (B, T, h, w, C): random window in train mode, centred in eval."""
        (H, W), (h, w) = self.image_hw, self.crop_hw
        if (h, w) == (H, W):
            return images
        if not self.training:
            top, left = (H - h) // 2, (W - w) // 2
            return images[:, :, top : top + h, left : left + w]
        b = images.shape[0]
        top = torch.randint(0, H - h + 1, (b, 1, 1, 1), device=images.device)
        left = torch.randint(0, W - w + 1, (b, 1, 1, 1), device=images.device)
        rows = top + torch.arange(h, device=images.device).view(1, 1, h, 1)
        cols = left + torch.arange(w, device=images.device).view(1, 1, 1, w)
        bi = torch.arange(b, device=images.device).view(b, 1, 1, 1)
        ti = torch.arange(images.shape[1], device=images.device).view(1, -1, 1, 1)
        return images[bi, ti, rows, cols]  # (B, T, h, w, C)

    def forward(self, images: Tensor) -> Tensor:
        expected = (self.n_obs_steps, *self.image_hw, 3)
        if images.ndim != 5 or tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"images must have shape (B, {', '.join(map(str, expected))}). "
                f"Got {tuple(images.shape)}."
            )
        b, t = images.shape[:2]
        x = self.crop(images).flatten(0, 1).permute(0, 3, 1, 2)  # (B*T, 3, h, w)
        x = x.to(self.proj.weight.dtype) / 127.5 - 1.0  # pixels stay uint8 until here
        keypoints = self.keypoints(self.backbone(x.contiguous()))  # (B*T, K, 2)
        return self.proj(keypoints.flatten(1)).view(b, t * self.feature_dim)


class ObservationEncoder(nn.Module):
    """dict of (B, T, ...) tensors -> (B, out_dim), one encoder per key, in sorted key order.

    Args:
        obs_shapes: per-frame shape of every key the policy uses: (H, W, 3) for an image,
            (D,) for a low-dim vector. Other keys in the obs dict are ignored at forward.
        n_obs_steps: T, the history length every key must have.
        image_feature_dim: per-frame feature width of each image key.
        low_dim_hidden: None to pass low-dim keys through flattened, else the width of a
            2-layer MLP applied to each.
        image_kwargs: extra keyword arguments for every `ImageEncoder` (channels, crop_ratio...).
    """

    def __init__(
        self,
        obs_shapes: Mapping[str, tuple[int, ...]],
        n_obs_steps: int,
        image_feature_dim: int = 64,
        low_dim_hidden: int | None = None,
        image_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if not obs_shapes:
            raise ValueError("`obs_shapes` must name at least one observation key. Got {}.")
        self.n_obs_steps = n_obs_steps
        self.keys = sorted(obs_shapes)
        self.shapes = {k: tuple(int(d) for d in obs_shapes[k]) for k in self.keys}
        encoders: list[nn.Module] = []
        for key in self.keys:
            shape = self.shapes[key]
            if len(shape) == 3 and shape[-1] == 3:
                enc: nn.Module = ImageEncoder(
                    shape[:2], n_obs_steps, feature_dim=image_feature_dim, **(image_kwargs or {})
                )
            elif len(shape) == 1:
                enc = LowDimEncoder(shape[0], n_obs_steps, out_dim=low_dim_hidden)
            else:
                raise ValueError(
                    f"obs key {key!r} must have shape (H, W, 3) for an image or "
                    f"(D,) for low-dim. Got {shape}."
                )
            encoders.append(enc)
        self.encoders = nn.ModuleList(encoders)  # a list: ModuleDict rejects keys with dots
        self.out_dim = sum(e.out_dim for e in encoders)

    def forward(self, obs: Mapping[str, Tensor]) -> Tensor:
        batch = None
        features = []
        for key, enc in zip(self.keys, self.encoders, strict=True):
            if key not in obs:
                raise ValueError(
                    f"obs is missing key {key!r}; this encoder needs {self.keys}. "
                    f"Got keys {sorted(obs)}."
                )
            x = obs[key]
            expected = (self.n_obs_steps, *self.shapes[key])
            if tuple(x.shape[1:]) != expected or (batch is not None and x.shape[0] != batch):
                want = ", ".join(map(str, (batch if batch is not None else "B", *expected)))
                raise ValueError(f"obs[{key!r}] must have shape ({want}). Got {tuple(x.shape)}.")
            batch = x.shape[0]
            features.append(enc(x))
        return torch.cat(features, dim=-1)
