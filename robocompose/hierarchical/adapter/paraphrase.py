"""Paraphrases of corpus requests written by the local model, kept only when they mean the same.

The generated corpus says each kind of goal in the sentences of `wordings.yaml`; a person says it
in others. The plain model (no adapter) rewrites a lifted request ("put X on Y, then Z on X") in
a few other ways, keeping the placeholders. A paraphrase is kept when:

- it names exactly the source's placeholders (one dropped or invented changes the goal);
- it shares no sentence and no lifted five-word run with the held-out collections (`LeakCheck`);
- the goal reader (the adapted model, as the planner reads) reads it to constraints that solve
  to the source label's goal (or, for a request that cannot be done, to none).

Kept paraphrases are corpus pairs in the scene's words (placeholders put back), of language
"en" and template "paraphrase: <source template>". `paraphrase_corpus` writes one JSONL record per
source pair as it is done, so a run resumes; `read_paraphrases` reads the kept pairs back for
training (`LoRAConfig.paraphrases`).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from robocompose.hierarchical.adapter.corpus import CorpusPair, LeakCheck, solved
from robocompose.hierarchical.base import LLMBackend, Message
from robocompose.hierarchical.goal.facts import SceneNames, colour_of
from robocompose.hierarchical.goal.grammar import gbnf
from robocompose.hierarchical.goal.lifting import PLACEHOLDERS, Lifted
from robocompose.hierarchical.goal.solver import same_goal

INSTRUCTIONS = (
    "You rewrite requests to a robot arm that moves coloured blocks between a table and bins. "
    "Capital letters (X, Y, Z, ...) stand for objects: keep each one exactly as written and add "
    "no other. Keep the meaning exactly: the same blocks end up in the same places. Vary the "
    "words and the sentence shape, as different people would say it. Write each rewrite on its "
    "own line, with nothing else."
)
_PLACEHOLDER = re.compile(rf"\b({'|'.join(PLACEHOLDERS)})\b")
_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")
# a line about the rewrites, not one ("Sure! Here are three rewrites of the request ...:")
_CHATTER = re.compile(r"\b(rewrites?|rephras\w*|request)\b|:$", re.IGNORECASE)


@dataclass(frozen=True)
class ParaphraseConfig:
    """How many rewrites are asked per request and how they are drawn."""

    per_pair: int = 3
    temperature: float = 0.8
    max_tokens: int = 160
    reader_max_tokens: int = 48


def prompt(lifted_request: str, count: int) -> list[Message]:
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Request: {lifted_request}\nWrite {count} rewrites."},
    ]


def rewrites(text: str, source: str) -> list[str]:
    """The model's lines as rewrites: numbering, bullets and quotes stripped; the source, empty
    lines, lines about the rewrites and repeats dropped."""
    out: list[str] = []
    for line in text.splitlines():
        line = _NUMBERING.sub("", line).strip().strip("\"'“”").strip()
        if _CHATTER.search(line):
            continue
        if line and line.lower() != source.lower() and line not in out:
            out.append(line)
    return out


def in_words(text: str, lifted: Lifted) -> str:
    """A rewrite over placeholders in the scene's words: each placeholder its colour word."""
    return _PLACEHOLDER.sub(lambda m: colour_of(lifted.binding[m[1]]), text)


def read_as(reader: LLMBackend, pair: CorpusPair, max_tokens: int) -> str:
    """The constraints the goal reader writes for `pair`'s request, in the scene's words (the
    planner's short lifted prompt, under the grammar over its placeholders)."""
    messages, _ = pair.messages()
    lifted = pair.lifted()
    reply = reader.chat(list(messages), max_tokens=max_tokens, grammar=gbnf(lifted.scene))
    first = reply.text.strip().splitlines()[0] if reply.text.strip() else ""
    return lifted.lower(first)


def judge(
    candidate: str, source: CorpusPair, reader: LLMBackend, check: LeakCheck, max_tokens: int
) -> tuple[CorpusPair | None, str]:
    """The rewrite `candidate` (over the source's placeholders) as a kept pair, or None and the
    reason it was dropped."""
    lifted = source.lifted()
    if set(_PLACEHOLDER.findall(candidate)) != set(_PLACEHOLDER.findall(lifted.request)):
        return None, "placeholders"
    pair = replace(
        source,
        language="en",
        template=f"paraphrase: {source.template}",
        request=in_words(candidate, lifted),
    )
    if check.leaks(pair):
        return None, "leaks"
    read = solved(read_as(reader, pair, max_tokens), pair)
    if not same_goal(read, solved(source.label, source)):
        return None, "another meaning"
    return pair, "kept"


def paraphrase_corpus(
    sources: Sequence[CorpusPair],
    writer: LLMBackend,
    reader: LLMBackend,
    out: str | os.PathLike[str],
    config: ParaphraseConfig | None = None,
    check: LeakCheck | None = None,
    progress: bool = True,
) -> Counter[str]:
    """Rewrite every English source pair and judge each rewrite; one JSONL record per source
    (its index, the rewrites with their verdicts, the kept pairs) appended to `out` as it is
    done, so a rerun resumes after the last. Returns the verdicts of every record in `out`."""
    config = config or ParaphraseConfig()
    check = check or LeakCheck.of_held_out()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {r["source"] for r in _records(path)}
    todo = [(i, p) for i, p in enumerate(sources) if p.language == "en" and i not in done]
    with path.open("a") as f:
        for index, source in tqdm(todo, desc="paraphrases", disable=not progress):
            lifted = source.lifted()
            reply = writer.chat(
                prompt(lifted.request, config.per_pair),
                max_tokens=config.max_tokens,
                temperature=config.temperature,
            )
            verdicts, kept = [], []
            for candidate in rewrites(reply.text, lifted.request)[: config.per_pair]:
                pair, verdict = judge(candidate, source, reader, check, config.reader_max_tokens)
                verdicts.append({"rewrite": candidate, "verdict": verdict})
                if pair is not None:
                    kept.append(pair.row())
            record = {"source": index, "request": source.request, "rewrites": verdicts}
            f.write(json.dumps(record | {"kept": kept}) + "\n")
            f.flush()
    return Counter(v["verdict"] for r in _records(path) for v in r["rewrites"])


def _records(path: Path) -> Iterable[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_paraphrases(
    path: str | os.PathLike[str], check: LeakCheck | None = None
) -> list[CorpusPair]:
    """The kept pairs of a `paraphrase_corpus` file, less any that leak under `check` (default:
    the held-out collections as they are now: a file kept under an older check stays clean)."""
    path = Path(path)
    check = check or LeakCheck.of_held_out()
    if not path.is_file():
        raise FileNotFoundError(f"paraphrases file {path} does not exist.")
    pairs = []
    for record in _records(path):
        for row in record["kept"]:
            scene = SceneNames(tuple(row["blocks"]), tuple(row["bins"]))
            pair = CorpusPair(
                kind=row["kind"],
                language=row["language"],
                template=row["template"],
                request=row["request"],
                label=row["label"],
                scene=scene,
                support=row["support"],
                feasible=row["feasible"],
            )
            if not check.leaks(pair):
                pairs.append(pair)
    return pairs
