"""(request -> constraints) training pairs for adapting the model, from the dev split only.

Each dev item's gold answer is written in the constraint language (`label`): a tower as
`bottom_up(...)`, sorting as `sort` / `sort except x; not in(x, any_bin)`, bins as `in(...)`,
a swap as `swap(a, b)`, and an infeasible item as `absent(x)` / `unclear` / `unsupported`.
Where the gold cannot say what the words say, the label is written by hand (`WORDED`): a
conditional as `if <relation> then ... else ...` (the solver decides it on the scene, not the
model), a contradiction or a block on itself as the relations asked for (the solver finds no
goal). The goal prompt's few-shot examples join as pairs too (`example_pairs`). Every label is
solved against the item's scene and kept only when its goal satisfies the gold (or, infeasible,
yields no goal).
New pairs come from renaming colours: one bijection of the eight scene colours applied to the
request, the scene, the start and the gold together, so the words stay the dev split's and the
colours vary; each renamed pair lists the scene's blocks in a random order. The held-out
collection never enters (`data/test.yaml` is not read here).

    for pair in training_pairs(variants=8, seed=0):
        pair.messages          # the short prompt (`prompt.short_messages`), then pair.answer
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from robocompose.hierarchical.base import Message
from robocompose.hierarchical.goal.constraints import ConstraintSyntaxError, parse
from robocompose.hierarchical.goal.facts import SceneNames, colour_of, state_of
from robocompose.hierarchical.goal.prompt import EXAMPLES, short_chat, short_messages
from robocompose.hierarchical.goal.solver import Goal, goal_facts, solve
from robocompose.hierarchical.goal.strips import State
from robocompose.hierarchical.instructions import (
    Fact,
    FactView,
    InstructionItem,
    Scene,
    instruction_items,
    unmet,
)
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT

COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "cyan", "white")
OPERATORS = PICK + PLACE + PLACE_AT
_WHY_LABEL = {"ambiguous": "unclear", "unsafe": "unsupported", "unreachable": "unsupported"}


@dataclass(frozen=True)
class Pair:
    """One training example: the prompt's messages and the answer the model should write."""

    key: str  # the dev item and colour renaming it came from
    messages: tuple[Message, ...]
    answer: str


def _short(name: str) -> str:
    return colour_of(name)


def _chains(goal: tuple[Fact, ...]) -> list[list[str]]:
    """The gold's towers bottom-up (blocks linked by `on`)."""
    above = {f[2]: f[1] for f in goal if f[0] == "on"}
    below = set(above.values())
    chains = []
    for base in [b for b in above if b not in below]:
        chain = [base]
        while chain[-1] in above:
            chain.append(above[chain[-1]])
        chains.append(chain)
    return chains


# dev items whose words say more than their gold: the rewrite a person would write
WORDED: dict[str, str] = {
    "dev/conditional/0": "if on(red, blue) then on(green, red) else on(green, blue)",
    "dev/conditional/1": "if on(yellow, purple) then on(orange, yellow) else on(orange, purple)",
    "dev/conditional/2": "if in(red, blue_bin) then in(red, red_bin) else in(green, blue_bin)",
    "dev/conditional/3": (
        "if in(green, green_bin) then in(blue, blue_bin) else in(green, green_bin)"
    ),
    "dev/conditional/4": "if on(white, cyan) then on(red, white) else on(red, cyan)",
    "dev/conditional/5": "if on(blue, table) then on(yellow, blue) else on(yellow, green)",
    "dev/conditional/6": "if on(blue, table) then on(purple, blue) else on(purple, blue)",
    "dev/conditional/7": (
        "if in(orange, yellow_bin) then in(orange, orange_bin) else in(orange, yellow_bin)"
    ),
    "dev/conditional/8": "if on(cyan, green) then on(cyan, table) else on(cyan, green)",
    "dev/conditional/9": "if on(red, yellow) then on(blue, red) else on(red, yellow)",
    "dev/conditional/10": (
        "if in(purple, red_bin) then in(purple, purple_bin) else in(red, purple_bin)"
    ),
    "dev/conditional/11": "if on(green, blue) then on(red, green) else on(green, blue)",
    "dev/infeasible/1": "on(red, red)",
    "dev/infeasible/2": "on(blue, green); on(green, blue)",
    "dev/infeasible/5": "tower; top(yellow)",
    "dev/infeasible/7": "in(orange, orange_bin); in(orange, blue_bin)",
    "dev/infeasible/8": "on(cyan, cyan)",
    "dev/infeasible/12": "on(yellow, red); on(blue, red)",
}


