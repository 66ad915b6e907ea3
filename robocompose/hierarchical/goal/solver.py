"""From constraints to one goal state, or the reason there is none (ask back or refuse).

    outcome = solve(program, now, scene, operators)
    # Goal(config, facts, calls)      exactly one fewest-calls configuration satisfies them
    # Question(text, options)         several do, equally near: which one?
    # Refusal(reason)                 none does, a name is missing, or the skills cannot do it

The solver enumerates every configuration of the scene's blocks (stacks on the table or in a
bin, a bin holding one block at its base, the hand empty), keeps those that satisfy every
statement, and ranks them by the number of skill calls from the facts now (a breadth-first
sweep of the symbolic states under the declared operators): the request changes what it says
and moves nothing else. When no configuration satisfies the statements, the smallest set of
statements that cannot hold together is named.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from robocompose.hierarchical.goal.constraints import (
    POSITION_WORDS,
    QUANTIFIERS,
    Arrangement,
    Program,
    Statement,
    holds,
    reversed_stacks,
    swapped,
)
from robocompose.hierarchical.goal.facts import TABLE, SceneNames, state_of, supports
from robocompose.hierarchical.goal.strips import Fact, GroundOperator, State, StripsOperator, ground

MAX_OPTIONS = 4  # configurations a question lists
MAX_STATES = 200_000  # symbolic states the sweep may visit


@dataclass(frozen=True)
class Goal:
    """The one configuration to reach: every block's support, and its facts."""

    config: Arrangement
    facts: State
    calls: int  # fewest skill calls from the facts it was solved against
    statements: tuple[Statement, ...] = ()

    def described(self) -> str:
        return describe_config(self.config.support)


@dataclass(frozen=True)
class Question:
    """Several goals fit equally well, or the request is unclear: ask which."""

    text: str
    options: tuple[Goal, ...] = ()
    kind: str = "ambiguous"  # "ambiguous" | "unclear"


@dataclass(frozen=True)
class Refusal:
    """No goal: contradiction, missing name, unsupported request, unreachable."""

    reason: str
    kind: str = "contradiction"  # contradiction | absent | unsupported | unreachable | invalid
    statements: tuple[str, ...] = field(default=())


Outcome = Goal | Question | Refusal


def describe_config(support: dict[str, str] | object, blocks: Sequence[str] | None = None) -> str:
    """ "green on red, blue on green, red on the table" for the blocks named (default all)."""
    parts = []
    for block, below in sorted(dict(support).items()):  # type: ignore[call-overload]
        if blocks is not None and block not in blocks:
            continue
        short = block.removesuffix("_block")
        where = "on the table" if below == TABLE else f"{'in' if below.endswith('_bin') else 'on'} "
        parts.append(f"{short} {where}{'' if below == TABLE else below.removesuffix('_block')}")
    return ", ".join(parts)


# -- configurations -------------------------------------------------------------------------------
def configurations(scene: SceneNames) -> Iterator[dict[str, str]]:
    """Every way to rest all blocks: on the table, in a bin (one block each) or on one block
    (one block each), without cycles."""
    blocks = scene.blocks

    def extend(k: int, support: dict[str, str]) -> Iterator[dict[str, str]]:
        if k == len(blocks):
            if not _cyclic(support):
                yield dict(support)
            return
        used = set(support.values())
        for below in (TABLE, *scene.bins, *blocks):
            if below == blocks[k] or (below != TABLE and below in used):
                continue
            support[blocks[k]] = below
            yield from extend(k + 1, support)
            del support[blocks[k]]

    yield from extend(0, {})


def _cyclic(support: dict[str, str]) -> bool:
    for start in support:
        seen, block = set(), start
        while block in support:
            if block in seen:
                return True
            seen.add(block)
            block = support[block]
    return False


