"""`eval` and `compose` say where their episodes and videos went: each video as written, filed
under the candidate's label (or checkpoint), so another run filmed into the same place keeps
its own; parents of different tasks are refused naming each one's task."""

from __future__ import annotations

import pytest

from robocompose.cli import main


def test_compose_prints_its_outputs_and_files_videos_by_label(tmp_path, capsys) -> None:
    seed = 100_000
    args = ["compose", "task=PushT", "--episodes", "1", "--steps", "1", "--out", str(tmp_path)]
    main([*args, "--weights", "0.5,0.5", "--video-seeds", str(seed)])
    lines = capsys.readouterr().out.splitlines()
    label = "convex_0.500_0.500"
    assert lines[-2:] == [
        f"episodes: {tmp_path / label}.jsonl",
        f"video: {tmp_path}/videos/{label}/seed_{seed}.mp4",
    ]
    assert [p.name for p in (tmp_path / "videos").iterdir()] == [label]
    assert (tmp_path / "videos" / label / f"seed_{seed}.mp4").stat().st_size > 1000


def test_eval_prints_the_video_file_actually_written(tmp_path, capsys) -> None:
    checkpoint, seed = "Stack_flow_mlp", "100000"
    videos = tmp_path / "videos" / "Stack_flow_mlp"
    args = ["eval", checkpoint, "--episodes", "1", "--video-seeds", seed]
    main([*args, "--out", f"{tmp_path}/a.jsonl"])
    with pytest.warns(UserWarning, match=r"seed_100000\.mp4 exists \(kept\)"):
        main([*args, "--out", f"{tmp_path}/b.jsonl"])  # another episodes file, same video folder
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.startswith("video: ")] == [
        f"video: {videos}/seed_{seed}.mp4",
        f"video: {videos}/seed_{seed}-2.mp4",
    ]
    assert sorted(p.name for p in videos.iterdir()) == [f"seed_{seed}-2.mp4", f"seed_{seed}.mp4"]


def test_compose_of_parents_from_different_tasks_names_each_task(tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "compose",
                "PushT_flow_mlp",
                "Stack_flow_mlp",
                "--episodes",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
    assert str(exit_info.value.code) == (
        "robocompose compose: error: the parents come from different tasks: PushT_flow_mlp "
        "(robocompose/PushT-v0), Stack_flow_mlp (robocompose/Stack-v0); composition needs "
        "parents of one task."
    )
    assert not any(tmp_path.iterdir())  # refused before any episode ran


def test_eval_without_out_writes_under_runs_not_into_the_checkpoint(tmp_path, monkeypatch, capsys):
    from robocompose.shipped import shipped_path

    checkpoint = shipped_path("Stack", "flow_mlp")
    before = sorted(p.name for p in checkpoint.iterdir())
    monkeypatch.chdir(tmp_path)
    main(["eval", str(checkpoint), "--episodes", "1"])
    assert capsys.readouterr().out.splitlines()[-1] == "episodes: runs/eval/Stack_flow_mlp.jsonl"
    assert (tmp_path / "runs" / "eval" / "Stack_flow_mlp.jsonl").is_file()
    assert sorted(p.name for p in checkpoint.iterdir()) == before
