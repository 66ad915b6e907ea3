"""Training a chunk verifier (`composition.verifier`) on chunk logs (`robocompose.chunk_log`).

Every chunk is labelled with its episode's outcome. A share of the seeds is held out, every
episode of a held-out seed with it (episodes of one seed start from one state, whatever policy
ran them): early stopping watches the held-out loss, and the held-out AUC says whether the
verifier ranks chunks of unseen episodes better than chance (0.5). The loss is class-balanced
BCE: failed episodes run to the time limit and give more chunks than successful ones. Members
differ by their initialisation and the order they see the chunks in (a deep ensemble), so
their spread is larger away from the data.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robocompose.chunk_log import EpisodeChunks, episode_files, read_episode
from robocompose.composition.verifier import Target, Verifier, sizes_text
from robocompose.composition.verifier_config import VerifierTrainConfig
from robocompose.devices import torch_threads_set
from robocompose.stats import auc

__all__ = ["VerifierReport", "VerifierTrainConfig", "train_verifier"]


@dataclass(frozen=True)
class VerifierReport:
    """What a training saw and how well the verifier ranks held-out chunks."""

    out: Path
    episodes: int  # used: episodes with chunks and no error
    successes: int  # of them, successful
    skipped: int  # episodes with an error or no chunk
    # episodes whose log lacks an observation key others hold (a parent alone observes less
    # than the composition that reads both parents' keys)
    lacking_keys: int
    train_episodes: int
    held_out_episodes: int
    chunks: int
    auc_held_out: float  # held-out chunks ranked by the ensemble's mean, labels their outcome
    auc_held_out_episodes: float  # held-out episodes ranked by the mean over their chunks
    auc_train: float
    epochs: int
    best_epoch: int
    seconds: float

    def summary(self) -> str:
        return (
            f"held-out AUC {self.auc_held_out:.3f} per chunk, {self.auc_held_out_episodes:.3f} "
            f"per episode ({self.held_out_episodes} episodes held out; train AUC "
            f"{self.auc_train:.3f}); {self.episodes} episodes ({self.successes} successful, "
            f"{self.skipped} skipped, {self.lacking_keys} lacking an observation key), "
            f"{self.chunks} chunks; best epoch {self.best_epoch} of "
            f"{self.epochs}, {self.seconds:.1f} s"
        )

    def as_dict(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        return fields | {"out": str(self.out)}


@dataclass(frozen=True)
class _Data:
    """Chunks as tensors: raw inputs (N, D + n * A), labels (N,), each chunk's episode (N,)."""

    x: torch.Tensor
    y: torch.Tensor
    episode: np.ndarray
    success: np.ndarray  # per episode
    seeds: np.ndarray  # per episode


