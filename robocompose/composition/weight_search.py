"""Test-time search over compositions, on one seed list for every candidate.

Common random numbers: every candidate runs the same episode seeds (and the runner draws each
episode's sampling noise from its seed), so differences between candidates are paired.

Candidates (`Key`) are compositions, each a method and its weights (`Composed`), and, beside
them, each parent alone on its own sampler (`NativeParent`, listed first so that a tie goes to
the parent). The pool (`search_pool`) holds the weights every searched method lists
(`CompositionMethod.search_weights`: convex, the simplex grid; weighted_sum, the product of
experts and each parent sharpened), all raced together. Whatever a method pruned, its winner
ends against every parent alone on all the search seeds, and the better parent is returned
unless the winner beats it there with confidence: its paired 95% interval against that parent
(`beat_parent_z`) lies above 0. The winner is the best of many candidates on the same seeds,
so a lead of a seed or two is mostly luck: a 40-seed search whose winning composition led the
parent by one seed lost 12.5 points to it on fresh seeds.

- `grid_search`: every candidate (for convex, every weight on a simplex lattice: step 0.1 for
  K=2, as the GPC paper) on all seeds.
- `successive_halving` (Jamieson & Talwalkar 2016): all candidates on a first slice of the seeds,
  keep the best 1/eta, double the slice, repeat; the winner ends on the full seed list so its
  interval is comparable with the grid's. Slices are prefixes of one seed list, so every episode
  already run is reused.
- `racing` (Maron & Moore 1994, with paired intervals): every surviving candidate runs the next
  `first_slice` seeds, then each candidate whose paired difference against the leader has its
  whole 95% interval (Newcombe, `robocompose.stats.paired_outcomes`) below 0 is dropped. Unlike
  halving it never drops a candidate that the episodes cannot tell from the leader, and it
  stops early once only the leader is left; the winner ends on the full seed list too.

The evaluator does the episodes and must be resumable (the harness's JSONL files are), so an
interrupted search picks up where it stopped. Each round's decision needs every alive
candidate's records: an evaluator with `many` gets the round's runs at once (`evaluate_round`;
`search(launcher=...)` runs them as parallel Ray tasks), a plain one each run in turn.
`SearchSettings` holds the defaults that both the Python `search()` and `robocompose search`
use.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tqdm import tqdm

from robocompose.choices import check_choices, each_of, one_of
from robocompose.composition.methods import (
    Weights,
    get_method,
    method_title,
    searchable_methods,
)
from robocompose.composition.timing import ParentTimes
from robocompose.records import pool
from robocompose.stats import Z_95, paired_outcomes, success_rate


def candidate_label(operator: str, weights: Sequence[float]) -> str:
    """A composition's name in episode files and tables: its method and weights, so a search's
    episodes are found again by any later run of that candidate."""
    return f"{operator}_" + "_".join(f"{w:.3f}" for w in weights)


def weights_text(weights: Sequence[float]) -> str:
    return "(" + ", ".join(f"{x:.2f}" for x in weights) + ")"


@dataclass(frozen=True)
class Composed:
    """The composition by the registered method `operator` at `weights`: a search candidate."""

    operator: str
    weights: Weights

    def __post_init__(self) -> None:  # a tuple of floats, so equal weights are one key
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))

    @property
    def label(self) -> str:
        return candidate_label(self.operator, self.weights)

    def __str__(self) -> str:
        return f"{method_title(self.operator)} at weights {weights_text(self.weights)}"


@dataclass(frozen=True)
class NativeParent:
    """Parent `index` of `parents` alone, on its own sampler: a search candidate beside the
    compositions."""

    index: int
    parents: int
    operator: ClassVar[None] = None  # no composition runs it

    @property
    def weights(self) -> Weights:
        """Its vertex of the simplex (where a plot draws it)."""
        return tuple(float(i == self.index) for i in range(self.parents))

    @property
    def label(self) -> str:
        return f"parent{self.index}_native"

    def __str__(self) -> str:
        return f"parent {chr(ord('A') + self.index)} alone (native sampler)"


# a candidate: a composition (method and weights), or one parent alone
Key = Composed | NativeParent
# (candidate, seeds) -> one record per seed with at least "seed", "success", "score"
Evaluator = Callable[[Key, Sequence[int]], list[dict]]
# a round: the (candidate, seeds) pairs whose records the round's decision needs
Round = Sequence[tuple[Key, Sequence[int]]]
KIND_NATIVE, KIND_COMPOSITION = "parent_native", "composition"


def native_parents(k: int) -> list[NativeParent]:
    return [NativeParent(i, k) for i in range(k)]


def search_pool(parents: int, step: float, operators: Sequence[str]) -> list[Key]:
    """Each parent alone (first, so a tie goes to it), then the weights each method in
    `operators` lists for a search (`step`: the simplex grid's)."""
    composed = [
        Composed(operator, w)
        for operator in operators
        for w in get_method(operator).search_weights(parents, step)
    ]
    return [*native_parents(parents), *composed]


METHODS = ("grid", "halving", "racing")


@dataclass(kw_only=True)
class SearchSettings:
    """How the candidates are searched; the one place these defaults live."""

    # grid: every candidate on every seed; halving, racing: see this module's docstring
    method: str = one_of(METHODS, "halving")
    step: float | None = None  # simplex grid step; None: 0.1 for two parents, else 0.25
    first_slice: int = 10  # halving: seeds of the first round; racing: seeds added per round
    # a winning composition replaces the better parent only when its paired interval against
    # that parent on the search seeds, at this z, lies above 0 (0: any lead, as a bare max)
    beat_parent_z: float = Z_95
    # racing: drop a candidate once it cannot beat the leader by this success-rate margin
    # (0: only once it is surely worse; 0.02 stops sooner, at the cost of a 2-point miss)
    tolerance: float = 0.0
    # the methods whose candidates race in one pool (their `search_weights`); default: every
    # searchable one (convex: the simplex grid; weighted_sum: the product of experts, each
    # parent sharpened)
    operators: list[str] = each_of(searchable_methods, searchable_methods)

    def __post_init__(self) -> None:
        check_choices(self)
        if self.first_slice < 1:
            raise ValueError(f"`first_slice` must be >= 1. Got {self.first_slice}.")
        if self.beat_parent_z < 0:
            raise ValueError(f"`beat_parent_z` must be >= 0. Got {self.beat_parent_z}.")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"`tolerance` must be in [0, 1). Got {self.tolerance}.")
        if self.step is not None and not 0 < self.step <= 1:
            raise ValueError(f"`step` must be in (0, 1] or None. Got {self.step}.")

    def grid_step(self, parents: int) -> float:
        if self.step is not None:
            return self.step
        return 0.1 if parents == 2 else 0.25


