# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: demo test lint setup clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch first, pinned to the CPU build on disk, so nothing later pulls a CUDA build.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[policies,dev]"
	# robomimic's dataset reader, for the compatibility test; its declared deps would pull
	# torchvision and a CUDA torch, and the reader needs only termcolor beyond ours.
	$(BIN)/pip install --quiet --no-deps robomimic==0.3.0 termcolor
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/robocompose demo

test: setup
	$(BIN)/ruff check robocompose tests benchmarks
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check robocompose tests benchmarks