def train_verifier(
    chunk_logs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    config: VerifierTrainConfig | None = None,
) -> VerifierReport:
    """Train a verifier on the episode files under `chunk_logs` (files or folders, searched at
    any depth) and write it to `out`. It reads every low-dim observation key the logs hold;
    an episode whose log lacks one is left out (counted in the report). Refuses logs of several
    tasks, sizes of one key or chunk shapes, and data without two successful and two failed
    seeds' episodes."""
    config = config or VerifierTrainConfig()
    started = time.perf_counter()
    episodes = [read_episode(p) for p in episode_files(chunk_logs)]
    used = [e for e in episodes if e.error is None and len(e.step)]
    if not used:
        raise ValueError(f"no episode with chunks and no error under {list(chunk_logs)}.")
    keys = _observation_keys(used)
    complete = [e for e in used if e.meta["obs_sizes"].keys() == keys.keys()]
    if not complete:
        raise ValueError(
            f"no episode's log holds every observation key the logs hold ({sizes_text(keys)}): "
            "log the composition's episodes (it observes both parents' keys) beside the parents'."
        )
    target = _target(complete, keys)
    data = _data(complete, keys)
    held = _held_out(data, config)
    generator = torch.Generator().manual_seed(config.seed)
    with torch_threads_set(config.torch_threads):
        verifier = Verifier(target, config.members, config.hidden, config.layers, generator)
        train_rows = torch.from_numpy(~held[data.episode])
        verifier.fit_normalisation(data.x[train_rows])
        epochs, best_epoch = _fit(verifier, data, train_rows, config, generator)
        with torch.no_grad():
            p = verifier.net(verifier.standardise(data.x)).sigmoid().mean(0).numpy()
    held_rows = held[data.episode]
    per_episode = np.array([p[data.episode == i].mean() for i in range(len(complete))])
    report = VerifierReport(
        out=Path(out),
        episodes=len(complete),
        successes=int(data.success.sum()),
        skipped=len(episodes) - len(used),
        lacking_keys=len(used) - len(complete),
        train_episodes=int((~held).sum()),
        held_out_episodes=int(held.sum()),
        chunks=len(data.y),
        auc_held_out=_auc(p[held_rows], data.y.numpy()[held_rows]),
        auc_held_out_episodes=_auc(per_episode[held], data.success[held]),
        auc_train=_auc(p[~held_rows], data.y.numpy()[~held_rows]),
        epochs=epochs,
        best_epoch=best_epoch,
        seconds=round(time.perf_counter() - started, 2),
    )
    verifier.header = {"training": dataclasses.asdict(config), "report": report.as_dict()}
    verifier.save(out)
    return report


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    value = auc(scores, labels)
    assert value is not None  # the split holds both outcomes
    return value


def _observation_keys(episodes: list[EpisodeChunks]) -> dict[str, int]:
    """Every low-dim observation key the logs hold, in the order first met, with its size;
    one key of two sizes is refused."""
    keys: dict[str, int] = {}
    first: dict[str, Path] = {}
    for e in episodes:
        for key, size in e.meta["obs_sizes"].items():
            if keys.setdefault(key, size) != size:
                raise ValueError(
                    f"chunk logs of one verifier must share each observation key's size: "
                    f"{first[key]} has {key} (size {keys[key]}), {e.path} has {key} (size {size})."
                )
            first.setdefault(key, e.path)
    return keys


def _target(episodes: list[EpisodeChunks], keys: dict[str, int]) -> Target:
    """The one task and chunk shape of all `episodes`, their observation `keys`, and their
    parents."""
    first = episodes[0]
    shape = tuple(first.actions.shape[1:])
    for e in episodes[1:]:
        for what, mine, theirs in (
            ("task", first.meta["task"], e.meta["task"]),
            ("chunk shape (steps, action dim)", shape, tuple(e.actions.shape[1:])),
        ):
            if mine != theirs:
                raise ValueError(
                    f"chunk logs of one verifier must share one {what}: {first.path} has "
                    f"{mine}, {e.path} has {theirs}."
                )
    parents = {p["fingerprint"]: p["name"] for e in episodes for p in e.meta["parents"]}
    return Target(
        first.meta["task"],
        dict(keys),
        (int(shape[0]), int(shape[1])),
        tuple((name, fingerprint) for fingerprint, name in parents.items()),
    )


def _in_order(e: EpisodeChunks, keys: dict[str, int]) -> np.ndarray:
    """An episode's flat observations with its keys' columns in the order of `keys`."""
    ends = np.cumsum(list(e.meta["obs_sizes"].values()))
    columns = dict(zip(e.meta["obs_sizes"], np.split(e.obs, ends[:-1], axis=1), strict=True))
    return np.concatenate([columns[k] for k in keys], axis=1)