def simplex_grid(k: int, step: float = 0.1) -> list[Weights]:
    """All weight vectors with entries in {0, step, 2 step, ..., 1} summing to 1."""
    n = round(1 / step)
    if not math.isclose(n * step, 1.0):
        raise ValueError(f"`step` must divide 1. Got {step}.")
    if k < 2:
        raise ValueError(f"the simplex needs k >= 2 parents. Got {k}.")
    points = [c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n]
    return [tuple(round(i / n, 10) for i in (*c, n - sum(c))) for c in points]


@dataclass
class Candidate:
    key: Key
    successes: int = 0
    episodes: int = 0
    mean_score: float = 0.0
    outcomes: dict[int, bool] = field(default_factory=dict, repr=False)  # by seed

    @property
    def weights(self) -> Weights:
        return self.key.weights

    @property
    def kind(self) -> str:
        return KIND_NATIVE if isinstance(self.key, NativeParent) else KIND_COMPOSITION

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def row(self) -> dict:
        rate = success_rate(self.successes, self.episodes)
        return {
            "operator": self.key.operator,
            "weights": list(self.weights),
            "kind": self.kind,
            "success": rate.rate,
            "ci_low": rate.ci_low,
            "ci_high": rate.ci_high,
            "episodes": self.episodes,
            "mean_score": self.mean_score,
        }


