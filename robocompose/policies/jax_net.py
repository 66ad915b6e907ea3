"""`MlpDenoiserNet` in flax: the same layers, activations and initial distributions.

Every parameter is stored as torch stores it (a Linear's `weight` is (out, in), a LayerNorm's
`weight`/`bias`) under a module path that spells the torch name: the flax tree
{"cond_mlp": {"0": {"weight": ...}}} flattens to "cond_mlp.0.weight", torch's state_dict name
under the backbone. A JAX checkpoint therefore holds the same tensors under the same names as
a torch one of the same architecture (`to_state_names` / `from_state_names`).

    __call__(x (B, H, A), timestep (B,) float, global_cond (B, C)) -> (B, H, A)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default
MAX_PERIOD = 10_000.0  # SinusoidalEmbedding's default
Params = dict[str, Any]


def mish(x: jax.Array) -> jax.Array:
    return x * jnp.tanh(jax.nn.softplus(x))


def _fan_in_uniform(fan_in: int) -> Callable[..., jax.Array]:
    """torch.nn.Linear's initial distribution for weights and biases: U(-1/sqrt(in), 1/sqrt(in))."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


class TorchLinear(nn.Module):
    """y = x W^T + b with W (out, in), as torch.nn.Linear stores and initialises it.

    `bias_shift` is added to the initial bias (FiLM starts its scales at 1)."""

    features: int
    bias_shift: Callable[[int], jax.Array] | None = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        fan_in = x.shape[-1]
        weight = self.param("weight", _fan_in_uniform(fan_in), (self.features, fan_in))
        uniform = _fan_in_uniform(fan_in)
        shift = self.bias_shift

        def bias_init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32):
            bias = uniform(key, shape, dtype)
            return bias if shift is None else bias + shift(shape[0]).astype(dtype)

        bias = self.param("bias", bias_init, (self.features,))
        # contract with W's input axis as stored: `x @ W.T` makes XLA copy W transposed
        # on every call
        dims = (((x.ndim - 1,), (1,)), ((), ()))
        return jax.lax.dot_general(x, weight.astype(x.dtype), dims) + bias.astype(x.dtype)


class TorchLayerNorm(nn.Module):
    """torch.nn.LayerNorm over the last axis: biased variance, eps 1e-5, weight 1, bias 0."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        width = x.shape[-1]
        weight = self.param("weight", nn.initializers.ones, (width,))
        bias = self.param("bias", nn.initializers.zeros, (width,))
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS) * weight + bias


def sinusoidal_embedding(t: jax.Array, dim: int, max_period: float = MAX_PERIOD) -> jax.Array:
    """(B,) -> (B, dim): [sin(t w_k) | cos(t w_k)], w_k = max_period^(-k / (dim // 2)), as
    `SinusoidalEmbedding` (its frequencies computed in the same order, in float32)."""
    half = dim // 2
    steps = jnp.arange(half, dtype=jnp.float32)
    freqs = jnp.exp(-math.log(max_period) * steps / half)
    args = t.astype(jnp.float32)[:, None] * freqs[None, :]
    emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
    return jnp.pad(emb, ((0, 0), (0, 1))) if dim % 2 else emb


class _CondMlp(nn.Module):
    """Linear -> Mish -> Linear, torch's nn.Sequential indices 0 and 2."""

    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return TorchLinear(self.width, name="2")(mish(TorchLinear(self.width, name="0")(x)))


class _FiLM(nn.Module):
    """Mish -> one Linear to every block's packed [scale | bias]; scales start near 1."""

    widths: tuple[int, ...]

    @nn.compact
    def __call__(self, cond: jax.Array) -> jax.Array:
        widths = self.widths

        def ones_at_scales(size: int) -> jax.Array:
            mask = [v for w in widths for v in (1.0,) * w + (0.0,) * w]
            assert len(mask) == size
            return jnp.asarray(mask)

        return TorchLinear(2 * sum(widths), bias_shift=ones_at_scales, name="proj")(mish(cond))


class _Block(nn.Module):
    """Pre-norm residual block: h + W2 Mish(FiLM(W1 LN(h)))."""

    hidden: int

    @nn.compact
    def __call__(self, h: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
        z = bias + TorchLinear(self.hidden, name="fc1")(TorchLayerNorm(name="norm")(h)) * scale
        return h + TorchLinear(self.hidden, name="fc2")(mish(z))


class _Blocks(nn.Module):
    """The residual blocks "0".."depth-1", each on its (scale, bias)."""

    hidden: int
    depth: int

    @nn.compact
    def __call__(self, h: jax.Array, films: Sequence[tuple[jax.Array, jax.Array]]) -> jax.Array:
        for i, (scale, bias) in enumerate(films):
            h = _Block(self.hidden, name=str(i))(h, scale, bias)
        return h


class _Out(nn.Module):
    """LayerNorm ("0") -> Linear ("1")."""

    features: int

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return TorchLinear(self.features, name="1")(TorchLayerNorm(name="0")(h))


class MlpDenoiser(nn.Module):
    """The residual MLP backbone (see `robocompose.policies.networks.MlpDenoiserNet`)."""

    action_dim: int
    horizon: int
    global_cond_dim: int
    hidden: int = 256
    depth: int = 4
    time_embed_dim: int = 128
    cond_hidden: int = 128

    def setup(self) -> None:
        self.cond_mlp = _CondMlp(self.cond_hidden)
        self.film = _FiLM((self.hidden,) * self.depth)
        self.in_proj = TorchLinear(self.hidden)
        self.blocks = _Blocks(self.hidden, self.depth)
        self.out = _Out(self.horizon * self.action_dim)

    def conditioning(self, timestep: jax.Array, global_cond: jax.Array) -> jax.Array:
        """(B,) timesteps, (B, C) -> (B, 2 * depth * hidden): every block's [scale | bias]."""
        t = sinusoidal_embedding(timestep, self.time_embed_dim).astype(global_cond.dtype)
        return self.film(self.cond_mlp(jnp.concatenate([t, global_cond], axis=-1)))

    def forward_conditioned(self, x: jax.Array, conditioning: jax.Array) -> jax.Array:
        """(B, H, A) and (B, P) from `conditioning` -> (B, H, A)."""
        h = self.in_proj(x.reshape(x.shape[0], -1))
        packed = conditioning.reshape(x.shape[0], self.depth, 2, self.hidden)  # [scale | bias]
        films = [(packed[:, i, 0], packed[:, i, 1]) for i in range(self.depth)]
        return self.out(self.blocks(h, films)).reshape(x.shape)

    def __call__(self, x: jax.Array, timestep: jax.Array, global_cond: jax.Array) -> jax.Array:
        return self.forward_conditioned(x, self.conditioning(timestep, global_cond))


def to_state_names(params: Params, prefix: str = "net.") -> dict[str, jax.Array]:
    """The flax tree as torch state_dict names: {"net.cond_mlp.0.weight": ..., ...}."""
    flat = traverse_util.flatten_dict(params, sep=".")
    return {prefix + name: value for name, value in flat.items()}


def from_state_names(state: Mapping[str, Any], prefix: str = "net.") -> Params:
    """Inverse of `to_state_names`; names outside `prefix` are refused."""
    outside = [k for k in state if not k.startswith(prefix)]
    if outside:
        raise ValueError(f"weight names must start with {prefix!r}. Got {outside[:5]}.")
    return traverse_util.unflatten_dict({k[len(prefix) :]: v for k, v in state.items()}, sep=".")