def distances(start: State, operators: Sequence[GroundOperator]) -> dict[State, int]:
    """Fewest calls from `start` to every reachable symbolic state (breadth first)."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for op in operators:
            if op.pre <= state:
                nxt = (state - op.delete) | op.add
                if nxt not in dist:
                    dist[nxt] = dist[state] + 1
                    if len(dist) > MAX_STATES:
                        raise RuntimeError(f"the scene has over {MAX_STATES} symbolic states")
                    queue.append(nxt)
    return dist


# -- checks before solving ------------------------------------------------------------------------
def scene_names(scene: SceneNames) -> str:
    words = [b.removesuffix("_block") for b in scene.blocks]
    text = f"blocks {', '.join(words)}"
    return text + (f" and bins {', '.join(scene.bins)}" if scene.bins else "")


def _in_scene(word: str, scene: SceneNames) -> bool:
    """`word` names a block of the scene ("red" or "red_block")."""
    return word in {*scene.blocks, *(b.rsplit("_", 1)[0] for b in scene.blocks)}


def _refuse_early(
    statements: Sequence[Statement], scene: SceneNames, now: Arrangement
) -> Outcome | None:
    for s in statements:
        if s.kind == "absent" and _in_scene(s.args[0], scene):  # the model slipped: ask
            return Question(
                f"I could not tell what you want done with {s.args[0]}. The scene has "
                f"{scene_names(scene)}; how should they end up?",
                kind="unclear",
            )
        if s.kind == "absent":
            return Refusal(
                f"there is no {s.args[0]} in the scene (it has {scene_names(scene)})",
                "absent",
                (str(s),),
            )
        if s.kind == "unsupported":
            return Refusal(
                "the skills only pick blocks up and put them on blocks, on the table"
                + (" or into bins" if scene.bins else ""),
                "unsupported",
                (str(s),),
            )
        if s.kind == "unclear":
            return Question(
                f"What should the blocks end up like? The scene has {scene_names(scene)}.",
                kind="unclear",
            )
        if len(set(s.args)) < len(s.args):
            twice = next(a for a in s.args if s.args.count(a) > 1).removesuffix("_block")
            return Refusal(
                f"{s} names {twice} twice: a block cannot rest on itself or trade "
                "places with itself",
                "contradiction",
                (str(s),),
            )
        if s.kind == "sort":
            missing = [b for b in scene.blocks if b not in s.args and scene.bin_of(b) is None]
            if missing:
                return Refusal(
                    f"there is no bin of {missing[0].removesuffix('_block')}'s colour "
                    f"(the scene has {', '.join(scene.bins)})",
                    "absent",
                    (str(s),),
                )
        if s.kind == "reverse" and not reversed_stacks(now):
            return Refusal(
                "no blocks are stacked: there is no stack to turn over", "unsupported", (str(s),)
            )
        if s.kind == "swap" and not s.negated:
            change = swapped(now, *s.args)
            if all(now.support.get(b) == below for b, below in change.items()):
                x, y = (a.removesuffix("_block") for a in s.args)
                return Refusal(
                    f"swapping {x} and {y} changes nothing the skills can tell apart "
                    f"({describe_config(now.support, s.args)})",
                    "unsupported",
                    (str(s),),
                )
    return None


def _chained(statements: tuple[Statement, ...]) -> tuple[Statement, ...]:
    """Lists that continue each other are one tower: bottom_up(red, blue) and
    bottom_up(blue, white) (or a top_down list read upward) -> bottom_up(red, blue, white)."""
    lists = [
        list(s.args if s.kind == "bottom_up" else s.args[::-1])
        for s in statements
        if s.kind in ("bottom_up", "top_down") and not s.negated
    ]
    merged = True
    while merged:
        merged = False
        for a, b in itertools.permutations(range(len(lists)), 2):
            if lists[a][-1] == lists[b][0] and not set(lists[a][:-1]) & set(lists[b]):
                lists[a] = lists[a] + lists[b][1:]
                del lists[b]
                merged = True
                break
    rest = [s for s in statements if s.kind not in ("bottom_up", "top_down") or s.negated]
    return (*rest, *(Statement("bottom_up", tuple(chain)) for chain in lists))


def _specific_first(statements: tuple[Statement, ...]) -> tuple[Statement, ...]:
    """A block another statement speaks of is left out of sort / all on table: "sort; not
    in(orange, any_bin)" means sort the others."""
    named = {a for s in statements if s.kind not in QUANTIFIERS for a in s.args}
    out = []
    for s in statements:
        if s.kind in QUANTIFIERS:
            extra = tuple(sorted(named - set(s.args)))
            s = Statement(s.kind, s.args + extra, s.negated)
        out.append(s)
    return tuple(out)


def _same_tower(statements: Sequence[Statement]) -> tuple[str, ...]:
    """Blocks named by positive position words: they must share a stack."""
    named: list[str] = []
    for s in statements:
        if s.kind in POSITION_WORDS and not s.negated:
            named += [a for a in s.args if a not in named]
    return tuple(named)


def _satisfies(config: Arrangement, statements: Sequence[Statement], now: Arrangement) -> bool:
    if not all(holds(s, config, now) for s in statements):
        return False
    tower = _same_tower(statements)
    return len({config.base_of(b) for b in tower}) <= 1


def _conflict(statements: Sequence[Statement], configs: list[Arrangement], now: Arrangement):
    """A smallest-by-deletion set of statements no configuration satisfies together."""
    core = list(statements)
    for s in list(core):
        trial = [t for t in core if t is not s]
        if trial and not any(_satisfies(c, trial, now) for c in configs):
            core = trial
    return core


