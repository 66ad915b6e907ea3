"""The GBNF grammar of the constraint language for one scene: only its names can be sampled.

    text = gbnf(scene)      # llama.cpp grammar (the local backend's `grammar=`)

Built from the same tables the parser reads (`goal.constraints`), so what the grammar admits
the parser accepts: blocks are the scene's colour words, bins its bin names (and `in`, `sort`
exist only when it has bins), `absent(...)` takes one short lowercase word that is not the colour of
one of the scene's blocks. The text is one line
of at most `MAX_ITEMS` statements, so a model cannot run on to its token limit.
"""

from __future__ import annotations

from robocompose.hierarchical.goal.constraints import (
    ANY_BIN,
    KEYWORDS,
    MAX_WORD,
    QUANTIFIERS,
    RELATIONS,
    STATEMENTS,
)
from robocompose.hierarchical.goal.facts import SceneNames

MAX_ITEMS = 6  # statements joined by "; " (conditionals count one)
MAX_LIST = 6  # blocks in a bottom_up / top_down list or an except list
MAX_BRANCH = 3  # statements in a then / else part


def _alts(options: list[str]) -> str:
    return " | ".join(f'"{o}"' for o in options)


def _repeat(rule: str, sep: str, lo: int, hi: int) -> str:
    """`rule` lo..hi times, separated by `sep` (GBNF without {m,n}: nested optionals)."""
    tail = ""
    for _ in range(hi - lo):
        tail = f'("{sep}" {rule} {tail})?' if tail else f'("{sep}" {rule})?'
    head = " ".join([rule] + [f'"{sep}" {rule}'] * (lo - 1))
    return f"{head} {tail}".strip()


LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _word_rules(excluded: set[str]) -> list[str]:
    """`word`: 1 to MAX_WORD lowercase letters, but none of `excluded` (the scene's block
    colours: `absent(red)` in a scene with a red block cannot be sampled). A rule per prefix of
    an excluded word; any other letter leaves the trie and runs free."""
    rules, names = [], {"": "word"}

    def name(prefix: str) -> str:
        return names.setdefault(prefix, f"word-{prefix}")

    def free(length: int) -> str:
        return " ".join(["[a-z]?"] * max(0, MAX_WORD - length))

    pending = [""]
    while pending:
        prefix = pending.pop()
        nexts = sorted({w[len(prefix)] for w in excluded if w.startswith(prefix) and w != prefix})
        alts = []
        for c in nexts:
            if len(prefix) + 1 < MAX_WORD:
                alts.append(f'"{c}" {name(prefix + c)}')
                pending.append(prefix + c)
        others = "".join(c for c in LETTERS if c not in nexts)
        if others:
            alts.append(f"[{others}] {free(len(prefix) + 1)}".rstrip())
        body = " | ".join(alts)
        may_end = prefix != "" and prefix not in excluded
        rules.append(f"{name(prefix)} ::= ({body})?" if may_end else f"{name(prefix)} ::= {body}")
    return rules


def gbnf(scene: SceneNames) -> str:
    """The grammar of constraint text over `scene`'s blocks and bins."""
    words = [b.removesuffix("_block") for b in scene.blocks]
    kinds = {
        "block": "block",
        "support": "support",
        "bin": "bin",
        "blocks": "blocks",
        "word": "word",
    }
    relations = [r for r in RELATIONS if r != "in" or scene.bins]
    rel_alts = []
    for name in relations:
        args = ' ", " '.join(kinds[k] for k in RELATIONS[name])
        rel_alts.append(f'"{name}(" {args} ")"')
    stmt_alts = ['"not "? relation']
    for name, arg_kinds in STATEMENTS.items():
        args = ' ", " '.join(kinds[k] for k in arg_kinds)
        stmt_alts.append(f'"{name}(" {args} ")"')
    stmt_alts += [f'"{k}"' for k in KEYWORDS]
    for q in QUANTIFIERS:
        if q == "sort" and not scene.bins:
            continue
        stmt_alts.append(f'"{q}" (" except " except)?')
    lines = [
        f"root ::= {_repeat('item', '; ', 1, MAX_ITEMS)}",
        'item ::= statement | "if " ("not "? relation) " then " branch (" else " branch)?',
        f"branch ::= {_repeat('statement', ' and ', 1, MAX_BRANCH)}",
        f"statement ::= {' | '.join(stmt_alts)}",
        f"relation ::= {' | '.join(rel_alts)}",
        f"block ::= {_alts(words)}",
        'support ::= block | "table"',
        f"blocks ::= {_repeat('block', ', ', 2, MAX_LIST)}",
        f"except ::= {_repeat('block', ', ', 1, MAX_LIST - 1)}",
        # a word is letters only: a name with a space or "_" ("small_box") cannot be one
        *_word_rules({w for b in scene.blocks if (w := b.rsplit("_", 1)[0]).isalpha()}),
    ]
    if scene.bins:
        lines.append(f"bin ::= {_alts([*scene.bins, ANY_BIN])}")
    return "\n".join(lines) + "\n"
