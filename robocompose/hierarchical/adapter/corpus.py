"""A corpus of many wordings for the goal adapter: (scene, request) -> constraints.

Pairs are written from `wordings.yaml`: a kind of goal (a tower read upward, a block into
another's bin, a swap, a conditional, ...), one of its sentences, a scene drawn to fit, and each
slot filled with a phrase of the language ("the scarlet cube", "navy", "le bloc rouge"). English
requests get filler and politeness, and some a typo in a word that names no object. Every label
is solved against its scene and kept only when it gives a goal (or, for a request that cannot be
done as asked, none). The model reads the requests lifted (`goal.lifting`): the corpus holds
the words, the training prompt the placeholders.

No pair may leak a held-out collection (the test split, the wordings collection): a pair sharing
a sentence, or any five-word run once lifted, with a held-out item is dropped (`leaks`), so
neither a held-out sentence nor a held-out template is in it.

    pairs = build_corpus(12_000, seed=0)
    pair.request, pair.label, pair.messages()    # the short prompt over placeholders, the answer
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robocompose.hierarchical.base import Message
from robocompose.hierarchical.goal.constraints import ConstraintSyntaxError, parse
from robocompose.hierarchical.goal.facts import TABLE, SceneNames, state_of
from robocompose.hierarchical.goal.lifting import SLIPS, Lifted, lift, slip
from robocompose.hierarchical.goal.prompt import short_messages
from robocompose.hierarchical.goal.solver import Goal, Outcome, solve
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT

WORDINGS = Path(__file__).with_name("wordings.yaml")
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "cyan", "white")
SCENES = ("stack", "tower", "bins", "binned", "cond_stack", "cond_bins")
OPERATORS = PICK + PLACE + PLACE_AT
MAX_STACK_BLOCKS = 5
MAX_BIN_BLOCKS = 3
SLOTS = ("a", "b", "c", "d")
_SLOT = re.compile(r"\{([a-d])(_bin)?\}")
_TOKEN = re.compile(r"[\w']+")


class WordingsError(ValueError):
    """The wordings file does not say a kind: names the kind and the field."""


@dataclass(frozen=True)
class CorpusPair:
    """One request and the constraints it means, over the scene it was said in."""

    kind: str
    language: str
    template: str  # the sentence before its slots were filled
    request: str
    label: str  # over the scene's colour words
    scene: SceneNames
    support: Mapping[str, str] = field(default_factory=dict)  # what each block rests on
    feasible: bool = True

    def lifted(self) -> Lifted:
        return lift(self.request, self.scene)

    def messages(self) -> tuple[tuple[Message, ...], str]:
        """The adapter's training example: the short prompt over placeholders, and the answer."""
        lifted = self.lifted()
        now = lifted.lift_facts(state_of(self.support, self.scene))
        answer = lifted.raise_text(self.label)
        return tuple(short_messages(lifted.scene, lifted.request, now)), answer

    def row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "language": self.language,
            "template": self.template,
            "request": self.request,
            "label": self.label,
            "blocks": list(self.scene.blocks),
            "bins": list(self.scene.bins),
            "support": dict(self.support),
            "feasible": self.feasible,
        }


@dataclass(frozen=True)
class Wording:
    kind: str
    language: str
    say: str
    label: str
    scene: str
    start: tuple[str, ...]
    feasible: bool
    blocks: int | None  # exact block count, or None: the slots' and a few more


@functools.cache
def wordings(path: Path = WORDINGS) -> tuple[tuple[Wording, ...], dict[str, Any]]:
    """Every sentence of the wordings file as a `Wording`, and the file's phrase tables."""
    data = yaml.safe_load(path.read_text())
    out: list[Wording] = []
    kinds = data.get("kinds") or {}
    for kind, spec in kinds.items():
        where = f"{path.name}: kind {kind!r}"
        for name in ("scene", "label", "say"):
            if name not in spec:
                raise WordingsError(f"{where} has no `{name}`.")
        if spec["scene"] not in SCENES:
            raise WordingsError(f"{where}: `scene` must be one of {SCENES}. Got {spec['scene']!r}.")
        for entry in spec["say"]:
            say, label, blocks = _entry(entry, spec, where)
            out.append(_wording(kind, "en", say, label, spec, blocks))
    for language, table in (data.get("languages") or {}).items():
        for kind, sentences in table.items():
            if kind not in kinds:
                raise WordingsError(f"{path.name}: language {language!r} names no kind {kind!r}.")
            spec = kinds[kind]
            for say in sentences:
                out.append(_wording(kind, language, say, spec["label"], spec, None))
    return tuple(out), data


