"""robocompose: compose pretrained diffusion and flow robot policies at test time.

Where things are (each package's own docstring maps its modules):

- the command line: `cli.py` parses; `verbs/` holds every verb: the table (`verbs/__init__.py`)
  and one light module per verb (`verbs/eval.py`, `verbs/compose.py`, ...: its `run(config)` and
  usually its `<Verb>Config`), above the packages doing the work. Configs: `config.py`
  (Hydra's `configs/<verb>.yaml` into the dataclass), `config_help.py` (`--help`'s field list),
  `rollout_config.py` (the parts the rollout verbs share: task, seeds, parents composed),
  `devices.py`.
- evaluation: `evaluation.py` (`evaluate`, the one way a policy is evaluated) over
  `sim/rollout.py` (`run_episodes`, the gym rollout harness); `records.py` (episode records,
  their JSONL files and pooling), `stats.py` (Wilson intervals, paired outcomes), `compare.py`,
  `interrupt.py` (Ctrl-C that leaves the work saved: `ResumableInterrupt`).
- `sim/` tasks, scripted experts, demo datasets; `policies/` policy families, training and
  checkpoints (`policies.checkpoint.load_policy`, re-exported as `composition.load`);
  `composition/` composing parents, samplers, weight search and the notebook API;
  `sweep/` grids of compositions; `hierarchical/` LLM planning; `real_robot/` serving and
  deployment; `viz/` Rerun recordings; `shipped.py` the checkpoints this repository ships.
"""

import os
import platform

# MuJoCo picks its OpenGL backend when it is first imported: EGL renders offscreen with no
# display and no apt package here. Set before any submodule imports mujoco; a user's choice wins.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

# The CPU kernels that decide a policy's last bits, pinned to the AVX2 paths every x86 machine
# this project runs on has: torch (ATen), MKL's BLAS (its conditional numerical reproducibility)
# and oneDNN otherwise each pick the widest instruction set present, so an AVX-512 Xeon and an
# EPYC computed different actions, closed-loop episodes drifted apart, and the demo's table
# differed between them. Read when torch first runs a kernel; a user's own setting wins.
CPU_KERNEL_PINS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
CPU_KERNEL_PINNED: list[str] = []  # the pins set here (`devices.unpin_cpu_kernels` undoes them)
if platform.machine().lower() in ("x86_64", "amd64"):
    for _name, _value in CPU_KERNEL_PINS.items():
        if _name not in os.environ:
            os.environ[_name] = _value
            CPU_KERNEL_PINNED.append(_name)

__version__ = "0.1.0"