@dataclass
class SearchResult:
    method: str
    candidates: list[Candidate]
    choice: Key  # the winning candidate: a composition, or a parent alone
    episodes_spent: int
    seeds: int
    extra: dict = field(default_factory=dict)
    # what was searched (task, parents, settings, seeds), set by the Python `search()`
    provenance: dict = field(default_factory=dict)
    # what each parent cost per chunk over every candidate's run (not saved: it is this run's)
    times: ParentTimes | None = None

    @property
    def chosen(self) -> Weights:
        """The chosen candidate's weights (a parent alone: its vertex)."""
        return self.choice.weights

    @property
    def chosen_operator(self) -> str | None:
        """The chosen composition's method; None for a parent alone."""
        return self.choice.operator

    @property
    def best_composed(self) -> Composed:
        """The composition the method would have returned without the parents alone: of the
        compositions run on the most seeds, the best (the grid's best, halving's and racing's
        last one standing), of whichever searched method."""
        return self.best_composed_where(lambda key: True)

    def best_composed_where(self, keep: Callable[[Composed], bool]) -> Composed:
        """`best_composed`'s rule over the compositions `keep` admits (the best convex weights
        of a search over every operator, or the best composition weighing every parent)."""
        composed = [c for c in self.candidates if isinstance(c.key, Composed) and keep(c.key)]
        if not composed:
            raise ValueError("the search ran no composition that the filter admits")
        most = max(c.episodes for c in composed)
        return _best([c for c in composed if c.episodes == most]).key  # type: ignore[return-value]

    @property
    def best_composition(self) -> Weights:
        """`best_composed`'s weights; its method is `best_composed.operator` (a search of one
        method, `operators=("convex",)`: that method's best weights, as before methods were
        searched together)."""
        return self.best_composed.weights

    @property
    def chosen_kind(self) -> str:
        return KIND_NATIVE if isinstance(self.choice, NativeParent) else KIND_COMPOSITION

    def chosen_text(self, names: Sequence[str] = ()) -> str:
        """Which candidate won, in words: a parent alone (named when `names` are given) or the
        composition, its method and weights ("GPC convex at weights (0.60, 0.40)")."""
        if isinstance(self.choice, NativeParent):
            name = f" = {names[self.choice.index]}" if names else ""
            return f"{self.choice}{name}: no composition beat it beyond chance on the search seeds"
        return str(self.choice)

    def table(self) -> str:
        """A markdown table, best first; the chosen candidate is marked."""
        lines = ["| candidate | success [95% CI] | episodes | mean score |", "|---|---|---|---|"]
        for c in sorted(self.candidates, key=lambda c: (-c.rate, -c.mean_score)):
            mark = " **chosen**" if c.key == self.choice else ""
            rate = success_rate(c.successes, c.episodes).format(episodes=False)
            lines.append(f"| {c.key}{mark} | {rate} | {c.episodes} | {c.mean_score:.3f} |")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "chosen": list(self.chosen),
            "chosen_kind": self.chosen_kind,
            "chosen_operator": self.chosen_operator,
            "episodes_spent": self.episodes_spent,
            "seeds": self.seeds,
            "candidates": [c.row() for c in self.candidates],
            **self.extra,
        }

    def record(self) -> dict:
        """search.json: what was searched, then what it found."""
        return {**self.provenance, "status": "done", "result": self.to_dict()}

    def save(self, path: str | os.PathLike[str]) -> Path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.record(), indent=2) + "\n")
        return Path(path)


def evaluate_round(evaluate: Evaluator, runs: Round) -> Iterable[list[dict]]:
    """The records of each of a round's runs, in order. An evaluator with a `many(runs)` method
    takes the round at once (a launcher runs its candidates in parallel, and the round waits for
    all); a plain one runs them in turn, as they are read. Either way the round's decision is
    computed from the same records."""
    many = getattr(evaluate, "many", None)
    if many is not None:
        return many(runs)
    return (evaluate(key, seeds) for key, seeds in runs)


def _scored(
    evaluate: Evaluator, candidates: Sequence[Candidate], seeds: Sequence[int]
) -> Iterator[list[dict]]:
    """A round: each candidate's records on `seeds` (`evaluate_round`), scored as they come."""
    runs = evaluate_round(evaluate, [(c.key, seeds) for c in candidates])
    for c, records in zip(candidates, runs, strict=True):
        _score(c, records)
        yield records


def _score(candidate: Candidate, records: list[dict]) -> None:
    rate, mean_score = pool(records)
    candidate.episodes, candidate.successes = rate.episodes, rate.successes
    candidate.mean_score = mean_score if records else 0.0
    candidate.outcomes = {r["seed"]: bool(r["success"]) for r in records}


def _best(candidates: Sequence[Candidate]) -> Candidate:
    return max(candidates, key=lambda c: (c.rate, c.mean_score))


def _against_parents(
    evaluate: Evaluator,
    pool: Sequence[Candidate],
    winner: Candidate,
    seeds: Sequence[int],
    beat_parent_z: float,
) -> Candidate:
    """The winner against each parent alone, all on every seed: the best parent alone is
    returned unless the winner beats it (`_beats`). Halving or racing may have dropped a parent
    on a noisy first slice; this makes what a search returns never below its better parent on
    the search seeds, whatever the method pruned."""
    natives = [c for c in pool if isinstance(c.key, NativeParent)]
    if not natives:
        return winner
    short = [c for c in natives if c.episodes < len(seeds)]
    list(_scored(evaluate, short, seeds))
    best = _best(natives)
    if isinstance(winner.key, NativeParent):  # the best parent is among them
        return best
    return winner if _beats(winner, best, seeds, beat_parent_z) else best


def _beats(winner: Candidate, parent: Candidate, seeds: Sequence[int], z: float) -> bool:
    """z > 0: the winner's paired interval against the parent on `seeds` lies above 0; z = 0:
    its success is higher (mean score breaking a tie)."""
    if z == 0:
        return (winner.rate, winner.mean_score) > (parent.rate, parent.mean_score)
    return paired_outcomes(_outcomes(winner, seeds), _outcomes(parent, seeds), z).ci_low > 0


def _pool(candidates: Sequence[Key]) -> list[Candidate]:
    return [Candidate(k) for k in candidates]


