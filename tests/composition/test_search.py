"""The search as a user meets it: the Python `search()` and `robocompose search` share their
defaults (every searchable method in one pool), the API writes search.json (what was searched)
and search.png, a rerun into the same folder with other parents or settings is refused, naming
what differs, and one with fewer methods reuses their episodes."""

from __future__ import annotations

import dataclasses
import inspect
import json
from importlib import metadata
from pathlib import Path

import pytest

from robocompose.cli import load_verb_config, main
from robocompose.composition import load, search
from robocompose.composition.composed_policy import CompositionConfig
from robocompose.composition.methods import searchable_methods
from robocompose.composition.search_record import SearchRecordError, seed_entry, start
from robocompose.composition.weight_search import SearchSettings
from robocompose.shipped import shipped_path
from robocompose.stats import Z_95
from robocompose.verbs.demo import DemoConfig

PARENTS = [
    str(shipped_path("PickPlaceTwoCubes", "flow_mlp")),
    str(shipped_path("PickPlaceTwoCubes", "flow_mlp_b")),
]
SEEDS = [100_000]
TINY = {"method": "grid", "step": 1.0, "num_envs": 1, "progress": False}  # 2 candidates, 1 seed


def test_the_api_defaults_are_the_cli_defaults() -> None:
    """What `search()`'s signature shows is what `robocompose search` (and the demo) runs."""
    api = inspect.signature(search).parameters
    cli = load_verb_config("search", [])
    assert api["method"].default == cli.search.method == SearchSettings.method == "halving"
    assert api["step"].default == cli.search.step
    assert api["first_slice"].default == cli.search.first_slice
    assert api["operators"].default is None  # every searchable method, as the CLI's default:
    assert cli.search.operators == SearchSettings().operators == list(searchable_methods())
    assert searchable_methods() == ("convex", "weighted_sum")
    assert api["device"].default == cli.device
    # the composition settings the CLI passes as **config are the ones the API defaults to
    base = dataclasses.asdict(CompositionConfig())
    assert {k: base[k] for k in cli.composition.settings()} == cli.composition.settings()
    grid = load_verb_config("search", ["search=grid"])
    assert (grid.search.method, grid.search.step) == ("grid", api["step"].default)
    demo = DemoConfig()
    assert (demo.method, demo.first_slice) == (api["method"].default, api["first_slice"].default)