def _data(episodes: list[EpisodeChunks], keys: dict[str, int]) -> _Data:
    obs = np.concatenate([_in_order(e, keys) for e in episodes])
    actions = np.concatenate([e.actions for e in episodes])
    x = torch.from_numpy(np.concatenate([obs, actions.reshape(len(actions), -1)], axis=1))
    episode = np.concatenate([np.full(len(e.step), i) for i, e in enumerate(episodes)])
    success = np.array([e.success for e in episodes])
    return _Data(
        x=x.float(),
        y=torch.from_numpy(success[episode]).float(),
        episode=episode,
        success=success,
        seeds=np.array([e.seed for e in episodes]),
    )


def _held_out(data: _Data, config: VerifierTrainConfig) -> np.ndarray:
    """Which episodes are held out (bool per episode): every episode of `held_out` of the
    seeds, spread evenly over the seeds ordered by their success rate (so both splits hold
    both outcomes), in a random order among seeds of one rate."""
    seeds = np.unique(data.seeds)
    rates = np.array([data.success[data.seeds == s].mean() for s in seeds])
    rng = np.random.default_rng(config.seed)
    order = np.lexsort((rng.permutation(len(seeds)), rates))
    k = max(1, round(config.held_out * len(seeds)))
    picked = np.floor((np.arange(k) + rng.uniform()) * len(seeds) / k).astype(int)
    held = np.isin(data.seeds, seeds[order[picked]])
    for name, mask in (("training", ~held), ("held-out", held)):
        outcomes = data.success[mask]
        if outcomes.all() or not outcomes.any():
            raise ValueError(
                f"a verifier needs successful and failed episodes in both its training and "
                f"held-out seeds; the {name} split has {int(outcomes.sum())} successful and "
                f"{int((~outcomes).sum())} failed (of {len(data.success)} episodes: "
                f"{int(data.success.sum())} successful, over {len(seeds)} seeds). Log more "
                "episodes, or of a policy that both succeeds and fails."
            )
    return held


def _balanced(y: torch.Tensor) -> torch.Tensor:
    """Per-chunk weights giving both outcomes half the loss."""
    positive = y.mean().clamp(1e-6, 1 - 1e-6)
    return torch.where(y > 0.5, 0.5 / positive, 0.5 / (1 - positive))


def _fit(
    verifier: Verifier,
    data: _Data,
    train_rows: torch.Tensor,
    config: VerifierTrainConfig,
    generator: torch.Generator,
) -> tuple[int, int]:
    """AdamW on the summed members' balanced BCE, each member on its own chunk order; the
    weights of the epoch with the lowest held-out loss are kept. Returns (epochs run, best)."""
    x = verifier.standardise(data.x)
    x_train, y_train = x[train_rows], data.y[train_rows]
    x_held, y_held = x[~train_rows], data.y[~train_rows]
    w_train, w_held = _balanced(y_train), _balanced(y_held)
    members, n = config.members, len(y_train)
    optimiser = torch.optim.AdamW(
        verifier.net.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    best, best_state, best_epoch, epoch = math.inf, None, 0, 0
    for epoch in range(1, config.max_epochs + 1):
        verifier.train()
        order = torch.stack([torch.randperm(n, generator=generator) for _ in range(members)])
        for start in range(0, n, config.batch_size):
            rows = order[:, start : start + config.batch_size]  # (M, b): each member's own
            logits = verifier.net(x_train[rows])
            losses = F.binary_cross_entropy_with_logits(
                logits, y_train[rows], weight=w_train[rows], reduction="none"
            )
            optimiser.zero_grad()
            losses.mean(1).sum().backward()
            optimiser.step()
        verifier.eval()
        with torch.no_grad():
            logits = verifier.net(x_held)
            held_loss = F.binary_cross_entropy_with_logits(
                logits, y_held.expand_as(logits), weight=w_held.expand_as(logits)
            ).item()
        if held_loss < best:
            best, best_state, best_epoch = held_loss, copy.deepcopy(verifier.state_dict()), epoch
        elif epoch - best_epoch >= config.patience:
            break
    assert best_state is not None
    verifier.load_state_dict(best_state)
    return epoch, best_epoch
