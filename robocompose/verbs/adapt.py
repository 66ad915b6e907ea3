"""`robocompose adapt --out FILE.gguf`: a LoRA adapter for the goal rewrite, trained on the CPU
and written as a llama.cpp GGUF adapter (`robocompose.hierarchical.adapter.train`); a rerun resumes.
Needs the `adapt` extra (torch, transformers, gguf, peft, accelerate).

Light to import (the command line reads `AdaptConfig` for `--help`); `run` imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from robocompose.hierarchical.adapter.train import LoRAConfig


@dataclass(frozen=True, kw_only=True)
class AdaptConfig(LoRAConfig):
    """`robocompose adapt`: what is trained (`LoRAConfig`'s fields) and where the adapter goes."""

    out: str  # the .gguf adapter to write (beside it: <out>.log.jsonl, <out>.ckpt.pt)


def run(config: AdaptConfig) -> Path:
    """Train (or resume) the adapter and print where it went."""
    from robocompose.hierarchical.adapter.train import train

    lora = LoRAConfig(**{f.name: getattr(config, f.name) for f in fields(LoRAConfig)})
    out = train(lora, Path(config.out))  # the adapter records the LoRA fields only
    print(f"wrote {out}")
    return out