def test_search_records_what_it_searched_and_refuses_another_search(tmp_path: Path, capsys):
    out = tmp_path / "search"
    result = search(PARENTS, SEEDS, out_dir=out, **TINY)
    # each parent alone on its own sampler, both convex vertices, the product of experts and
    # each parent sharpened: one pool
    assert result.episodes_spent == 7
    labels = [c.key.label for c in result.candidates]
    assert labels == [
        "parent0_native",
        "parent1_native",
        "convex_0.000_1.000",
        "convex_1.000_0.000",
        "weighted_sum_1.000_1.000",
        "weighted_sum_2.000_0.000",
        "weighted_sum_0.000_2.000",
    ]
    assert result.choice in [c.key for c in result.candidates]
    record = json.loads((out / "search.json").read_text())
    assert record["task"] == {
        "name": "PickPlaceTwoCubes",
        "env_id": "robocompose/PickPlaceTwoCubes-v0",
    }
    assert [p["path"] for p in record["parents"]] == PARENTS
    assert [p["name"] for p in record["parents"]] == [Path(p).name for p in PARENTS]
    assert [p["fingerprint"] for p in record["parents"]] == [load(p).fingerprint() for p in PARENTS]
    assert "operator" not in record and "operator" not in record["composition"]
    assert record["composition"]["sampler"] == "euler" and record["composition"]["steps"] is None
    assert record["search"] == {
        "method": "grid",
        "step": 1.0,
        "first_slice": 10,
        "beat_parent_z": Z_95,
        "tolerance": 0.0,
        "operators": ["convex", "weighted_sum"],
    }
    assert record["seeds"] == {"start": 100_000, "count": 1}
    assert (record["num_envs"], record["device"], record["batch_invariant"]) == (1, "auto", True)
    assert record["robocompose"] == metadata.version("robocompose")
    assert record["status"] == "done" and record["result"]["chosen"] == list(result.chosen)
    assert record["result"]["chosen_operator"] == result.chosen_operator
    rows = record["result"]["candidates"]
    assert [r["operator"] for r in rows] == [None, None, "convex", "convex", *["weighted_sum"] * 3]
    assert (out / "search.png").stat().st_size > 1000

    episodes = sorted((out / "episodes").iterdir())
    before = {p.name: p.read_text() for p in episodes}
    with pytest.raises(SearchRecordError, match=r"other parents \(parents: .*_b .* there"):
        search(PARENTS[::-1], SEEDS, out_dir=out, **TINY)
    with pytest.raises(SearchRecordError, match=r"other composition .*\"sampler\": \"heun\""):
        search(PARENTS, SEEDS, out_dir=out, sampler="heun", **TINY)
    with pytest.raises(SearchRecordError, match=r"other batching .*1 envs in one batch now"):
        search(PARENTS, SEEDS, out_dir=out, batch_invariant=False, **TINY)
    assert {p.name: p.read_text() for p in episodes} == before  # nothing ran, nothing mixed

    # fewer methods: a narrower search of the same folder, its episodes all read back
    convex = search(PARENTS, SEEDS, out_dir=out, operators=("convex",), **TINY)
    assert [c.key.label for c in convex.candidates] == labels[:4]
    assert {p.name: p.read_text() for p in episodes} == before

    # the CLI is the API plus printing: same folder, same search, every episode read back
    main(
        ["search", *PARENTS, "--method", "grid", "--step", "1.0", "--episodes", "1"]
        + ["--out", str(out), "num_envs=1", "confirm=0"]
    )
    printed = capsys.readouterr().out
    assert f"record: {out / 'search.json'}" in printed and f"plot: {out / 'search.png'}" in printed
    assert "| candidate | success [95% CI] | episodes | mean score |" in printed
    names = [Path(p).name for p in PARENTS]
    assert f"won: {result.chosen_kind}, {result.chosen_text(names)}" in printed
    assert {p.name: p.read_text() for p in episodes} == before
    assert json.loads((out / "search.json").read_text())["result"] == record["result"]


def test_three_parents_race_end_to_end_from_the_cli(tmp_path: Path, capsys) -> None:
    """K=3 through `robocompose search`: the simplex's vertices raced on real episodes, the
    record names the three parents and the method, the plot is written."""
    three = [
        str(shipped_path("Stack", kind)) for kind in ("diffusion_mlp", "flow_mlp", "flow_mlp_b")
    ]
    out = tmp_path / "k3"
    main(
        ["search", *three, "--method", "racing", "--step", "1.0", "--episodes", "2"]
        + ["--out", str(out), "num_envs=1", "search.first_slice=1", "search.tolerance=0.02"]
        + ["search.beat_parent_z=1.0", "--operators", "convex", "confirm=0"]
    )
    assert "| candidate | success [95% CI] | episodes | mean score |" in capsys.readouterr().out
    record = json.loads((out / "search.json").read_text())
    assert [p["name"] for p in record["parents"]] == [Path(p).name for p in three]
    settings = {
        "method": "racing",
        "step": 1.0,
        "first_slice": 1,
        "beat_parent_z": 1.0,
        "tolerance": 0.02,
        "operators": ["convex"],
    }
    assert record["search"] == settings
    result = record["result"]
    assert result["method"] == "racing" and len(result["chosen"]) == 3
    vertices = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    rows = [(c["kind"], tuple(c["weights"])) for c in result["candidates"]]
    assert sorted(rows) == sorted(
        (k, v) for k in ("composition", "parent_native") for v in vertices
    )
    chosen = next(
        c
        for c in result["candidates"]
        if (c["kind"], c["weights"]) == (result["chosen_kind"], result["chosen"])
    )
    assert chosen["episodes"] == 2 and 6 <= result["episodes_spent"] <= 12
    assert (out / "search.png").stat().st_size > 1000


