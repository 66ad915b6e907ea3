"""A LoRA adapter for the goal rewrite, trained on the CPU and written as a llama.cpp GGUF adapter.

The shipped model rewrites requests into goal constraints from ~25 few-shot examples (~2000
prompt tokens) and still gets argument order wrong. This adapts it instead: the GGUF model is
loaded by transformers (dequantised to fp32, ~6 GB RAM, offline), LoRA matrices are trained on
the attention projections with the short prompt (`goal.prompt.short_messages`, ~70 tokens), the
loss on the answer's tokens only. `data="corpus"`: the corpus of many wordings
(`adapter.corpus`), lifted to placeholders as the planner reads them; `data="dev"`: the dev
split's pairs under colour renamings and the prompt's examples (`adapter.pairs`), the recipe of
the first shipped adapter. The adapter is saved in llama.cpp's adapter format (general.type
"adapter", tensors `<base>.lora_a` / `.lora_b`), so the planner keeps llama.cpp, its grammar and
its speed: `LocalLLM(lora=path)`. On a GPU: `robocompose adapt ... device=cuda`.

    robocompose adapt --out goal-lora.gguf [--steps 900]     (robocompose.verbs.adapt)

Training writes `<out>.log.jsonl` (loss per step) and a checkpoint every `save_every` steps
(`<out>.ckpt.pt`); a rerun resumes from it. Needs the `adapt` extra (torch, transformers, gguf,
peft, accelerate).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from robocompose.hierarchical.llm.models import DEFAULT_MODEL, resolve_model

DATA = ("corpus", "dev")
# transformers module name -> the llama.cpp tensor name of a Qwen2 / Llama block
GGUF_NAMES = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}


@dataclass(frozen=True)
class LoRAConfig:
    """What is trained, on what and how long. `pairs`: the corpus's size (`data="corpus"`);
    `variants`: colour renamings per dev item (`data="dev"`). `device`: "cpu" or "cuda"."""

    model: str = DEFAULT_MODEL
    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    lr: float = 3e-4
    steps: int = 900  # the shipped adapter's
    batch: int = 4
    data: str = "corpus"
    pairs: int = 12_000
    # data="corpus" only: a file of the local model's paraphrases (`adapter.paraphrase`), added
    paraphrases: str | None = None
    variants: int = 8
    seed: int = 0
    device: str = "cpu"
    threads: int = 2
    save_every: int = 25
    bf16: bool = True  # base weights in bfloat16 (LoRA matrices stay fp32): ~3x faster steps

    def __post_init__(self) -> None:
        unknown = [t for t in self.targets if t not in GGUF_NAMES]
        if unknown:
            raise ValueError(f"`targets` has {unknown}; choose from {sorted(GGUF_NAMES)}.")
        if self.data not in DATA:
            raise ValueError(f"`data` must be one of {DATA}. Got {self.data!r}.")
        if self.paraphrases is not None and self.data != "corpus":
            raise ValueError("`paraphrases` are added to data='corpus' only.")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"`device` must be 'cpu' or 'cuda'. Got {self.device!r}.")
        for name in ("rank", "steps", "batch", "pairs", "variants", "threads", "save_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1. Got {getattr(self, name)}.")


def load_model(model: str) -> tuple[Any, Any]:
    """The tokenizer and fp32 causal LM of a local GGUF model, through transformers, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    lm = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return tokenizer, lm


def encode(tokenizer: Any, messages: Any, answer: str) -> tuple[list[int], list[int]]:
    """Token ids of the chat prompt plus the answer and end of turn, and labels that score the
    answer only (-100 on the prompt)."""
    prompt = tokenizer.apply_chat_template(
        list(messages), add_generation_prompt=True, tokenize=False
    )
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tail = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
    return ids + tail, [-100] * len(ids) + tail


def _batch(examples: list[tuple[list[int], list[int]]], pad: int) -> dict[str, Any]:
    import torch

    width = max(len(ids) for ids, _ in examples)
    ids = [i + [pad] * (width - len(i)) for i, _ in examples]
    labels = [lab + [-100] * (width - len(lab)) for _, lab in examples]
    mask = [[1] * len(i) + [0] * (width - len(i)) for i, _ in examples]
    return {
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": torch.tensor(mask),
    }


