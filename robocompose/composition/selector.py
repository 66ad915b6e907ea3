"""The selector: at every chunk, candidate chunks from each parent alone and from the convex
composition, one of them picked per row by a score the parents' own samples give (no reward, no
training).

Candidates are compared in parent 0's normalised action space. Candidate 0 of parent i runs on
the chunk's own noise, so the selector's candidates include exactly what parent i alone would
have done; the further candidates draw their noise from per-row generators seeded by the row's
noise, so a row's chunk does not depend on the batch it runs in.

Scores (higher is better), each a (C, B) tensor over C candidates and B rows:
- `agreement`: minus the mean distance of the executed steps to the other candidates' (the
  medoid wins): the chunk most of the parents' samples agree with.
- `denoising`: minus the parents' summed denoising error on the whole candidate chunk at a few
  noise levels (a one-step likelihood proxy).
- `likelihood`: the parents' summed log-density of the candidate chunk, integrated along the
  probability-flow ODE from the chunk up to sigma_max (Hutchinson's estimate of the divergence,
  one fixed probe per level).
- `coherence`: minus the distance between the candidate's first steps and what the previously
  executed chunk planned for the same times (backward coherence, as in Bidirectional Decoding:
  a chunk that keeps to the plan in motion). Needs the previous chunk; all zero without one.
- `bidirectional`: `coherence` and `agreement` together (the sum of their ranks).

The last three need whole chunks: every parent must share parent 0's horizon and history length
(`Candidates.full` is None otherwise, and they refuse).

Those are training-free (`SCORES`). `verifier` (`LEARNED`) is not: a verifier trained on the
parents' chunk logs (`composition.verifier`) estimates each candidate's probability of success
from the current observation and its executed steps, all candidates of all rows in one forward
pass; the ensemble's mean, or with `verifier_std_weight` k > 0 its lower bound mean - k * std.

Whatever the score, `selector_margin` m > 0 keeps the composed candidate unless another scores
more than m above it: a score that ranks a state's chunks near chance then leaves the
composition acting rather than swapping it for a parent's sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from robocompose.chunk_log import COMPOSITION
from robocompose.composition.samplers import RowGenerators, randn

if TYPE_CHECKING:
    from robocompose.composition.methods import Composition

DENOISING_SIGMAS = (0.1, 0.5, 1.0)  # where `denoising` probes the parents
# where `likelihood` integrates the probability-flow ODE: geometric from near the data to a level
# where every parent's marginal is close to its Gaussian prior
LIKELIHOOD_SIGMAS = tuple(float(s) for s in torch.logspace(math.log10(0.02), math.log10(80), 12))


@dataclass
class Candidates:
    """C candidate chunks for B rows, in parent 0's normalised action space."""

    executed: torch.Tensor  # (C, B, n_exec, A): the steps that would run
    full: torch.Tensor | None  # (C, B, H, A): whole chunks, when the parents' chunks align
    sources: list[str]  # "parent<i>" or "composition", per candidate
    noise: torch.Tensor | None = None  # (B, H, A): the chunk's noise they were drawn from

    def need_full(self, score: str) -> torch.Tensor:
        if self.full is None:
            raise ValueError(
                f"selector score {score!r} compares whole chunks: every parent must have parent "
                "0's horizon and n_obs_steps. Use score 'agreement' for this pair."
            )
        return self.full


def _aligned(policy: Composition) -> bool:
    horizon = policy.parents[0].config.horizon
    return all(s == 0 for s in policy.starts) and all(
        p.config.horizon == horizon for p in policy.parents
    )


def candidates(
    policy: Composition, obs: dict[str, torch.Tensor], noise: torch.Tensor, per_parent: int
) -> Candidates:
    """`per_parent` native samples of each parent, then one composed sample (the configured
    operator at the configured weights on the configured sampler). A parent's samples run as
    one batch of `per_parent` x B rows: each row's chunk is its own (rows never mix), and one
    call costs far less than `per_parent` calls at batch 1."""
    generators = RowGenerators(noise)
    steps = policy.steps
    b, n_exec = noise.shape[0], policy.executed.stop - policy.executed.start
    normalize = policy.parents[0].action_normalizer.normalize
    aligned = _aligned(policy)
    executed, full, sources = [], [], []
    for i, parent in enumerate(policy.parents):
        view = policy.parent_view(parent, obs)
        own = noise[:, : parent.config.horizon]
        draws = [own, *(randn(own.shape, generators, noise) for _ in range(per_parent - 1))]
        rows = {k: v.repeat(per_parent, *[1] * (v.dim() - 1)) for k, v in view.items()}
        with policy.times.sampling(i, per_parent * b):
            chunks = normalize(parent.sample(rows, steps, torch.cat(draws))).split(b)
        begin = policy.executed.start - policy.starts[i]
        for chunk in chunks:
            executed.append(chunk[:, begin : begin + n_exec])
            full.append(chunk)
            sources.append(f"parent{i}")
    denoiser = policy.denoiser(obs)
    composed = policy.run_sampler(denoiser, noise, policy.sigmas(denoiser))
    executed.append(composed[:, policy.executed])
    full.append(composed)
    sources.append(COMPOSITION)
    return Candidates(torch.stack(executed), torch.stack(full) if aligned else None, sources, noise)


