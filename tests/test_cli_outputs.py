"""`compose` says where its episodes and videos went, and files videos under the candidate's
label, so another composition filmed into the same --out keeps its own."""

from __future__ import annotations

from robocompose.cli import main


def test_compose_prints_its_outputs_and_files_videos_by_label(tmp_path, capsys) -> None:
    seed = 100_000
    args = ["compose", "task=PushT", "--episodes", "1", "--steps", "1", "--out", str(tmp_path)]
    main([*args, "--weights", "0.5,0.5", "--video-seeds", str(seed)])
    lines = capsys.readouterr().out.splitlines()
    label = "convex_0.500_0.500"
    assert lines[-2:] == [
        f"episodes: {tmp_path / label}.jsonl",
        f"videos: {tmp_path}/videos/{label}/",
    ]
    assert [p.name for p in (tmp_path / "videos").iterdir()] == [label]
    assert (tmp_path / "videos" / label / f"seed_{seed}.mp4").stat().st_size > 1000
