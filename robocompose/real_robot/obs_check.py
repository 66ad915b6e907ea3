"""Check an observation message against the served policy's spec before any inference runs.

A served policy never trusts the network: every key of the spec must be there with shape
(n_obs_steps, *shape) and exactly the spec's dtype, floats must be finite, and nothing else may
come along except the optional request fields below. Each error names the key and what was
expected, so a client can fix its message.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from robocompose.real_robot.base import PolicySpec

PREFIX_KEY = "prefix_actions"  # (m, A) env units, m <= chunk_length: the old chunk's overlap
PREFIX_COMMITTED_KEY = "prefix_committed"  # int k <= m: the first k of them are committed
SEED_KEY = "seed"  # int in [0, MAX_SEED]: the episode seed the sampling noise is drawn from
CHUNK_INDEX_KEY = "chunk_index"  # int in [0, MAX_CHUNK_INDEX]: which chunk of the seeded episode
OPTIONAL_KEYS = (PREFIX_KEY, PREFIX_COMMITTED_KEY, SEED_KEY, CHUNK_INDEX_KEY)
MAX_SEED = 2**63 - 1
# the noise of chunk i costs i draws of the episode's stream: 10,000 chunks of 8 steps at 10 Hz
# are over two hours of one episode, and under 0.1 s of drawing on one core
MAX_CHUNK_INDEX = 10_000


WIDEST_ELEMENT_BYTES = 16  # the widest numeric dtype the wire carries (float128)
WIRE_SLACK_BYTES = 64 * 2**10  # key names, map headers and the scalar fields, with room to spare


def message_limit(spec: PolicySpec) -> int:
    """The largest observation message worth decoding for `spec`, in bytes: every key's history
    and a full prefix at the widest dtype, and slack; a larger frame is refused unread."""
    elements = spec.n_obs_steps * sum(math.prod(k.shape) for k in spec.obs.values())
    elements += spec.chunk_length * spec.action_dim
    return WIDEST_ELEMENT_BYTES * elements + WIRE_SLACK_BYTES


class ObservationError(ValueError):
    """An observation message that does not fit the policy's spec (the text names the key)."""


def _int_field(obs: dict[str, Any], key: str, high: int) -> int | None:
    """`obs[key]` as an int in [0, high], or None when absent."""
    value = obs.get(key)
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ObservationError(f"`{key}` must be an integer. Got {type(value).__name__}.")
    if not 0 <= value <= high:
        raise ObservationError(f"`{key}` must be in [0, {high}]. Got {value}.")
    return int(value)


def _prefix(obs: dict[str, Any], spec: PolicySpec) -> np.ndarray | None:
    value = obs.get(PREFIX_KEY)
    if value is None:
        return None
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
        raise ObservationError(f"`{PREFIX_KEY}` must be a numeric array (m, {spec.action_dim}).")
    if value.ndim != 2 or value.shape[1] != spec.action_dim or value.shape[0] > spec.chunk_length:
        raise ObservationError(
            f"`{PREFIX_KEY}` must have shape (m, {spec.action_dim}) with m <= "
            f"{spec.chunk_length}. Got {value.shape}."
        )
    if not np.all(np.isfinite(value)):
        raise ObservationError(f"`{PREFIX_KEY}` must be finite. Got NaN or inf.")
    return value.astype(np.float64)  # float32 would turn a finite 1e308 into inf


def check_observation(obs: Any, spec: PolicySpec) -> dict[str, Any]:
    """The observation as the policy takes it: spec keys -> arrays, plus the optional fields
    (`prefix_actions` as float64; `prefix_committed`, `seed`, `chunk_index` as int) if present."""
    if not isinstance(obs, dict):
        raise ObservationError(
            f"an observation must be a map of key -> array. Got {type(obs).__name__}."
        )
    bad_keys = [k for k in obs if not isinstance(k, str)]
    if bad_keys:
        raise ObservationError(f"observation keys must be strings. Got {bad_keys[:3]}.")
    missing = [k for k in spec.obs if k not in obs]
    extra = [k for k in obs if k not in spec.obs and k not in OPTIONAL_KEYS]
    if missing or extra:
        raise ObservationError(
            f"observation keys do not match the spec: missing {missing}, unexpected {extra}; "
            f"expected {sorted(spec.obs)} (optional: {list(OPTIONAL_KEYS)})."
        )
    checked: dict[str, Any] = {}
    for key, key_spec in spec.obs.items():
        value = obs[key]
        shape = (spec.n_obs_steps, *key_spec.shape)
        if not isinstance(value, np.ndarray):
            raise ObservationError(
                f"`{key}` must be a numpy array of shape {shape}. Got {type(value).__name__}."
            )
        if value.shape != shape:
            raise ObservationError(
                f"`{key}` must have shape {shape} (history {spec.n_obs_steps} x "
                f"{key_spec.shape}). Got {value.shape}."
            )
        if value.dtype != np.dtype(key_spec.dtype):
            raise ObservationError(f"`{key}` must have dtype {key_spec.dtype}. Got {value.dtype}.")
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ObservationError(f"`{key}` must be finite. Got NaN or inf.")
        checked[key] = value
    prefix = _prefix(obs, spec)
    if prefix is not None:
        checked[PREFIX_KEY] = prefix
    highs = (
        (PREFIX_COMMITTED_KEY, spec.chunk_length),
        (SEED_KEY, MAX_SEED),
        (CHUNK_INDEX_KEY, MAX_CHUNK_INDEX),
    )
    for key, high in highs:
        value = _int_field(obs, key, high)
        if value is not None:
            checked[key] = value
    committed = checked.get(PREFIX_COMMITTED_KEY)
    if committed is not None and (prefix is None or committed > len(prefix)):
        given = 0 if prefix is None else len(prefix)
        raise ObservationError(
            f"`{PREFIX_COMMITTED_KEY}` must be <= the number of `{PREFIX_KEY}` ({given}). "
            f"Got {committed}."
        )
    return checked
