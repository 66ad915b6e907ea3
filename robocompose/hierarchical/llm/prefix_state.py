"""The KV state of a prompt's fixed part on disk, so a new process starts warm.

`robocompose plan` is one process per plan: without this, every plan evaluates the whole prompt
(instructions, skill listing, examples: ~1000 tokens, most of a plan's time on a CPU). A chat
prompt's fixed part is everything before the last message's text; its llama.cpp KV cache is saved
once to `<folder>/<key>.kvstate` (llama.cpp's own sequence-state file, which stores the tokens
with it), keyed by the model file, llama.cpp's version and the prefix tokens themselves, so a
changed prompt or model never reuses a stale state. A later process loads the file (tens of
milliseconds) and evaluates only the request.

    states = PrefixStates(folder, model_id)
    tokens, n_fixed = chat_tokens(llama, formatter, messages)
    evaluated = states.warm(llama, tokens, n_fixed)   # tokens evaluated to get the prefix in

Files are written to a temporary name and renamed, and a prefix is evaluated under its lock file
(concurrent processes may share a folder: each prefix is evaluated once, the others load it);
only the `max_files` most recently used are kept. An unreadable file is evaluated again.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import hashlib
import os
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from robocompose.hierarchical.base import Message

SUFFIX = ".kvstate"
MIN_PREFIX_TOKENS = 32  # shorter prefixes are cheaper to evaluate than to load
_SPLIT = "\u27e6fixed-part-ends\u27e7"  # stands in for the last message's text when rendering


def default_state_dir() -> Path:
    """`$ROBOCOMPOSE_LLM_STATE`, else `~/.cache/robocompose/llm-state`."""
    env = os.environ.get("ROBOCOMPOSE_LLM_STATE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "robocompose" / "llm-state"


def chat_formatter(llama: Any) -> Any | None:
    """The formatter `create_chat_completion` uses for a GGUF with a chat template (None for
    other chat formats: then no prefix state is kept)."""
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if llama.chat_format != "chat_template.default" or not template:
        return None
    eos, bos = llama.token_eos(), llama.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )


def _tokenize(llama: Any, response: Any) -> list[int]:
    return llama.tokenize(
        response.prompt.encode(), add_bos=not response.added_special, special=True
    )


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def chat_tokens(llama: Any, formatter: Any, messages: Sequence[Message]) -> tuple[list[int], int]:
    """The prompt's tokens as `create_chat_completion` builds them, and how many of them are the
    fixed part (everything before the last message's text)."""
    tokens = _tokenize(llama, formatter(messages=[dict(m) for m in messages]))
    marked = [dict(m) for m in messages]
    marked[-1]["content"] = _SPLIT
    rendered = formatter(messages=marked)
    prefix_text = rendered.prompt.split(_SPLIT)[0]
    prefix = _tokenize(llama, dataclasses.replace(rendered, prompt=prefix_text))
    # the last prefix token may merge with the request's first characters: stop before it
    return tokens, max(0, min(common_prefix(prefix, tokens), len(prefix) - 1))


def held_tokens(llama: Any) -> list[int]:
    """The tokens the context holds now."""
    return [int(t) for t in llama.input_ids[: llama.n_tokens]]


class PrefixStates:
    """A folder of prompt-prefix KV states for one model file (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike[str], model_id: str, max_files: int = 24) -> None:
        import llama_cpp

        if max_files < 1:
            raise ValueError(f"`max_files` must be >= 1. Got {max_files}.")
        self.folder = Path(folder).expanduser()
        self.model_id = f"{model_id}:llama_cpp={llama_cpp.__version__}"
        self.max_files = max_files
        self.loads = 0
        self.saves = 0

    def path(self, prefix: Sequence[int]) -> Path:
        digest = hashlib.sha256(self.model_id.encode())
        digest.update(",".join(map(str, prefix)).encode())
        return self.folder / f"{digest.hexdigest()}{SUFFIX}"

    def warm(self, llama: Any, tokens: Sequence[int], n_fixed: int) -> int:
        """Make the context hold `tokens[:n_fixed]`: kept from the last call, loaded from disk, or
        evaluated and saved. Returns how many tokens were evaluated to do it."""
        prefix = list(tokens[:n_fixed])
        if n_fixed < MIN_PREFIX_TOKENS or common_prefix(held_tokens(llama), prefix) == n_fixed:
            return 0
        path = self.path(prefix)
        if self._try_load(llama, path, prefix):
            return 0
        with self._exclusive(path):
            # another process may have evaluated the same prefix while this one waited
            if self._try_load(llama, path, prefix):
                return 0
            keep = min(common_prefix(held_tokens(llama), prefix), n_fixed - 1)
            llama.n_tokens = keep
            llama.eval(prefix[keep:])
            self._save(llama, path, prefix)
        return n_fixed - keep

    def _try_load(self, llama: Any, path: Path, prefix: list[int]) -> bool:
        if not (path.is_file() and self._load(llama, path, prefix)):
            return False
        self.loads += 1
        os.utime(path)
        return True

    @contextlib.contextmanager
    def _exclusive(self, path: Path) -> Iterator[None]:
        """Hold `path`'s lock file: processes sharing the folder (pytest-xdist workers, plans
        started together) then evaluate each prefix once and load it from disk after."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self, llama: Any, path: Path, prefix: list[int]) -> bool:
        import llama_cpp

        llama._ctx.kv_cache_clear()
        out = (llama_cpp.llama_token * len(prefix))()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            llama._ctx.ctx, str(path).encode(), 0, out, len(prefix), ctypes.byref(count)
        )
        if read == 0 or list(out[: count.value]) != prefix:
            llama._ctx.kv_cache_clear()
            llama.n_tokens = 0
            warnings.warn(f"unusable prompt state {path}: evaluating the prompt", stacklevel=3)
            return False
        llama.input_ids[: len(prefix)] = prefix
        llama.n_tokens = len(prefix)
        return True

    def _save(self, llama: Any, path: Path, prefix: list[int]) -> None:
        import llama_cpp

        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".kv.", suffix=".tmp")
        os.close(fd)
        try:
            array = (llama_cpp.llama_token * len(prefix))(*prefix)
            written = llama_cpp.llama_state_seq_save_file(
                llama._ctx.ctx, tmp.encode(), 0, array, len(prefix)
            )
            if written == 0:
                warnings.warn(f"could not save the prompt state to {path}", stacklevel=3)
                return
            os.replace(tmp, path)
            self.saves += 1
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._evict()

    def _evict(self) -> None:
        aged = []
        for file in self.folder.glob(f"*{SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):  # another process evicted it
                aged.append((file.stat().st_mtime, file))
        files = [file for _, file in sorted(aged)]
        for old in files[: max(0, len(files) - self.max_files)]:
            old.unlink(missing_ok=True)
            old.with_suffix(".lock").unlink(missing_ok=True)
