"""Denoiser backbones: networks `net(x, timestep, global_cond) -> (B, H, A)`.

A backbone knows nothing of its noise schedule or what its output means (eps, x0, v or a flow
velocity); the policy around it decides that. Both backbones share one contract:

    forward(x: (B, H, A), timestep: (B,) float, global_cond: (B, C)) -> (B, H, A)

`timestep` is a float so a denoiser adapter can query a discrete-time model between its training
steps (k-diffusion style: the timestep for a sigma is interpolated in log-sigma between the two
training steps around it; see `robocompose.policies.denoiser`).

| name   | class               | what it is                                                  |
|--------|---------------------|-------------------------------------------------------------|
| "unet" | `ConditionalUnet1D` | Diffusion Policy's temporal CNN (Chi et al. 2023), with FiLM |
| "mlp"  | `MlpDenoiserNet`    | residual MLP over the flattened chunk; the small fast one   |
"""

from __future__ import annotations

import difflib
import math
from typing import Any

import torch
from torch import Tensor, nn


class SinusoidalEmbedding(nn.Module):
    """Transformer-style sinusoidal embedding of float timesteps, (B,) -> (B, dim).

    Half the channels are `sin(t * w_k)`, half `cos(t * w_k)`, with angular frequencies
    `w_k = max_period ** (-k / (dim // 2))`, k = 0..dim//2-1, geometrically spaced from 1 rad per
    unit of t down to ~1/max_period. The embedding is smooth in t, so fractional timesteps
    (37.4) are fine. Scale: t is resolved well on [0, ~max_period / 10]; DDPM timesteps in
    [0, num_train_timesteps) are fed as they are, and a flow time in [0, 1] should be multiplied
    by a `time_scale` (e.g. 1000) by the caller, otherwise only the slowest channels move.
    An odd `dim` gets one trailing zero channel.
    """

    def __init__(self, dim: int, max_period: float = 10_000.0) -> None:
        super().__init__()
        if dim < 2:
            raise ValueError(f"`dim` must be >= 2. Got {dim}.")
        self.dim, self.max_period = dim, max_period
        self.register_buffer("freqs", self._frequencies(torch.float32, None), persistent=False)

    def _frequencies(self, dtype: torch.dtype, device: torch.device | None) -> Tensor:
        half = self.dim // 2
        steps = torch.arange(half, dtype=dtype, device=device)
        return torch.exp(-math.log(self.max_period) * steps / half)

    def _apply(self, fn, recurse: bool = True):
        """After `.to(dtype/device)`, recompute the frequencies there: a cast of the float32
        table would carry float32 rounding into a float64 model."""
        super()._apply(fn, recurse)
        self.freqs = self._frequencies(self.freqs.dtype, self.freqs.device)
        return self

    def forward(self, t: Tensor) -> Tensor:
        args = t.to(self.freqs.dtype)[:, None] * self.freqs[None, :]
        emb = torch.cat([args.sin(), args.cos()], dim=-1)
        if self.dim % 2:
            emb = nn.functional.pad(emb, (0, 1))
        return emb


def _timestep_batch(timestep: Tensor | float, like: Tensor) -> Tensor:
    """Accept a (B,) tensor, a 0-d tensor or a Python number; return (B,) in `like`'s dtype
    and device, B = len(like)."""
    batch = like.shape[0]
    t = torch.as_tensor(timestep, dtype=like.dtype, device=like.device)
    if t.ndim == 0:
        return t.expand(batch)
    if t.shape != (batch,):
        raise ValueError(f"`timestep` must have shape ({batch},) or (). Got {tuple(t.shape)}.")
    return t


def _check_inputs(x: Tensor, global_cond: Tensor, action_dim: int, cond_dim: int) -> None:
    if x.ndim != 3 or x.shape[-1] != action_dim:
        raise ValueError(f"`x` must have shape (B, H, {action_dim}). Got {tuple(x.shape)}.")
    if global_cond.shape != (x.shape[0], cond_dim):
        raise ValueError(
            f"`global_cond` must have shape ({x.shape[0]}, {cond_dim}). "
            f"Got {tuple(global_cond.shape)}."
        )