def grid_search(
    evaluate: Evaluator,
    candidates: Sequence[Key],
    seeds: Sequence[int],
    progress: bool = True,
    beat_parent_z: float = SearchSettings.beat_parent_z,
) -> SearchResult:
    pool = _pool(candidates)
    list(tqdm(_scored(evaluate, pool, seeds), "grid search", len(pool), disable=not progress))
    winner = _against_parents(evaluate, pool, _best(pool), seeds, beat_parent_z)
    spent = sum(c.episodes for c in pool)
    return SearchResult("grid", pool, winner.key, spent, len(seeds))


def successive_halving(
    evaluate: Evaluator,
    candidates: Sequence[Key],
    seeds: Sequence[int],
    first_slice: int = SearchSettings.first_slice,
    eta: float = 2.0,
    progress: bool = True,
    beat_parent_z: float = SearchSettings.beat_parent_z,
) -> SearchResult:
    if first_slice < 1 or eta <= 1:
        raise ValueError(f"need first_slice >= 1 and eta > 1. Got {first_slice}, {eta}.")
    pool = _pool(candidates)
    alive, n, rounds = list(pool), min(first_slice, len(seeds)), []
    bar = tqdm(desc="successive halving", disable=not progress, unit="round")
    while True:
        list(_scored(evaluate, alive, seeds[:n]))
        rounds.append({"seeds": n, "alive": [c.key.label for c in alive]})
        bar.update()
        ranked = sorted(alive, key=lambda c: (c.rate, c.mean_score), reverse=True)
        if n == len(seeds):  # every seed spent: the best, mean score breaking a tie
            alive = ranked[:1]
            break
        # a candidate tied in success with the last one kept stays: on a few seeds a tie is
        # noise, and mean score alone dropped the demo's best candidate in its first round
        cut = ranked[max(1, math.ceil(len(alive) / eta)) - 1].rate
        alive = [c for c in ranked if c.rate >= cut]
        n = len(seeds) if len(alive) == 1 else min(len(seeds), 2 * n)
    bar.close()
    winner = _against_parents(evaluate, pool, alive[0], seeds, beat_parent_z)
    spent = sum(c.episodes for c in pool)
    return SearchResult(
        "successive_halving", pool, winner.key, spent, len(seeds), {"rounds": rounds}
    )


def _outcomes(candidate: Candidate, seeds: Sequence[int]) -> list[bool]:
    """Successes in the order of `seeds`, so two candidates' lists pair seed by seed."""
    missing = [s for s in seeds if s not in candidate.outcomes]
    if missing:
        raise ValueError(f"the evaluator returned no record for seeds {missing[:5]}.")
    return [candidate.outcomes[s] for s in seeds]


def racing(
    evaluate: Evaluator,
    candidates: Sequence[Key],
    seeds: Sequence[int],
    first_slice: int = SearchSettings.first_slice,
    z: float = Z_95,
    tolerance: float = 0.0,
    progress: bool = True,
    beat_parent_z: float = SearchSettings.beat_parent_z,
) -> SearchResult:
    """Race the candidates on growing prefixes of `seeds`, `first_slice` more per round.

    A candidate leaves once its paired interval (at `z`) against the round's leader lies below
    `tolerance` (a success-rate difference): on common seeds the discordant pairs are all that
    decide, so a clearly worse candidate goes after few episodes while close ones stay. With
    tolerance 0 it goes only once it is worse; with tolerance t once it cannot beat the leader
    by t, so near-ties stop costing episodes when a choice within t of the best is enough."""
    if first_slice < 1 or z <= 0 or not 0 <= tolerance < 1:
        raise ValueError(
            f"need first_slice >= 1, z > 0 and 0 <= tolerance < 1. "
            f"Got {first_slice}, {z}, {tolerance}."
        )
    pool = _pool(candidates)
    alive, n, rounds = list(pool), 0, []
    bar = tqdm(desc="racing", disable=not progress, unit="round")
    while len(alive) > 1 and n < len(seeds):
        n = min(len(seeds), n + first_slice)
        list(_scored(evaluate, alive, seeds[:n]))
        leader = _best(alive)
        ahead = _outcomes(leader, seeds[:n])
        alive = [
            c
            for c in alive
            if c is leader
            or paired_outcomes(_outcomes(c, seeds[:n]), ahead, z).ci_high >= tolerance
        ]
        rounds.append({"seeds": n, "leader": leader.key.label, "alive": len(alive)})
        bar.update()
    bar.close()
    winner = _best(alive)
    if winner.episodes < len(seeds):  # the winner ends on every seed, as in the grid
        _score(winner, evaluate(winner.key, seeds))
    winner = _against_parents(evaluate, pool, winner, seeds, beat_parent_z)
    spent = sum(c.episodes for c in pool)
    return SearchResult("racing", pool, winner.key, spent, len(seeds), {"rounds": rounds})
