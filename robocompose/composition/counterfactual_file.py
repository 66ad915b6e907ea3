"""A counterfactual episode (`counterfactual.CounterfactualEpisode`) on disk: one
`seed_<seed>.npz`, complete or absent (`chunk_log.save_npz`), so a run of many episodes resumes
at the first missing file and scores can be computed again later (a verifier trained since)
without running the simulator.

Its arrays stack the K boundaries (C candidates each) on a first axis: chunk, step,
finisher_key, chosen, seconds, has_previous (K,); noise; obs/<key> (K, T, ...); previous (K, H, A),
zeros where there is none; executed, actions (K, C, n, A); full (K, C, H, A), absent when the
parents' chunks do not align; success, score, length (K, C); final_state (K, C, S);
episode_actions (steps, A), the selector's own; meta (JSON: seed, task, settings, the
selector's success, steps and chunks, the sources, the obs keys, the seconds it took).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from robocompose.chunk_log import load_npz, save_npz
from robocompose.composition.counterfactual import Boundary, CounterfactualEpisode

__all__ = ["episode_path", "read_episode", "save_episode"]

FORMAT = 1
_PER_BOUNDARY = ("chunk", "step", "finisher_key", "chosen", "seconds")
_PER_CANDIDATE = ("executed", "actions", "success", "score", "length", "final_state")
_META = ("seed", "task", "settings", "success", "steps", "chunks", "seconds")  # the episode's


def episode_path(folder: str | os.PathLike[str], seed: int) -> Path:
    return Path(folder) / f"seed_{seed}.npz"


def save_episode(path: str | os.PathLike[str], episode: CounterfactualEpisode) -> None:
    """Write `episode` whole to `path`."""
    bounds = episode.boundaries
    first = bounds[0]
    arrays = {name: np.array([getattr(b, name) for b in bounds]) for name in _PER_BOUNDARY}
    arrays |= {name: np.stack([getattr(b, name) for b in bounds]) for name in _PER_CANDIDATE}
    arrays |= {f"obs/{k}": np.stack([b.obs[k] for b in bounds]) for k in first.obs}
    arrays["noise"] = np.stack([b.noise for b in bounds])
    arrays["has_previous"] = np.array([b.previous is not None for b in bounds])
    shape = (first.executed if first.full is None else first.full).shape[1:]
    blank = np.zeros(shape, dtype=first.executed.dtype)
    arrays["previous"] = np.stack([blank if b.previous is None else b.previous for b in bounds])
    if first.full is not None:
        arrays["full"] = np.stack([b.full for b in bounds])
    arrays["episode_actions"] = episode.actions
    meta = {"format": FORMAT, "sources": first.sources, "obs_keys": list(first.obs)}
    meta |= {name: getattr(episode, name) for name in _META}
    arrays["meta"] = np.asarray(json.dumps(meta))
    save_npz(Path(path), arrays)


def read_episode(path: str | os.PathLike[str]) -> CounterfactualEpisode:
    """The episode a file holds; a file that is not one names itself."""
    arrays, meta = load_npz(Path(path), "counterfactual episode", FORMAT)
    boundaries = [
        Boundary(
            **{name: arrays[name][i].item() for name in _PER_BOUNDARY},
            **{name: arrays[name][i] for name in _PER_CANDIDATE},
            obs={k: arrays[f"obs/{k}"][i] for k in meta["obs_keys"]},
            noise=arrays["noise"][i],
            previous=arrays["previous"][i] if arrays["has_previous"][i] else None,
            sources=list(meta["sources"]),
            full=arrays["full"][i] if "full" in arrays else None,
        )
        for i in range(len(arrays["chunk"]))
    ]
    return CounterfactualEpisode(
        **{name: meta[name] for name in _META},
        actions=arrays["episode_actions"],
        boundaries=boundaries,
    )