def label(item: InstructionItem) -> str | None:
    """The item's gold in the constraint language (None when no rule fits: the item is
    left out)."""
    goal = item.goal
    if item.key in WORDED:
        return WORDED[item.key]
    if not item.feasible:
        if item.why == "missing_object":
            named = [w for w in re.findall(r"[a-z]+", item.instruction.lower()) if w in COLOURS]
            missing = [w for w in named if w not in item.scene.blocks]
            return f"absent({missing[0]})" if missing else None
        return _WHY_LABEL.get(item.why)
    if item.category == "sort_distractor":
        return "sort"
    if item.category == "all_but_one":
        out = [_short(f[1]) for f in goal if f[0] == "in_no_bin"]
        return f"sort except {out[0]}; not in({out[0]}, any_bin)" if len(out) == 1 else None
    if item.category == "swap":
        moved = _swapped_pair(item)
        if moved is not None:
            return f"swap({moved[0]}, {moved[1]})"
    if item.category == "rebuild" and _reversed(item):
        return "reverse"
    parts = []
    chains = _chains(goal)
    for chain in chains:
        words = [_short(b) for b in chain]
        on_table = ("on_table", chain[0]) in goal
        parts.append(
            f"bottom_up({', '.join(words)})"
            if on_table or len(chain) > 2
            else f"on({words[1]}, {words[0]})"
        )
    bases = {c[0] for c in chains}
    parts += [f"in({_short(f[1])}, {f[2]})" for f in goal if f[0] == "in"]
    parts += [f"not in({_short(f[1])}, any_bin)" for f in goal if f[0] == "in_no_bin"]
    parts += [
        f"on({_short(f[1])}, table)" for f in goal if f[0] == "on_table" and f[1] not in bases
    ]
    return "; ".join(parts) or None


def _reversed(item: InstructionItem) -> bool:
    """The gold tower is the start tower upside down."""
    before = _chains(item.scene.start)
    after = _chains(item.goal)
    return len(before) == len(after) == 1 and before[0] == after[0][::-1]


def _swapped_pair(item: InstructionItem) -> tuple[str, str] | None:
    """The two blocks whose places the gold exchanges, if it is one exchange."""
    start = {f[1]: f[2] if len(f) > 2 else "table" for f in item.scene.start}
    end = {f[1]: f[2] if len(f) > 2 else "table" for f in item.goal if f[0] != "in_no_bin"}
    changed = [b for b in end if end[b] != start.get(b, "table")]
    if len(changed) != 2:
        return None
    a, b = changed
    return (_short(a), _short(b))


def _goal_scene(item: InstructionItem) -> tuple[SceneNames, State]:
    scene = item.scene.names()
    support: dict[str, str] = {b: "table" for b in scene.blocks}
    for fact in item.scene.start:
        support[fact[1]] = fact[2] if len(fact) > 2 else "table"
    return scene, state_of(support, scene)


def confirmed(item: InstructionItem, answer: str) -> bool:
    """The answer, solved against the item's start, meets the gold (feasible) or gives no goal
    (infeasible)."""
    scene, facts = _goal_scene(item)
    try:
        outcome = solve(parse(answer, scene), facts, scene, OPERATORS)
    except ConstraintSyntaxError:
        return False
    if not item.feasible:
        return not isinstance(outcome, Goal)
    return isinstance(outcome, Goal) and not unmet(FactView(goal_facts(outcome)), item.goal)