def _entry(entry: Any, spec: Mapping[str, Any], where: str) -> tuple[str, str, int | None]:
    if isinstance(entry, str):
        return entry, spec["label"], None
    if not isinstance(entry, Mapping) or "say" not in entry:
        raise WordingsError(f"{where}: an entry of `say` is a sentence or {{say, label}}.")
    return entry["say"], entry.get("label", spec["label"]), entry.get("blocks")


def _wording(
    kind: str, language: str, say: str, label: str, spec: Mapping[str, Any], blocks: int | None
) -> Wording:
    start = tuple(str(spec.get("start", "")).split())
    return Wording(
        kind, language, say, label, spec["scene"], start, spec.get("feasible", True), blocks
    )


def _slots(text: str) -> tuple[set[str], set[str]]:
    """The slots `text` uses as blocks and as bins."""
    blocks, bins = set(), set()
    for slot, is_bin in _SLOT.findall(text):
        (bins if is_bin else blocks).add(slot)
    return blocks, bins


def _scene(
    wording: Wording, rng: random.Random
) -> tuple[dict[str, str], SceneNames, dict[str, str]]:
    """Colours for the slots, the scene, and what each block rests on at the start."""
    block_slots, bin_slots = _slots(wording.say + " " + wording.label)
    block_slots |= set(wording.start)
    slots = sorted(block_slots | bin_slots)
    colours = rng.sample(COLOURS, len(COLOURS))
    colour = dict(zip(slots, colours, strict=False))
    rest = [c for c in colours if c not in colour.values()]
    named = [colour[s] for s in sorted(block_slots)]
    binned = wording.scene in ("bins", "binned", "cond_bins")
    most = MAX_BIN_BLOCKS if binned else MAX_STACK_BLOCKS
    total = wording.blocks or min(most, max(2, len(named)) + rng.randint(0, 2))
    blocks = named + rest[: max(0, total - len(named))]
    rest = rest[len(blocks) - len(named) :]
    rng.shuffle(blocks)
    bins: list[str] = []
    if binned:
        bins = list(dict.fromkeys([*blocks, *(colour[s] for s in sorted(bin_slots))]))
        bins += rest[: rng.randint(0, 1)]
        rng.shuffle(bins)
    scene = SceneNames(tuple(f"{c}_block" for c in blocks), tuple(f"{c}_bin" for c in bins))
    support = {b: TABLE for b in scene.blocks}
    if wording.scene == "tower":
        tower = [f"{colour[s]}_block" for s in wording.start]
        for lower, upper in zip(tower, tower[1:], strict=False):
            support[upper] = lower
    elif wording.scene == "binned":
        support = {b: b.replace("_block", "_bin") for b in scene.blocks}
    elif wording.scene == "cond_stack" and rng.random() < 0.5:
        support[f"{colour['a']}_block"] = f"{colour['b']}_block"
    elif wording.scene == "cond_bins" and rng.random() < 0.5:
        support[f"{colour['a']}_block"] = f"{colour['b']}_bin"
    return colour, scene, support


def _phrase(
    is_bin: bool, colour: str, language: str, phrases: Mapping[str, Any], rng: random.Random
) -> str:
    table = phrases[language]
    word = table.get("colours", {}).get(colour, colour)
    others = table.get("other_words", {}).get(colour, [])
    if others and rng.random() < 0.15:
        word = rng.choice(others)
    form = rng.choice(table["bin" if is_bin else "block"])
    return form.replace("{c}", word)


def _typo(text: str, protected: set[str], rng: random.Random) -> str:
    """One slip in one word of four letters or more that names no object."""
    words = [m for m in re.finditer(r"[A-Za-z]{4,}", text) if m[0].lower() not in protected]
    if not words:
        return text
    m = rng.choice(words)
    w, i = m[0], rng.randrange(1, len(m[0]) - 1)
    return text[: m.start()] + slip(w, i, rng.choice(SLIPS)) + text[m.end() :]