# -- solve ----------------------------------------------------------------------------------------
def solve(
    program: Program, now: State, scene: SceneNames, operators: Sequence[StripsOperator]
) -> Outcome:
    """The goal the constraints pin down from the facts `now`, or why there is none."""
    held = next((f[1] for f in now if f[0] == "holding"), None)
    current = Arrangement(supports(now), scene, held)
    statements = _specific_first(_chained(program.goal_statements(current)))
    early = _refuse_early(statements, scene, current)
    if early is not None:
        return early
    configs = [Arrangement(s, scene) for s in configurations(scene)]
    fitting = [c for c in configs if _satisfies(c, statements, current)]
    if not fitting:
        core = _conflict(statements, configs, current)
        shown = "; ".join(map(str, core))
        hint = ""
        if sum(s.kind == "in" and not s.negated for s in core) > 1:
            hint = " (a bin holds one block)"
        if len(core) == 1:
            return Refusal(f"{shown} cannot hold in this scene{hint}", "contradiction", (shown,))
        return Refusal(
            f"these cannot all hold: {shown}{hint}", "contradiction", tuple(map(str, core))
        )
    dist = distances(now, ground(operators, scene.objects))
    named = _named(statements, scene)
    ranked = sorted(
        (dist[f], _parked(c, current, named), i)
        for i, c in enumerate(fitting)
        if (f := state_of(c.support, scene)) in dist
    )
    if not ranked:
        return Refusal(
            "no sequence of skill calls reaches a configuration that satisfies "
            f"{'; '.join(map(str, statements))}",
            "unreachable",
        )
    best = ranked[0][:2]
    goals = tuple(
        Goal(fitting[i], state_of(fitting[i].support, scene), d, statements)
        for d, parked, i in ranked
        if (d, parked) == best
    )
    if len(goals) == 1:
        return goals[0]
    return _question(goals[:MAX_OPTIONS], len(goals))


def _named(statements: Sequence[Statement], scene: SceneNames) -> set[str]:
    """Blocks the statements place: the arguments of positive ones, or for sort and
    all-on-table every block but the excepted ones (a negated statement places nothing)."""
    named: set[str] = set()
    for s in statements:
        if s.negated:
            continue
        if s.kind in QUANTIFIERS:
            named |= {b for b in scene.blocks if b not in s.args}
        else:
            named |= set(s.args)
    return named


def _parked(config: Arrangement, now: Arrangement, named: set[str]) -> int:
    """Blocks no statement places that moved somewhere other than the table: of equally near
    goals, the one that sets moved blocks aside on the table is meant."""
    return sum(
        1
        for b, below in config.support.items()
        if b not in named and below != now.support.get(b) and below != TABLE
    )


def _question(goals: tuple[Goal, ...], count: int) -> Question:
    differ = sorted(
        b for b in goals[0].config.support if len({g.config.support[b] for g in goals}) > 1
    )
    options = [
        f"({k + 1}) {describe_config(g.config.support, differ)}" for k, g in enumerate(goals)
    ]
    more = f" (and {count - len(goals)} more)" if count > len(goals) else ""
    return Question(f"Several goals fit; which one: {'; or '.join(options)}{more}?", goals)


def choose(question: Question, answer: str) -> Goal | None:
    """The option an answer picks by number ("2", "the second") or by its words, else None."""
    text = answer.strip().lower().strip(".!()")
    ordinals = ("first", "second", "third", "fourth")
    for k, goal in enumerate(question.options):
        if text in (str(k + 1), ordinals[k], f"the {ordinals[k]}", f"option {k + 1}"):
            return goal
    differ = [b for b in question.options[0].config.support]
    for goal in question.options:
        if text and text == describe_config(goal.config.support, differ).lower():
            return goal
    return None


def goal_facts(goal: Goal) -> frozenset[Fact]:
    """The facts the final world must show for `goal` (where each block rests, hand empty)."""
    return frozenset(f for f in goal.facts if f[0] in ("on", "on_table", "in", "hand_empty"))


def same_goal(a: Outcome | None, b: Outcome | None) -> bool:
    """Two readings agree: the same goal facts, or neither is a goal (None: no reading at all,
    which agrees with nothing)."""
    if a is None or b is None:
        return False
    if isinstance(a, Goal) and isinstance(b, Goal):
        return goal_facts(a) == goal_facts(b)
    return not isinstance(a, Goal) and not isinstance(b, Goal)


__all__ = [
    "Goal",
    "Question",
    "Refusal",
    "Outcome",
    "solve",
    "choose",
    "configurations",
    "distances",
    "describe_config",
    "goal_facts",
    "same_goal",
    "QUANTIFIERS",
]