def renamed(item: InstructionItem, mapping: dict[str, str]) -> InstructionItem:
    """The item with every colour renamed by `mapping` (request, scene, start, gold)."""

    def word(match: re.Match[str]) -> str:
        text = match.group(0)
        new = mapping.get(text.lower(), text.lower())
        return new.capitalize() if text[0].isupper() else new

    def name(n: str) -> str:
        colour, _, kind = n.rpartition("_")
        return f"{mapping.get(colour, colour)}_{kind}" if kind in ("block", "bin") else n

    def fact(f: Fact) -> Fact:
        return (f[0], *(name(a) for a in f[1:]))

    pattern = re.compile(r"\b(" + "|".join(COLOURS) + r")\b", re.IGNORECASE)
    scene = Scene(
        item.scene.env,
        tuple(mapping[c] for c in item.scene.blocks),
        tuple(mapping[c] for c in item.scene.bins),
        tuple(fact(f) for f in item.scene.start),
    )
    return replace(
        item,
        instruction=pattern.sub(word, item.instruction),
        scene=scene,
        goal=tuple(fact(f) for f in item.goal),
    )


def training_pairs(variants: int = 8, seed: int = 0) -> Iterator[Pair]:
    """Each dev item whose label is confirmed, as written and under `variants - 1` random
    colour renamings (each confirmed again)."""
    rng = random.Random(seed)
    for item in instruction_items("dev"):
        answer = label(item)
        if answer is None or not confirmed(item, answer):
            continue
        for k, mapping in enumerate(_renamings(variants, rng)):
            new = renamed(item, mapping)
            text = _rename_answer(answer, mapping)
            if k and not confirmed(new, text):
                continue
            scene, facts = _goal_scene(new)
            if k:  # the listing in another order: the answer never follows it
                scene = SceneNames(tuple(rng.sample(scene.blocks, len(scene.blocks))), scene.bins)
            yield Pair(
                f"{item.key}/{k}", tuple(short_messages(scene, new.instruction, facts)), text
            )


def example_pairs(variants: int = 8, seed: int = 1) -> Iterator[Pair]:
    """The goal prompt's few-shot examples (written on the dev split's vocabulary) as pairs,
    as written and under `variants - 1` colour renamings; each answer must parse in its scene."""
    rng = random.Random(seed)
    for index, (line, request, answer) in enumerate(EXAMPLES):
        for k, mapping in enumerate(_renamings(variants, rng)):
            new_line, new_request, new_answer = (
                _rename_answer(t, mapping) for t in (line, request, answer)
            )
            blocks = new_line.split(";")[0].removeprefix("blocks: ").split(", ")
            bins = re.findall(r"[a-z]+_bin", new_line.split("now:")[0])
            try:
                parse(new_answer, SceneNames(tuple(f"{b}_block" for b in blocks), tuple(bins)))
            except ConstraintSyntaxError:
                continue
            yield Pair(f"example/{index}/{k}", tuple(short_chat(new_line, new_request)), new_answer)


def _renamings(variants: int, rng: random.Random) -> Iterator[dict[str, str]]:
    """`variants` colour bijections: the identity first, then random ones from `rng`."""
    for k in range(variants):
        shuffled = COLOURS if k == 0 else rng.sample(COLOURS, len(COLOURS))
        yield dict(zip(COLOURS, shuffled, strict=True))


def _rename_answer(answer: str, mapping: dict[str, str]) -> str:
    """Colours renamed wherever they stand as words, in names like `red_bin` too."""
    pattern = r"(?<![a-z])(" + "|".join(COLOURS) + r")(?![a-z])"
    return re.sub(pattern, lambda m: mapping[m.group(0)], answer)
