"""The checkpoints this repository ships (trained by `make checkpoints`, see the Makefile)."""

from __future__ import annotations

from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"

# the heterogeneous parent pair of each task: (A, B)
PARENT_PAIR = ("diffusion_unet", "flow_mlp")


def shipped_checkpoints() -> list[Path]:
    """Every shipped checkpoint folder (one holding a config.json), sorted by name."""
    return sorted(p.parent for p in CHECKPOINTS.glob("*/config.json"))


def shipped_path(task: str, kind: str) -> Path:
    """checkpoints/<task>_<kind>; a clear error says how to make it when it is missing."""
    path = CHECKPOINTS / f"{task}_{kind}"
    if not (path / "config.json").is_file():
        have = ", ".join(p.name for p in shipped_checkpoints()) or "none"
        raise FileNotFoundError(
            f"no shipped checkpoint {path.name} in {CHECKPOINTS} (have: {have}). "
            f"Train it with `make {path.relative_to(CHECKPOINTS.parent)}/config.json`."
        )
    return path
