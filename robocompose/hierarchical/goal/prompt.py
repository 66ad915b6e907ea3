"""The goal planner's prompt: its fixed text and few-shot examples, in one place.

The fixed part (instructions, the language, the examples) comes first and never depends on the
scene or the request, so a backend can keep its evaluated state; the scene's names and the
request follow in the last message. Edit `INSTRUCTIONS` and `EXAMPLES` to tune the prompt;
`PROMPT_VERSION` names the text (bump it when either changes: caches key on it).

    messages(scene, request)  -> chat messages for the backend
"""

from __future__ import annotations

from robocompose.hierarchical.base import Message
from robocompose.hierarchical.goal.facts import Scene

PROMPT_VERSION = "goal-v1"

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
swap(a, b): a and b trade places.
sort: every block into the bin of its colour. sort except a: all but a.
all on table: every block on the table. all on table except a.
not ...: the relation must not hold, e.g. not in(a, any_bin).
if <relation> then <statements> else <statements>: decided on the scene as it is now; \
join several statements in a part with " and ".
absent(word): the request names a thing the scene does not have.
unclear: the request does not say how the blocks should end up.
unsupported: the request asks for something else than putting blocks on blocks, on the table \
or in bins (lining up, throwing, pushing over, ...).
Join statements with "; ". Blocks are named by their colour."""

# (scene, request, constraints): scene is "blocks: ...; bins: ..."
EXAMPLES: tuple[tuple[str, str, str], ...] = (
    ("blocks: yellow, white, cyan", "set the cyan cube on the white one", "on(cyan, white)"),
    (
        "blocks: orange, purple, yellow",
        "move yellow onto orange, then purple onto yellow",
        "on(yellow, orange); on(purple, yellow)",
    ),
    (
        "blocks: white, yellow, purple",
        "the purple block should carry the white block, and yellow goes under purple",
        "on(white, purple); under(yellow, purple)",
    ),
    (
        "blocks: cyan, orange, white",
        "make a pile with white highest, orange lowest and cyan between them",
        "top(white); bottom(orange); middle(cyan)",
    ),
    (
        "blocks: purple, cyan, yellow",
        "a tower listed top first: cyan, yellow, purple",
        "top_down(cyan, yellow, purple)",
    ),
    (
        "blocks: yellow, purple, white",
        "going upward the stack is white, purple, yellow",
        "bottom_up(white, purple, yellow)",
    ),
    (
        "blocks: orange, white, cyan",
        "one tower of all three, orange as the base and cyan as the top",
        "tower; bottom(orange); top(cyan)",
    ),
    (
        "blocks: cyan, orange; bins: cyan_bin, orange_bin, white_bin",
        "cyan into the white bin, and keep orange out of the bins",
        "in(cyan, white_bin); not in(orange, any_bin)",
    ),
    (
        "blocks: purple, white, yellow",
        "if purple is sitting on white, put yellow on purple, otherwise put yellow on white",
        "if on(purple, white) then on(yellow, purple) else on(yellow, white)",
    ),
    (
        "blocks: yellow, orange; bins: yellow_bin, orange_bin",
        "tidy everything into matching bins except the orange one",
        "sort except orange",
    ),
    ("blocks: white, cyan", "exchange the positions of cyan and white", "swap(cyan, white)"),
    ("blocks: orange, yellow, cyan", "put the pink block on the orange block", "absent(pink)"),
    ("blocks: cyan, purple", "line the blocks up from left to right", "unsupported"),
)


def scene_line(scene: Scene) -> str:
    blocks = ", ".join(b.removesuffix("_block") for b in scene.blocks)
    return f"blocks: {blocks}" + (f"; bins: {', '.join(scene.bins)}" if scene.bins else "")


def _shot(scene: str, request: str) -> str:
    return f"Scene: {scene}\nRequest: {request}\nConstraints:"


def messages(scene: Scene, request: str) -> list[Message]:
    """System text and examples (fixed), then the scene and the request."""
    out: list[Message] = [{"role": "system", "content": INSTRUCTIONS}]
    for shot_scene, shot_request, answer in EXAMPLES:
        out.append({"role": "user", "content": _shot(shot_scene, shot_request)})
        out.append({"role": "assistant", "content": answer})
    out.append({"role": "user", "content": _shot(scene_line(scene), request)})
    return out
