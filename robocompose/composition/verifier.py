"""A learned chunk verifier: (observation, action chunk) -> the probability that the episode
succeeds, from an ensemble of small MLPs whose spread says how sure it is.

The selector's training-free scores rank successful chunks no better than chance; a verifier
trained on the policies' own evaluation rollouts does (V-GPS re-ranks sampled actions by a
learned Q-function, UF-OPS trains a verifier on a policy's evaluation episodes). Its training
data are chunk logs (`robocompose.chunk_log`), its training `verifier_training`, and the
selector's score "verifier" ranks the candidates by it.

One file (safetensors): the ensemble's weights and the input normalisation as tensors, and a
JSON header holding the model's size, what it judges (`Target`: task, observation keys and
sizes, chunk shape, the parents whose episodes it saw), the training settings and the held-out
report. A composition it does not fit is refused, naming both sides.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from robocompose.policies.base import is_image_shape
from robocompose.policies.checkpoint import write_atomic

if TYPE_CHECKING:
    from robocompose.policies.base import GenerativePolicy

HEADER = "robocompose_verifier"  # the safetensors metadata key holding the JSON header
FORMAT = 1
MIN_STD = 1e-6  # a constant input dimension is centred, not divided by ~0


@dataclass(frozen=True)
class Target:
    """What a verifier judges: chunks of `chunk` = (executed steps, action dim) actions on
    `task`, from the current frame of the low-dim observation keys `obs_sizes` (key -> flat
    size, concatenated in this order), in episodes of `parents` ((name, fingerprint) each)."""

    task: str | None
    obs_sizes: dict[str, int]
    chunk: tuple[int, int]
    parents: tuple[tuple[str, str], ...]

    @property
    def inputs(self) -> int:
        return sum(self.obs_sizes.values()) + self.chunk[0] * self.chunk[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "obs_sizes": self.obs_sizes,
            "chunk": list(self.chunk),
            "parents": [{"name": n, "fingerprint": f} for n, f in self.parents],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Target:
        chunk = tuple(int(v) for v in d["chunk"])
        parents = tuple((p["name"], p["fingerprint"]) for p in d["parents"])
        return cls(d["task"], dict(d["obs_sizes"]), (chunk[0], chunk[1]), parents)


def target_of(parents: Sequence[GenerativePolicy], names: Sequence[str], executed: int) -> Target:
    """What a composition of `parents` (named `names`) executing `executed` steps per chunk
    asks of a verifier: every parent's low-dim keys, in the composition's key order."""
    sizes: dict[str, int] = {}
    for parent in parents:
        for key in parent.config.obs_keys:
            shape = tuple(parent.config.obs_shapes[key])
            if not is_image_shape(shape):
                sizes.setdefault(key, math.prod(shape))
    task = getattr(parents[0], "metadata", {}).get("task")
    fingerprints = tuple(zip(names, (p.fingerprint() for p in parents), strict=True))
    return Target(task, sizes, (executed, parents[0].config.action_dim), fingerprints)


class Ensemble(nn.Module):
    """`members` MLPs run as one batched network: layer weights (M, in, out), so M members on
    N inputs are a few batched matmuls. Inputs (N, in), shared by every member, or (M, N, in);
    out (M, N) logits."""

    def __init__(
        self,
        members: int,
        inputs: int,
        hidden: int,
        layers: int,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        sizes = [inputs, *[hidden] * layers, 1]
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            bound = 1 / math.sqrt(fan_in)  # nn.Linear's initialisation, per member
            for shape, params in (((fan_in, fan_out), self.weights), ((1, fan_out), self.biases)):
                init = (torch.rand(members, *shape, generator=generator) * 2 - 1) * bound
                params.append(nn.Parameter(init))
        self.members = members

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.expand(self.members, *x.shape) if x.dim() == 2 else x
        last = len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(bias, h, weight)
            if i < last:
                h = torch.relu(h)
        return h.squeeze(-1)


class Verifier(nn.Module):
    """An ensemble's estimate of success for (observation, chunk) pairs, in env units: it
    standardises its inputs with the training data's mean and std (`mean`, `std`)."""

    def __init__(
        self,
        target: Target,
        members: int = 5,
        hidden: int = 128,
        layers: int = 2,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self.model = {"members": members, "hidden": hidden, "layers": layers}
        self.net = Ensemble(members, target.inputs, hidden, layers, generator)
        self.register_buffer("mean", torch.zeros(target.inputs))
        self.register_buffer("std", torch.ones(target.inputs))
        self.header: dict[str, Any] = {}  # what the file says beyond the model (training, report)
        self.path: Path | None = None
        self.digest: str | None = None  # the file's hash once saved or loaded

    def inputs(self, obs: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        """Observations (N, D) and chunks (N, n, A) -> standardised inputs (N, D + n * A)."""
        return self.standardise(torch.cat([obs.flatten(1), chunks.flatten(1)], dim=1))

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        """Raw inputs (N, D + n * A), observation then chunk -> the network's."""
        return (x.to(self.mean) - self.mean) / self.std

    def fit_normalisation(self, x: torch.Tensor) -> None:
        """Set `mean` and `std` from the raw training inputs x (N, inputs)."""
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0, correction=0).clamp_min(MIN_STD))

    def probabilities(self, obs: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        """Each member's probability of success (M, N)."""
        return torch.sigmoid(self.net(self.inputs(obs, chunks)))

    def score(
        self, obs: torch.Tensor, chunks: torch.Tensor, std_weight: float = 0.0
    ) -> torch.Tensor:
        """The members' mean probability minus `std_weight` times their spread (N,): with
        std_weight > 0 a lower confidence bound, which distrusts chunks the members disagree on."""
        p = self.probabilities(obs, chunks)
        return p.mean(0) - std_weight * p.std(0, correction=0)

    def observation(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """A policy's observation history {key: (B, T, ...)} -> its current frame's low-dim
        keys, flat and concatenated (B, D), as the chunk log holds them."""
        frames = [obs[key][:, -1].flatten(1) for key in self.target.obs_sizes]
        return torch.cat(frames, dim=1).to(self.mean)

    def check_fits(self, target: Target) -> None:
        """Refuse a composition whose task, observations, chunks or parents are not the ones
        this verifier was trained on, naming both."""
        mine, where = self.target, f"verifier {self.path or '(unsaved)'}"
        if mine.task != target.task:
            raise ValueError(
                f"{where} was trained on {mine.task} episodes; this composition's parents are "
                f"of {target.task}."
            )
        if any(target.obs_sizes.get(k) != size for k, size in mine.obs_sizes.items()):
            raise ValueError(
                f"{where} takes observation {sizes_text(mine.obs_sizes)}; this composition "
                f"observes {sizes_text(target.obs_sizes)}."
            )
        if mine.chunk != target.chunk:
            raise ValueError(
                f"{where} takes chunks of {mine.chunk[0]} x {mine.chunk[1]} actions (executed "
                f"steps x action dim); this composition executes {target.chunk[0]} x "
                f"{target.chunk[1]}."
            )
        seen = {fingerprint for _, fingerprint in mine.parents}
        unseen = [name for name, fingerprint in target.parents if fingerprint not in seen]
        if unseen:
            raise ValueError(
                f"{where} was trained on episodes of {[n for n, _ in mine.parents]}; parent(s) "
                f"{unseen} of this composition are not among them (another checkpoint, or "
                "retrained since). Train a verifier on this composition's chunk logs."
            )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the one file (replaced whole, never half-written) and note its hash."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "target": self.target.to_dict(), "model": self.model}
        metadata = {HEADER: json.dumps(header | self.header)}
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        write_atomic(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))
        self.path, self.digest = path, _digest(path)
        return path


def sizes_text(sizes: Mapping[str, int]) -> str:
    """{"state": 19} -> "state (size 19)"."""
    return ", ".join(f"{k} (size {v})" for k, v in sizes.items()) or "no low-dim key"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def load_verifier(path: str | os.PathLike[str]) -> Verifier:
    """The verifier a file holds (on the CPU, in eval mode); a file that is not one says so."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"verifier file {path} does not exist; `robocompose verifier` trains one from chunk "
            "logs."
        )
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except SafetensorError as e:
        raise ValueError(f"{path} is not a verifier file ({e}).") from None
    if HEADER not in metadata:
        raise ValueError(
            f"{path} is not a verifier file (no {HEADER!r} header); `robocompose verifier` "
            "writes one."
        )
    header = json.loads(metadata[HEADER])
    if header.get("format") != FORMAT:
        raise ValueError(f"{path}: verifier format {header.get('format')!r}, expected {FORMAT}.")
    verifier = Verifier(Target.from_dict(header.pop("target")), **header.pop("model"))
    verifier.load_state_dict(tensors)
    header.pop("format")
    verifier.header, verifier.path, verifier.digest = header, path, _digest(path)
    return verifier.eval()