def agreement(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """Minus each candidate's mean distance to the others (C, B)."""
    flat = cands.executed.flatten(2)  # (C, B, n * A)
    distances = torch.cdist(flat.transpose(0, 1), flat.transpose(0, 1)).transpose(0, 1)
    return -distances.sum(-1) / max(flat.shape[0] - 1, 1)


def _in_parent_space(policy: Composition, i: int, chunks: torch.Tensor) -> torch.Tensor:
    """(N, H, A) chunks in parent 0's normalised space -> parent i's."""
    norm0, norm_i = policy.parents[0].action_normalizer, policy.parents[i].action_normalizer
    return chunks if i == 0 else norm_i.normalize(norm0.unnormalize(chunks))


def _parent_denoisers(policy: Composition, obs, c: int):
    """Each parent's index and Denoiser, its observation batch repeated for C candidates."""
    for i, parent in enumerate(policy.parents):
        cond = parent.encode(policy.parent_view(parent, obs))
        yield i, parent.denoiser_for(cond.repeat(c, 1))


def denoising(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """Minus the parents' summed denoising error on each whole candidate chunk (C, B), noised
    at DENOISING_SIGMAS with fixed per-level noise."""
    full = cands.need_full("denoising")
    c, b = full.shape[:2]
    error = torch.zeros(c, b, dtype=full.dtype, device=full.device)
    for i, denoiser in _parent_denoisers(policy, obs, c):
        x0 = _in_parent_space(policy, i, full.flatten(0, 1))
        generator = torch.Generator().manual_seed(0)
        for sigma in DENOISING_SIGMAS:
            eps = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
            out = denoiser(x0 + sigma * eps, sigma)
            error += (out.x0_hat - x0).pow(2).flatten(1).mean(1).view(c, b)
    return -error


def ode_log_density(
    denoise: Callable[[torch.Tensor, float], torch.Tensor],
    x: torch.Tensor,
    levels: tuple[float, ...] = LIKELIHOOD_SIGMAS,
) -> torch.Tensor:
    """log p(x) per row of x (N, ...) under the model whose denoiser is `denoise(x, sigma) ->
    x0_hat`: Euler along the probability-flow ODE dx/dsigma = (x - D(x)) / sigma from levels[0]
    to levels[-1], where a Gaussian of variance 1 + sigma^2 (data of unit scale) is the prior,
    plus the integral of div f (d log p / dsigma = -div f along the path); div D by Hutchinson's
    estimate with one fixed Rademacher probe per level."""
    x = x.detach()
    dim = x[0].numel()
    generator = torch.Generator().manual_seed(0)
    log_det = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    for sigma, nxt in zip(levels[:-1], levels[1:], strict=True):
        probe = (torch.randint(0, 2, x.shape, generator=generator) * 2 - 1).to(x)
        with torch.enable_grad():
            x_in = x.clone().requires_grad_(True)
            x0_hat = denoise(x_in, sigma)
            (grad,) = torch.autograd.grad((x0_hat * probe).sum(), x_in)
        div_d = (grad * probe).flatten(1).sum(1)
        log_det += (nxt - sigma) * (dim - div_d) / sigma
        x = x + (nxt - sigma) * (x - x0_hat.detach()) / sigma
    var = 1.0 + levels[-1] ** 2
    prior = -0.5 * x.pow(2).flatten(1).sum(1) / var - 0.5 * dim * math.log(2 * math.pi * var)
    return prior + log_det


def likelihood(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """The parents' summed log-density of each whole candidate (C, B) by `ode_log_density`, each
    in its own normalised space (the maps between spaces are affine: a constant per parent)."""
    full = cands.need_full("likelihood")
    c, b = full.shape[:2]
    total = torch.zeros(c, b, dtype=full.dtype, device=full.device)
    for i, denoiser in _parent_denoisers(policy, obs, c):
        x = _in_parent_space(policy, i, full.flatten(0, 1))
        total += ode_log_density(lambda x, s, d=denoiser: d(x, s).x0_hat, x).view(c, b)
    return total


def coherence(
    policy: Composition, obs, cands: Candidates, previous: torch.Tensor | None = None
) -> torch.Tensor:
    """Minus the mean squared distance (C, B) between each candidate's steps and the steps the
    previously executed whole chunk `previous` (B, H, A) planned for the same times; zeros
    without one."""
    full = cands.need_full("coherence")
    if previous is None:
        return torch.zeros(full.shape[:2], dtype=full.dtype, device=full.device)
    shift = policy.executed.stop - policy.executed.start  # the steps run since `previous`
    overlap = full.shape[2] - shift
    now, planned = full[:, :, :overlap], previous[None, :, shift:]
    return -(now - planned).pow(2).flatten(2).mean(2)


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """(C, B) values -> each candidate's rank among its row's (0 = lowest), as floats."""
    return values.argsort(0).argsort(0).to(values.dtype)


def bidirectional(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """Bidirectional Decoding's two criteria at once: the sum of each candidate's ranks by
    `coherence` (backward: keeps to the plan) and by `agreement` (forward: what the samples
    agree on); ranks, because the two distances have different scales. Without a previous
    chunk, `agreement` alone."""
    forward = agreement(policy, obs, cands)
    if previous is None:
        return forward
    return _ranks(coherence(policy, obs, cands, previous)) + _ranks(forward)


def weak_samples(policy: Composition, obs, noise: torch.Tensor, per_parent: int) -> torch.Tensor:
    """`per_parent` samples of each parent's weaker checkpoint (`policy.contrast`): their
    executed steps (N, B, n, A) in parent 0's normalised space. Noise from per-row generators
    of their own (seeded by the row's noise shifted by one: not the candidates' draws)."""
    if policy.contrast is None:
        raise ValueError(
            "selector score 'contrast' needs `selector_contrast`: a weaker checkpoint of each "
            "parent (e.g. an early training checkpoint)."
        )
    generators = RowGenerators(noise + 1.0)
    normalize = policy.parents[0].action_normalizer.normalize
    b, n_exec = noise.shape[0], policy.executed.stop - policy.executed.start
    out = []
    for i, weak in enumerate(policy.contrast):
        view = policy.parent_view(policy.parents[i], obs)
        own = noise[:, : weak.config.horizon]
        draws = [randn(own.shape, generators, own) for _ in range(per_parent)]
        rows = {k: v.repeat(per_parent, *[1] * (v.dim() - 1)) for k, v in view.items()}
        begin = policy.executed.start - policy.starts[i]
        for chunk in normalize(weak.sample(rows, policy.steps, torch.cat(draws))).split(b):
            out.append(chunk[:, begin : begin + n_exec])
    return torch.stack(out)


def contrast(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """Bidirectional Decoding's forward contrast (C, B): a candidate's mean distance to the
    weaker checkpoints' samples (negatives) minus its mean distance to the other candidates
    (positives, as `agreement`): what the strong samples agree on and the weak ones do not.
    The weak samples are drawn here, from `cands.noise`."""
    if cands.noise is None:
        raise ValueError("selector score 'contrast' needs the candidates' noise.")
    flat = cands.executed.flatten(2).transpose(0, 1)  # (B, C, n * A)
    weak = weak_samples(policy, obs, cands.noise, policy.config.selector_samples)
    negatives = torch.cdist(flat, weak.flatten(2).transpose(0, 1)).mean(-1)  # (B, C)
    return negatives.transpose(0, 1) + agreement(policy, obs, cands)


def verifier(policy: Composition, obs, cands: Candidates, previous=None) -> torch.Tensor:
    """The composition's verifier's estimate of success (C, B) for each candidate's executed
    steps (in env units, as the chunk logs it learned from hold them) from the row's current
    observation: the ensemble's mean less `verifier_std_weight` times its spread."""
    model = policy.verifier
    if model is None:
        raise ValueError(
            "selector score 'verifier' needs `verifier`: a file `robocompose verifier` wrote."
        )
    c, b = cands.executed.shape[:2]
    chunks = policy.parents[0].action_normalizer.unnormalize(cands.executed).flatten(0, 1)
    rows = model.observation(obs).repeat(c, 1)  # row c * B + b is row b's observation
    values = model.score(rows, chunks, policy.config.verifier_std_weight)
    return values.view(c, b).to(cands.executed)


Score = Callable[..., torch.Tensor]
# training-free: from the parents' own samples (what benchmarks/composition_parts/selector.py
# studies)
SCORES: dict[str, Score] = {
    "agreement": agreement,
    "denoising": denoising,
    "likelihood": likelihood,
    "coherence": coherence,
    "bidirectional": bidirectional,
}
LEARNED: dict[str, Score] = {"verifier": verifier}  # from a model trained on chunk logs
CONTRASTED: dict[str, Score] = {"contrast": contrast}  # training-free, with weaker checkpoints


def score_of(name: str) -> Score:
    """The score `name`: training-free, against weaker checkpoints, or learned."""
    return {**SCORES, **CONTRASTED, **LEARNED}[name]
