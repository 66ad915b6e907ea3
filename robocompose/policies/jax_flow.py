"""A rectified-flow policy whose network runs in JAX (flax), trained with optax.

It is the torch flow policy (`robocompose.policies.flow`) with the MLP backbone, computed by
JAX: the same loss (x_t = (1 - t) a0 + t n, velocity target n - a0), the same Euler sampler and
the same Denoiser (`FlowDenoiser`, fed by a `JaxBoundNet` that crosses by DLPack), so it
composes with torch parents through the ordinary composition code. Its checkpoints are the
torch layout: the backbone's tensors under torch's state_dict names (see `jax_net`).

Observations are low-dim only: each key's history is normalised and flattened, the keys
concatenated in sorted order (the torch `LowDimEncoder` with `out_dim=None`). Image keys are
refused. The policy is a `GenerativePolicy` (so evaluation, serving and composition take it as
any other) whose weights live in JAX arrays: `state_dict()` gives them to torch without a copy,
`load_state_dict` copies torch tensors in, and it runs on JAX's CPU backend only.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from robocompose.policies.base import GenerativePolicy, is_image_shape, register_family
from robocompose.policies.flow import FlowConfig, FlowDenoiser
from robocompose.policies.jax_bridge import JaxBoundNet, to_jax, to_torch, torch_dtype
from robocompose.policies.jax_net import MlpDenoiser, Params, from_state_names, to_state_names

# Each call's result is needed at once (torch reads it next), so XLA runs it on the calling
# thread: with async dispatch every call hands off to a worker thread and waits for it, a round
# trip that costs a small batch's denoiser call more than the call itself.
jax.config.update("jax_cpu_enable_async_dispatch", False)


@dataclass
class FlowJaxConfig(FlowConfig):
    """The flow policy's settings; the backbone must be the MLP and observations low-dim."""

    family: str = "flow_jax"
    backbone: str = "mlp"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backbone != "mlp":
            raise ValueError(
                f"family 'flow_jax' has the MLP backbone only (policy.backbone=mlp). "
                f"Got {self.backbone!r}."
            )
        images = [k for k, shape in self.obs_shapes.items() if is_image_shape(shape)]
        if images:
            raise ValueError(
                f"family 'flow_jax' takes low-dim observations only; obs keys {images} are "
                f"images (shapes {[self.obs_shapes[k] for k in images]}). Use family 'flow' "
                "for image policies."
            )
        known = {f.name for f in dataclasses.fields(MlpDenoiser)} - {
            "action_dim",
            "horizon",
            "global_cond_dim",
            "parent",
            "name",
        }
        unknown = sorted(set(self.backbone_kwargs) - known)
        if unknown:
            raise ValueError(
                f"`backbone_kwargs` {unknown} are not MLP settings; known: {sorted(known)}."
            )


def flow_matching_loss(
    net: MlpDenoiser,
    params: Params,
    cond: jax.Array,
    a0: jax.Array,
    noise: jax.Array,
    t: jax.Array,
    time_scale: float,
) -> jax.Array:
    """Mean squared error of the predicted velocity against n - a0 at x_t = (1 - t) a0 + t n."""
    x_t = (1 - t[:, None, None]) * a0 + t[:, None, None] * noise
    pred = net.apply({"params": params}, x_t, t * time_scale, cond)
    return jnp.mean(jnp.square(pred - (noise - a0)))


def encode_low_dim(
    keys: tuple[str, ...], norms: Mapping[str, tuple[jax.Array, jax.Array]], obs: Mapping
) -> jax.Array:
    """{key: (B, T, D)} -> (B, sum T * D): each key normalised, flattened, in `keys` order."""
    parts = []
    for key in keys:
        scale, offset = norms[key]
        value = obs[key].astype(scale.dtype) * scale + offset
        parts.append(value.reshape(value.shape[0], -1))
    return jnp.concatenate(parts, axis=-1)


