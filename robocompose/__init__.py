"""robocompose: compose pretrained diffusion and flow robot policies at test time."""

import os

# MuJoCo picks its OpenGL backend when it is first imported: EGL renders offscreen with no
# display and no apt package here. Set before any submodule imports mujoco; a user's choice wins.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

__version__ = "0.1.0"
