"""The goal planner's prompt: its fixed text and few-shot examples, in one place.

The fixed part (instructions, the language, the examples) comes first and never depends on the
scene or the request, so a backend can keep its evaluated state; the scene's names and the
request follow in the last message. Edit `INSTRUCTIONS` and `EXAMPLES` to tune the prompt;
`PROMPT_VERSION` names the text (bump it when either changes: caches key on it).

    messages(scene, request)  -> chat messages for the backend
    example_orders(3)         -> the examples in 3 orders (the planner agrees across them)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from robocompose.hierarchical.base import Message
from robocompose.hierarchical.goal.facts import TABLE, SceneNames, stacks_of, supports
from robocompose.hierarchical.goal.strips import Fact

PROMPT_VERSION = "goal-v3"

INSTRUCTIONS = """\
You turn a request to a robot arm into constraints on how the blocks must end up. Do not plan \
moves: only restate what the request asks, with its own relations, in this language:
on(a, b): a directly on b. on(a, table): a on the table. in(a, x_bin): a in that bin. \
in(a, any_bin): a in some bin.
under(a, b): b directly on a. above(a, b) / below(a, b): higher / lower in the same stack.
bottom(a) / top(a) / middle(a): a tower's base, top block, a block between two others.
clear(a): nothing on a. stay(a): a stays where it is.
bottom_up(a, b, c): a list from the bottom up. top_down(c, b, a): a list from the top down.
tower: all blocks of the scene in one stack.
swap(a, b): a and b trade places. reverse: every stack turned upside down.
sort: every block into the bin of its colour. sort except a: all but a.
all on table: every block on the table. all on table except a.
not ...: the relation must not hold, e.g. not in(a, any_bin).
if <relation> then <statements> else <statements>: decided on the scene as it is now; \
join several statements in a part with " and ".
absent(word): the request names a thing the scene does not have.
unclear: the request does not say how the blocks should end up.
unsupported: the request asks for something else than putting blocks on blocks, on the table \
or in bins (lining up, throwing, pushing over, ...).
Join statements with "; ". Blocks are named by their colour. The scene says where each block \
is now."""

# (scene, request, constraints): scene is the planner's scene line (blocks; bins; now: where
# each block is), as `scene_line` writes it
EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "blocks: yellow, white, cyan; now: yellow on the table, white on the table, cyan on the "
        "table",
        "set the cyan cube on the white one",
        "on(cyan, white)",
    ),
    (
        "blocks: orange, purple, white; now: orange on the table, purple on the table, white on "
        "the table",
        "lower the purple block onto the orange block",
        "on(purple, orange)",
    ),
    (
        "blocks: cyan, yellow, white; now: cyan on the table, yellow on the table, white on the "
        "table",
        "a two-block stack: yellow at the base, white above it",
        "on(white, yellow)",
    ),
    (
        "blocks: orange, purple, yellow; now: orange on the table, purple on the table, yellow on "
        "the table",
        "move yellow onto orange, then purple onto yellow",
        "on(yellow, orange); on(purple, yellow)",
    ),
    (
        "blocks: white, yellow, purple; now: white on the table, yellow on the table, purple on "
        "the table",
        "the purple block should carry the white block, and yellow goes under purple",
        "on(white, purple); under(yellow, purple)",
    ),
    (
        "blocks: cyan, orange, white; now: cyan on the table, orange on the table, white on the "
        "table",
        "make a pile with white highest, orange lowest and cyan between them",
        "top(white); bottom(orange); middle(cyan)",
    ),
    (
        "blocks: purple, cyan, yellow; now: purple on the table, cyan on the table, yellow on the "
        "table",
        "a tower listed top first: cyan, purple, yellow",
        "top_down(cyan, purple, yellow)",
    ),
    (
        "blocks: white, orange, cyan; now: white on the table, orange on the table, cyan on the "
        "table",
        "from top to bottom the pile should be orange, cyan, white",
        "top_down(orange, cyan, white)",
    ),
    (
        "blocks: yellow, purple, white; now: yellow on the table, purple on the table, white on "
        "the table",
        "going upward the stack is white, purple, yellow",
        "bottom_up(white, purple, yellow)",
    ),
    (
        "blocks: white, purple, yellow; now: white on the table, purple on the table, yellow on "
        "the table",
        "stack yellow on purple on white",
        "bottom_up(white, purple, yellow)",
    ),
    (
        "blocks: white, purple, orange; now: white on the table, orange on white, purple on orange",
        "take the stack down and build it again with purple at the bottom, orange in the middle "
        "and white on top",
        "bottom_up(purple, orange, white)",
    ),
    (
        "blocks: purple, yellow, white; now: purple on the table, yellow on purple, white on "
        "yellow",
        "put the stack upside down",
        "reverse",
    ),
    (
        "blocks: orange, white, cyan; now: orange on the table, white on orange, cyan on white",
        "trade the top block and the bottom block",
        "swap(cyan, orange)",
    ),
    (
        "blocks: orange, white, cyan; now: orange on the table, white on the table, cyan on the "
        "table",
        "one tower of all three, orange as the base and cyan as the top",
        "tower; bottom(orange); top(cyan)",
    ),
    (
        "blocks: cyan, orange; bins: cyan_bin, orange_bin, white_bin; now: cyan on the table, "
        "orange on the table",
        "cyan into the white bin, and keep orange out of the bins",
        "in(cyan, white_bin); not in(orange, any_bin)",
    ),
    (
        "blocks: white, cyan; bins: white_bin, cyan_bin, orange_bin; now: white on the table, cyan"
        " on the table",
        "white block to the orange bin, cyan block to the white bin",
        "in(white, orange_bin); in(cyan, white_bin)",
    ),
    (
        "blocks: orange, white; bins: white_bin, cyan_bin, orange_bin; now: orange on the table, "
        "white on the table",
        "drop every block into the bin of the same colour; one bin stays empty",
        "sort",
    ),
    (
        "blocks: yellow, orange; bins: yellow_bin, orange_bin; now: yellow on the table, orange on"
        " the table",
        "tidy everything into matching bins except the orange one",
        "sort except orange",
    ),
    (
        "blocks: white, purple, cyan; bins: white_bin, purple_bin, cyan_bin; now: white on the "
        "table, purple on the table, cyan on the table",
        "do not touch the purple block and sort the others",
        "sort except purple",
    ),
    (
        "blocks: purple, white, yellow; now: white on the table, purple on white, yellow on the "
        "table",
        "if purple is sitting on white, put yellow on purple, otherwise put yellow on white",
        "if on(purple, white) then on(yellow, purple) else on(yellow, white)",
    ),
    (
        "blocks: cyan, white; bins: cyan_bin, white_bin, yellow_bin; now: cyan in white_bin, white"
        " on the table",
        "if the cyan block is in the white bin, move it to the cyan bin; otherwise put the white "
        "block in the yellow bin",
        "if in(cyan, white_bin) then in(cyan, cyan_bin) else in(white, yellow_bin)",
    ),
    (
        "blocks: white, cyan; now: white on the table, cyan on white",
        "exchange the positions of cyan and white",
        "swap(cyan, white)",
    ),
    (
        "blocks: orange, yellow, cyan; now: orange on the table, yellow on the table, cyan on the "
        "table",
        "put the pink block on the orange block",
        "absent(pink)",
    ),
    (
        "blocks: white, orange; bins: white_bin, orange_bin; now: white on the table, orange on "
        "the table",
        "put the orange block in the purple bin",
        "absent(purple)",
    ),
    (
        "blocks: cyan, purple; now: cyan on the table, purple on the table",
        "line the blocks up from left to right",
        "unsupported",
    ),
)


def scene_line(scene: SceneNames, now: Iterable[Fact] = ()) -> str:
    """ "blocks: red, green; bins: red_bin; now: green on red, red in red_bin" (`now`: the
    facts, listed stack by stack from the bottom; left out when not given)."""
    blocks = ", ".join(b.removesuffix("_block") for b in scene.blocks)
    line = f"blocks: {blocks}" + (f"; bins: {', '.join(scene.bins)}" if scene.bins else "")
    support = supports(now)
    if not support:
        return line
    parts = []
    for base, *pile in stacks_of(support):
        names = [b.removesuffix("_block") for b in pile]
        parts.append(f"{names[0]} {'on the table' if base == TABLE else 'in ' + base}")
        parts += [f"{upper} on {lower}" for lower, upper in zip(names, names[1:], strict=False)]
    held = [f[1].removesuffix("_block") for f in now if f[0] == "holding"]
    parts += [f"{h} held" for h in held]
    return f"{line}; now: {', '.join(parts)}"


def _shot(scene: str, request: str) -> str:
    return f"Scene: {scene}\nRequest: {request}\nConstraints:"


SHORT_INSTRUCTIONS = (
    "You turn a request to a robot arm into constraints on how the blocks must end up, in the "
    "goal constraint language, on one line."
)


def short_messages(scene: SceneNames, request: str, now: Iterable[Fact] = ()) -> list[Message]:
    """The prompt of a model adapted to the language (`adapter.pairs`): no examples, ~60 tokens."""
    return short_chat(scene_line(scene, now), request)


def short_chat(line: str, request: str) -> list[Message]:
    """`short_messages` for a scene already written as its line (`scene_line`)."""
    return [
        {"role": "system", "content": SHORT_INSTRUCTIONS},
        {"role": "user", "content": _shot(line, request)},
    ]


def example_orders(count: int) -> list[tuple[tuple[str, str, str], ...]]:
    """`EXAMPLES` as written, reversed, rotated by half, rotated and reversed (the first `count`
    orders, 1 to 4): prompts that differ only in which example sits next to the request."""
    if not 1 <= count <= 4:
        raise ValueError(f"`count` (example orders) must be 1 to 4. Got {count}.")
    half = len(EXAMPLES) // 2
    rotated = EXAMPLES[half:] + EXAMPLES[:half]
    return [EXAMPLES, EXAMPLES[::-1], rotated, rotated[::-1]][:count]


def scene_orders(scene: SceneNames, count: int) -> list[SceneNames]:
    """The scene with its blocks and bins listed as given, reversed, rotated by one, rotated and
    reversed (the first `count`, 1 to 4): prompts that say the same in another order."""
    if not 1 <= count <= 4:
        raise ValueError(f"`count` (scene orders) must be 1 to 4. Got {count}.")

    def rotated(names: tuple[str, ...]) -> tuple[str, ...]:
        return names[1:] + names[:1]

    orders = [
        scene,
        SceneNames(scene.blocks[::-1], scene.bins[::-1]),
        SceneNames(rotated(scene.blocks), rotated(scene.bins)),
        SceneNames(rotated(scene.blocks)[::-1], rotated(scene.bins)[::-1]),
    ]
    return orders[:count]


def messages(
    scene: SceneNames,
    request: str,
    now: Iterable[Fact] = (),
    examples: Sequence[tuple[str, str, str]] = EXAMPLES,
) -> list[Message]:
    """System text and examples (fixed, in the order given), then the scene (with the facts
    `now`) and the request."""
    out: list[Message] = [{"role": "system", "content": INSTRUCTIONS}]
    for shot_scene, shot_request, answer in examples:
        out.append({"role": "user", "content": _shot(shot_scene, shot_request)})
        out.append({"role": "assistant", "content": answer})
    out.append({"role": "user", "content": _shot(scene_line(scene, now), request)})
    return out
