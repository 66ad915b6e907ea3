"""The main job end to end on a tiny budget: shipped Stack parents, search, product, outputs."""

from __future__ import annotations

import json

import pytest

from robocompose.verbs import demo
from robocompose.verbs.demo import DemoConfig


def test_demo_writes_its_table_plot_video_and_record(tmp_path, capsys) -> None:
    config = DemoConfig(episodes=4, first_slice=2, num_envs=2, out=str(tmp_path))
    record = demo.run(config)
    labels = [r["label"] for r in record["rows"]]
    assert labels[:2] == ["Stack_diffusion_mlp", "Stack_flow_mlp"]
    # the search's choice: convex weights, the product of experts, a parent sharpened, or a
    # parent alone when no composition beat it
    chosen = ("GPC convex (", "product of experts (", "Stack_diffusion_mlp alone", "Stack_flow")
    assert labels[2].startswith(chosen) and labels[2].endswith(", searched")
    search = record["search"]
    assert {c["operator"] for c in search["candidates"]} == {None, "convex", "weighted_sum"}
    # the product of experts has a row of its own unless the search chose it
    product_won = [search["chosen_operator"], search["chosen"]] == ["weighted_sum", [1.0, 1.0]]
    assert labels[3:] == ([] if product_won else ["product of experts (1, 1)"])
    assert all(r["episodes"] == 4 for r in record["rows"])
    folder = tmp_path / "Stack"
    product = folder / "episodes" / "weighted_sum_1.000_1.000.jsonl"
    assert len(product.read_text().splitlines()) == 4  # the search's episodes, not run twice
    assert (folder / "search.png").stat().st_size > 1000
    assert (folder / "videos" / "seed_100000.mp4").stat().st_size > 1000
    assert json.loads((folder / "demo.json").read_text())["rows"] == record["rows"]
    printed = capsys.readouterr().out
    assert "| product of experts (1, 1)" in printed and "- best parent:" in printed
    assert "searching convex weights, product of experts and sharpened sums (halving)" in printed
    assert f"the search's choice ({record['won']}): " in printed

    assert record["video"] == str(folder / "videos" / "seed_100000.mp4")
    assert "| Stack_flow_mlp | " in printed and " (n=4)" not in printed  # episodes: own column

    # every episode is on disk: the rerun only reads them back; with the filmed episode's
    # record gone it films again, and demo.json names the file it wrote (the first is kept)
    [filmed] = (folder / "video_episodes").iterdir()  # one file, named by the chosen candidate
    filmed.unlink()
    with pytest.warns(UserWarning, match=r"seed_100000\.mp4 exists \(kept\)"):
        again = demo.run(config)
    assert again["rows"] == record["rows"]
    assert again["video"] == str(folder / "videos" / "seed_100000-2.mp4")
    assert json.loads((folder / "demo.json").read_text())["video"] == again["video"]
    assert f"video: {again['video']}" in capsys.readouterr().out
