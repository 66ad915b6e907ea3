"""robosuite's Lift and PickPlaceCan as gymnasium envs, set up as robomimic's datasets are.

A Panda with robosuite's default OSC pose controller (7-D delta action in [-1, 1]: xyz, axis-angle
rotation, gripper; -1 opens) at 20 Hz. Observations carry robomimic's low-dim keys: `object`
(robosuite's "object-state"), `robot0_eef_pos`, `robot0_eef_quat`, `robot0_gripper_qpos`, and on
request `agentview_image` (uint8, upright). `info["success"]` is robosuite's `_check_success()`
and an episode terminates on it; the episode limit comes from gymnasium's TimeLimit.

Seeding: robosuite draws object placements and robot init noise from the generator `env.rng`,
shared by reference with its placement samplers. `reset(seed=s)` rewinds that generator in place
to `default_rng(s)`, so a seeded reset gives the same scene whatever ran before. `robosuite.make`
builds and compiles the whole model, far slower than a reset, so one env is built per instance
and reused across resets (no hard reset).

Importing this module registers `robocompose/RobosuiteLift-v0` and
`robocompose/RobosuitePickPlaceCan-v0`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robocompose.notices import printed_as_warning
from robocompose.sim.base import check_env_options, checked_action

TASKS = ("Lift", "PickPlaceCan")
LOW_DIM_KEYS = ("object", "robot0_eef_pos", "robot0_eef_quat", "robot0_gripper_qpos")
IMAGE_KEY = "agentview_image"
OBS_KEYS = (*LOW_DIM_KEYS, IMAGE_KEY)
CAMERA = "agentview"
CONTROL_FREQ = 20
ENV_IDS = {task: f"robocompose/Robosuite{task}-v0" for task in TASKS}
MAX_EPISODE_STEPS = {"Lift": 300, "PickPlaceCan": 400}
_ROBOSUITE_KEY = {"object": "object-state"}  # robomimic's name -> robosuite's


class RobosuiteEnv(gym.Env):
    """One robosuite manipulation task with a Panda, as a gymnasium env (see the module doc).

    Args:
        task: "Lift" or "PickPlaceCan".
        obs_keys: a non-empty subset of `OBS_KEYS`.
        image_size: side of `agentview_image`, when asked for.
        render_mode: None or "rgb_array" (an offscreen `agentview` frame of `render_size`).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": CONTROL_FREQ}

    def __init__(
        self,
        task: str = "Lift",
        *,
        obs_keys: tuple[str, ...] | list[str] = LOW_DIM_KEYS,
        image_size: int = 84,
        render_mode: str | None = None,
        render_size: int = 256,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"`task` must be one of {TASKS}. Got {task!r}.")
        obs_keys = tuple(obs_keys)
        check_env_options(obs_keys, OBS_KEYS, render_mode)
        if image_size < 1 or render_size < 1:
            raise ValueError(
                f"`image_size` and `render_size` must be >= 1. Got {image_size}, {render_size}."
            )
        self.task = task
        self.obs_keys = obs_keys
        self.image_size = int(image_size)
        self.render_mode = render_mode
        self.render_size = int(render_size)
        self._env = _make_robosuite(
            task,
            camera_obs=IMAGE_KEY in obs_keys,
            offscreen=IMAGE_KEY in obs_keys or render_mode == "rgb_array",
            image_size=self.image_size,
        )
        low, high = self._env.action_spec
        self.action_space = gym.spaces.Box(
            low.astype(np.float32), high.astype(np.float32), dtype=np.float32
        )
        self._env.reset()
        first = self._obs(self._fresh_obs())
        spaces: dict[str, gym.Space] = {
            key: gym.spaces.Box(-np.inf, np.inf, value.shape, np.float32)
            for key, value in first.items()
            if key != IMAGE_KEY
        }
        if IMAGE_KEY in first:
            spaces[IMAGE_KEY] = gym.spaces.Box(0, 255, first[IMAGE_KEY].shape, np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)

    @property
    def sim_env(self) -> Any:
        """The robosuite environment (privileged state for scripted experts)."""
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._env.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        self._env.reset()
        obs = self._obs(self._fresh_obs())
        return obs, {"success": bool(self._env._check_success()), "score": 0.0}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = checked_action(action, self.action_space)
        raw, _, _, _ = self._env.step(np.clip(action, -1.0, 1.0))
        success = bool(self._env._check_success())
        score = float(success)
        return self._obs(raw), score, success, False, {"success": success, "score": score}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        size = self.render_size
        return self._env.sim.render(width=size, height=size, camera_name=CAMERA)[::-1].copy()

    def close(self) -> None:
        self._env.close()

    def _fresh_obs(self) -> dict[str, np.ndarray]:
        """Observations read anew. Right after a reset robosuite's relative object sensors
        (e.g. Can_to_robot0_eef_pos) read a cache that their own reset just filled: zeros."""
        return self._env._get_observations(force_update=True)

    def _obs(self, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        obs = {}
        for key in self.obs_keys:
            value = np.asarray(raw[_ROBOSUITE_KEY.get(key, key)])
            if key == IMAGE_KEY:  # robosuite renders bottom-up (OpenGL)
                obs[key] = np.ascontiguousarray(value[::-1]).astype(np.uint8)
            else:
                obs[key] = value.astype(np.float32)
        return obs


def _make_robosuite(task: str, *, camera_obs: bool, offscreen: bool, image_size: int) -> Any:
    """`robosuite.make` with robomimic's settings: Panda, default OSC pose, 20 Hz, no done.
    What robosuite prints meanwhile (macros, optional robots, controller files) is an
    ImportNotice."""
    with printed_as_warning("robosuite"):
        return _robosuite_env(
            task, camera_obs=camera_obs, offscreen=offscreen, image_size=image_size
        )


def _robosuite_env(task: str, *, camera_obs: bool, offscreen: bool, image_size: int) -> Any:
    import robosuite
    from robosuite.controllers import load_composite_controller_config

    controller = load_composite_controller_config(controller="BASIC", robot="Panda")
    # the BASIC config also names parts a Panda lacks (left arm, torso...): keep the arm only
    controller["body_parts"] = {"right": controller["body_parts"]["right"]}
    return robosuite.make(
        task,
        robots="Panda",
        controller_configs=controller,
        has_renderer=False,
        has_offscreen_renderer=offscreen,
        use_camera_obs=camera_obs,
        use_object_obs=True,
        camera_names=CAMERA,
        camera_heights=image_size,
        camera_widths=image_size,
        reward_shaping=False,
        control_freq=CONTROL_FREQ,
        horizon=10**9,  # gymnasium's TimeLimit ends episodes
        ignore_done=True,
        hard_reset=False,
    )


def register() -> None:
    """Register both ids with gymnasium (idempotent)."""
    for task, env_id in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point=f"{__name__}:RobosuiteEnv",
                max_episode_steps=MAX_EPISODE_STEPS[task],
                kwargs={"task": task},
            )


register()
