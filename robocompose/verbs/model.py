"""`robocompose model [NAME]`: the path of a local planner model (default: the planners'
default), joined from its PyPI parts and sha256-checked on first use
(`robocompose.hierarchical.llm.models.resolve_model`).

Light to import: resolving the model reads no model into memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from robocompose.hierarchical.llm.models import DEFAULT_MODEL


@dataclass(kw_only=True)
class ModelConfig:
    """`robocompose model`: which model to prepare."""

    model: str = DEFAULT_MODEL  # "qwen2.5-coder-1.5b", "smollm2", or a path to a .gguf file


def run(config: ModelConfig) -> Path:
    """Prepare the model and print its path."""
    from robocompose.hierarchical.llm.models import resolve_model

    path = Path(resolve_model(config.model))
    print(path)
    return path