def _time_mlp(embed_dim: int) -> nn.Sequential:
    """Sinusoid -> Linear -> Mish -> Linear, as in Diffusion Policy's step encoder."""
    return nn.Sequential(
        SinusoidalEmbedding(embed_dim),
        nn.Linear(embed_dim, 4 * embed_dim),
        nn.Mish(),
        nn.Linear(4 * embed_dim, embed_dim),
    )


# -- 1-D temporal UNet --------------------------------------------------------------------------
class Conv1dBlock(nn.Module):
    """Conv1d (same padding) -> GroupNorm -> Mish, on (B, C, H).

    Mish is called as a function: at batch 1 every module call costs microseconds.
    """

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, n_groups: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_ch, out_ch, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(n_groups, out_ch)

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.mish(self.norm(self.conv(x)))


class ConditionalResidualBlock1D(nn.Module):
    """Two Conv1dBlocks with FiLM in between: `h * scale + bias`, per channel, then a residual.

    `scale` and `bias` are (B, out_ch, 1), computed from the conditioning vector by the owner
    (one Linear for all blocks, see `FiLM`).
    """

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, n_groups: int) -> None:
        super().__init__()
        self.out_ch = out_ch
        self.block1 = Conv1dBlock(in_ch, out_ch, kernel_size, n_groups)
        self.block2 = Conv1dBlock(out_ch, out_ch, kernel_size, n_groups)
        self.residual = nn.Conv1d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

    def forward(self, x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        h = torch.addcmul(bias, self.block1(x), scale)
        return self.block2(h) + self.residual(x)


class FiLM(nn.Module):
    """Per-channel (scale, bias) pairs for several layers from one conditioning vector.

    Mish -> one Linear to all layers' parameters at once (one kernel instead of one per layer,
    which is what costs time at batch 1). The scale half of the Linear's bias starts at 1, so
    the modulation `h * scale + bias` starts near the identity; the parametrisation is Diffusion
    Policy's (bare scale), only the initialisation differs.
    """

    def __init__(self, cond_dim: int, widths: list[int], channels_first: bool = False) -> None:
        super().__init__()
        self.widths = list(widths)
        self.channels_first = channels_first
        self.act = nn.Mish()
        self.proj = nn.Linear(cond_dim, 2 * sum(self.widths))
        with torch.no_grad():
            pos = 0
            for w in self.widths:  # layout per layer: [scale (w) | bias (w)]
                self.proj.bias[pos : pos + w] += 1.0
                pos += 2 * w

    def params(self, cond: Tensor) -> Tensor:
        """(B, cond_dim) -> (B, 2 * sum(widths)): every layer's [scale | bias], packed."""
        return self.proj(self.act(cond))

    def split(self, params: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Packed `params` -> [(scale, bias)] per layer, each (B, width), or (B, width, 1)."""
        if self.channels_first:
            params = params.unsqueeze(-1)
        parts = params.split([2 * w for w in self.widths], dim=1)
        return [p.chunk(2, dim=1) for p in parts]

    def forward(self, cond: Tensor) -> list[tuple[Tensor, Tensor]]:
        """(B, cond_dim) -> [(scale, bias)] per layer, each (B, width), or (B, width, 1)."""
        return self.split(self.params(cond))


class ConditionalUnet1D(nn.Module):
    """Diffusion Policy's 1-D temporal UNet over the action horizon (Chi et al. 2023).

    Stage i of the encoder has two FiLM residual blocks with `down_dims[i]` channels and halves
    the horizon with a stride-2 conv (all but the last stage); two blocks sit in the middle; the
    decoder doubles the horizon with a transposed conv, concatenates the encoder's skip of the
    same resolution and applies two blocks. Unlike the reference implementation every skip,
    including the full-resolution one, is used. Works for any horizon divisible by
    `2 ** (len(down_dims) - 1)`.

    Size (H=16, A=2, C=40): the default (32, 64, 128) has 1.4 M parameters, (64, 128, 256)
    4.7 M, Diffusion Policy's (256, 512, 1024) 65 M. At batch 1 on a CPU the cost is mostly
    per-op overhead rather than parameters, so for a state policy that must sample fast use
    `MlpDenoiserNet` (the shipped policies' chunk latency by backbone:
    benchmarks/results/policy_latency.json).

    Args:
        action_dim: A, channels of the action chunk.
        global_cond_dim: C, width of the observation feature (0 for an unconditional model).
        down_dims: channels per resolution level.
        kernel_size: temporal kernel of the convolutions (odd).
        n_groups: GroupNorm groups; must divide every entry of `down_dims`.
        time_embed_dim: width of the timestep embedding.
        horizon: optional; if given, checked here rather than at the first forward.
    """

    name = "unet"

    def __init__(
        self,
        action_dim: int,
        global_cond_dim: int,
        down_dims: tuple[int, ...] = (32, 64, 128),
        kernel_size: int = 5,
        n_groups: int = 8,
        time_embed_dim: int = 128,
        horizon: int | None = None,
    ) -> None:
        super().__init__()
        down_dims = tuple(int(d) for d in down_dims)
        if not down_dims:
            raise ValueError("`down_dims` must be non-empty. Got ().")
        bad = [d for d in down_dims if d % n_groups]
        if bad:
            raise ValueError(f"`n_groups`={n_groups} must divide every down_dim. Got {bad}.")
        if kernel_size % 2 == 0:
            raise ValueError(f"`kernel_size` must be odd. Got {kernel_size}.")
        self.config: dict[str, Any] = dict(
            action_dim=action_dim,
            global_cond_dim=global_cond_dim,
            down_dims=down_dims,
            kernel_size=kernel_size,
            n_groups=n_groups,
            time_embed_dim=time_embed_dim,
            horizon=horizon,
        )
        self.action_dim = action_dim
        self.global_cond_dim = global_cond_dim
        self.horizon_multiple = 2 ** (len(down_dims) - 1)
        if horizon is not None:
            self._check_horizon(horizon)
        cond_dim = time_embed_dim + global_cond_dim

        def block(i: int, o: int) -> ConditionalResidualBlock1D:
            return ConditionalResidualBlock1D(i, o, kernel_size, n_groups)

        self.time_mlp = _time_mlp(time_embed_dim)
        self.down = nn.ModuleList()
        for level, (ch_in, ch_out) in enumerate(
            zip((action_dim, *down_dims[:-1]), down_dims, strict=True)
        ):
            last = level == len(down_dims) - 1
            resample = nn.Identity() if last else nn.Conv1d(ch_out, ch_out, 3, 2, 1)
            self.down.append(nn.ModuleList([block(ch_in, ch_out), block(ch_out, ch_out), resample]))
        self.mid = nn.ModuleList([block(down_dims[-1], down_dims[-1]) for _ in range(2)])
        self.up = nn.ModuleList()
        for level in reversed(range(len(down_dims) - 1)):
            ch_deep, ch_skip = down_dims[level + 1], down_dims[level]
            upsample = nn.ConvTranspose1d(ch_deep, ch_deep, 4, 2, 1)
            self.up.append(
                nn.ModuleList(
                    [upsample, block(ch_deep + ch_skip, ch_skip), block(ch_skip, ch_skip)]
                )
            )
        self.final = nn.Sequential(
            Conv1dBlock(down_dims[0], down_dims[0], kernel_size, n_groups),
            nn.Conv1d(down_dims[0], action_dim, 1),
        )
        widths = [m.out_ch for m in self.modules() if isinstance(m, ConditionalResidualBlock1D)]
        self.film = FiLM(cond_dim, widths, channels_first=True)

    def _check_horizon(self, horizon: int) -> None:
        if horizon < 1 or horizon % self.horizon_multiple:
            raise ValueError(
                f"horizon must be a positive multiple of 2**(len(down_dims)-1) = "
                f"{self.horizon_multiple}. Got horizon={horizon}."
            )

    def forward(self, x: Tensor, timestep: Tensor | float, global_cond: Tensor) -> Tensor:
        """(B, H, A), (B,) float, (B, C) -> (B, H, A)."""
        _check_inputs(x, global_cond, self.action_dim, self.global_cond_dim)
        self._check_horizon(x.shape[1])
        t = _timestep_batch(timestep, x)
        return self.forward_conditioned(x, self.conditioning(t, global_cond))

    def conditioning(self, timestep: Tensor, global_cond: Tensor) -> Tensor:
        """(B,) float timesteps, (B, C) -> (B, P): every block's FiLM parameters, the only way
        the timestep and the observation enter the network (see `BoundBackbone`)."""
        cond = torch.cat([self.time_mlp(timestep).to(global_cond.dtype), global_cond], dim=-1)
        return self.film.params(cond)

    def forward_conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor:
        """(B, H, A), (B, P) from `conditioning` -> (B, H, A); the inputs are not checked."""
        films = iter(self.film.split(conditioning))  # one (scale, bias) per block, in order
        h = run_unet_blocks(self, x.transpose(1, 2), films, channel_dim=1)  # (B, A, H) maps
        return self.final(h).transpose(1, 2)


# -- residual MLP -------------------------------------------------------------------------------
def run_unet_blocks(unet: nn.Module, h: Tensor, films, channel_dim: int) -> Tensor:
    """The UNet's block order, shared by one network and a stack of them (whose maps keep their
    channels last): each down level (two residual blocks, a skip, a downsample), the mid blocks,
    each up level (upsample, the skip joined on `channel_dim`, two residual blocks). `films`
    yields each block's (scale, bias) in that order."""
    skips = []
    for res1, res2, downsample in unet.down:
        h = res1(h, *next(films))
        h = res2(h, *next(films))
        skips.append(h)
        h = downsample(h)
    skips.pop()  # the deepest skip is the mid path's own input
    for res in unet.mid:
        h = res(h, *next(films))
    for upsample, res1, res2 in unet.up:
        h = torch.cat([upsample(h), skips.pop()], dim=channel_dim)
        h = res1(h, *next(films))
        h = res2(h, *next(films))
    return h


class _MlpBlock(nn.Module):
    """Pre-norm residual block: h + W2 Mish(FiLM(W1 LN(h)))."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.act = nn.Mish()

    def forward(self, h: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        z = torch.addcmul(bias, self.fc1(self.norm(h)), scale)
        return h + self.fc2(self.act(z))


class MlpDenoiserNet(nn.Module):
    """Residual MLP over the flattened (H, A) chunk; the fast backbone for state policies.

    The sinusoidal time embedding and the global cond are mixed by a 2-layer MLP into a
    conditioning vector c of width `cond_hidden`; the chunk is projected to `hidden`, and each
    of `depth` pre-norm residual blocks is FiLM-modulated by c (all blocks' scale/bias come from
    one Linear, which saves kernel launches at batch 1). The horizon is fixed at construction.

    Args:
        action_dim: A.
        horizon: H.
        global_cond_dim: C (0 for an unconditional model).
        hidden: width of the residual stream.
        depth: number of residual blocks.
        time_embed_dim: width of the sinusoidal timestep embedding.
        cond_hidden: width of the conditioning vector c that drives FiLM.

    Size (H=16, A=2, C=40): the defaults give 0.85 M parameters, hidden=512 gives 2.7 M. At
    batch 1 the matrix-vector products are memory-bound, so time grows with the parameter count
    (the shipped policies' chunk latency: benchmarks/results/policy_latency.json).
    """

    name = "mlp"

    def __init__(
        self,
        action_dim: int,
        horizon: int,
        global_cond_dim: int,
        hidden: int = 256,
        depth: int = 4,
        time_embed_dim: int = 128,
        cond_hidden: int = 128,
    ) -> None:
        super().__init__()
        if horizon < 1 or depth < 1:
            raise ValueError(f"`horizon` and `depth` must be >= 1. Got {horizon}, {depth}.")
        self.config: dict[str, Any] = dict(
            action_dim=action_dim,
            horizon=horizon,
            global_cond_dim=global_cond_dim,
            hidden=hidden,
            depth=depth,
            time_embed_dim=time_embed_dim,
            cond_hidden=cond_hidden,
        )
        self.action_dim, self.horizon, self.global_cond_dim = action_dim, horizon, global_cond_dim
        self.time_embed = SinusoidalEmbedding(time_embed_dim)
        self.cond_mlp = nn.Sequential(
            nn.Linear(time_embed_dim + global_cond_dim, cond_hidden),
            nn.Mish(),
            nn.Linear(cond_hidden, cond_hidden),
        )
        self.film = FiLM(cond_hidden, [hidden] * depth)
        self.in_proj = nn.Linear(horizon * action_dim, hidden)
        self.blocks = nn.ModuleList([_MlpBlock(hidden) for _ in range(depth)])
        self.out = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, horizon * action_dim))

    def forward(self, x: Tensor, timestep: Tensor | float, global_cond: Tensor) -> Tensor:
        """(B, H, A), (B,) float, (B, C) -> (B, H, A)."""
        _check_inputs(x, global_cond, self.action_dim, self.global_cond_dim)
        if x.shape[1] != self.horizon:
            raise ValueError(
                f"`x` must have horizon {self.horizon} (fixed at construction). "
                f"Got horizon={x.shape[1]}."
            )
        t = _timestep_batch(timestep, x)
        return self.forward_conditioned(x, self.conditioning(t, global_cond))

    def conditioning(self, timestep: Tensor, global_cond: Tensor) -> Tensor:
        """(B,) float timesteps, (B, C) -> (B, P): every block's FiLM parameters, the only way
        the timestep and the observation enter the network (see `BoundBackbone`)."""
        t = self.time_embed(timestep).to(global_cond.dtype)
        return self.film.params(self.cond_mlp(torch.cat([t, global_cond], -1)))

    def forward_conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor:
        """(B, H, A), (B, P) from `conditioning` -> (B, H, A); the inputs are not checked."""
        h = self.in_proj(x.flatten(1))
        for blk, (scale, bias) in zip(self.blocks, self.film.split(conditioning), strict=True):
            h = blk(h, scale, bias)
        return self.out(h).view_as(x)


class BoundBackbone:
    """A backbone with one observation batch `cond` (B, C) bound: (x, t) -> output.

    Its FiLM conditioning depends on the timestep and the observation only, so a sampler that
    knows its grid has it computed for every step in one call (`conditioning`, one matmul of
    N * B rows instead of N of B rows) and runs each step on it (`conditioned`)."""

    def __init__(self, net: ConditionalUnet1D | MlpDenoiserNet, cond: Tensor) -> None:
        self.net, self.cond = net, cond

    def __call__(self, x: Tensor, timestep: Tensor) -> Tensor:
        return self.net(x, timestep, self.cond)

    def conditioning(self, timesteps: Tensor) -> Tensor:
        """(N,) timesteps -> (N, B, P): the conditioning at each, for every batch row."""
        n, b = len(timesteps), self.cond.shape[0]
        t = timesteps.repeat_interleave(b)
        return self.net.conditioning(t, self.cond.repeat(n, 1)).view(n, b, -1)

    def conditioned(self, x: Tensor, conditioning: Tensor) -> Tensor:
        """The network on x (B, H, A) at one step's `conditioning` (B, P)."""
        return self.net.forward_conditioned(x, conditioning)


# -- registry -----------------------------------------------------------------------------------
BACKBONES: dict[str, type[nn.Module]] = {
    ConditionalUnet1D.name: ConditionalUnet1D,
    MlpDenoiserNet.name: MlpDenoiserNet,
}


def make_backbone(name: str, **kwargs: Any) -> nn.Module:
    """Build a registered backbone; `make_backbone(net.name, **net.config)` rebuilds `net`."""
    if name not in BACKBONES:
        near = difflib.get_close_matches(name, BACKBONES, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise ValueError(f"Unknown backbone {name!r}; choose from {sorted(BACKBONES)}.{hint}")
    return BACKBONES[name](**kwargs)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
