"""The constraint language: a request rewritten in its own relations, parsed and evaluated.

The LLM writes statements close to the request's words, joined by "; " (one line):

    on(green, red); on(blue, green)          green directly on red, blue directly on green
    on(red, table)                           red on the table (outside every bin)
    in(red, blue_bin)  /  not in(red, red_bin)
    in(red, any_bin)  /  not in(red, any_bin)  red in some bin / in no bin
    under(red, green)                        green directly on red
    above(blue, red) / below(red, blue)      higher / lower in the same stack
    bottom(red) / top(blue) / middle(green)  a tower's base (with a block on it), its top block,
                                             a block with blocks below and above
    clear(red)                               nothing on red
    bottom_up(red, green, blue)              a list read from the bottom: red at the base, ...
    top_down(blue, green, red)               a list read from the top
    tower                                    every block of the scene in one stack
    stay(red)                                red stays on what it rests on now
    swap(red, blue)                          red takes blue's place and blue red's
    reverse                                  every stack of two or more blocks upside down
    sort  /  sort except green               every block (but green) into the bin of its colour
    all on table  /  all on table except red every block (but red) on the table
    if on(red, blue) then on(green, red) else on(green, blue)     a condition on the scene now;
                                             "then"/"else" parts join statements with " and "
    absent(purple)                           the request names something the scene lacks
    unclear                                  the request does not say what it wants
    unsupported                              the skills cannot do it (line up, throw, ...)

Blocks are colour words, bins "<colour>_bin", and the table "table". `not ` may prefix any
relation (on, in, under, above, below, bottom, top, middle, clear). The position words (above,
below, bottom, top, middle) speak of one tower: the blocks they name share a stack.

    program = parse("on(green, red); on(blue, green)", scene)
    program.goal_statements(config_now)      # conditionals resolved against the scene now
    holds(statement, config)                 # one statement on a configuration

The grammar the LLM samples under is generated from the same tables (`goal.grammar`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from robocompose.hierarchical.goal.facts import TABLE, SceneNames, block_name

# relation -> argument kinds ("block", "support" = block or table, "bin")
RELATIONS: dict[str, tuple[str, ...]] = {
    "on": ("block", "support"),
    "in": ("block", "bin"),
    "under": ("block", "block"),
    "above": ("block", "block"),
    "below": ("block", "block"),
    "bottom": ("block",),
    "top": ("block",),
    "middle": ("block",),
    "clear": ("block",),
}
POSITION_WORDS = ("above", "below", "bottom", "top", "middle")
# goal-only statements with arguments: name -> kinds ("blocks" = two or more blocks, "word")
STATEMENTS: dict[str, tuple[str, ...]] = {
    "stay": ("block",),
    "swap": ("block", "block"),
    "bottom_up": ("blocks",),
    "top_down": ("blocks",),
    "absent": ("word",),
}
KEYWORDS = ("tower", "reverse", "unclear", "unsupported")
QUANTIFIERS = ("sort", "all on table")  # each may take " except <blocks>"
MAX_WORD = 16
ANY_BIN = "any_bin"


class ConstraintSyntaxError(ValueError):
    """Text that is not in the constraint language (names the position and what was expected)."""


@dataclass(frozen=True)
class Statement:
    """One statement: `kind` ("on", "sort", "bottom_up", ...), resolved names, negation."""

    kind: str
    args: tuple[str, ...] = ()
    negated: bool = False

    def __str__(self) -> str:
        shown = [_short(a) for a in self.args]
        if self.kind in QUANTIFIERS:
            text = self.kind + (f" except {', '.join(shown)}" if shown else "")
        elif self.kind in KEYWORDS:
            text = self.kind
        else:
            text = f"{self.kind}({', '.join(shown)})"
        return f"not {text}" if self.negated else text


@dataclass(frozen=True)
class Conditional:
    condition: Statement
    then: tuple[Statement, ...]
    otherwise: tuple[Statement, ...] = ()

    def __str__(self) -> str:
        text = f"if {self.condition} then " + " and ".join(map(str, self.then))
        return text + (" else " + " and ".join(map(str, self.otherwise)) if self.otherwise else "")


@dataclass(frozen=True)
class Program:
    items: tuple[Statement | Conditional, ...]

    def __str__(self) -> str:
        return "; ".join(map(str, self.items))

    def goal_statements(self, now: Arrangement) -> tuple[Statement, ...]:
        """The statements the goal must satisfy: each conditional's branch chosen by its
        condition on the configuration `now`."""
        out: list[Statement] = []
        for item in self.items:
            if isinstance(item, Conditional):
                out += item.then if holds(item.condition, now) else item.otherwise
            else:
                out.append(item)
        return tuple(out)


def _short(name: str) -> str:
    return name[: -len("_block")] if name.endswith("_block") else name


# -- parsing --------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, text: str, scene: SceneNames) -> None:
        self.text, self.pos, self.scene = text, 0, scene

    def fail(self, expected: str) -> ConstraintSyntaxError:
        seen = self.text[self.pos : self.pos + 20] or "the end"
        return ConstraintSyntaxError(
            f"constraint text at character {self.pos}: expected {expected}, got {seen!r} "
            f"(in {self.text!r})"
        )

    def take(self, literal: str) -> bool:
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.take(literal):
            raise self.fail(repr(literal))

    def word(self) -> str:
        match = re.compile(r"[a-z_]+").match(self.text, self.pos)
        if not match:
            raise self.fail("a name")
        self.pos = match.end()
        return match.group()

    def name(self, kind: str) -> str:
        start = self.pos
        word = self.word()
        if kind == "word":
            if len(word) > MAX_WORD:
                raise self.fail(f"a word of at most {MAX_WORD} letters")
            return word
        if kind == "support" and word == TABLE:
            return TABLE
        if kind == "bin":
            if word in self.scene.bins or word == ANY_BIN:
                return word
            self.pos = start
            raise self.fail(f"a bin of the scene ({', '.join(self.scene.bins) or 'none'})")
        block = block_name(word)
        if block in self.scene.blocks:
            return block
        self.pos = start
        allowed = ", ".join(_short(b) for b in self.scene.blocks)
        raise self.fail(f"a block of the scene ({allowed}{', table' if kind == 'support' else ''})")

    def blocks(self) -> tuple[str, ...]:
        names = [self.name("block")]
        while self.take(", "):
            names.append(self.name("block"))
        return tuple(names)

    def relation(self) -> Statement:
        negated = self.take("not ")
        kind = self.word()
        if kind not in RELATIONS or (kind == "in" and not self.scene.bins):
            raise self.fail(f"a relation ({', '.join(self._relations())})")
        return Statement(kind, self.arguments(RELATIONS[kind]), negated)

    def _relations(self) -> list[str]:
        return [r for r in RELATIONS if r != "in" or self.scene.bins]

    def arguments(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        self.expect("(")
        args: list[str] = []
        for k, kind in enumerate(kinds):
            if k:
                self.expect(", ")
            if kind == "blocks":
                args += self.blocks()
                if len(args) < 2:
                    raise self.fail("', ' and a second block")
            else:
                args.append(self.name(kind))
        self.expect(")")
        return tuple(args)

    def statement(self) -> Statement:
        for keyword in QUANTIFIERS:
            if self.take(keyword):
                if keyword == "sort" and not self.scene.bins:
                    raise self.fail("a statement this scene allows (it has no bins)")
                return Statement(keyword, self.blocks() if self.take(" except ") else ())
        for keyword in KEYWORDS:
            if self.text.startswith(keyword, self.pos) and not self._word_follows(keyword):
                self.pos += len(keyword)
                return Statement(keyword)
        start = self.pos
        kind = self.word() if not self.text.startswith("not ", self.pos) else ""
        if kind in STATEMENTS:
            return Statement(kind, self.arguments(STATEMENTS[kind]))
        self.pos = start
        return self.relation()

    def _word_follows(self, keyword: str) -> bool:
        end = self.pos + len(keyword)
        return end < len(self.text) and (self.text[end].isalpha() or self.text[end] == "_")

    def statements(self) -> tuple[Statement, ...]:
        items = [self.statement()]
        while self.take(" and "):
            items.append(self.statement())
        return tuple(items)

    def item(self) -> Statement | Conditional:
        if self.take("if "):
            condition = self.relation()
            self.expect(" then ")
            then = self.statements()
            otherwise = self.statements() if self.take(" else ") else ()
            return Conditional(condition, then, otherwise)
        return self.statement()


def parse(text: str, scene: SceneNames) -> Program:
    """Constraint text -> Program; names are resolved to the scene's ("red" -> "red_block")."""
    reader = _Reader(text.strip(), scene)
    items = [reader.item()]
    while reader.take("; "):
        items.append(reader.item())
    if reader.pos != len(reader.text):
        raise reader.fail("'; ' or the end")
    return Program(tuple(items))


