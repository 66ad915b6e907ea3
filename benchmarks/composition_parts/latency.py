"""P2 latency (`--parts latency`): a composed chunk against each parent alone (native sampler
and the composed sampler's own path) and against the floor, per batch size and thread count."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from policy_latency import random_obs

from robocompose.composition.api import compose
from robocompose.composition.composed_policy import ComposedPolicy
from robocompose.composition.fused import (
    StackedDenoiser,
    StackedNetwork,
    fusable,
    stack_networks,
)
from robocompose.composition.samplers import sample_euler

from .shared import parents_of


@torch.no_grad()
def euler_alone(parent, obs, noise, stacked: StackedNetwork | None = None) -> torch.Tensor:
    """One parent alone, sampled the way a composition samples: its Denoiser, prepared for
    its own grid, Euler on it; with `stacked`, its backbone in the stacked form a fused
    composition runs (K = 1), so the parent gets every speed-up the composition gets."""
    cond = parent.encode(obs)
    denoiser = parent.denoiser_for(cond)
    if stacked is not None:
        denoiser = StackedDenoiser(denoiser, stacked, cond)
    sigmas = denoiser.sigmas(10)
    denoiser.prepare(sigmas)
    return sample_euler(denoiser, noise, sigmas)


@torch.no_grad()
def floor_chunk(
    parents: list,
    views: list[dict],
    noise: torch.Tensor,
    stacks: list | None,
    steps: int = 10,
) -> list[torch.Tensor]:
    """The floor of a composed chunk in its execution mode (eager): the parents' networks as the
    composition runs them (`stacks`: its stacked groups, each group's conditioning for every
    step in one call; else each parent's own network) plus the sampler's update, nothing else
    (no adapter, operator, grid or scheduler). Each group integrates its chunk by Euler."""
    conds = [p.encode(v) for p, v in zip(parents, views, strict=True)]
    levels = torch.linspace(1.0, 0.0, steps + 1)
    groups = [group for group, _ in stacks] if stacks else [[i] for i in range(len(parents))]
    units = []
    for j, group in enumerate(groups):
        horizon = parents[group[0]].config.horizon
        x = noise[:, :horizon].expand(len(group), *noise[:, :horizon].shape).clone()
        if stacks:
            net = stacks[j][1]
            b = x.shape[1]
            table = (100.0 * levels[:-1]).to(x.dtype)[None, :].repeat_interleave(b, 1)
            cond = torch.stack([conds[i] for i in group])
            table = table.expand(len(group), -1)
            prepared = net.conditioning(table, cond.repeat(1, steps, 1))
            per_step = prepared.unflatten(1, (steps, b)).unbind(1)
            units.append((lambda x, k, n=net, c=per_step: n.forward_conditioned(x, c[k]), x))
        else:
            parent, cond = parents[group[0]], conds[group[0]]

            def own(x, k, p=parent, c=cond):
                t = torch.full((x.shape[1],), 100.0 * float(levels[k]), dtype=x.dtype)
                return p.net(x[0], t, c)[None]

            units.append((own, x))
    for k in range(steps):
        dt = float(levels[k + 1] - levels[k])
        for network, x in units:
            x.add_(network(x, k), alpha=dt)
    return [x for _, x in units]


def _interleaved_ms(
    calls: dict[str, Callable[[], object]], repeats: int, warmup: int = 3
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall ms and process CPU ms of each call in every round, the calls timed in turn within a
    round (the machine is shared: a burst of contention hits every call of that round, not one
    variant's whole series). CPU time leaves out the time other jobs held the core, so on
    one thread it is the steadier estimate; with several threads it sums them."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    wall: dict[str, list[float]] = {key: [] for key in calls}
    cpu: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            cpu[key].append(1e3 * (time.process_time() - start_cpu))
            wall[key].append(1e3 * (time.perf_counter() - start))
    return wall, cpu


def _medians(rows: dict[str, list[float]]) -> dict[str, float]:
    return {key: statistics.median(ms) for key, ms in rows.items()}


def _paired_ratio(rows: dict[str, list[float]], composed: str, parents: list[str]) -> float:
    """Median over rounds of the composition's time over the slower parent's in that round:
    the two were timed seconds apart, under the same contention."""
    return statistics.median(
        c / max(ms) for c, *ms in zip(rows[composed], *(rows[p] for p in parents), strict=True)
    )


def _best(ms_by_setting: dict[str, float]) -> tuple[str, float]:
    key = min(ms_by_setting, key=ms_by_setting.get)
    return key, ms_by_setting[key]


@torch.no_grad()
def _stacked_network_ratio(parents: list, batch: int, repeats: int) -> float:
    """One-thread CPU time of the parents' stacked network over one parent's stack (K = 1),
    the network alone at one prepared step: the floor of a fused pair's ratio on one core."""
    nets = [p.net for p in parents]
    config = parents[0].config
    x = torch.randn(len(nets), batch, config.horizon, config.action_dim)
    t = torch.full((len(nets), batch), 50.0)
    conds = torch.randn(len(nets), batch, nets[0].global_cond_dim)
    calls = {}
    for key, k in (("all", len(nets)), ("one", 1)):
        stacked = stack_networks(nets[:k]).eval()
        conditioning = stacked.conditioning(t[:k], conds[:k])
        calls[key] = partial(stacked.forward_conditioned, x[:k], conditioning)
    cpu = _medians(_interleaved_ms(calls, repeats)[1])
    return cpu["all"] / cpu["one"]


def latency(task: str, repeats: int) -> dict:
    """Per batch size: each parent alone (native sampler; the composed sampler's path, on its
    own network and on the one-parent stacked one) and the composition (serial, parallel),
    all timed in one interleaved loop per torch thread count; each figure at its best thread
    count, which is recorded."""
    parents, names = parents_of(task)
    stacks = [stack_networks([p.net]).eval() if fusable([p]) else None for p in parents]
    composed = {"serial": compose(parents, "convex", (0.5, 0.5))}
    if composed["serial"].fused is None:  # a fused pair runs one network: nothing to thread
        composed["parallel"] = compose(parents, "convex", (0.5, 0.5), parallel=True)
    out = {}
    for batch in (1, 16):
        obs: dict[str, torch.Tensor] = {}
        for parent in parents:
            obs |= random_obs(parent, batch)
        noise = torch.randn(batch, *composed["serial"].noise_shape)
        calls: dict[str, Callable[[], object]] = {}
        for name, parent, stacked in zip(names, parents, stacks, strict=True):
            view = ComposedPolicy.parent_view(parent, obs)
            own = noise[:, : parent.config.horizon]
            calls[f"{name}|native"] = lambda p=parent, o=view, n=own: p.sample(o, 10, n)
            calls[f"{name}|same_sampler"] = lambda p=parent, o=view, n=own: euler_alone(p, o, n)
            if stacked is not None:
                calls[f"{name}|same_sampler_stacked"] = partial(
                    euler_alone, parent, view, own, stacked
                )
        for mode, policy in composed.items():
            calls[f"composed|{mode}"] = lambda p=policy, o=obs, n=noise: p.predict_actions(o, n)
        views = [ComposedPolicy.parent_view(p, obs) for p in parents]
        groups = composed["serial"].stacks
        calls["floor|eager"] = partial(floor_chunk, parents, views, noise, groups)
        rounds = repeats if batch == 1 else max(3, repeats // 2)
        torch.set_num_threads(1)
        wall, cpu = _interleaved_ms(calls, rounds)
        floor = None
        if composed["serial"].fused is not None:
            floor = _stacked_network_ratio(parents, batch, 4 * rounds)
        by_threads = {1: _medians(wall)}
        torch.set_num_threads(2)
        probe_key = f"{names[0]}|same_sampler"
        probe = _interleaved_ms({probe_key: calls[probe_key]}, 1, warmup=1)[0][probe_key][0]
        if probe < 1.5 * by_threads[1][probe_key]:
            by_threads[2] = _medians(_interleaved_ms(calls, rounds)[0])
        else:  # other jobs hold the cores: every op's thread barrier waits on a descheduled one
            print(f"latency batch {batch}: 2 threads skipped ({probe:.0f} ms probe)", flush=True)
        settings = {  # call -> {"threads1": ms, "threads2": ms}
            key: {f"threads{t}": by_threads[t][key] for t in by_threads} for key in calls
        }
        per_parent = {}
        for name in names:
            native_at, native = _best(settings[f"{name}|native"])
            paths = {"own": settings[f"{name}|same_sampler"]}
            if f"{name}|same_sampler_stacked" in settings:
                paths["stacked"] = settings[f"{name}|same_sampler_stacked"]
            same = {f"{path}_{t}": ms for path, row in paths.items() for t, ms in row.items()}
            same_at, same_ms = _best(same)
            per_parent[name] = {
                "native_ms": native,
                "native_setting": native_at,
                "same_sampler_ms": same_ms,
                "same_sampler_setting": same_at,  # path (own network or stacked) and threads
                "all_ms": {
                    key.split("|")[1]: row
                    for key, row in settings.items()
                    if key.split("|")[0] == name
                },
            }
        composed_ms = {
            f"{t}_{mode}": ms for mode in composed for t, ms in settings[f"composed|{mode}"].items()
        }
        cpu_ms = _medians(cpu)
        paths1 = [  # each parent's faster same-sampler call on one thread
            min((key for key in calls if key.startswith(f"{name}|same_sampler")), key=cpu_ms.get)
            for name in names
        ]
        best_key, best_ms = _best(composed_ms)
        # the composition against the floor in its own execution mode (eager) and thread count
        best_threads = int(best_key.split("_")[0].removeprefix("threads"))
        floor_ms = settings["floor|eager"]
        single = {name: row["native_ms"] for name, row in per_parent.items()}
        same_sampler = {name: row["same_sampler_ms"] for name, row in per_parent.items()}
        out[f"batch{batch}"] = {
            "fused": composed["serial"].fused is not None,
            "threads_timed": sorted(by_threads),
            "rounds": rounds,
            "threads2_probe_ms": {probe_key: probe},
            "per_parent": per_parent,
            "single_ms": single,
            "single_same_sampler_ms": same_sampler,
            "composed_ms": composed_ms,
            "best_composed": best_key,
            "ratio_vs_slower_parent": best_ms / max(single.values()),
            "ratio_vs_slower_parent_same_sampler": best_ms / max(same_sampler.values()),
            "ratio_vs_sum_of_parents": best_ms / sum(single.values()),
            "ratio_vs_sum_of_parents_same_sampler": best_ms / sum(same_sampler.values()),
            # on one thread, the serial composition against each parent's faster same-sampler
            # path there: per-round ratios (wall), and medians of CPU ms
            "ratio_same_sampler_paired_threads1": _paired_ratio(wall, "composed|serial", paths1),
            "cpu_ms_threads1": cpu_ms,
            "stacked_network_ratio_cpu": floor,  # fused pairs: K parents' network over one's
            "ratio_vs_slower_parent_same_sampler_cpu": cpu_ms["composed|serial"]
            / max(cpu_ms[key] for key in paths1),
            # the floor: both parents' networks and the sampler, eager, timed in the same rounds
            "floor_ms": floor_ms,
            "ratio_to_floor": best_ms / floor_ms[f"threads{best_threads}"],
            "ratio_to_floor_paired_threads1": _paired_ratio(
                wall, "composed|serial", ["floor|eager"]
            ),
            "ratio_to_floor_cpu_threads1": cpu_ms["composed|serial"] / cpu_ms["floor|eager"],
            "load_average": list(os.getloadavg()),
        }
        print(f"latency batch {batch}: {json.dumps(out[f'batch{batch}'])}", flush=True)
    torch.set_num_threads(2)
    return out


def same_sampler_headline(results: dict) -> None:
    """`latency_ratio_same_sampler`: the equal-footing ratio of the worst task, batch 1 or 16;
    `_cpu`: the same from one-thread CPU time, which other jobs on the machine disturb less."""
    for suffix in ("", "_cpu"):
        results[f"latency_ratio_same_sampler{suffix}"] = max(
            row[batch][f"ratio_vs_slower_parent_same_sampler{suffix}"]
            for row in results["latency"].values()
            for batch in ("batch1", "batch16")
        )
    floors = [
        row[batch]["ratio_to_floor"]
        for row in results["latency"].values()
        for batch in ("batch1", "batch16")
        if "ratio_to_floor" in row[batch]
    ]
    if floors:
        results["latency_ratio_to_floor"] = max(floors)
