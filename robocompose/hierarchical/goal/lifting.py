"""Lifting: the request's object names become placeholders before the model reads it.

A model that reads "put the X block on Y" learns the sentence's structure, not its colours: the
same adapter then reads synonyms, other languages and names it never saw in training ("the teal
one", "the mug"), because it never sees a name at all. Each word that names a scene object (its
own name, a synonym, the colour in French, German or Spanish) is replaced by a placeholder; the
scene is listed over the same placeholders (a block and a bin of one colour share one: "X" and
"X_bin", so "into its own bin" still reads); the model writes constraints over placeholders, and
`lower` puts the scene's words back before the solver reads them. "The other one" becomes the
one block the request does not name, where only one is left. Words that name an object the
scene lacks are left as they are: the planner refuses those before any model reads
(`grounding.missing_names`).

    lifted = lift("put the scarlet cube on blue", SceneNames(("red_block", "blue_block")))
    lifted.request                     "put the X cube on Y"
    lifted.scene                       blocks X_block, Y_block
    lifted.lower("on(X, Y)")           "on(red, blue)"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from robocompose.hierarchical.goal.facts import SceneNames, colour_of
from robocompose.hierarchical.goal.strips import Fact

# placeholders in the order they are handed out: capitals that are not English words
PLACEHOLDERS = ("X", "Y", "Z", "W", "V", "U", "Q", "P", "K", "J", "H", "G")

# other words for the scenes' colours: synonyms, and French, German and Spanish with their
# inflected forms (a scene's own name always wins over a word listed here)
OTHER_WORDS: Mapping[str, tuple[str, ...]] = {
    "red": ("scarlet", "crimson", "rouge", "rouges", "rot", "rote", "roten", "roter", "rotes",
            "rojo", "roja", "rojos", "rojas"),
    "green": ("emerald", "vert", "verte", "verts", "vertes", "grün", "grüne", "grünen",
              "grüner", "grünes", "verde", "verdes"),
    "blue": ("navy", "azure", "bleu", "bleue", "bleus", "bleues", "blau", "blaue", "blauen",
             "blauer", "blaues", "azul", "azules"),
    "yellow": ("golden", "jaune", "jaunes", "gelb", "gelbe", "gelben", "gelber", "gelbes",
               "amarillo", "amarilla", "amarillos", "amarillas"),
    "purple": ("violet", "violette", "violets", "violettes", "lila", "morado", "morada",
               "morados", "moradas"),
    "orange": ("oranges", "orangen", "orangene", "orangenen", "naranja", "naranjas"),
    "cyan": ("aqua", "cian"),
    "white": ("blanc", "blanche", "blancs", "blanches", "weiß", "weiße", "weißen", "weißer",
              "weisse", "weissen", "blanco", "blanca", "blancos", "blancas"),
}  # fmt: skip
# one-typo variants of a name that are common words, never read as the name ("cyan" -> "can")
NOT_TYPOS = frozenset({"can", "range", "whit"})
_TOKEN = re.compile(r"[^\W\d_]+")
_BIN = re.compile(r"\b([A-Z])_bin\b")
_BIN_AFTER = re.compile(r"(?:'s)?\s+(?:bin|zone|area|box|basket|tray)\b", re.IGNORECASE)
_OTHER_ONE = re.compile(r"\bthe other (?:one|block|cube)\b", re.IGNORECASE)
_BLOCK = re.compile(r"\b([A-Z])\b")


@dataclass(frozen=True)
class Lifted:
    """A request and its scene over placeholders, and the binding back to the scene's words."""

    request: str
    scene: SceneNames
    binding: Mapping[str, str]  # placeholder -> the scene's word ("X" -> "red")
    # the scene words the request names as blocks, in whatever form ("gren", "rouge", "navy")
    said_blocks: frozenset[str] = frozenset()

    def lower(self, constraints: str) -> str:
        """Constraint text over placeholders -> over the scene's words (`X_bin` -> `red_bin`)."""
        text = _BIN.sub(lambda m: f"{self.binding.get(m[1], m[1])}_bin", constraints)
        return _BLOCK.sub(lambda m: self.binding.get(m[1], m[1]), text)

    def raise_text(self, constraints: str) -> str:
        """Constraint text over the scene's words -> over placeholders (`lower` undone)."""
        placeholder = {word: p for p, word in self.binding.items()}
        if not placeholder:
            return constraints
        pattern = _names_pattern(tuple(placeholder))
        return pattern.sub(lambda m: placeholder[m[1]] + (m[2] or ""), constraints)

    def lift_facts(self, facts: Iterable[Fact]) -> tuple[Fact, ...]:
        """Scene facts (`("on", "red_block", "blue_block")`) over placeholders."""
        placeholder = {word: p for p, word in self.binding.items()}
        return tuple((f[0], *(_placeheld(a, placeholder) for a in f[1:])) for f in facts)


