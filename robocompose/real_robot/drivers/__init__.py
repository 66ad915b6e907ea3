"""Arm drivers behind the `Arm` interface: the MuJoCo twin and thin drivers over vendor SDKs.

`make_arm(robot, *args, **kwargs)` builds one by name (the one place that does: the deploy loop
and the control process call it too); the vendor SDKs are the optional extra `arms`
(`pip install 'robocompose[arms]'`) and are imported only when their driver is built. Every
real-arm driver commands position only: the tool keeps the orientation it had at connect.

| robot | class | SDK (PyPI) | units on the wire | control process rate |
|---|---|---|---|---|
| twin | `drivers.twin.TwinArm` | - (MuJoCo) | m | 500 Hz |
| ur5e | `drivers.ur.URDriver` | ur-rtde | m, axis-angle rad | 500 Hz |
| xarm6 | `drivers.xarm.XArmDriver` | xarm-python-sdk | mm, deg | 250 Hz |
| franka | `drivers.franka.FrankaDriver` | franky-control | m, quaternion | 100 Hz |

The rates and what each arm does when its control process dies are
`control_config.DEFAULT_RATES_HZ` and `control_config.ARM_TIMEOUTS`.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from robocompose.real_robot.base import Arm

DRIVERS: dict[str, str] = {
    "twin": "robocompose.real_robot.drivers.twin:TwinArm",
    "ur5e": "robocompose.real_robot.drivers.ur:URDriver",
    "xarm6": "robocompose.real_robot.drivers.xarm:XArmDriver",
    "franka": "robocompose.real_robot.drivers.franka:FrankaDriver",
}


def make_arm(robot: str, *args: Any, **kwargs: Any) -> Arm:
    """Build the driver of `robot` (a key of `DRIVERS`) with its arguments: the twin's task, or a
    real arm's address, then the class's keyword arguments."""
    target = DRIVERS.get(robot.lower())
    if target is None:
        nearest = difflib.get_close_matches(robot.lower(), list(DRIVERS), 1)
        hint = f" Did you mean {nearest[0]!r}?" if nearest else ""
        raise ValueError(f"unknown robot {robot!r}. Choices: {', '.join(DRIVERS)}.{hint}")
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


def import_sdk(module: str, package: str) -> Any:
    """Import a vendor SDK module, or say which package (extra `arms`) provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"the {package!r} SDK is not installed (module {module!r}): "
            "pip install 'robocompose[arms]'"
        ) from e


def closed_fraction(gripper: float) -> float:
    """Gripper command (-1 open .. +1 closed) -> how closed, 0..1."""
    return (min(max(float(gripper), -1.0), 1.0) + 1.0) / 2.0


def gripper_command(closed: float) -> float:
    """How closed (0..1) -> gripper command (-1 open .. +1 closed)."""
    return 2.0 * min(max(float(closed), 0.0), 1.0) - 1.0
