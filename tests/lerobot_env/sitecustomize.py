"""LeRobot's venv on the CPU torch: torchvision's Python code without its CUDA-built ops.

`make setup-all` installs this file as the .venv-lerobot interpreter's `sitecustomize`. PyPI's
torchvision wheels are CUDA builds: next to the CPU torch their C ops cannot load, which
torchvision allows, except that it registers a fake kernel for `torchvision::nms` whether its ops
loaded or not, and torch refuses that for an operator no one defined. Defining that operator's
schema (no kernel) before torchvision is first imported lets it import; LeRobot's dataset and
diffusion policy code never call nms. Torch is imported only when torchvision is, and nothing is
defined where torchvision's own ops load.
"""

from __future__ import annotations

import ctypes
import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import PathFinder
from pathlib import Path

NMS_SCHEMA = "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"


def _ops_load(package: Path) -> bool:
    import torch  # noqa: F401  (its libraries first: torchvision's ops link against them)

    try:
        ctypes.CDLL(str(next(package.glob("_C*.so"))))
    except (OSError, StopIteration):
        return False
    return True


class _DefineNmsFirst(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name)
        if spec is not None and not _ops_load(Path(spec.submodule_search_locations[0])):
            import torch

            torch.library.define("torchvision::nms", NMS_SCHEMA)
        return None


sys.meta_path.insert(0, _DefineNmsFirst())