@functools.lru_cache(maxsize=256)
def _names_pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """The scene's words as constraint names (`red`, `red_bin`)."""
    names = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!\w)({names})(_bin)?(?!\w)")


def _words(scene: SceneNames) -> list[str]:
    """The scene's object words, blocks first then bins, each once ("red", "small_box")."""
    return list(dict.fromkeys(colour_of(n) for n in (*scene.blocks, *scene.bins)))


@functools.lru_cache(maxsize=256)
def _pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Any of the phrases as whole words, longest first; "_" in a name matches a space or "-"."""
    alts = sorted(phrases, key=len, reverse=True)
    body = "|".join(re.escape(p).replace("_", r"[\s_-]") for p in alts)
    return re.compile(rf"(?<![\w-])({body})(?![\w-])", re.IGNORECASE)


def lift(request: str, scene: SceneNames) -> Lifted:
    """Replace every word naming one of `scene`'s objects by its placeholder; placeholders go
    to the objects in the order the request first names them, then in the scene's order."""
    words = _words(scene)
    if not words:
        return Lifted(request, scene, {})
    if len(words) > len(PLACEHOLDERS):
        raise ValueError(f"a scene of at most {len(PLACEHOLDERS)} names lifts. Got {words}.")
    phrase_of = {w: w for w in words}
    for word in words:
        for other in OTHER_WORDS.get(word, ()):
            if other not in phrase_of and other not in words:
                phrase_of[other] = word
    for token in dict.fromkeys(t.lower() for t in _TOKEN.findall(request)):
        typed = None if token in phrase_of else _misspelt(token, words)
        if typed is not None:
            phrase_of[token] = typed
    pattern = _pattern(tuple(phrase_of))
    named = [phrase_of[_key(m[1], phrase_of)] for m in pattern.finditer(request)]
    order = list(dict.fromkeys([*named, *words]))
    binding = dict(zip(PLACEHOLDERS, order, strict=False))
    placeholder = {word: p for p, word in binding.items()}
    text = pattern.sub(lambda m: placeholder[phrase_of[_key(m[1], phrase_of)]], request)
    said_blocks = {
        phrase_of[_key(m[1], phrase_of)]
        for m in pattern.finditer(request)
        if not _BIN_AFTER.match(request, m.end())
    }
    unnamed = [colour_of(b) for b in scene.blocks if colour_of(b) not in said_blocks]
    if len(unnamed) == 1 and said_blocks:  # "the other one" can be one block only
        text = _OTHER_ONE.sub(f"the {placeholder[unnamed[0]]} block", text)

    lifted = SceneNames(
        tuple(_placeheld(b, placeholder) for b in scene.blocks),
        tuple(_placeheld(b, placeholder) for b in scene.bins),
    )
    return Lifted(text, lifted, binding, frozenset(said_blocks))


def _misspelt(token: str, words: list[str]) -> str | None:
    """The one scene word `token` is a typo of (two letters swapped, a letter doubled, or, in a
    name of four letters or more, a letter dropped), if exactly one."""
    if len(token) < 3 or token in NOT_TYPOS:
        return None
    found = [w for w in words if w.isalpha() and token in _typos(w)]
    return found[0] if len(found) == 1 else None


SLIPS = ("swap", "drop", "double")  # the typing slips read back here and written into the corpus


def slip(word: str, i: int, kind: str) -> str:
    """`word` with one slip at letter `i`: letters i and i+1 swapped, letter i dropped or
    doubled. The one typo model: the adapter's corpus writes these, lifting reads them back."""
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    raise ValueError(f"a slip is one of {SLIPS}. Got {kind!r}.")


@functools.lru_cache(maxsize=256)
def _typos(word: str) -> frozenset[str]:
    swapped = {slip(word, i, "swap") for i in range(len(word) - 1)}
    doubled = {slip(word, i, "double") for i in range(len(word))}
    dropped = {slip(word, i, "drop") for i in range(len(word))} if len(word) >= 4 else set()
    return frozenset((swapped | doubled | dropped) - {word})


def _placeheld(name: str, placeholder: Mapping[str, str]) -> str:
    """A scene name over its placeholder ("red_block" -> "X_block"); other words as they are."""
    word, _, kind = name.rpartition("_")
    if kind in ("block", "bin") and word in placeholder:
        return f"{placeholder[word]}_{kind}"
    return name


def _key(said: str, phrase_of: Mapping[str, str]) -> str:
    """The table key a matched phrase stands for (case and separators as the person wrote)."""
    folded = re.sub(r"[\s-]+", "_", said.lower())
    return folded if folded in phrase_of else said.lower()