# -- evaluation on configurations -----------------------------------------------------------------
@dataclass(frozen=True)
class Arrangement:
    """Where every block rests (block -> "table", a block or a bin), plus the held block."""

    support: Mapping[str, str]
    scene: SceneNames
    held: str | None = None

    def on_it(self, block: str) -> str | None:
        for other, below in self.support.items():
            if below == block:
                return other
        return None

    def base_of(self, block: str) -> str:
        """The lowest block of `block`'s stack."""
        while self.support.get(block) in self.scene.blocks:
            block = self.support[block]
        return block

    def below_chain(self, block: str) -> list[str]:
        chain = []
        while self.support.get(block) in self.scene.blocks:
            block = self.support[block]
            chain.append(block)
        return chain

    def rests_on_block(self, block: str) -> bool:
        return self.support.get(block) in self.scene.blocks


def holds(statement: Statement, config: Arrangement, now: Arrangement | None = None) -> bool:
    """Whether `statement` is true of `config` (`now`: the scene before, for stay and swap)."""
    value = _holds(statement, config, now)
    return not value if statement.negated else value


def _holds(s: Statement, c: Arrangement, now: Arrangement | None) -> bool:
    a = s.args
    sup = c.support
    if s.kind == "in" and a[1] == ANY_BIN:
        return sup.get(a[0]) in c.scene.bins
    if s.kind in ("on", "in"):
        return sup.get(a[0]) == a[1]
    if s.kind == "under":
        return sup.get(a[1]) == a[0]
    if s.kind == "above":
        return a[1] in c.below_chain(a[0])
    if s.kind == "below":
        return a[0] in c.below_chain(a[1])
    if s.kind == "bottom":
        return a[0] in sup and not c.rests_on_block(a[0]) and c.on_it(a[0]) is not None
    if s.kind == "top":
        return c.rests_on_block(a[0]) and c.on_it(a[0]) is None
    if s.kind == "middle":
        return c.rests_on_block(a[0]) and c.on_it(a[0]) is not None
    if s.kind == "clear":
        return c.on_it(a[0]) is None
    if s.kind in ("bottom_up", "top_down"):
        order = a if s.kind == "bottom_up" else a[::-1]
        pairs = zip(order[1:], order[:-1], strict=True)
        return (
            order[0] in sup
            and not c.rests_on_block(order[0])
            and all(sup.get(upper) == lower for upper, lower in pairs)
            and c.on_it(order[-1]) is None
        )
    if s.kind == "tower":
        return c.held is None and len({c.base_of(b) for b in c.scene.blocks}) == 1
    if s.kind == "sort":
        return all(sup.get(b) == c.scene.bin_of(b) for b in c.scene.blocks if b not in a)
    if s.kind == "all on table":
        return all(sup.get(b) == TABLE for b in c.scene.blocks if b not in a)
    if s.kind == "stay":
        return now is not None and sup.get(a[0]) == now.support.get(a[0])
    if s.kind == "reverse":
        return now is not None and all(
            sup.get(block) == below for block, below in reversed_stacks(now).items()
        )
    if s.kind == "swap":
        return now is not None and all(
            sup.get(block) == below for block, below in swapped(now, a[0], a[1]).items()
        )
    raise ValueError(f"statement {s} is not a condition on a configuration")


def swapped(now: Arrangement, x: str, y: str) -> dict[str, str]:
    """What the blocks around x and y rest on once x and y trade places (x, y and the blocks
    resting on either)."""
    trade = {x: y, y: x}
    out = {}
    for block, below in now.support.items():
        if block in trade or below in trade:
            out[trade.get(block, block)] = trade.get(below, below)
    return out


def reversed_stacks(now: Arrangement) -> dict[str, str]:
    """What the blocks of every stack of two or more rest on once it is upside down (the new
    bottom block takes the old bottom block's place: the table or its bin)."""
    out = {}
    for block in now.scene.blocks:
        if block not in now.support or now.rests_on_block(block) or now.on_it(block) is None:
            continue
        pile = [block]
        while (above := now.on_it(pile[-1])) is not None:
            pile.append(above)
        below = now.support[block]
        for upper in reversed(pile):
            out[upper] = below
            below = upper
    return out
