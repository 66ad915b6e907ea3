"""Shared machinery of the MuJoCo tasks: model, control loop, dict observations, rendering.

A task subclasses `MujocoTaskEnv` and fills in four hooks: how an action sets the controls, the
low-dim state vector, success/score, and the randomised initial state. Everything else (seeding,
substeps, the optional image key, offscreen rendering) lives here once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np

OBS_KEYS = ("state", "proprio", "image")


class MujocoTaskEnv(gym.Env):
    """A fixed-rate MuJoCo task with `{"state": (n,), "proprio": (m,), "image": (H, W, 3) uint8}`
    observations. `state` is privileged (object poses included); `proprio` is what the robot
    senses of itself, so a policy seeing `proprio` and `image` learns the scene from pixels.

    Args:
        xml: the MJCF of the whole scene.
        obs_keys: which observation keys to emit; "image" renders the `camera` offscreen;
            "proprio" needs a task that implements `_proprio_obs`.
        image_size: side of the square image observation, in pixels.
        control_hz: policy rate; each step runs `1 / (control_hz * timestep)` physics substeps.
        camera: MJCF camera used for the image key and for `render()`.
        render_mode: None or "rgb_array" (gymnasium convention).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        xml: str,
        *,
        obs_keys: tuple[str, ...] = ("state",),
        image_size: int = 96,
        control_hz: float = 10.0,
        camera: str = "top",
        render_mode: str | None = None,
        render_size: int = 256,
    ) -> None:
        check_env_options(obs_keys, OBS_KEYS, render_mode)
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        self.obs_keys = tuple(obs_keys)
        self.image_size = int(image_size)
        self.camera = camera
        self.render_mode = render_mode
        self.render_size = int(render_size)
        self.control_hz = float(control_hz)
        self.n_substeps = max(1, round(1.0 / (control_hz * self.model.opt.timestep)))
        self.metadata = {**self.metadata, "render_fps": int(round(control_hz))}
        self._renderers: dict[int, mujoco.Renderer] = {}
        self._bind()

        spaces: dict[str, gym.Space] = {}
        if "state" in self.obs_keys:
            n = self._state_obs().shape[0]
            spaces["state"] = gym.spaces.Box(-np.inf, np.inf, (n,), np.float64)
        if "proprio" in self.obs_keys:
            try:
                n = self._proprio_obs().shape[0]
            except NotImplementedError:
                raise ValueError(
                    f"{type(self).__name__} has no `proprio` observation; `obs_keys` may use "
                    f"{[k for k in OBS_KEYS if k != 'proprio']}. Got {self.obs_keys}."
                ) from None
            spaces["proprio"] = gym.spaces.Box(-np.inf, np.inf, (n,), np.float64)
        if "image" in self.obs_keys:
            shape = (self.image_size, self.image_size, 3)
            spaces["image"] = gym.spaces.Box(0, 255, shape, np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)

    # -- hooks for tasks -------------------------------------------------------------------
    def _bind(self) -> None:
        """Look up joint/body/actuator ids by name, once, before anything reads the state."""

    def _apply_action(self, action: np.ndarray) -> None:
        raise NotImplementedError

    def _state_obs(self) -> np.ndarray:
        raise NotImplementedError

    def _proprio_obs(self) -> np.ndarray:
        """The robot's own sensed state (joint positions, gripper), nothing about objects."""
        raise NotImplementedError

    def _evaluate(self) -> tuple[bool, float]:
        """(success, score in [0, 1]) of the current state."""
        raise NotImplementedError

    def _randomize(self, rng: np.random.Generator) -> None:
        """Write a random initial qpos (and ctrl) into `self.data`."""
        raise NotImplementedError

    # -- gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self._randomize(self.np_random)
        mujoco.mj_forward(self.model, self.data)
        success, score = self._evaluate()
        return self._obs(), {"success": success, "score": score}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = checked_action(action, self.action_space)
        self._apply_action(np.clip(action, self.action_space.low, self.action_space.high))
        mujoco.mj_step(self.model, self.data, nstep=self.n_substeps)
        success, score = self._evaluate()
        reward = float(score)
        return self._obs(), reward, success, False, {"success": success, "score": score}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self._render(self.render_size)

    @property
    def camera_names(self) -> tuple[str, ...]:
        """The scene's MJCF cameras, any of which `render_camera` can film."""
        return tuple(self.model.camera(i).name for i in range(self.model.ncam))

    def render_camera(self, camera: str, size: int | None = None) -> np.ndarray:
        """An rgb frame (size, size, 3) of the scene from `camera` (default size: the render
        size), whatever camera the image observation uses: a video can show another view."""
        if camera not in self.camera_names:
            raise ValueError(f"`camera` must be one of {self.camera_names}. Got {camera!r}.")
        return self._render(size or self.render_size, camera)

    def close(self) -> None:
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    # -- internals -------------------------------------------------------------------------
    def _obs(self) -> dict[str, np.ndarray]:
        obs: dict[str, np.ndarray] = {}
        if "state" in self.obs_keys:
            obs["state"] = self._state_obs()
        if "proprio" in self.obs_keys:
            obs["proprio"] = self._proprio_obs()
        if "image" in self.obs_keys:
            obs["image"] = self._render(self.image_size)
        return obs

    def _render(self, size: int, camera: str | None = None) -> np.ndarray:
        renderer = self._renderers.get(size)
        if renderer is None:
            renderer = self._renderers[size] = mujoco.Renderer(self.model, size, size)
        renderer.update_scene(self.data, camera=camera or self.camera)
        return renderer.render().copy()

    def body_pose_xy(self, body_id: int) -> tuple[np.ndarray, float]:
        """Planar pose (x, y), yaw of a body, from its world rotation matrix."""
        xmat = self.data.xmat[body_id].reshape(3, 3)
        return self.data.xpos[body_id, :2].copy(), float(np.arctan2(xmat[1, 0], xmat[0, 0]))


def check_env_options(
    obs_keys: tuple[str, ...], known: tuple[str, ...], render_mode: str | None
) -> None:
    """Refuse obs keys outside `known` (or none) and a render mode other than rgb_array."""
    unknown = [k for k in obs_keys if k not in known]
    if unknown or not obs_keys:
        raise ValueError(f"`obs_keys` must be a non-empty subset of {known}. Got {obs_keys}.")
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"`render_mode` must be None or 'rgb_array'. Got {render_mode!r}.")


def checked_action(action: Any, space: gym.spaces.Box) -> np.ndarray:
    """`action` as float64 of the space's shape, finite; a wrong one is refused by name."""
    action = np.asarray(action, dtype=np.float64)
    if action.shape != space.shape:
        raise ValueError(f"action must have shape {space.shape}. Got {action.shape}.")
    if not np.all(np.isfinite(action)):
        raise ValueError(f"action must be finite. Got {action}.")
    return action
