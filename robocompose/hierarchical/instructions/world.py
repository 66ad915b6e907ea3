"""An item's scene as a world to plan and run in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robocompose.hierarchical.instructions.items import InstructionItem

if TYPE_CHECKING:
    from robocompose.hierarchical.world import SimWorld


def make_world(item: InstructionItem, seed: int | None = None, **world_kwargs: Any) -> SimWorld:
    """A SimWorld of the item's env and blocks (and Stack order: the env's own success check),
    reset to `seed` (default: the item's own), its start facts arranged."""
    from robocompose.hierarchical.world import SimWorld

    world = SimWorld(item.scene.env, item.scene.env_kwargs(), **world_kwargs)
    world.reset(item.seed if seed is None else seed)
    if item.scene.start:
        world.arrange(item.scene.start)
    return world
