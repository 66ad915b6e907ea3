"""What the scripted skills need and do, as STRIPS operators over the scene's facts.

One declaration per skill, attached to the skill in the registry: it feeds the skills' own
precondition message, the plan check before motion, the prompt listing and the planning domain.
pick, place, place_at and place_in are declared; move_to, open_gripper, close_gripper and push
move things by coordinates, which facts cannot follow: a plan check stops following the state
after one of them (see `goal.strips.Opaque`).

place_at(obj, x, y) declares the block "on the table" whatever x and y are: the planner picks
a spot outside the bins (`planners.goal`), and a program that drops a block into a bin's zone by
coordinates is the one case the facts get wrong (the world's facts after the call correct it).
"""

from __future__ import annotations

from robocompose.hierarchical.goal.strips import StripsOperator

B, T, N = "?obj", "?below", "?bin"  # the block acted on, the block under it, a bin
Where = tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[tuple[str, ...], ...]]
# where a block can be picked from: (extra variables, its location fact, what that frees)
FROM: dict[str, Where] = {
    "from_table": ((), ("on_table", B), ()),
    "from_block": (((T, "block"),), ("on", B, T), (("clear", T),)),
    "from_bin": (((N, "bin"),), ("in", B, N), (("empty", N),)),
}


def _pick(variant: str) -> StripsOperator:
    """pick(obj) from one kind of place: the hand must be empty and nothing on the block."""
    extra, where, freed = FROM[variant]
    return StripsOperator(
        "pick",
        variant,
        ((B, "block"), *extra),
        (("obj", B),),
        (("hand_empty",), ("clear", B), where),
        (("holding", B), *freed),
        (("hand_empty",), where),
    )


def _place_in(variant: str) -> StripsOperator:
    """place_in(obj, bin) = pick from one kind of place, then into the empty bin ?to."""
    extra, where, freed = FROM[variant]
    if variant == "from_bin":  # the bin it leaves is not the argument `bin`
        extra, where, freed = ((("?from", "bin"),), ("in", B, "?from"), (("empty", "?from"),))
    return StripsOperator(
        "place_in",
        variant,
        ((B, "block"), *extra, ("?to", "bin")),
        (("obj", B), ("bin", "?to")),
        (("hand_empty",), ("clear", B), where, ("empty", "?to")),
        (*freed, ("in", B, "?to"), ("hand_empty",)),
        (where, ("empty", "?to")),
    )


PICK = tuple(_pick(variant) for variant in FROM)

PLACE = (
    StripsOperator(
        "place",
        "on_block",
        ((B, "block"), ("?target", "block")),
        (("obj", B), ("target", "?target")),
        (("holding", B), ("clear", "?target")),
        (("on", B, "?target"), ("hand_empty",)),
        (("holding", B), ("clear", "?target")),
    ),
    StripsOperator(
        "place",
        "in_bin",
        ((B, "block"), (N, "bin")),
        (("obj", B), ("target", N)),
        (("holding", B), ("empty", N)),
        (("in", B, N), ("hand_empty",)),
        (("holding", B), ("empty", N)),
    ),
)

PLACE_AT = (
    StripsOperator(
        "place_at",
        "on_table",
        ((B, "block"),),
        (("obj", B),),
        (("holding", B),),
        (("on_table", B), ("hand_empty",)),
        (("holding", B),),
    ),
)

# the held variant last: when none applies, a pick variant's failure says why best
PLACE_IN = (
    *(_place_in(variant) for variant in FROM),
    StripsOperator(
        "place_in",
        "held",
        ((B, "block"), ("?to", "bin")),
        (("obj", B), ("bin", "?to")),
        (("holding", B), ("empty", "?to")),
        (("in", B, "?to"), ("hand_empty",)),
        (("holding", B), ("empty", "?to")),
    ),
)

# the planning domain: place_in is pick then place, so the planner plans with those two
PLANNING_SKILLS = ("pick", "place", "place_at")
