"""The goal adapter's corpus: how big, how varied, and that it shares nothing with the test split.

Builds the corpus `robocompose adapt` trains on (`hierarchical.adapter.corpus.build_corpus`, the
same count and seed), writes it to runs/benchmarks/goal_corpus/corpus.jsonl, and reports:
`pairs`; `distinct_3grams` (of the lifted requests); `wordings_per_relation` (sentences per kind
of goal); `languages` (pairs per language); `leak_check`: test-split sentences, and lifted
five-word runs of the test split, found in the corpus, each recounted here from the test items
(must be 0: the builder drops any pair that leaks), and `leak_check_wordings` the same for the
held-out wordings collection (typos, other languages, self-corrections); `seconds` to build it.

    python benchmarks/goal_corpus.py [--pairs 12000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from common import RUNS_DIR, ResultsFile

from robocompose.hierarchical.adapter.corpus import (
    CorpusPair,
    build_corpus,
    diversity,
    ngrams,
    write_corpus,
)
from robocompose.hierarchical.adapter.train import LoRAConfig
from robocompose.hierarchical.goal.lifting import lift
from robocompose.hierarchical.instructions import instruction_items

RESULTS = ResultsFile("goal_corpus.json", writer="goal_corpus.py")


def leak_check(pairs: list[CorpusPair], collection: str) -> dict[str, int]:
    """The collection's sentences (as written, lower case) and lifted five-word runs, and how
    many of each the corpus holds."""
    sentences, grams = set(), set()
    for item in instruction_items(collection):
        sentences.add(item.instruction.lower())
        grams |= ngrams(lift(item.instruction, item.scene.names()).request, 5)
    shared_grams = set()
    for pair in pairs:
        shared_grams |= ngrams(pair.lifted().request, 5) & grams
    return {
        f"{collection}_sentences": len(sentences),
        f"{collection}_5grams": len(grams),
        "shared_sentences": sum(p.request.lower() in sentences for p in pairs),
        "shared_5grams": len(shared_grams),
    }


def main() -> None:
    defaults = LoRAConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=defaults.pairs)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args()
    start = time.perf_counter()
    pairs = build_corpus(args.pairs, args.seed)
    seconds = time.perf_counter() - start
    write_corpus(pairs, RUNS_DIR / "goal_corpus" / "corpus.jsonl")
    test, wordings = leak_check(pairs, "test"), leak_check(pairs, "wordings")
    result = diversity(pairs) | {
        "seed": args.seed,
        "seconds": round(seconds, 1),
        "leak_check": test,
        "leak_check_wordings": wordings,
    }
    RESULTS.write(result)
    print(
        f"{result['pairs']} pairs, {result['distinct_3grams']} distinct 3-grams, "
        f"languages {result['languages']}, shared with the test split: "
        f"{test['shared_sentences']} sentences, {test['shared_5grams']} 5-grams; with the "
        f"wordings: {wordings['shared_sentences']}, {wordings['shared_5grams']} ({seconds:.0f} s)"
    )


if __name__ == "__main__":
    main()
