"""LLM backends for the planners: one interface (`base.LLMBackend`), two backends, a disk cache.

    from robocompose.hierarchical.llm import make_backend

    llm = make_backend()                          # local Qwen2.5-Coder-1.5B, cached on disk
    llm = make_backend("local", model="smollm2")  # the 98 MB model, for tests of structure
    llm = make_backend("openai", base_url="http://127.0.0.1:8080/v1")  # any compatible server
    reply = llm.chat([{"role": "user", "content": "..."}], max_tokens=128,
                     json_schema={"type": "array", "items": {"type": "string"}})
    reply.text, reply.prompt_tokens, reply.completion_tokens, reply.seconds, reply.cached
    llm.score("Robot: I will", [" pick up the red block", " dance"])  # summed log-probs

- "local" (`LocalLLM`): a GGUF model through llama-cpp-python; `model` is "qwen2.5-coder-1.5b"
  (default), "smollm2" or a path to a .gguf file (see `models`). `grammar` takes GBNF,
  `json_schema` a JSON schema; both constrain decoding, so the output always parses.
- "openai" (`OpenAIBackend`): an OpenAI-compatible endpoint; see its docstring for the
  environment variables.

Temperature is 0 unless a call asks otherwise. Completions and scores are cached on disk by a
hash of the backend, model and request (`cache.CachedLLM`); `cache=False` turns it off.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from robocompose.hierarchical.base import LLMBackend
from robocompose.hierarchical.llm.cache import CachedLLM, default_cache_dir
from robocompose.hierarchical.llm.local import LocalLLM
from robocompose.hierarchical.llm.models import DEFAULT_MODEL
from robocompose.hierarchical.llm.prefix_state import default_state_dir
from robocompose.hierarchical.llm.remote import SCHEMA_FORMATS, OpenAIBackend

BACKENDS = ("local", "openai")

__all__ = ["BACKENDS", "CachedLLM", "LLMConfig", "LocalLLM", "OpenAIBackend", "make_backend"]


@dataclass(kw_only=True)
class LLMConfig:
    """Which LLM a planner or the reward writer talks to (`llm.` keys of `plan` and `rewards`).
    Empty strings mean "the default" (see each field)."""

    backend: str = "local"  # local: a GGUF model via llama.cpp; openai: a compatible endpoint
    # local: a name from `models.MODEL_NAMES` or a .gguf path ("" -> qwen2.5-coder-1.5b);
    # openai: the served model's name ("" -> $ROBOCOMPOSE_LLM_MODEL, else the server's only one)
    model: str = ""
    base_url: str = ""  # openai: "" -> $ROBOCOMPOSE_LLM_BASE_URL, else $OPENAI_BASE_URL
    api_key: str = ""  # openai: "" -> $ROBOCOMPOSE_LLM_API_KEY, else $OPENAI_API_KEY
    schema_format: str = "auto"  # openai: how `json_schema` is sent (see OpenAIBackend)
    timeout_s: float = 120.0  # openai: per request
    n_ctx: int = 4096  # local: context length in tokens
    n_threads: int = 2  # local: CPU threads
    seed: int = 0
    cache: bool = True
    cache_dir: str = ""  # "" -> $ROBOCOMPOSE_LLM_CACHE, else ~/.cache/robocompose/llm
    # local: keep the KV state of each prompt's fixed part on disk, so a new process starts warm
    prefix_state: bool = True
    state_dir: str = ""  # "" -> $ROBOCOMPOSE_LLM_STATE, else ~/.cache/robocompose/llm-state
    lora: str = ""  # local: a llama.cpp LoRA adapter file on top of the model ("" -> none)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            near = difflib.get_close_matches(self.backend, BACKENDS, 1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise ValueError(
                f"`backend` must be one of {list(BACKENDS)}. Got {self.backend!r}.{hint}"
            )
        if self.schema_format not in SCHEMA_FORMATS:
            raise ValueError(
                f"`schema_format` must be one of {SCHEMA_FORMATS}. Got {self.schema_format!r}."
            )
        if self.timeout_s <= 0:
            raise ValueError(f"`timeout_s` must be > 0. Got {self.timeout_s}.")
        if not 256 <= self.n_ctx <= 32768:
            raise ValueError(f"`n_ctx` must be in [256, 32768]. Got {self.n_ctx}.")
        if not 1 <= self.n_threads <= (os.cpu_count() or 1) * 2:
            raise ValueError(
                f"`n_threads` must be in [1, {(os.cpu_count() or 1) * 2}]. Got {self.n_threads}."
            )
        if self.backend != "local" and self.lora:
            raise ValueError(f"`lora` applies to backend=local only. Got {self.backend!r}.")
        if self.backend == "local" and (self.base_url or self.api_key):
            raise ValueError(
                "`base_url` and `api_key` apply to backend=openai only. "
                f"Got backend=local with base_url={self.base_url!r}."
            )


def backend_from_config(config: LLMConfig) -> LLMBackend:
    """The backend `config` describes, behind the disk cache unless `config.cache` is off."""
    backend: LLMBackend
    if config.backend == "local":
        backend = LocalLLM(
            config.model or DEFAULT_MODEL,
            n_ctx=config.n_ctx,
            n_threads=config.n_threads,
            seed=config.seed,
            state_dir=(config.state_dir or default_state_dir()) if config.prefix_state else None,
            lora=config.lora or None,
        )
    else:
        backend = OpenAIBackend(
            config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            timeout_s=config.timeout_s,
            seed=config.seed,
            schema_format=config.schema_format,
        )
    if not config.cache:
        return backend
    return CachedLLM(backend, config.cache_dir or default_cache_dir())


def make_backend(backend: str = "local", **fields: object) -> LLMBackend:
    """`backend_from_config(LLMConfig(backend=backend, **fields))`; unknown fields fail by
    name."""
    names = set(LLMConfig.__dataclass_fields__)
    for name in fields:
        if name not in names:
            near = difflib.get_close_matches(name, names, 1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise TypeError(
                f"unknown LLM setting {name!r}. Choices: {', '.join(sorted(names))}.{hint}"
            )
    return backend_from_config(LLMConfig(backend=backend, **fields))  # type: ignore[arg-type]
