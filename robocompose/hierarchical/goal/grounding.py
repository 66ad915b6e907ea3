"""Checks of the request's own words, before and after the LLM's rewrite, that need no model.

A small model maps what the scene lacks onto what it has ("put the white block in the purple
bin" with no purple bin -> `in(white, blue_bin)`), and fills blocks the request leaves open
("put one block in the green bin" -> `in(red, green_bin)`). Both moved the robot on infeasible
requests. Word-level checks stand around the rewrite:

- `missing_names(request, scene)`: colour words the request uses for a block or a bin the
  scene lacks ("the orange bin", "purple" in a scene without purple). The planner refuses
  before asking the LLM anything.
- `ungrounded_blocks(request, text, scene)`: blocks the constraints name that the request
  neither names nor points at (by position, "the others", "all", ...). The planner asks back
  which block is meant instead of choosing one for the person.
- `beyond_skills(request, scene)`: the request asks the arm for something its pick-and-place
  skills cannot do: throw or smash (never), knock or push a tower over without saying where the
  blocks go, put a block inside another block. A model read "smash the tower as hard as you
  can" as "every block on the table" and moved the robot; the planner refuses before any
  model reads.
- `bare_bin(request, scene)`: "in the bin" where the scene has several bins and nothing says
  which; the model's reading names one, and the planner asks which, each bin's goal numbered.

    scene = SceneNames(("red_block",), ("red_bin",))
    missing_names("put red in the yellow bin", scene)      # ["yellow bin"]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from robocompose.hierarchical.goal.facts import SceneNames, colour_of
from robocompose.hierarchical.goal.lifting import OTHER_WORDS, lift

# colour words a person may use for a block or a bin (the scenes use the first eight)
COLOUR_WORDS = (
    "red", "green", "blue", "yellow", "purple", "orange", "cyan", "white",
    "black", "pink", "brown", "grey", "gray", "magenta", "violet", "teal", "gold", "silver",
    "indigo", "maroon", "navy", "beige", "turquoise", "lime",
)  # fmt: skip
BIN_NOUNS = frozenset({
    "bin", "bins", "box", "boxes", "basket", "baskets", "tray", "container",
    "kiste", "korb", "behälter", "schale",  # German: the colour comes first, as in English
})  # fmt: skip
# French and Spanish bins: the colour comes after the noun ("le bac rouge", "la caja roja")
BIN_NOUNS_BEFORE = frozenset({
    "bac", "bacs", "boîte", "boite", "panier", "caisse", "caja", "cajas", "cesta", "contenedor",
    "bandeja",
})  # fmt: skip
_FILLERS = frozenset({"s", "coloured", "colored", "one"})  # "blue's bin", "the red-coloured box"
# words that point at blocks without naming them: quantifiers, "the others", "the top block"
_REFERENCE = re.compile(
    r"\b(all|every|each|both|everything|other|others|rest|remaining|them|those|these|blocks"
    r"|cubes)\b"
    r"|\bthe\s+(tower|stack|pile)\b"
    r"|\b(top|bottom|middle|upper|lower|highest|lowest|topmost|bottommost|uppermost|lowermost"
    r"|base)\s+(two|three|block|blocks|one|ones|cube|cubes|piece)\b"
    r"|\bthe\s+(block|cube|one|piece)\s+(on top|at the top|at the bottom|in the middle"
    r"|underneath|beneath|below|above|under)\b"
)
_WORD = re.compile(r"[a-z]+")
# what the arm will never do, whatever else the request says
_UNSAFE = re.compile(
    r"\b(throw|throws|throwing|thrown|fling|flings|flinging|flung|hurl|hurls|hurling|smash"
    r"|smashes|smashing|crush|crushes|crushing|shatter|shatters|kick|kicks|kicking|launch"
    r"|launches|launching|hit|hits|hitting|strike|strikes|striking|punch|punches|punching|slam"
    r"|slams|slamming)\b"
    r"|\bas hard as\b|\bat (me|him|her|them|someone|somebody|anyone|whoever|people)\b"
    r"|\b(my|your|his|her|their|someone's|somebody's)\s+(hand|hands|head|foot|feet|face|arm"
    r"|arms|finger|fingers|leg|legs|lap)\b",
    re.IGNORECASE,
)
# uncontrolled moves: fine when the request also says where the blocks end up
_UNCONTROLLED = re.compile(
    r"\b(knock|knocks|knocking|push|pushes|pushing|tip|tips|tipping|shove|shoves|shoving)\b"
    r"(\s+\w+){0,4}?\s+(over|down)\b|\b(topple|topples|toppling|collapse|demolish)\b",
    re.IGNORECASE,
)
_PLACEMENT = re.compile(
    r"\b(on|onto|into|in|atop|under|beneath|underneath|on top of)\s+(the\s+)?(table|floor"
    r"|[A-Z]\b)|\b[A-Z](\s+\w+)?\s+(bin|box|basket|tray)\b",
)
# a block said to go inside another block (over the lifted request: placeholders)
_CONTAINED = re.compile(
    r"\b(?:inside|within)\s+(?:of\s+)?(?:the\s+)?(?P<inside>[A-Z])\b"
    r"(?!\s*(?:'s\s+)?(?:bin|box|basket|tray))"
    r"|\b(?:in|into)\s+(?:the\s+)?(?P<block>[A-Z])\s+(?:block|cube)\b",
)
_CONSTRAINT_WORD = re.compile(r"\b[a-z][a-z_]*?(?:_bin)?\b")


@dataclass(frozen=True)
class Mentions:
    """Colours a request names, in English, split by what they name: a block or a bin."""

    blocks: frozenset[str]
    bins: frozenset[str]


def _colour(word: str, scene_colours: set[str]) -> str | None:
    """The colour `word` names: a scene's own colour name first, then the colour it is another
    word for (a synonym, French, German, Spanish: as lifting reads it), then itself when it is
    a colour word; None for any other word."""
    if word in scene_colours:
        return word
    for colour, others in OTHER_WORDS.items():
        if word in others:
            return colour
    return word if word in COLOUR_WORDS else None


def mentions(request: str, scene: SceneNames | None = None) -> Mentions:
    """The colours the request uses for blocks and for bins ("red bin", "la caja roja" are bin
    mentions), each word read as `_colour` reads it in `scene`."""
    scene_colours = {colour_of(n) for n in (*scene.blocks, *scene.bins)} if scene else set()
    words = _WORD.findall(request.lower())
    blocks, bins = set(), set()
    for i, word in enumerate(words):
        colour = _colour(word, scene_colours)
        if colour is None:
            continue
        after = [w for w in words[i + 1 : i + 3] if w not in _FILLERS][:1]
        before = words[i - 1 : i] if i else []
        is_bin = (after and after[0] in BIN_NOUNS) or (before and before[0] in BIN_NOUNS_BEFORE)
        (bins if is_bin else blocks).add(colour)
    return Mentions(frozenset(blocks), frozenset(bins))


def missing_names(request: str, scene: SceneNames) -> list[str]:
    """What the request names that the scene lacks, e.g. ["yellow bin", "purple"], in English
    whatever language it was said in; a colour said of a block may name a bin of that colour
    ("put green into red")."""
    block_colours = {colour_of(b) for b in scene.blocks}
    bin_colours = {colour_of(b) for b in scene.bins}
    said = mentions(request, scene)
    missing = [f"{c} bin" for c in sorted(said.bins) if c not in bin_colours]
    missing += [c for c in sorted(said.blocks) if c not in block_colours | bin_colours]
    return missing


def beyond_skills(request: str, scene: SceneNames) -> str | None:
    """Why the request asks for what picking and placing cannot do, or None: throwing or
    smashing; knocking a tower over without a place for the blocks ("knock the tower down:
    every block on the table" is a placement); a block inside a block."""
    found = _UNSAFE.search(request)
    if found:
        return (
            f"the arm only picks blocks up and sets them down gently, and {found[0].lower()!r} "
            "asks for force or for a person in the way"
        )
    lifted = lift(request, scene)
    found = _UNCONTROLLED.search(request)
    if found and not _PLACEMENT.search(lifted.request):
        return (
            f"the arm picks blocks up and sets them down; it cannot {found[0].lower()!r}. Say "
            "where the blocks should go (e.g. 'every block on the table')"
        )
    bins = {b.rpartition("_")[0] for b in lifted.scene.bins}
    for found in _CONTAINED.finditer(lifted.request):
        holder = found["inside"] or found["block"]
        if found["block"] or holder not in bins:
            name = lifted.binding.get(holder, holder).replace("_", " ")
            return (
                f"a block cannot go inside the {name} block; blocks go on blocks, on the table "
                "or in bins"
            )
    return None


# a bin as a destination with nothing after it that says which ("in the bin." but not "in the
# bin of its colour", "in the bin that matches it"), over the lifted request
_BARE_BIN = re.compile(
    r"\b(in|into|inside|to)\s+(the|a|one)\s+(bin|box|basket|tray|container)\s*"
    r"(?:[.,;:!?]|$|and\b|then\b|please\b)",
    re.IGNORECASE,
)


def bare_bin(request: str, scene: SceneNames) -> bool:
    """The request puts something in "the bin" of a scene with several, saying none."""
    return len(scene.bins) > 1 and _BARE_BIN.search(lift(request, scene).request) is not None


def points_at_unnamed(request: str) -> bool:
    """The request refers to blocks without naming them (quantifiers, positions, "the rest")."""
    return _REFERENCE.search(request.lower()) is not None


def ungrounded_blocks(request: str, constraints: str, scene: SceneNames) -> list[str]:
    """Blocks the constraint text names (colour words, not bins) that the request does not name,
    when it does not point at unnamed blocks either: the model chose them itself."""
    if points_at_unnamed(request):
        return []
    block_colours = {colour_of(b) for b in scene.blocks}
    named = {w for w in _CONSTRAINT_WORD.findall(constraints) if w in block_colours}
    # said in any form lifting reads: the name, a synonym, another language, one typo away
    return sorted(named - lift(request, scene).said_blocks)
