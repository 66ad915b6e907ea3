"""Any OpenAI-compatible HTTP endpoint through the `openai` client: hosted APIs, vLLM, Ollama,
llama.cpp's servers (`python -m llama_cpp.server`, `llama-server`)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from robocompose.hierarchical.base import Completion, LLMBackend, Message
from robocompose.hierarchical.llm.checks import check_chat_args, check_score_args

SCHEMA_FORMATS = ("auto", "json_schema", "json_object")
NO_KEY = "not-needed"  # what a self-hosted server gets when no key is configured


def _openai():
    try:
        import openai
    except ImportError as error:
        raise ImportError(
            f"the OpenAI-compatible backend needs the `openai` package: run `make setup-all`. "
            f"({error})"
        ) from None
    return openai


def _env(*names: str) -> str:
    return next((os.environ[n] for n in names if os.environ.get(n)), "")


class OpenAIBackend(LLMBackend):
    """A chat model behind an OpenAI-compatible endpoint.

    `base_url`, `api_key` and `model` come from the arguments, else `ROBOCOMPOSE_LLM_BASE_URL`,
    `ROBOCOMPOSE_LLM_API_KEY`, `ROBOCOMPOSE_LLM_MODEL`, else `OPENAI_BASE_URL`, `OPENAI_API_KEY`.
    With a `base_url` and no key, the key sent is a placeholder (self-hosted servers ignore it).
    With no model, the server's only model is used (`/v1/models`).

    `json_schema` is sent the OpenAI way (`response_format` of type "json_schema"); `schema_format`
    "json_object" sends llama-cpp-python's form (type "json_object" with a "schema"), and "auto"
    switches to it once when the server rejects the first. `grammar` (GBNF) goes in the request
    body, for servers that read it (llama.cpp's). `score` needs the completions endpoint with
    `echo` and `logprobs`. Caveat, llama-cpp-python's server (0.3.36): its echoed log-probs are
    right only for models whose tokenizer adds a BOS token; SmolLM2 and Qwen2.5 add none, so
    serve them with `--kv_overrides tokenizer.ggml.add_bos_token=bool:true` to score (or score
    with the local backend)."""

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str = "",
        api_key: str = "",
        timeout_s: float = 120.0,
        max_retries: int = 2,
        seed: int | None = 0,
        schema_format: str = "auto",
    ) -> None:
        if schema_format not in SCHEMA_FORMATS:
            raise ValueError(
                f"`schema_format` must be one of {SCHEMA_FORMATS}. Got {schema_format!r}."
            )
        if timeout_s <= 0:
            raise ValueError(f"`timeout_s` must be > 0. Got {timeout_s}.")
        openai = _openai()
        self.base_url = base_url or _env("ROBOCOMPOSE_LLM_BASE_URL", "OPENAI_BASE_URL")
        key = api_key or _env("ROBOCOMPOSE_LLM_API_KEY", "OPENAI_API_KEY")
        if not key and not self.base_url:
            raise ValueError(
                "no endpoint and no API key: set `base_url` (ROBOCOMPOSE_LLM_BASE_URL) for a "
                "self-hosted server, or `api_key` (ROBOCOMPOSE_LLM_API_KEY / OPENAI_API_KEY) for "
                "a hosted API."
            )
        self.client = openai.OpenAI(
            base_url=self.base_url or None,
            api_key=key or NO_KEY,
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self.seed = seed
        self.schema_format = schema_format
        self.model = model or _env("ROBOCOMPOSE_LLM_MODEL") or self._only_model()
        self.identity = f"openai:{self.base_url or 'api.openai.com'}:{self.model}:seed={seed}"

    def _only_model(self) -> str:
        openai = _openai()
        try:
            names = [m.id for m in self.client.models.list()]
        except openai.APIError as error:
            raise ConnectionError(
                f"cannot list the models of {self.base_url or 'the OpenAI API'} ({error}); "
                "is the server up? Or name the model: `model=...`."
            ) from None
        if len(names) != 1:
            raise ValueError(f"the server offers {names}: choose one with `model=...`.")
        return names[0]

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        grammar: str | None = None,
        json_schema: dict[str, Any] | None = None,
        stop: Sequence[str] = (),
    ) -> Completion:
        check_chat_args(messages, max_tokens, temperature, grammar, json_schema, stop)
        openai = _openai()
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stop": list(stop) or None,
        }
        if self.seed is not None:
            request["seed"] = self.seed
        if grammar is not None:
            request["extra_body"] = {"grammar": grammar}
        start = time.perf_counter()
        if json_schema is None:
            response = self._create(request)
        elif self.schema_format == "auto":
            try:  # no retries: a server that rejects the form rejects it every time
                response = self._create(
                    request, _response_format(json_schema, "json_schema"), max_retries=0
                )
            except openai.APIStatusError as error:
                if not _rejects_response_format(error):
                    raise
                self.schema_format = "json_object"
                start = time.perf_counter()
                response = self._create(request, _response_format(json_schema, "json_object"))
            else:
                self.schema_format = "json_schema"
        else:
            response = self._create(request, _response_format(json_schema, self.schema_format))
        seconds = time.perf_counter() - start
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            seconds=seconds,
            model=self.model,
            finish_reason=choice.finish_reason or "",
        )

    def _create(
        self,
        request: dict[str, Any],
        response_format: dict | None = None,
        max_retries: int | None = None,
    ) -> Any:
        openai = _openai()
        if response_format is not None:
            request = {**request, "response_format": response_format}
        client = (
            self.client
            if max_retries is None
            else self.client.with_options(max_retries=max_retries)
        )
        try:
            return client.chat.completions.create(**request)
        except openai.APIConnectionError as error:
            raise ConnectionError(
                f"cannot reach {self.base_url or 'the OpenAI API'}: {error}"
            ) from error

    def score(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """Sum of the log-probabilities of the tokens that cover each continuation, read from the
        completions endpoint's echoed prompt (`echo=True`, `logprobs`). A token that straddles
        the prompt's end counts with the continuation."""
        check_score_args(prompt, continuations)
        openai = _openai()
        scores = []
        for text in continuations:
            try:
                response = self.client.completions.create(
                    model=self.model,
                    prompt=prompt + text,
                    max_tokens=1,
                    temperature=0.0,
                    echo=True,
                    logprobs=1,
                )
            except (openai.BadRequestError, openai.NotFoundError) as error:
                raise NotImplementedError(
                    f"{self.base_url or 'the OpenAI API'} cannot score continuations: its "
                    f"completions endpoint refused echo + logprobs ({error})."
                ) from None
            logprobs = response.choices[0].logprobs
            if logprobs is None or not logprobs.text_offset:
                raise NotImplementedError(
                    f"{self.base_url or 'the OpenAI API'} cannot score continuations: its "
                    "completions endpoint returned no log-probabilities."
                )
            scores.append(_continuation_logprob(logprobs, len(prompt), len(prompt + text)))
        return scores


def _rejects_response_format(error: Any) -> bool:
    """Whether a server refused the request over its `response_format`: a 400 or 422, or
    llama-cpp-python's server, which answers a request it cannot validate with a 500 naming the
    field."""
    if error.status_code in (400, 422):
        return True
    return error.status_code == 500 and "response_format" in str(error)


def _response_format(json_schema: dict[str, Any], form: str) -> dict[str, Any]:
    if form == "json_object":
        return {"type": "json_object", "schema": json_schema}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": json_schema}}


def _continuation_logprob(logprobs: Any, start: int, end: int) -> float:
    """Sum over the echoed tokens ending after `start` and starting before `end` (characters)."""
    offsets = list(logprobs.text_offset)
    total = 0.0
    for i, (offset, value) in enumerate(zip(offsets, logprobs.token_logprobs, strict=True)):
        token_end = offsets[i + 1] if i + 1 < len(offsets) else end
        if token_end > start and offset < end:
            if value is None:
                raise NotImplementedError("the server gave no log-probability for a scored token.")
            total += value
    return total
