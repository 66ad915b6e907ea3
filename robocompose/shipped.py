"""The checkpoints the package ships (trained by `make checkpoints`, see the Makefile).

They live inside the package, so an installed robocompose has them too; a checkpoint argument
names one by its folder's name (`Stack_flow_mlp`) from any folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from robocompose.sim.tasks import TASKS

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"

# The parent pair (A, B) that composition uses on each task, by checkpoint kind (each task's
# `TaskSpec.shipped_pair`, which says why): a diffusion and a flow policy where a competent
# diffusion policy exists, else two flows trained on disjoint halves of one demo file.
PARENT_PAIRS: dict[str, tuple[str, str]] = {
    name: spec.shipped_pair for name, spec in TASKS.items() if spec.shipped_pair
}


def shipped_checkpoints() -> list[Path]:
    """Every shipped checkpoint folder (one holding a config.json), sorted by name."""
    return sorted(p.parent for p in CHECKPOINTS.glob("*/config.json"))


def checkpoint_folder(checkpoint: str | os.PathLike[str]) -> Path:
    """A checkpoint argument as a folder: a folder holding config.json, else the shipped
    checkpoint of that name; anything else comes back as it is, for the loader to name."""
    path = Path(checkpoint)
    if (path / "config.json").is_file() or len(path.parts) != 1:
        return path
    shipped = CHECKPOINTS / path.name
    return shipped if (shipped / "config.json").is_file() else path


def shipped_name(path: str | os.PathLike[str]) -> str | None:
    """The shipped checkpoint a missing path most likely meant (`Stack_flow_mlp`
    from before the folder moved into the package), for error messages."""
    name = Path(path).name
    return name if (CHECKPOINTS / name / "config.json").is_file() else None


def shipped_path(task: str, kind: str) -> Path:
    """The shipped checkpoint <task>_<kind>; a clear error says how to make it if missing."""
    path = CHECKPOINTS / f"{task}_{kind}"
    if not (path / "config.json").is_file():
        have = ", ".join(p.name for p in shipped_checkpoints()) or "none"
        raise FileNotFoundError(
            f"no shipped checkpoint {path.name} in {CHECKPOINTS} (have: {have}). "
            f"Train it with `make {make_target(path.name)}` (the Makefile holds the exact "
            "command)."
        )
    return path


# Shipped checkpoints whose Makefile target is not `train-<task>` (or `train-<task>-image`).
_OWN_TARGETS = {
    "Stack_flow_jax_mlp": "train-Stack-jax",
    "GymPushT_flow_unet": "train-GymPushT-unet",
    "GymPushT_diffusion_unet_v": "train-GymPushT-unet",
    "Tabletop_skills_flow_mlp": "train-skills",
    "Tabletop_skills_flow_mlp_b": "train-skills",
    "Tabletop_skills_diffusion_mlp": "train-skills",
}


def make_target(name: str) -> str:
    """The Makefile target that trains the shipped checkpoint <name> (a test dry-runs it for every
    shipped checkpoint)."""
    if name in _OWN_TARGETS:
        return _OWN_TARGETS[name]
    task, _, kind = name.partition("_")
    return f"train-{task}-image" if kind.startswith("image") else f"train-{task}"


def parent_pair(task: str) -> list[Path]:
    """The shipped parent checkpoints composed on `task` (see `PARENT_PAIRS`)."""
    if task not in PARENT_PAIRS:
        raise ValueError(f"no shipped parent pair for task {task!r}; have {sorted(PARENT_PAIRS)}.")
    return [shipped_path(task, kind) for kind in PARENT_PAIRS[task]]
