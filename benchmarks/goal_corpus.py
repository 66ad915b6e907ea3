"""The goal adapter's corpus: how big, how varied, and that it shares nothing with the test split.

Builds the corpus `robocompose adapt` trains on (`hierarchical.adapter.corpus.build_corpus`, the
same count and seed), writes it to runs/benchmarks/goal_corpus/corpus.jsonl, and reports:
`pairs`; `distinct_3grams` (of the lifted requests); `wordings_per_relation` (sentences per kind
of goal); `languages` (pairs per language); `leak_check`: test-split sentences, and lifted
five-word runs of the test split, found in the corpus, each recounted here from the test items
(must be 0: the builder drops any pair that leaks), and `leak_check_wordings` the same for the
held-out wordings collection (typos, other languages, self-corrections); `seconds` to build it.

With `--paraphrase-sources N`: the local model rewrites the first N English corpus requests
(`hierarchical.adapter.paraphrase`: the plain model writes, the adapted reader judges), into
runs/benchmarks/goal_corpus/paraphrases.jsonl as each is done (a rerun resumes), and
`paraphrases` reports the sources done, every rewrite's verdict, the pairs kept, the corpus's
distinct 3-grams with them added, and both leak checks over the kept pairs.
`robocompose adapt paraphrases=runs/benchmarks/goal_corpus/paraphrases.jsonl` trains on them too.

    python benchmarks/goal_corpus.py [--pairs 12000] [--seed 0] [--paraphrase-sources 200]
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
from robocompose.hierarchical.adapter.paraphrase import paraphrase_corpus, read_paraphrases
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


def paraphrased(pairs: list[CorpusPair], sources: int, threads: int) -> dict:
    """The local model's paraphrases of the first `sources` English pairs (resumed)."""
    from robocompose.hierarchical.llm import LLMConfig
    from robocompose.hierarchical.planners.goal import readers

    english = [p for p in pairs if p.language == "en"][:sources]
    config = LLMConfig(model=LoRAConfig().model, n_threads=threads, cache=False)
    writer, _ = readers(config, "examples")
    reader, _ = readers(config, "adapted")
    path = RUNS_DIR / "goal_corpus" / "paraphrases.jsonl"
    start = time.perf_counter()
    verdicts = paraphrase_corpus(english, writer, reader, path)
    kept = read_paraphrases(path)
    done = sum(1 for line in path.read_text().splitlines() if line.strip())
    return {
        "sources": done,
        "verdicts": dict(verdicts),
        "kept": len(kept),
        "distinct_3grams_with_them": diversity([*pairs, *kept])["distinct_3grams"],
        "leak_check": leak_check(kept, "test"),
        "leak_check_wordings": leak_check(kept, "wordings"),
        "seconds_this_run": round(time.perf_counter() - start, 1),
        "file": str(path.relative_to(RUNS_DIR.parents[1])),
    }


def main() -> None:
    defaults = LoRAConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=defaults.pairs)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--paraphrase-sources", type=int, default=0, help="0: no paraphrases")
    parser.add_argument("--n-threads", type=int, default=2, help="the local model's threads")
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
    if args.paraphrase_sources:
        result["paraphrases"] = paraphrased(pairs, args.paraphrase_sources, args.n_threads)
    else:
        result["paraphrases"] = RESULTS.read().get("paraphrases")
    RESULTS.write(result)
    print(
        f"{result['pairs']} pairs, {result['distinct_3grams']} distinct 3-grams, "
        f"languages {result['languages']}, shared with the test split: "
        f"{test['shared_sentences']} sentences, {test['shared_5grams']} 5-grams; with the "
        f"wordings: {wordings['shared_sentences']}, {wordings['shared_5grams']} ({seconds:.0f} s)"
    )


if __name__ == "__main__":
    main()
