"""Train the JAX flow policy with optax: the torch loop's data, schedule and files, in JAX.

What it shares with `robocompose.policies.train`: `prepare` (dataset, demo selection,
normalisers, windows, metadata), batches drawn by the same seeded torch generator (so both
frameworks see the same windows in the same order), the learning-rate schedule, the EMA decay
warmup, the TensorBoard curves, the EMA evaluation, the refusal to train fewer steps and the
checkpoint writer (model.safetensors holds the EMA weights under torch's names). AdamW is
optax's (decoupled weight decay, the same betas and eps as torch's), after a global-norm clip
when `grad_clip` is set. Training state (raw weights, EMA, the optimiser's moments, the JAX key,
the batch generator) is saved with every checkpoint, so a rerun resumes.

One jitted update per step. `torch_threads` caps torch (the batches) only: XLA sizes its CPU
thread pool from the process's CPU affinity (XLA_FLAGS' thread settings do not limit it), so
`taskset -c 0 robocompose train ...` holds a run to one core.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch

from robocompose.interrupt import interrupt_deferred
from robocompose.policies.checkpoint import save_policy
from robocompose.policies.jax_bridge import to_torch
from robocompose.policies.jax_flow import JaxFlowPolicy, encode_low_dim, flow_matching_loss
from robocompose.policies.jax_net import Params, from_state_names, to_state_names
from robocompose.policies.train import learning_rate, prepare
from robocompose.policies.train_config import TrainConfig
from robocompose.policies.train_monitor import (
    Evaluator,
    TrainingProgress,
    check_finite,
    evaluate_ema,
)
from robocompose.policies.train_state import (
    STATE_JSON,
    check_resumable,
    read_state_document,
    read_state_tensors,
    refuse_fewer_steps,
    write_state,
)
from robocompose.stats import SuccessRate


def optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """AdamW (torch's defaults) behind an optional global-norm clip; the learning rate is a
    hyperparameter set every step from `learning_rate`."""

    def make(learning_rate: float) -> optax.GradientTransformation:
        adamw = optax.adamw(
            learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=config.weight_decay
        )
        if config.grad_clip is None:
            return adamw
        return optax.chain(optax.clip_by_global_norm(config.grad_clip), adamw)

    return optax.inject_hyperparams(make)(learning_rate=config.lr)


def ema_decay(config: TrainConfig, step: int) -> float:
    """The torch loop's EMA decay after `step` updates: warms up from 0 toward `ema_decay`."""
    return min(config.ema_decay, (1 + step) / (10 + step))


def make_update(policy: JaxFlowPolicy, tx: optax.GradientTransformation):
    """The jitted training step: (params, opt_state, ema, key, obs, actions, lr, decay) ->
    (params, opt_state, ema, key, loss, grad_norm)."""
    net, keys, scale = policy.net, policy.keys, policy.config.flow_time_scale
    action_scale, action_offset = (
        jnp.asarray(a, jnp.float32)
        for a in (policy.action_normalizer.scale, policy.action_normalizer.offset)
    )
    norms = policy.norms()

    def loss_fn(params: Params, obs: dict, actions: jax.Array, key: jax.Array) -> jax.Array:
        a0 = actions * action_scale + action_offset
        noise_key, time_key = jax.random.split(key)
        noise = jax.random.normal(noise_key, a0.shape, a0.dtype)
        t = jax.random.uniform(time_key, (a0.shape[0],), a0.dtype)
        cond = encode_low_dim(keys, norms, obs)
        return flow_matching_loss(net, params, cond, a0, noise, t, scale)

    @jax.jit
    def update(params, opt_state, ema, key, obs, actions, lr, decay):
        key, step_key = jax.random.split(key)
        loss, grads = jax.value_and_grad(loss_fn)(params, obs, actions, step_key)
        opt_state.hyperparams["learning_rate"] = lr
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        ema = jax.tree_util.tree_map(lambda e, p: decay * e + (1 - decay) * p, ema, params)
        return params, opt_state, ema, key, loss, optax.tree.norm(grads)

    return update


def _check_config(config: TrainConfig, metadata: dict[str, Any]) -> None:
    if config.amp != "off":
        raise ValueError(f"family 'flow_jax' trains in float32: set amp=off. Got {config.amp!r}.")
    if config.device not in ("auto", "cpu"):
        raise ValueError(
            f"family 'flow_jax' trains on JAX's CPU backend: set device=cpu. Got {config.device!r}."
        )
    if config.eval_every and not metadata["task"]:
        raise ValueError(
            f"`eval_every`={config.eval_every}: {config.dataset} names no task (env_args has no "
            "env_name), so there is no env to evaluate on. Set eval_every=0."
        )


def _torch_state(params: Params) -> dict[str, torch.Tensor]:
    return {k: to_torch(v) for k, v in to_state_names(params).items()}


def _flat_optimizer_state(opt_state: Any) -> dict[str, torch.Tensor]:
    leaves = jax.tree_util.tree_leaves_with_path(opt_state)
    return {
        f"optim{jax.tree_util.keystr(path)}": torch.from_numpy(np.array(leaf))
        for path, leaf in leaves
    }


def _restore_optimizer_state(like: Any, tensors: dict[str, torch.Tensor]) -> Any:
    paths, treedef = jax.tree_util.tree_flatten_with_path(like)
    leaves = []
    for path, leaf in paths:
        name = f"optim{jax.tree_util.keystr(path)}"
        leaves.append(jnp.asarray(tensors[name].numpy(), dtype=jnp.asarray(leaf).dtype))
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _jax_params(tensors: dict[str, torch.Tensor], prefix: str) -> Params:
    named = {
        k[len(prefix) :]: jnp.asarray(v.numpy()) for k, v in tensors.items() if k.startswith(prefix)
    }
    return from_state_names(named)


def train_jax(
    config: TrainConfig,
    progress: bool = True,
    stop_at_step: int | None = None,
    evaluator: Evaluator | None = None,
) -> Path:
    """Train (or resume) a `flow_jax` policy; returns the run folder (see the module doc)."""
    out = Path(config.out)
    refuse_fewer_steps(out, config.steps)
    policy, windows, metadata = prepare(config)
    assert isinstance(policy, JaxFlowPolicy)
    _check_config(config, metadata)
    tx = optimizer(config)
    params = policy.params
    opt_state = tx.init(params)
    ema = jax.tree_util.tree_map(jnp.array, params)
    key = jax.random.key(config.seed)
    sampler = torch.Generator().manual_seed(config.seed)
    step, minutes = 0, 0.0
    if (out / STATE_JSON).exists():
        document = read_state_document(out)
        check_resumable(out, config, document)
        step, minutes = int(document["step"]), float(document["train_minutes"])
        tensors = read_state_tensors(out, step)
        params = _jax_params(tensors, "model.")
        ema = _jax_params(tensors, "ema.")
        opt_state = _restore_optimizer_state(opt_state, tensors)
        key = jax.random.wrap_key_data(jnp.asarray(tensors["rng.jax"].numpy()))
        sampler.set_state(tensors["rng.sampler"])
    update = make_update(policy, tx)

    def save(run: TrainingProgress) -> None:
        elapsed = run.minutes()
        policy.params = params
        meta = metadata | {"step": run.step, "train_minutes": elapsed, "loss": run.smoothed}
        dtype = getattr(torch, config.checkpoint_dtype)
        save_policy(policy, out, meta, state_dict=_torch_state(ema), dtype=dtype)
        _save_state(out, config, params, ema, opt_state, key, sampler, run.step, elapsed)

    def evaluate() -> SuccessRate:
        cpu = torch.device("cpu")
        state = _torch_state(ema)
        return evaluate_ema(policy, state, metadata, config.eval_episodes, cpu, evaluator)

    with TrainingProgress(config, step, minutes, stop_at_step, progress, save, evaluate) as run:
        while run.step < run.last:
            with interrupt_deferred():  # Ctrl-C lands between steps, where the state is whole
                began = time.perf_counter()
                index = torch.randint(len(windows), (config.batch_size,), generator=sampler)
                batch = windows.batch(index.numpy())
                obs = {k: np.asarray(v, np.float32) for k, v in batch["obs"].items()}
                lr = learning_rate(config, run.step)
                decay = ema_decay(config, run.step + 1)
                *state, loss, grad_norm = update(
                    params,
                    opt_state,
                    ema,
                    key,
                    obs,
                    np.asarray(batch["actions"], np.float32),
                    lr,
                    decay,
                )
                value, norm = float(loss), float(grad_norm)
                check_finite(run.step + 1, value, norm, out, run.saved)  # else not kept
                params, opt_state, ema, key = state
                run.step += 1
            run.after_step(value, norm, lr, time.perf_counter() - began)
    return out


def _save_state(
    out: Path,
    config: TrainConfig,
    params: Params,
    ema: Params,
    opt_state: Any,
    key: jax.Array,
    sampler: torch.Generator,
    step: int,
    minutes: float,
) -> None:
    """The torch loop's two files, with the JAX state under its own names."""
    tensors = {f"model.{k}": v for k, v in _torch_state(params).items()}
    tensors |= {f"ema.{k}": v for k, v in _torch_state(ema).items()}
    tensors |= _flat_optimizer_state(opt_state)
    tensors["rng.jax"] = torch.from_numpy(np.array(jax.random.key_data(key)))
    tensors["rng.sampler"] = sampler.get_state()
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    write_state(out, config, tensors, step, minutes)