def test_a_search_logs_every_candidates_chunks_for_the_verifier(tmp_path: Path) -> None:
    pool = {**TINY, "operators": ("convex",)}
    result = search(PARENTS, SEEDS, out_dir=tmp_path, chunk_log=True, **pool)
    logged = sorted(p.parent.name for p in (tmp_path / "chunks").glob("*/seed_*.npz"))
    assert logged == sorted(c.key.label for c in result.candidates)


def test_a_search_folder_of_an_older_robocompose_is_refused(tmp_path: Path) -> None:
    (tmp_path / "search.json").write_text(json.dumps({"method": "grid", "candidates": []}))
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "convex_0.000_1.000.jsonl").write_text('{"seed": 100000}\n')
    with pytest.raises(SearchRecordError, match="did not record the parents"):
        search(PARENTS, SEEDS, out_dir=tmp_path, **TINY)


def test_a_search_that_ran_no_episode_binds_nothing(tmp_path: Path) -> None:
    """Stopped before its first episode (say, a wrong observation key), the folder is free."""
    record = {"task": {"name": "Stack", "env_id": "robocompose/Stack-v0"}, "operator": "convex"}
    start(tmp_path, {**record, "parents": [{"name": "a", "path": None, "fingerprint": "1"}]})
    again = {**record, "parents": [{"name": "b", "path": None, "fingerprint": "2"}]}
    assert json.loads(start(tmp_path, again).read_text())["parents"][0]["name"] == "b"
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "convex_0.500_0.500.jsonl").write_text('{"seed": 1}\n')
    with pytest.raises(SearchRecordError, match=r"other parents \(parents: b \(2\) there, a"):
        start(tmp_path, {**record, "parents": [{"name": "a", "path": None, "fingerprint": "1"}]})


def test_another_pool_of_methods_may_rerun_and_any_episode_binds_the_folder(tmp_path: Path):
    """Each episode file names its method, so a search of other methods over the same parents
    is no other search; any file binds the folder, whichever method the record searched."""
    task = {"name": "Stack", "env_id": "robocompose/Stack-v0"}
    a, b = ({"name": n, "path": None, "fingerprint": n} for n in "ab")
    both = {"task": task, "search": {"operators": ["convex", "weighted_sum"]}}
    start(tmp_path, {**both, "parents": [a]})
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "weighted_sum_1.000_1.000.jsonl").write_text('{"seed": 1}\n')
    convex = {"task": task, "search": {"operators": ["convex"]}}
    start(tmp_path, {**convex, "parents": [a]})
    with pytest.raises(SearchRecordError, match=r"other parents \(parents: a \(a\) there, b"):
        start(tmp_path, {**convex, "parents": [b]})


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(
        ValueError, match=r"`method` must be one of \['grid', 'halving', 'racing'\]"
    ):
        search(PARENTS, SEEDS, out_dir="unused", method="random")
    with pytest.raises(ValueError, match=r"`first_slice` must be >= 1"):
        SearchSettings(first_slice=0)
    with pytest.raises(ValueError, match=r"`tolerance` must be in \[0, 1\). Got 2"):
        SearchSettings(tolerance=2)
    with pytest.raises(ValueError, match="not on task 'Stack'"):
        search(PARENTS, SEEDS, out_dir="unused", task="Stack")
    searchable = r"\['convex', 'weighted_sum'\]"
    with pytest.raises(
        ValueError, match=rf"`operators\[1\]` must be one of {searchable}. Got 'mixture'"
    ):
        search(PARENTS, SEEDS, out_dir="unused", operators=("convex", "mixture"))
    with pytest.raises(ValueError, match=rf"`operators` must name at least one of {searchable}"):
        SearchSettings(operators=[])


def test_seeds_are_recorded_as_a_range_or_in_full() -> None:
    assert seed_entry(range(100_000, 100_050)) == {"start": 100_000, "count": 50}
    assert seed_entry([7, 3, 5]) == {"list": [7, 3, 5], "count": 3}


def test_the_package_search_is_the_function_whatever_was_imported_first() -> None:
    """The verbs' configs import the search settings module first; the package's `search` must
    still be the API function (a submodule of that name would shadow it)."""
    import robocompose.composition.weight_search  # noqa: F401
    from robocompose.composition import search as package_search

    assert callable(package_search) and package_search.__module__ == "robocompose.composition.api"