def _pair(wording: Wording, data: Mapping[str, Any], rng: random.Random) -> CorpusPair:
    colour, scene, support = _scene(wording, rng)
    phrases = data["phrases"]

    def fill(match: re.Match[str]) -> str:
        return _phrase(bool(match[2]), colour[match[1]], wording.language, phrases, rng)

    request = _SLOT.sub(fill, wording.say)
    if wording.language == "en":
        decorations = data["decorations"]
        if rng.random() < decorations["rate"]:
            request = rng.choice(decorations["before"]) + request
        if rng.random() < decorations["rate"]:
            request = request.rstrip(".!") + rng.choice(decorations["after"])
        if rng.random() < data["typo_rate"]:
            named = {w.lower() for c in colour.values() for w in _names_of(c, phrases)}
            request = _typo(request, named, rng)
    label = _SLOT.sub(lambda m: colour[m[1]] + ("_bin" if m[2] else ""), wording.label)
    return CorpusPair(
        wording.kind,
        wording.language,
        wording.say,
        request,
        label,
        scene,
        support,
        wording.feasible,
    )


def _names_of(colour: str, phrases: Mapping[str, Any]) -> list[str]:
    words = [colour]
    for table in phrases.values():
        words.append(table.get("colours", {}).get(colour, colour))
        words += table.get("other_words", {}).get(colour, [])
    return words


def solved(label: str, pair: CorpusPair) -> Outcome | None:
    """Constraint text `label` solved against the pair's start; None when it does not parse."""
    try:
        program = parse(label, pair.scene)
    except ConstraintSyntaxError:
        return None
    return solve(program, state_of(pair.support, pair.scene), pair.scene, OPERATORS)


def confirmed(pair: CorpusPair) -> bool:
    """The label, solved against the pair's start, gives a goal (feasible) or none."""
    outcome = solved(pair.label, pair)
    return outcome is not None and isinstance(outcome, Goal) == pair.feasible


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(text.lower())
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


@dataclass(frozen=True)
class LeakCheck:
    """What the corpus shares with the held-out collections (the test split and the wordings
    collection), lifted: sentences and five-word runs."""

    sentences: frozenset[str]
    fivegrams: frozenset[tuple[str, ...]]

    @classmethod
    def of_held_out(cls) -> LeakCheck:
        from robocompose.hierarchical.instructions import HELD_OUT, instruction_items

        items = [item for collection in HELD_OUT for item in instruction_items(collection)]
        lifted = [_lifted_item(item) for item in items]
        grams: set[tuple[str, ...]] = set()
        for text in lifted:
            grams |= ngrams(text, 5)
        return cls(frozenset(t.lower() for t in lifted), frozenset(grams))

    def leaks(self, pair: CorpusPair) -> bool:
        text = pair.lifted().request
        return text.lower() in self.sentences or bool(ngrams(text, 5) & self.fivegrams)


def _lifted_item(item: Any) -> str:
    return lift(item.instruction, item.scene.names()).request


def build_corpus(
    count: int, seed: int = 0, leak_check: LeakCheck | None = None, max_tries: int = 20
) -> list[CorpusPair]:
    """`count` distinct pairs (distinct once lifted), every kind and language drawn evenly by
    sentence; each label confirmed by the solver; none leaking the test split."""
    sentences, data = wordings()
    check = leak_check or LeakCheck.of_held_out()
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    out: list[CorpusPair] = []
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > max_tries * count:
            raise RuntimeError(
                f"only {len(out)} distinct pairs after {tries - 1} draws: the wordings cannot "
                f"make {count}; add sentences to {WORDINGS.name}."
            )
        pair = _pair(rng.choice(sentences), data, rng)
        messages, answer = pair.messages()
        key = (messages[-1]["content"], answer)
        if key in seen or not confirmed(pair) or check.leaks(pair):
            continue
        seen.add(key)
        out.append(pair)
    return out


def diversity(pairs: Sequence[CorpusPair]) -> dict[str, Any]:
    """What the corpus covers: distinct lifted 3-grams, wordings per kind, languages."""
    grams: set[tuple[str, ...]] = set()
    for pair in pairs:
        grams |= ngrams(pair.lifted().request, 3)
    per_kind: dict[str, set[str]] = {}
    for pair in pairs:
        per_kind.setdefault(pair.kind, set()).add(pair.template)
    return {
        "pairs": len(pairs),
        "distinct_3grams": len(grams),
        "wordings_per_relation": {k: len(v) for k, v in sorted(per_kind.items())},
        "languages": dict(sorted(Counter(p.language for p in pairs).items())),
        "feasible": sum(p.feasible for p in pairs),
    }


def write_corpus(pairs: Iterable[CorpusPair], path: Path) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(p.row()) + "\n" for p in pairs))
