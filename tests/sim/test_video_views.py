"""Videos can show what an image policy sees (its own observation frames, scaled up) beside a
camera of the scene, instead of the env's default view."""

from __future__ import annotations

import imageio.v2 as imageio
import numpy as np
import pytest

from robocompose.sim.rollout import run_episodes, side_by_side
from robocompose.sim.tasks import make_env, register_tasks

PICKPLACE = "robocompose/PickPlace-v0"
KWARGS = {"obs_keys": ("proprio", "image"), "image_size": 32}
TARGET = np.array([0.05, 0.0, 0.12, -1.0])  # an ee target: the gripper moves, the scene changes
SEED, STEPS = 3, 4


def hold_target(obs: dict) -> np.ndarray:
    return np.tile(TARGET, (len(obs["proprio"]), 1))


def scene_frames() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The observation images and top-camera frames of the episode, rendered directly."""
    env = make_env("PickPlace", **KWARGS)
    obs, _ = env.reset(seed=SEED)
    images, tops = [obs["image"]], [env.unwrapped.render_camera("top")]
    for _ in range(STEPS):
        obs, *_ = env.step(TARGET)
        images.append(obs["image"])
        tops.append(env.unwrapped.render_camera("top"))
    env.close()
    return images, tops


def film(video_dir, views: list[str]):
    """One short PickPlace episode of `hold_target`, filmed with `views`."""
    register_tasks()
    return run_episodes(
        PICKPLACE,
        hold_target,
        [SEED],
        env_kwargs=KWARGS,
        max_episode_steps=STEPS,
        video_seeds=[SEED],
        video_dir=video_dir,
        video_views=views,
        progress=False,
    )


def test_a_video_shows_the_policys_own_frames_beside_another_camera(tmp_path) -> None:
    result = film(tmp_path, ["image", "top"])
    filmed = [np.asarray(f) for f in imageio.get_reader(result.videos[0])]
    images, tops = scene_frames()
    assert len(filmed) == len(images) == STEPS + 1
    for frame, image, top in zip(filmed, images, tops, strict=True):
        assert frame.shape == (256, 512, 3)  # the 32 px image scaled 8x, beside the 256 px top
        left, right = frame[:, :256].astype(float), frame[:, 256:].astype(float)
        seen = np.kron(image, np.ones((8, 8, 1)))  # each observed pixel as an 8x8 block
        assert np.abs(left - seen).mean() < 4  # video compression blurs a little
        assert np.abs(right - top).mean() < 4
        assert np.abs(left - top).mean() > 20  # the two views differ: the check can fail
    assert np.abs(filmed[-1].astype(float) - filmed[0]).mean() > 1  # the gripper moved


def test_side_by_side_scales_each_frame_to_the_tallest_by_nearest_pixel() -> None:
    small = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    tall = np.full((4, 2, 3), 200, np.uint8)
    joined = side_by_side([small, tall])
    assert joined.shape == (4, 8, 3)
    assert (joined[:, :6] == small.repeat(2, 0).repeat(2, 1)).all()
    assert (joined[:, 6:] == 200).all()


def test_an_unknown_view_is_refused_naming_the_keys_and_cameras(tmp_path) -> None:
    with pytest.raises(
        ValueError,
        match=r"`video_views` \['side'\] name neither an image observation key \['image'\] nor "
        r"a camera \['angled', 'top'\] of PickPlaceEnv",
    ):
        film(tmp_path, ["image", "side"])
