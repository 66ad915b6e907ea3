"""Mixed precision for the torch training loop: autocast, and loss scaling for fp16."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager

import torch


class MixedPrecision:
    """Autocast and, for fp16, loss scaling: `amp` = off, bf16 (any device) or fp16 (CUDA).

    bf16 keeps float32's exponent range, so it needs no loss scaling; fp16 does (GradScaler).
    The weights, the optimizer and the EMA stay float32 whatever `amp` is.
    """

    def __init__(self, amp: str, device: torch.device) -> None:
        if amp == "fp16" and device.type != "cuda":
            raise ValueError(
                f"`amp`='fp16' needs a CUDA device (loss scaling); this run is on {device}. "
                "Use amp=bf16 or amp=off."
            )
        self.device_type = device.type
        self.dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        self.scaler = torch.amp.GradScaler(device.type) if amp == "fp16" else None

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.dtype is not None)

    def backward(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
        grad_clip: float | None,
    ) -> torch.Tensor:
        """Backward and clip; returns the total gradient norm before clipping. The caller
        looks at it before `step` applies the gradients."""
        max_norm = grad_clip if grad_clip is not None else math.inf
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(optimizer)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)  # skipped when the scaled gradients overflowed
        self.scaler.update()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        if self.scaler is None:
            return {}
        state = self.scaler.state_dict()
        return {
            "amp.scale": torch.tensor(state["scale"]),
            "amp.growth_tracker": torch.tensor(state["_growth_tracker"]),
        }

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        if self.scaler is None or "amp.scale" not in tensors:
            return
        state = self.scaler.state_dict()
        state["scale"] = float(tensors["amp.scale"])
        state["_growth_tracker"] = int(tensors["amp.growth_tracker"])
        self.scaler.load_state_dict(state)
