"""The LoRA adapter file: written from a real model's LoRA matrices in llama.cpp's adapter
layout (read back by gguf), it loads into llama.cpp against the base GGUF; an adapter whose B is
zero leaves the logits exactly as they were, a non-zero one changes them."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("peft", reason="peft is not installed: make setup-all")
pytest.importorskip("gguf", reason="gguf is not installed: make setup-all")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: make setup-all")

TEXT = b"put the red block on the blue block"


def _llama_logits(path, lora=None) -> tuple[np.ndarray, list[int]]:
    from llama_cpp import Llama

    llama = Llama(str(path), lora_path=None if lora is None else str(lora), n_ctx=128,
                  n_threads=1, logits_all=True, verbose=False)  # fmt: skip
    tokens = llama.tokenize(TEXT, add_bos=True)
    llama.eval(tokens)
    return np.array(llama.scores[len(tokens) - 1]), tokens


@pytest.fixture(scope="module")
def smollm2_lm(smollm2_path):
    """SmolLM2 through transformers, loaded once for the module (the GGUF load takes ~20 s);
    each test adapts its own copy."""
    from robocompose.hierarchical.adapter.train import load_model

    return load_model(str(smollm2_path))[1]


def test_the_adapter_loads_in_llama_cpp_and_only_a_trained_update_changes_it(
    smollm2_path, smollm2_lm, tmp_path
):
    import gguf
    import torch
    from peft import LoraConfig, get_peft_model

    from robocompose.hierarchical.adapter.train import LoRAConfig, write_gguf_adapter

    lm = get_peft_model(
        copy.deepcopy(smollm2_lm),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    config = LoRAConfig(model=str(smollm2_path), rank=4, alpha=8.0)
    zero = tmp_path / "zero.gguf"
    write_gguf_adapter(lm, config, zero)  # peft starts B at zero
    reader = gguf.GGUFReader(str(zero))
    shapes = {t.name: tuple(t.data.shape) for t in reader.tensors}
    assert shapes["blk.0.attn_q.weight.lora_a"] == (4, 576)  # (rank, in): ne [in, rank]
    assert bytes(reader.fields["general.type"].parts[-1]).decode() == "adapter"
    base, _ = _llama_logits(smollm2_path)
    assert np.array_equal(_llama_logits(smollm2_path, zero)[0], base)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    moved = tmp_path / "moved.gguf"
    write_gguf_adapter(lm, config, moved)
    assert np.abs(_llama_logits(smollm2_path, moved)[0] - base).max() > 1e-2


def test_a_missing_adapter_file_is_named(smollm2_path, tmp_path):
    from robocompose.hierarchical.llm import LocalLLM
    from robocompose.hierarchical.llm.models import ModelError

    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match="nope.gguf"):
        LocalLLM(str(smollm2_path), lora=missing)


def test_the_adapter_is_part_of_the_backend_identity(smollm2_path, smollm2_lm, tmp_path):
    """Completions cached for the plain model are never served for the adapted one."""
    from peft import LoraConfig, get_peft_model

    from robocompose.hierarchical.adapter.train import LoRAConfig, write_gguf_adapter
    from robocompose.hierarchical.llm import LocalLLM

    lm = get_peft_model(
        copy.deepcopy(smollm2_lm), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])
    )
    adapter = tmp_path / "a.gguf"
    write_gguf_adapter(lm, LoRAConfig(model=str(smollm2_path), rank=2, alpha=4.0), adapter)
    plain, adapted = LocalLLM(str(smollm2_path)), LocalLLM(str(smollm2_path), lora=adapter)
    assert adapted.lora == adapter.resolve()
    assert plain.identity != adapted.identity and "lora=" in adapted.identity
