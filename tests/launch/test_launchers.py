"""The launchers' parts that need no Ray cluster: a node's checkpoint cache (written once,
atomically, by content hash), the error naming the cells of lost tasks, the retry setting's
check, the one-line errors when Ray is missing or its cluster unreachable, and what a Ray run
refuses before it starts. The launcher itself runs against a real cluster in
tests/sweep/test_ray_cluster.py (a sweep) and test_ray_episodes.py (eval, search)."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from robocompose.cli import main
from robocompose.composition import load, search
from robocompose.launch.config import LauncherConfig
from robocompose.launch.episodes import Run, evaluate_runs
from robocompose.launch.launchers import (
    CHECKPOINT_FILES,
    LauncherUnavailable,
    Task,
    WorkersLost,
    connect,
    content_digest,
    materialise,
)
from robocompose.policies.checkpoint import load_policy
from robocompose.shipped import shipped_path

FILES = {"config.json": b"{}\n", "model.safetensors": b"\x00\x01weights"}
CHECKPOINT = "PickPlaceTwoCubes_flow_mlp"
ON_RAY = LauncherConfig(name="ray")


def test_a_checkpoint_materialised_from_its_bytes_loads_as_the_same_policy(tmp_path: Path) -> None:
    source = shipped_path("PickPlace", "flow_mlp")
    files = {name: (source / name).read_bytes() for name in CHECKPOINT_FILES}
    folder = materialise(content_digest(files), lambda: files, tmp_path / "cache")
    assert folder == tmp_path / "cache" / content_digest(files)
    assert sorted(p.name for p in folder.iterdir()) == sorted(CHECKPOINT_FILES)
    assert load_policy(folder).fingerprint() == load_policy(source).fingerprint()


def test_the_digest_covers_names_and_bytes() -> None:
    assert content_digest(FILES) == content_digest(dict(reversed(FILES.items())))
    assert content_digest(FILES) != content_digest({**FILES, "config.json": b"{ }\n"})
    assert content_digest({"a": b"bc"}) != content_digest({"ab": b"c"})


def test_a_cached_checkpoint_is_not_fetched_again(tmp_path: Path) -> None:
    digest = content_digest(FILES)
    first = materialise(digest, lambda: FILES, tmp_path)

    def fetch_again() -> dict[str, bytes]:
        raise AssertionError("fetched a checkpoint the cache holds")

    assert materialise(digest, fetch_again, tmp_path) == first
    assert {p.name: p.read_bytes() for p in first.iterdir()} == FILES


def test_a_failed_fetch_leaves_nothing_behind(tmp_path: Path) -> None:
    def lost() -> dict[str, bytes]:
        raise ConnectionError("object store unreachable")

    with pytest.raises(ConnectionError, match="unreachable"):
        materialise(content_digest(FILES), lost, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_of_two_tasks_writing_one_checkpoint_the_first_rename_wins(tmp_path: Path) -> None:
    """Another task finishes the folder while this one writes its copy: this one's is dropped."""
    digest = content_digest(FILES)

    def fetch_while_another_task_finishes() -> dict[str, bytes]:
        materialise(digest, lambda: FILES, tmp_path)
        return {name: b"this task's copy" for name in FILES}

    folder = materialise(digest, fetch_while_another_task_finishes, tmp_path)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == FILES
    assert [p.name for p in tmp_path.iterdir()] == [digest]  # no temporary folder left


def test_lost_tasks_are_named_by_cell_with_their_episodes() -> None:
    tasks = [
        Task(0, "composition=mixture seed=1", None, [1, 2, 3]),
        Task(0, "composition=mixture seed=1", None, [4]),
        Task(2, "composition=convex seed=0", None, [5, 6]),
    ]
    message = str(WorkersLost(tasks, 4, "The worker died unexpectedly"))
    assert "3 task(s) lost their Ray worker on each of 4 tries (The worker died" in message
    assert (
        "Not finished: composition=mixture seed=1 (4 episodes); composition=convex seed=0 (2"
        in message
    )
    assert "rerun the same command to run only these" in message


def test_retries_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="`max_retries` must be >= 0. Got -1"):
        LauncherConfig(name="ray", max_retries=-1)
    assert LauncherConfig(name="ray", max_retries=0).max_retries == 0


def test_without_ray_the_error_names_the_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as where it is missing
    with pytest.raises(LauncherUnavailable, match=r"install 'robocompose\[sweep\]' \(the `sweep`"):
        connect(ON_RAY)


def test_an_unreachable_cluster_is_named_in_seconds(tmp_path: Path) -> None:
    """Ray itself retries an address that takes no connection for minutes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there
    out = tmp_path / "episodes.jsonl"
    command = ["eval", CHECKPOINT, "--episodes", "1", "--out", str(out), "launcher=ray"]
    start = time.monotonic()
    with pytest.raises(
        SystemExit, match=f"cannot reach the Ray cluster at launcher.address={address}"
    ):
        main([*command, f"launcher.address={address}"])
    assert time.monotonic() - start < 30
    assert not out.exists()


def test_ray_refuses_files_the_nodes_would_write_and_policies_they_cannot_load(
    tmp_path: Path,
) -> None:
    """Before any Ray starts: videos and chunk logs would land on the nodes; a loaded policy
    has no folder a worker could load it from."""
    with pytest.raises(ValueError, match="chunk_log would be written on the nodes"):
        evaluate_runs([Run(CHECKPOINT, [0], chunk_log=tmp_path)], ON_RAY)
    with pytest.raises(ValueError, match="video_seeds, video_dir would be written on the nodes"):
        evaluate_runs([Run(CHECKPOINT, [0])], ON_RAY, video_seeds=[0], video_dir=tmp_path)
    with pytest.raises(TypeError, match="from checkpoint folders: pass a folder or a PolicyRecipe"):
        evaluate_runs([Run(load_policy(CHECKPOINT), [0])], ON_RAY)
    parents = [load(CHECKPOINT), load("PickPlaceTwoCubes_flow_mlp_b")]
    with pytest.raises(TypeError, match="pass folders .* not loaded policies"):
        search(parents, [0], out_dir=tmp_path, launcher=ON_RAY, progress=False)
    assert list(tmp_path.iterdir()) == []
