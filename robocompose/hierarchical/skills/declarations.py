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

from robocompose.hierarchical.goal.strips import Operator

B, T, N = "?obj", "?below", "?bin"  # the held block, the block under it, a bin


def _pick_from(
    skill: str, variant: str, extra: tuple[tuple[str, str], ...], where, freed, after=(), needs=()
) -> Operator:
    """A pick (or the pick half of place_in) of ?obj from `where`."""
    args = (("obj", B),) if skill == "pick" else (("obj", B), ("bin", "?to"))
    return Operator(
        skill,
        variant,
        ((B, "block"), *extra),
        args,
        (("hand_empty",), ("clear", B), where, *needs),
        (("holding", B), *freed) if not after else (*freed, *after),
        (("hand_empty",), where) if not after else (where, *needs),
    )


PICK = (
    _pick_from("pick", "from_table", (), ("on_table", B), ()),
    _pick_from("pick", "from_block", ((T, "block"),), ("on", B, T), (("clear", T),)),
    _pick_from("pick", "from_bin", ((N, "bin"),), ("in", B, N), (("empty", N),)),
)

PLACE = (
    Operator(
        "place",
        "on_block",
        ((B, "block"), ("?target", "block")),
        (("obj", B), ("target", "?target")),
        (("holding", B), ("clear", "?target")),
        (("on", B, "?target"), ("hand_empty",)),
        (("holding", B), ("clear", "?target")),
    ),
    Operator(
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
    Operator(
        "place_at",
        "on_table",
        ((B, "block"),),
        (("obj", B),),
        (("holding", B),),
        (("on_table", B), ("hand_empty",)),
        (("holding", B),),
    ),
)

_INTO = (("in", B, "?to"), ("hand_empty",))  # place_in's end: ?obj in ?to, hand empty
# the held variant last: when none applies, a pick variant's failure says why best
PLACE_IN = (
    _pick_from(
        "place_in",
        "from_table",
        (("?to", "bin"),),
        ("on_table", B),
        (),
        _INTO,
        (("empty", "?to"),),
    ),
    _pick_from(
        "place_in",
        "from_block",
        ((T, "block"), ("?to", "bin")),
        ("on", B, T),
        (("clear", T),),
        _INTO,
        (("empty", "?to"),),
    ),
    _pick_from(
        "place_in",
        "from_bin",
        (("?from", "bin"), ("?to", "bin")),
        ("in", B, "?from"),
        (("empty", "?from"),),
        _INTO,
        (("empty", "?to"),),
    ),
    Operator(
        "place_in",
        "held",
        ((B, "block"), ("?to", "bin")),
        (("obj", B), ("bin", "?to")),
        (("holding", B), ("empty", "?to")),
        _INTO,
        (("holding", B), ("empty", "?to")),
    ),
)

# the planning domain: place_in is pick then place, so the planner plans with those two
PLANNING_SKILLS = ("pick", "place", "place_at")
