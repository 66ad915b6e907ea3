"""Every searchable method a candidate: convex's simplex grid, the product of experts and each
parent sharpened race in one pool beside the parents alone, on common seeds; a method declares
what it contributes (`searchable`, `search_weights`), and `operators=("convex",)` is the search
as it was before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robocompose.compare import CandidateSpec
from robocompose.composition import methods
from robocompose.composition.methods import (
    CompositionMethod,
    Weights,
    register_method,
    searchable_methods,
)
from robocompose.composition.weight_search import (
    Composed,
    NativeParent,
    SearchSettings,
    grid_search,
    native_parents,
    racing,
    search_pool,
    simplex_grid,
    successive_halving,
)

PRODUCT, SHARP_A = Composed("weighted_sum", (1.0, 1.0)), Composed("weighted_sum", (2.0, 0.0))
SEARCHES = {
    "grid": lambda ev, pool, seeds: grid_search(ev, pool, seeds, progress=False),
    "halving": lambda ev, pool, seeds: successive_halving(ev, pool, seeds, 10, progress=False),
    "racing": lambda ev, pool, seeds: racing(ev, pool, seeds, 10, progress=False),
}


def _evaluator(rate: dict, default: float):
    """Candidate `key` succeeds with rate.get(key, default), paired: a seed's uniform draw
    decides every candidate on it."""

    def run(key, seeds):
        p = rate.get(key, default)
        return [
            {"seed": s, "success": np.random.default_rng(s).uniform() < p, "score": p}
            for s in seeds
        ]

    return run


def test_the_default_pool_is_every_searchable_method_and_convex_alone_is_the_old_one() -> None:
    assert searchable_methods() == ("convex", "weighted_sum")
    pool = search_pool(2, 0.1, SearchSettings().operators)
    convex = [Composed("convex", w) for w in simplex_grid(2, 0.1)]
    sharpened = [SHARP_A, Composed("weighted_sum", (0.0, 2.0))]
    assert pool == [*native_parents(2), *convex, PRODUCT, *sharpened]
    for k, step in ((2, 0.1), (3, 0.25)):  # the parents alone, then the simplex grid, as before
        old = [*native_parents(k), *simplex_grid(k, step)]
        assert [key.weights for key in search_pool(k, step, ["convex"])] == [
            key.weights if isinstance(key, NativeParent) else key for key in old
        ]
    assert search_pool(3, 0.5, ["weighted_sum"])[3:] == [
        Composed("weighted_sum", w)
        for w in ((1.0, 1.0, 1.0), (2.0, 0.0, 0.0), (0.0, 2.0, 0.0), (0.0, 0.0, 2.0))
    ]


@pytest.mark.parametrize("method", SEARCHES)
def test_one_pool_picks_the_better_methods_candidate(method: str) -> None:
    """The product of experts beats every convex weight and both parents: the search returns
    it, named by its method; with the convex weights alone it could not."""
    pool = search_pool(2, 0.25, ["convex", "weighted_sum"])
    rates = {NativeParent(0, 2): 0.5, NativeParent(1, 2): 0.55, PRODUCT: 0.85, SHARP_A: 0.3}
    seeds = list(range(200))
    found = SEARCHES[method](_evaluator(rates, default=0.6), pool, seeds)
    assert found.choice == PRODUCT and found.chosen == (1.0, 1.0)
    assert (found.chosen_kind, found.chosen_operator) == ("composition", "weighted_sum")
    assert found.chosen_text() == "product of experts at weights (1.00, 1.00)"
    assert found.best_composed == PRODUCT and found.best_composition == (1.0, 1.0)
    if method == "grid":  # every candidate ran every seed: the filter ranks them all
        best_convex = found.best_composed_where(lambda key: key.operator == "convex")
        assert best_convex.operator == "convex" and best_convex != PRODUCT
        sharp = found.best_composed_where(lambda k: k.operator == "weighted_sum" and 0 in k.weights)
        assert sharp == Composed("weighted_sum", (0.0, 2.0))  # SHARP_A is at 0.3, B at 0.6
    with pytest.raises(ValueError, match="no composition that the filter admits"):
        found.best_composed_where(lambda key: False)
    chosen_line = next(line for line in found.table().splitlines() if "**chosen**" in line)
    assert chosen_line.startswith("| product of experts at weights (1.00, 1.00) **chosen** |")
    rows = found.to_dict()
    assert (rows["chosen"], rows["chosen_kind"], rows["chosen_operator"]) == (
        [1.0, 1.0],
        "composition",
        "weighted_sum",
    )
    assert {r["operator"] for r in rows["candidates"]} == {None, "convex", "weighted_sum"}

    # the convex weights win where the product is worse: GPC named with its weights
    convex = Composed("convex", (0.75, 0.25))
    rates |= {PRODUCT: 0.3, convex: 0.9}
    found = SEARCHES[method](_evaluator(rates, default=0.6), pool, seeds)
    assert found.choice == convex and found.chosen_operator == "convex"
    assert found.chosen_text() == "GPC convex at weights (0.75, 0.25)"


def test_a_parent_alone_has_no_operator() -> None:
    pool = search_pool(2, 0.5, ["convex", "weighted_sum"])
    found = SEARCHES["grid"](_evaluator({NativeParent(1, 2): 0.9}, default=0.4), pool, range(100))
    assert found.choice == NativeParent(1, 2) and found.chosen_operator is None
    assert found.to_dict()["chosen_operator"] is None
    assert found.best_composed in pool  # a composition, whichever method


@pytest.fixture
def own_registry(monkeypatch):
    """Methods registered in a test leave the registry as it was."""
    monkeypatch.setattr(methods, "_REGISTRY", dict(methods._REGISTRY))


def test_a_method_that_declares_itself_searchable_joins_the_pool(own_registry) -> None:
    @register_method("halfway")
    class Halfway(CompositionMethod):
        searchable = True
        title = "halfway"

        def search_weights(self, parents: int, step: float) -> list[Weights]:
            return [(1 / parents,) * parents]

    @register_method("unsearched")
    class Unsearched(CompositionMethod):
        pass

    assert searchable_methods() == ("convex", "weighted_sum", "halfway")
    settings = SearchSettings()
    assert settings.operators == ["convex", "weighted_sum", "halfway"]
    assert search_pool(2, 0.5, settings.operators)[-1] == Composed("halfway", (0.5, 0.5))
    assert str(Composed("halfway", (0.5, 0.5))) == "halfway at weights (0.50, 0.50)"
    with pytest.raises(ValueError, match=r"`operators\[0\]` must be one of .*Got 'unsearched'"):
        SearchSettings(operators=["unsearched"])


def test_an_unknown_or_unsearchable_operator_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"`operators\[0\]` must be one of \['convex', "):
        SearchSettings(operators=["mixture"])
    with pytest.raises(ValueError, match=r"Got 'convx'. Did you mean 'convex'\?"):
        SearchSettings(operators=["convex", "convx"])


def test_search_json_records_the_chosen_method_and_compare_builds_it(tmp_path: Path) -> None:
    """search.json keeps the keys older readers use (chosen, chosen_kind, candidates' weights
    and kind) and adds chosen_operator; compare's candidate from it is that method at its
    weights, and a record older than chosen_operator is read by its one `operator`."""
    pool = search_pool(2, 0.5, ["convex", "weighted_sum"])
    found = SEARCHES["grid"](_evaluator({SHARP_A: 0.9}, default=0.4), pool, range(50))
    found.provenance = {
        "parents": [{"name": "a", "path": "ckpt/a"}, {"name": "b", "path": "ckpt/b"}],
        "composition": {"sampler": "heun"},
        "search": {"operators": ["convex", "weighted_sum"]},
        "seeds": {"start": 0, "count": 50},
    }
    record = json.loads(found.save(tmp_path / "search.json").read_text())
    result = record["result"]
    assert (result["chosen"], result["chosen_kind"], result["chosen_operator"]) == (
        [2.0, 0.0],
        "composition",
        "weighted_sum",
    )
    assert {"weights", "kind", "operator"} <= set(result["candidates"][0])
    spec = CandidateSpec.chosen_by(tmp_path / "search.json")
    assert spec == CandidateSpec(
        ("ckpt/a", "ckpt/b"), "weighted_sum", (2.0, 0.0), {"sampler": "heun"}
    )
    assert spec.label() == "weighted_sum_2.000_0.000"  # the search's episode file for it

    older = {**record, "operator": "convex"}
    older["result"] = {k: v for k, v in result.items() if k != "chosen_operator"}
    older["result"]["chosen"] = [0.5, 0.5]
    (tmp_path / "older.json").write_text(json.dumps(older))
    assert CandidateSpec.chosen_by(tmp_path / "older.json").operator == "convex"


def test_halving_keeps_every_candidate_tied_at_the_cut() -> None:
    """On the first ten seeds three candidates tie at 10/10; the one that keeps succeeding has
    the lowest mean score there. Cutting the tie by mean score would drop it (as the demo's
    first round dropped the product of experts); kept, it wins on all the seeds."""
    steady, early_a, early_b, poor = (Composed("convex", (w, 1 - w)) for w in (0.1, 0.2, 0.3, 0.4))

    def run(key, seeds):
        if key == steady:
            return [{"seed": s, "success": True, "score": 0.5} for s in seeds]
        score = {early_a: 0.9, early_b: 0.8, poor: 0.1}[key]
        return [{"seed": s, "success": key != poor and s < 10, "score": score} for s in seeds]

    found = successive_halving(run, [early_a, early_b, steady, poor], list(range(40)), 10,
                               progress=False)  # fmt: skip
    assert found.choice == steady
    assert found.extra["rounds"][1]["alive"] == [c.label for c in (early_a, early_b, steady)]