# the training loop imports this module: named, imported when training starts
@register_family(
    "flow_jax", config=FlowJaxConfig, trainer="robocompose.policies.jax_train:train_jax"
)
class JaxFlowPolicy(GenerativePolicy):
    """The flow policy on a flax MLP; see the module docstring."""

    config: FlowJaxConfig
    params: Params

    def build_networks(self) -> None:
        """The flax network (`net`; not a torch module, so composition never fuses it) and
        its weights, drawn from a key taken from torch's global generator: `prepare` seeds it
        with the run's seed, so one seed gives one initialisation, as for the torch families."""
        config = self.config
        self.keys = tuple(sorted(config.obs_keys))
        cond_dim = sum(config.n_obs_steps * int(np.prod(config.obs_shapes[k])) for k in self.keys)
        self.cond_dim = cond_dim
        self.net = MlpDenoiser(
            action_dim=config.action_dim,
            horizon=config.horizon,
            global_cond_dim=cond_dim,
            **config.backbone_kwargs,
        )
        seed = int(torch.randint(0, 2**31 - 1, ()).item())
        x = jnp.zeros((1, config.horizon, config.action_dim), jnp.float32)
        self.params = self.net.init(
            jax.random.key(seed), x, jnp.zeros((1,), jnp.float32), jnp.zeros((1, cond_dim))
        )["params"]
        net, time_scale = self.net, config.flow_time_scale
        self.net_fn = jax.jit(lambda p, x, t, c: net.apply({"params": p}, x, t, c))
        self.encode_fn = jax.jit(lambda norms, obs: encode_low_dim(self.keys, norms, obs))
        self.loss_fn = jax.jit(
            lambda p, c, a0, n, t: flow_matching_loss(net, p, c, a0, n, t, time_scale)
        )
        self.sample_fn = jax.jit(self._euler, static_argnames="grid")
        self._norms: dict[str, tuple[jax.Array, jax.Array]] | None = None

    # -- where the weights are ------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        return torch_dtype(jax.tree_util.tree_leaves(self.params)[0])

    def to(self, *args: Any, **kwargs: Any) -> JaxFlowPolicy:
        """`nn.Module.to`'s arguments: a device (CPU only) and/or a floating dtype (float32;
        float64 once JAX has x64 enabled, JAX_ENABLE_X64=1)."""
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.dtype):
                self._cast(value)
            elif isinstance(value, torch.Tensor):
                self._cast(value.dtype)
            elif isinstance(value, str | torch.device):
                device = torch.device(value)
                if device.type != "cpu":
                    raise ValueError(
                        f"the JAX flow policy runs on JAX's CPU backend; cannot move it to "
                        f"{device}. Use device=cpu."
                    )
        return self

    def _cast(self, dtype: torch.dtype) -> None:
        if not dtype.is_floating_point:
            return
        names = {torch.float32: jnp.float32, torch.float64: jnp.float64}
        if dtype not in names:
            raise ValueError(f"the JAX flow policy runs in float32 or float64. Got {dtype}.")
        if dtype == torch.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "float64 needs JAX's x64 mode: set JAX_ENABLE_X64=1 before starting Python."
            )
        self.params = jax.tree_util.tree_map(lambda a: a.astype(names[dtype]), self.params)
        self._norms = None

    def state_dict(self, *args: Any, **kwargs: Any) -> OrderedDict[str, torch.Tensor]:
        """The weights under torch's names, sharing the JAX buffers (read them, do not write)."""
        return OrderedDict(
            (name, to_torch(value)) for name, value in to_state_names(self.params).items()
        )

    def load_state_dict(
        self, state_dict: Mapping[str, torch.Tensor], strict: bool = True, assign: bool = False
    ) -> None:
        """Copy torch tensors (torch names, e.g. a torch flow MLP's) into the JAX weights."""
        own = to_state_names(self.params)
        missing, unexpected = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
        if missing or unexpected:
            raise ValueError(
                f"weights do not fit the JAX flow policy: missing {missing[:5]}, unexpected "
                f"{unexpected[:5]}."
            )
        loaded = {}
        for name, tensor in state_dict.items():
            if tuple(tensor.shape) != own[name].shape:
                raise ValueError(
                    f"`{name}` has shape {tuple(tensor.shape)}, the config builds "
                    f"{own[name].shape}."
                )
            array = tensor.detach().cpu().to(torch.float64).numpy()
            loaded[name] = jnp.asarray(array, dtype=own[name].dtype)
        self.params = from_state_names(loaded)

    # -- the policy -------------------------------------------------------------------------
    def norms(self) -> dict[str, tuple[jax.Array, jax.Array]]:
        """Each low-dim key's (scale, offset) as JAX arrays in the weights' dtype."""
        if self._norms is None:
            dtype = jax.tree_util.tree_leaves(self.params)[0].dtype
            self._norms = {
                k: (
                    jnp.asarray(self.normalizers[k].scale, dtype),
                    jnp.asarray(self.normalizers[k].offset, dtype),
                )
                for k in self.keys
            }
        return self._norms

    def encode(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Observation history {key: (B, T, D)} -> conditioning (B, C), computed in JAX."""
        arrays, batch = {}, None
        for key in self.keys:
            if key not in obs:
                raise ValueError(f"observation must have key {key!r}. Got {sorted(obs)}.")
            expected = (self.config.n_obs_steps, *self.config.obs_shapes[key])
            value = obs[key]
            if tuple(value.shape[1:]) != expected or batch not in (None, value.shape[0]):
                want = ", ".join(map(str, (batch or "B", *expected)))
                raise ValueError(
                    f"obs[{key!r}] must have shape ({want}). Got {tuple(value.shape)}."
                )
            batch = value.shape[0]
            arrays[key] = to_jax(value)
        return to_torch(self.encode_fn(self.norms(), arrays))

    def denoiser_for(self, cond: torch.Tensor | None) -> FlowDenoiser:
        bound = JaxBoundNet(self.net_fn, self.params, None if cond is None else to_jax(cond))
        config = self.config
        return FlowDenoiser(bound, config.horizon, config.action_dim, config.flow_time_scale)

    def _euler(self, params: Params, cond: jax.Array, noise: jax.Array, grid: tuple) -> jax.Array:
        x = noise
        scale = self.config.flow_time_scale
        for t, t_next in zip(grid[:-1], grid[1:], strict=True):
            t_batch = jnp.full((x.shape[0],), t * scale, x.dtype)
            x = x + (t_next - t) * self.net.apply({"params": params}, x, t_batch, cond)
        return x

    def sample_normalized(
        self, cond: torch.Tensor, steps: int, noise: torch.Tensor
    ) -> torch.Tensor:
        """The flow's Euler sampler, every step in one jitted call (one compile per batch size
        and step count); the grid is torch's, so both frameworks step at the same times."""
        grid = tuple(torch.linspace(1.0, 0.0, steps + 1, dtype=noise.dtype).tolist())
        return to_torch(self.sample_fn(self.params, to_jax(cond), to_jax(noise), grid))

    def loss(self, obs: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        """The training loss on a batch (noise and times from torch's generator), as a torch
        scalar without gradient: training runs in JAX (`robocompose.policies.jax_train`)."""
        a0 = self.action_normalizer.normalize(actions.to(self.dtype))
        noise = torch.randn_like(a0)
        t = torch.rand(a0.shape[0], dtype=a0.dtype)
        cond = to_jax(self.encode(obs))
        value = self.loss_fn(self.params, cond, to_jax(a0), to_jax(noise), to_jax(t))
        return to_torch(value)