def training_data(config: LoRAConfig) -> list[tuple[Any, str]]:
    """(chat, answer) examples of `config.data`."""
    if config.data == "corpus":
        from robocompose.hierarchical.adapter.corpus import build_corpus

        pairs = build_corpus(config.pairs, config.seed)
        if config.paraphrases is not None:
            from robocompose.hierarchical.adapter.paraphrase import read_paraphrases

            pairs += read_paraphrases(config.paraphrases)
        return [pair.messages() for pair in pairs]
    from robocompose.hierarchical.adapter.pairs import example_pairs, training_pairs

    pairs = [*training_pairs(config.variants), *example_pairs(config.variants)]
    return [(p.messages, p.answer) for p in pairs]


def train(config: LoRAConfig, out: Path) -> Path:
    """Train (resuming from `<out>.ckpt.pt`), then write the GGUF adapter to `out`."""
    from robocompose.devices import unpin_cpu_kernels

    unpin_cpu_kernels()  # bfloat16 needs oneDNN's widest kernels
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    tokenizer, lm = load_model(config.model)
    if config.bf16:
        lm = lm.to(torch.bfloat16)
    lm = get_peft_model(
        lm,
        LoraConfig(r=config.rank, lora_alpha=config.alpha, target_modules=list(config.targets),
                   lora_dropout=0.0),
    )  # fmt: skip
    for p in lm.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    data = [encode(tokenizer, messages, answer) for messages, answer in training_data(config)]
    lm.to(config.device)
    params = [p for p in lm.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    checkpoint, log = out.with_suffix(".ckpt.pt"), out.with_suffix(".log.jsonl")
    step = 0
    if checkpoint.is_file():
        saved = torch.load(checkpoint, map_location=config.device)
        lm.load_state_dict(saved["lora"], strict=False)
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    rng = random.Random(config.seed)
    order = [
        rng.sample(range(len(data)), len(data))
        for _ in range(1 + config.steps * config.batch // len(data))
    ]
    flat = [i for epoch in order for i in epoch]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lm.train()
    while step < config.steps:
        start = time.perf_counter()
        chosen = flat[step * config.batch : (step + 1) * config.batch]
        warm = min(1.0, (step + 1) / 10)  # a short warm-up of the learning rate
        for group in optimizer.param_groups:
            group["lr"] = config.lr * warm * (1 - step / config.steps) ** 0.5
        batch = {k: v.to(config.device) for k, v in _batch([data[i] for i in chosen], pad).items()}
        loss = lm(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        row = {"step": step, "loss": round(loss.item(), 4)}
        row["seconds"] = round(time.perf_counter() - start, 2)
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if step % config.save_every == 0 or step == config.steps:
            lora = {k: v for k, v in lm.state_dict().items() if "lora_" in k}
            torch.save(
                {"lora": lora, "optimizer": optimizer.state_dict(), "step": step}, checkpoint
            )
    write_gguf_adapter(lm, config, out)
    return out


def write_gguf_adapter(lm: Any, config: LoRAConfig, out: Path) -> None:
    """The trained A and B matrices in llama.cpp's adapter layout: A (rank, in) as
    `<base>.lora_a`, B (out, rank) as `<base>.lora_b`, scale alpha / rank."""
    import gguf

    writer = gguf.GGUFWriter(str(out), arch=lm.config.model_type)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(config.alpha))
    writer.add_string("robocompose.lora_config", json.dumps(asdict(config)))
    for name, tensor in sorted(lm.state_dict().items()):
        if "lora_A" not in name and "lora_B" not in name:
            continue
        layer = int(name.split(".layers.")[1].split(".")[0])
        module = next(m for m in GGUF_NAMES if f".{m}." in name)
        kind = "lora_a" if "lora_A" in name else "lora_b"
        base = f"blk.{layer}.{GGUF_NAMES[module]}.weight.{kind}"
        array = tensor.detach().float().cpu().numpy()
        heads = _rope_heads(lm.config, module)
        if kind == "lora_b" and heads:
            array = _to_llama_cpp_rows(array, heads)
        writer.add_tensor(base, array.astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _rope_heads(config: Any, module: str) -> int:
    """Heads whose rows llama.cpp stores interleaved for rotary embedding: Llama's q and k
    (Qwen2 keeps transformers' order: 0)."""
    if config.model_type != "llama" or module not in ("q_proj", "k_proj"):
        return 0
    if module == "q_proj":
        return config.num_attention_heads
    return config.num_key_value_heads or config.num_attention_heads


def _to_llama_cpp_rows(rows: Any, heads: int) -> Any:
    """Output rows of a q / k update in llama.cpp's order: each head's two rotary halves
    interleaved pairwise, as its GGUF conversion stores a Llama's q and k weights."""
    out = rows.shape[0]
    return rows.reshape(heads, 2, out // heads // 2, -1).swapaxes(1, 2).reshape(rows.shape)
