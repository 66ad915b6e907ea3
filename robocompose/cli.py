"""`robocompose` command line: one entry point, one sub-command per verb.

Every verb reads `configs/<verb>.yaml` (with its groups: task/, policy/, composition/, search/,
sweep/, launcher/) and takes overrides in Hydra's grammar (quote brackets for the shell):

    robocompose compose task=PickPlace composition=mixture 'composition.weights=[0.3,0.7]'
    robocompose sweep -m composition=convex,mixture 'composition.weights=[0.3,0.7]' seed=0,1

Flags and positional arguments (`compose CKPT_A CKPT_B --weights 0.6,0.4`) are shorthands that
become the same overrides; `--cfg` prints the composed config instead of running.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import json
import re
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robocompose.config import CONFIGS, compose_all, hydra_value, load, to_tree
from robocompose.interrupt import ResumableInterrupt

if TYPE_CHECKING:  # the verbs import what they run when they run
    from robocompose.records import EvalResult


@dataclass(frozen=True)
class Shorthand:
    """A flag (or the positional arguments) standing for one config key."""

    flag: str  # "--episodes"; "" for the positional arguments
    key: str
    parse: Callable[[str], Any] = str
    help: str = ""
    group: bool = False  # the key is a config group: the value is an option name
    switch: bool = False  # a flag without a value (`--dry-run`): sets the key to true

    def override(self, value: str | list[str]) -> str:
        """`key=value` in Hydra's grammar; a list (positional arguments) parses item by item."""
        try:
            if self.group:
                return f"{self.key}={self.parse(value)}"
            values = value if isinstance(value, list) else [value]
            parsed = [self.parse(v) for v in values]
        except ValueError as e:
            where = self.flag or "the positional argument"
            expects = getattr(self.parse, "expects", None) or EXPECTS.get(self.parse, "")
            raise ValueError(
                f"{where} {value!r}: expected {expects or 'a valid value'} ({e})."
            ) from None
        return f"{self.key}={hydra_value(parsed if isinstance(value, list) else parsed[0])}"


EXPECTS: dict[Callable[[str], Any], str] = {
    int: "an integer",
    float: "a number",
    json.loads: "JSON",
}


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list]:
    def parse(text: str) -> list:
        return [kind(v) for v in text.split(",") if v]

    plural = {int: "integers", float: "numbers"}.get(kind, "values")
    parse.expects = f"comma-separated {plural}, e.g. 1,2"  # type: ignore[attr-defined]
    return parse


# like runs/compose and runs/search: a run never writes into a checkpoint folder (shipped ones
# are the repository's)
EVAL_RUNS = "runs/eval"
EPISODES = Shorthand("--episodes", "episodes", int)
SEED_START = Shorthand("--seed-start", "seed_start", int, "first evaluation seed")
OUT = Shorthand("--out", "out")
VIDEO_SEEDS = Shorthand("--video-seeds", "video_seeds", _csv(int), "comma-separated seeds to film")
VIDEO_VIEWS = Shorthand(
    "--video-views",
    "video_views",
    _csv(str),
    "what the videos show side by side: image (what an image policy sees) or a camera "
    "(PickPlace: angled, top); default the env's view",
)
OPERATOR = Shorthand("--operator", "composition.operator")
ACTION_STEPS_HELP = "actions of each predicted chunk run before replanning (default: as trained)"
ACTION_STEPS = Shorthand("--n-action-steps", "composition.n_action_steps", int, ACTION_STEPS_HELP)
# every verb: more config files (e.g. DIR/sweep/mine.yaml -> sweep=mine) beside configs/
CONFIG_DIR = Shorthand(
    "--config-dir",
    "hydra.searchpath",
    lambda folder: [f"file://{Path(folder).resolve()}"],
    "a folder of config groups searched as well as configs/",
)


@dataclass(frozen=True)
class Verb:
    help: str
    config: str  # "module:Class" of the verb's dataclass config (imported when used)
    run: Callable[[list[str]], None]  # the verb, given its overrides
    groups: tuple[str, ...] = ()
    positional: Shorthand | None = None
    many: bool = False  # the positional arguments form a list
    flags: tuple[Shorthand, ...] = ()
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # composed tree -> fields
    # group -> the options this verb takes, when not every file in the group
    choices: Callable[[], dict[str, Sequence[str]]] | None = None

    def config_class(self) -> type:
        module, name = self.config.split(":")
        return getattr(importlib.import_module(module), name)


def load_verb_config(verb: str, overrides: list[str]) -> Any:
    """The verb's dataclass config from configs/<verb>.yaml and the overrides."""
    return load(verb, VERBS[verb].config_class(), overrides, VERBS[verb].adapt)


def _with_task_of_parents(name: str, verb: Verb, overrides: list[str]) -> list[str]:
    """Parents named without `task=` run on their own task (recorded in the first one's
    checkpoint), not on the config's default task."""
    fields = {f.name for f in dataclasses.fields(verb.config_class())}
    has_task = {"parents", "task"} <= fields
    if name == "sweep" or not has_task or any(o.startswith("task=") for o in overrides):
        return overrides
    tree = to_tree(compose_all(name, verb.config_class(), [overrides])[0])
    if not tree.get("parents") or not (Path(tree["parents"][0]) / "config.json").is_file():
        return overrides  # nothing to read; loading the parents will say what is wrong
    from robocompose.policies.checkpoint import read_checkpoint_config
    from robocompose.sim.tasks import get_task

    env_id = read_checkpoint_config(tree["parents"][0])["metadata"].get("task")
    return [*overrides, f"task={get_task(env_id).name}"] if env_id else overrides


def _collect(overrides: list[str]) -> None:
    from robocompose.sim.collect import collect

    config = load_verb_config("collect", overrides)
    rate = collect(
        config.task.name,
        config.episodes,
        config.out,
        obs_keys=tuple(config.obs_keys),
        image_size=config.image_size,
        seed_start=config.seed_start,
        expert_config=config.expert,
        skills=config.skills,
        env_config=config.env,
        format=config.format,
    )
    print(f"{config.task.name}: wrote {config.out}; expert success this run {rate}")


def _train(overrides: list[str]) -> None:
    from robocompose.policies.train import train

    config = load_verb_config("train", overrides)
    print(
        f"training into {config.out} (checkpoint and train_state, saved as it goes); curves: "
        f"{config.events_dir}/, view with `robocompose report {config.out}` or "
        f"`tensorboard --logdir {config.events_dir}`",
        flush=True,
    )
    print(f"checkpoint: {train(config)}")


def _report(overrides: list[str]) -> None:
    from robocompose.report import write_report

    print(f"plot: {write_report(load_verb_config('report', overrides))}")


def _eval(overrides: list[str]) -> None:
    from robocompose.evaluation import evaluate

    config = load_verb_config("eval", overrides)
    name = Path(config.checkpoint).resolve().name
    episodes = Path(config.out or f"{EVAL_RUNS}/{name}.jsonl")
    # one folder per checkpoint: evaluations of other checkpoints into one --out keep theirs
    videos = episodes.parent / "videos" / name
    result = evaluate(
        _with_task(config.checkpoint, config.task),
        config.seeds(),
        label=name,
        out=episodes,
        steps=config.steps,
        n_action_steps=config.n_action_steps,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        video_seeds=config.video_seeds,
        video_dir=videos if config.video_seeds else None,
        video_views=config.video_views,
    )
    print(result.summary())
    _print_outputs(episodes, result.videos)
    _refuse_errors(result, episodes)


def _with_task(checkpoint: str, task: Any) -> Any:
    """The checkpoint folder, or its policy on the env `task=` attaches (see `attached_env`)."""
    if task is None:
        return checkpoint
    from robocompose.policies.checkpoint import load_policy
    from robocompose.sim.tasks import attached_env

    policy = load_policy(checkpoint)
    recorded = policy.metadata.get("task"), policy.metadata.get("env_kwargs", {})
    env, kwargs = attached_env(*recorded, f"checkpoint {checkpoint}", task.name)
    policy.metadata |= {"task": env, "env_kwargs": kwargs}
    return policy


def _experts(overrides: list[str]) -> None:
    """The scripted expert on every task: a table and one video per task."""
    import imageio

    from robocompose.sim.collect import run_expert_episode
    from robocompose.sim.tasks import TASKS, make_env, make_expert
    from robocompose.stats import success_rate

    config = load_verb_config("experts", overrides)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in TASKS:
        env = make_env(name, render_mode="rgb_array")
        expert = make_expert(name)
        successes, scores, start = 0, [], time.perf_counter()
        for seed in range(config.episodes):
            episode = run_expert_episode(env, expert, seed, video=seed == 0)
            if seed == 0:
                video = out / f"{name}_expert_seed0.mp4"
                imageio.mimsave(video, episode.video, fps=env.metadata.get("render_fps", 10))
            successes += episode.success
            scores.append(episode.score)
        env.close()
        rate = success_rate(successes, config.episodes)
        rows.append(
            (name, str(rate), f"{statistics.fmean(scores):.3f}", time.perf_counter() - start)
        )
    print("| task | expert success [95% CI] | mean score | seconds |\n|---|---|---|---|")
    for name, rate, score, seconds in rows:
        print(f"| {name} | {rate} | {score} | {seconds:.1f} |")


def _compose(overrides: list[str]) -> None:
    from robocompose.evaluation import evaluate

    config = load_verb_config("compose", overrides)
    label = config.label()
    episodes, videos = Path(config.out) / f"{label}.jsonl", Path(config.out) / "videos" / label
    policy = config.policy()
    result = evaluate(
        policy,
        config.seeds(),
        steps=config.composition.steps,
        label=label,
        out=episodes,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        video_seeds=config.video_seeds,
        video_dir=videos,
        video_views=config.video_views,
    )
    print(result.summary())
    times = getattr(policy, "times", None)  # a parameter merge is one policy: no parents run
    if times is not None:
        print(times.summary())
    _print_outputs(episodes, result.videos)
    _refuse_errors(result, episodes)


def _compare(overrides: list[str]) -> None:
    import json

    from robocompose.compare import compare

    config = load_verb_config("compare", overrides)
    result = compare(
        *config.checkpoints,
        config.seeds(),
        out_dir=config.out,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
    )
    print(result.table())
    record = Path(config.out) / "compare.json"
    record.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    print(f"record: {record}")


def _print_outputs(episodes: Path, videos: list[Path]) -> None:
    """Where eval/compose put their results, so nobody has to guess the default folders; each
    video as written (`seed_N-2.mp4` when `seed_N.mp4` was already there)."""
    print(f"episodes: {episodes}")
    for video in videos:
        print(f"video: {video}")


def _refuse_errors(result: EvalResult, episodes: Path) -> None:
    """Episodes that errored (a NaN action, an env that raised) fail the verb: a success rate
    over them says nothing, and only the records said why."""
    first = next((r for r in result.records if r["error"] is not None), None)
    if first is not None:
        raise ValueError(
            f"{result.errors} of {result.episodes} episodes errored; the first (seed "
            f"{first['seed']}): {first['error']}. Records: {episodes}."
        )


def _search(overrides: list[str]) -> None:
    from robocompose.composition import search

    config = load_verb_config("search", overrides)
    result = search(
        config.parents or config.parent_paths(),
        config.seeds(),
        out_dir=config.out,
        task=config.task.name,
        operator=config.composition.operator,
        method=config.search.method,
        step=config.search.step,
        first_slice=config.search.first_slice,
        tolerance=config.search.tolerance,
        num_envs=config.num_envs,
        device=config.device,
        batch_invariant=config.batch_invariant,
        **config.composition.settings(),
    )
    print(result.table())
    if result.times is not None:
        print(result.times.summary())
    names = [p["name"] for p in result.provenance["parents"]]
    print(f"won: {result.chosen_kind}, {result.chosen_text(names)}")
    print(f"chosen {result.chosen}; {result.episodes_spent} episodes spent")
    print(f"record: {Path(config.out) / 'search.json'}\nplot: {Path(config.out) / 'search.png'}")


def _sweep(overrides: list[str]) -> None:
    from robocompose.sweep import run_sweep
    from robocompose.sweep.launchers import WorkersLost

    try:
        report = run_sweep(overrides)
    except WorkersLost as e:
        raise SystemExit(f"robocompose sweep: error: {e}") from None
    print(f"\n{report.summary}\n")
    print(f"table: {report.table} ({report.rows} episodes, {report.ran} run now)")
    for plot in report.plots:
        print(f"plot: {plot}")


def _demo(overrides: list[str]) -> None:
    from robocompose.demo import run_demo

    run_demo(load_verb_config("demo", overrides))


def _serve(overrides: list[str]) -> None:
    from robocompose.real_robot.serve import run
    from robocompose.real_robot.websocket_server import PortInUse

    try:
        run(load_verb_config("serve", overrides))
    except PortInUse as e:
        raise SystemExit(f"robocompose serve: error: {e}") from None


def _deploy(overrides: list[str]) -> None:
    from robocompose.real_robot.deploy import run

    try:
        summary = run(load_verb_config("deploy", overrides))
    except (ConnectionError, ImportError) as e:  # no server, no arm, or no vendor SDK
        raise SystemExit(f"robocompose deploy: error: {e}") from None
    print(f"success {summary['success_text']}; step log {summary['steps_log']}")


def _replay(overrides: list[str]) -> None:
    from robocompose.real_robot.replay import run

    text, plots = run(load_verb_config("replay", overrides))
    print(text)
    for path in plots:
        print(f"plot: {path}")


def _view(overrides: list[str]) -> None:
    from robocompose.viz.view import run_view

    print(run_view(load_verb_config("view", overrides)))


def _is_true(text: str) -> bool:
    return text == "true"


def _deploy_option(path: str) -> str:
    """configs/deploy/<robot>.yaml (or just <robot>) -> the option name of group deploy/; a
    relative path not found here is looked up in the repository, as a deploy file's checkpoint
    is, so `deploy configs/deploy/twin.yaml` runs from any folder."""
    file = Path(path)
    if file.suffix not in (".yaml", ".yml") and file.parent == Path("."):
        return path
    if not file.is_file() and (CONFIGS.parent / file).is_file():
        file = CONFIGS.parent / file
    if not file.is_file():
        near = difflib.get_close_matches(file.name, [p.name for p in file.parent.glob("*.y*ml")], 1)
        hint = f" Did you mean {str(file.parent / near[0])!r}?" if near else ""
        raise FileNotFoundError(f"deploy config {path} does not exist.{hint}")
    if file.parent.name != "deploy":
        raise ValueError(
            f"a deploy config must be a deploy/<name>.yaml file. Got {path}; for your own file "
            "DIR/deploy/NAME.yaml pass `--config-dir DIR deploy=NAME`."
        )
    if file.parent.resolve() != (CONFIGS / "deploy").resolve():
        raise ValueError(
            f"{path} is outside {CONFIGS / 'deploy'}: pass `--config-dir {file.parent.parent} "
            f"deploy={file.stem}` instead."
        )
    return file.stem


def _plan(overrides: list[str]) -> None:
    from robocompose.hierarchical.api import Runner, describe, show_plan
    from robocompose.hierarchical.run.corrections import read_lines_into

    config = load_verb_config("plan", overrides)
    runner = Runner(config)
    print(f"{runner.item.task}: {runner.item.instruction!r} ({config.planner} planner)")
    reader = None
    if config.corrections:
        reader = read_lines_into(sys.stdin, runner.queue)
        print('type a correction and Enter while it runs ("a bit more to the left", "stop")')

    def show(i: int, plan: str | list[str]) -> None:
        print(f"\nround {i}:\n{show_plan(plan)}", flush=True)

    try:
        result = runner.run(show)
        while result.outcome in ("asked", "declined"):  # nothing moved: ask the person
            print(f"\n{result.message}\nyour answer (end the input to stop):", flush=True)
            answer = _read_answer(runner.queue, reader)
            if not answer:
                break
            result = runner.answer(answer, show)
    finally:
        runner.close()
    print(describe(result, plans=False))
    if not result.success:
        raise SystemExit(1)  # every round failed (or was stopped): say so to the shell too


def _read_answer(queue: Any, reader: Any) -> str | None:
    """The next line typed on stdin: from the corrections queue while its reader runs, else
    read directly; None at the end of the input."""
    if reader is None:
        line = sys.stdin.readline()
        return line.strip() or None
    while True:
        waiting = queue.poll()
        if waiting is not None:
            return waiting[1]
        if not reader.is_alive():
            waiting = queue.poll()
            return waiting[1] if waiting is not None else None
        time.sleep(0.05)


def _rewards(overrides: list[str]) -> None:
    from robocompose.hierarchical.language_to_rewards.pipeline import run_config

    print(json.dumps(run_config(load_verb_config("rewards", overrides)), indent=2))


def _corrections(overrides: list[str]) -> None:
    from robocompose.hierarchical.run.correction_bank import run_corrections

    print(run_corrections(load_verb_config("corrections", overrides)))


def _plan_tasks() -> dict[str, Sequence[str]]:
    from robocompose.hierarchical.api import LONG_TASKS

    return {"task": sorted(LONG_TASKS)}


def _task_name(tree: dict[str, Any]) -> dict[str, Any]:
    """DemoConfig names its task; configs/demo.yaml takes it from the task/ group, as every
    verb does, so `task=PickPlace` means the same everywhere."""
    return tree | {"task": tree["task"]["name"]}


VERBS: dict[str, Verb] = {
    "collect": Verb(
        "write expert demos to a robomimic-layout hdf5 file, or with format=lerobot a LeRobot "
        "dataset folder (appends until it holds `episodes`)",
        "robocompose.jobs:CollectConfig",
        _collect,
        ("task",),
        Shorthand("", "task", help="the task (config group task/)", group=True),
        flags=(
            Shorthand("--episodes", "episodes", int, "number of successful demos"),
            Shorthand("--out", "out", help="output .hdf5 (appended to if it exists)"),
            Shorthand("--obs-keys", "obs_keys", _csv(str), "comma-separated: state,proprio,image"),
            Shorthand("--image-size", "image_size", int, "side of the image key in pixels"),
            Shorthand("--seed-start", "seed_start", int),
            Shorthand("--expert-config", "expert", json.loads, 'JSON: {"action_noise_m": 0.003}'),
        ),
    ),
    "train": Verb(
        "train a policy, e.g. dataset=data/PushT.hdf5 out=ckpt/pusht policy=flow_mlp steps=5000",
        "robocompose.policies.train_config:TrainConfig",
        _train,
        ("policy", "task"),
    ),
    "eval": Verb(
        "evaluate a checkpoint on its task",
        "robocompose.jobs:EvalConfig",
        _eval,
        ("task",),
        positional=Shorthand("", "checkpoint", help="checkpoint folder (config.json + weights)"),
        flags=(
            EPISODES,
            SEED_START,
            Shorthand("--steps", "steps", int, "denoising steps (default: the checkpoint's)"),
            Shorthand("--n-action-steps", "n_action_steps", int, ACTION_STEPS_HELP),
            Shorthand("--num-envs", "num_envs", int),
            Shorthand("--out", "out", help=f"episodes JSONL (default: {EVAL_RUNS}/<name>.jsonl)"),
            VIDEO_SEEDS,
            VIDEO_VIEWS,
        ),
    ),
    "compose": Verb(
        "evaluate a composition of checkpoints (default: the task's shipped pair)",
        "robocompose.jobs:ComposeConfig",
        _compose,
        ("task", "composition"),
        Shorthand("", "parents", help="parent checkpoint folders (>= 2)"),
        many=True,
        flags=(
            OPERATOR,
            Shorthand("--weights", "composition.weights", _csv(float), "e.g. 0.6,0.4"),
            Shorthand("--sampler", "composition.sampler", help="euler, heun, ancestral, mcmc"),
            Shorthand("--steps", "composition.steps", int, "denoising steps"),
            ACTION_STEPS,
            EPISODES,
            SEED_START,
            OUT,
            VIDEO_SEEDS,
            VIDEO_VIEWS,
        ),
    ),
    "compare": Verb(
        "two checkpoints on the same seeds: each one's success, where each succeeds alone, "
        "and the paired difference (before a search: has the pair anything to gain?)",
        "robocompose.jobs:CompareConfig",
        _compare,
        positional=Shorthand("", "checkpoints", help="two checkpoint folders"),
        many=True,
        flags=(EPISODES, SEED_START, Shorthand("--num-envs", "num_envs", int), OUT),
    ),
    "search": Verb(
        "test-time search of composition weights (defaults: the demo's search)",
        "robocompose.jobs:SearchConfig",
        _search,
        ("task", "composition", "search"),
        Shorthand("", "parents", help="parent checkpoint folders (>= 2)"),
        many=True,
        flags=(
            OPERATOR,
            Shorthand("--method", "search.method", help="grid, halving or racing"),
            Shorthand("--step", "search.step", float, "simplex grid step (0.1 for K=2)"),
            ACTION_STEPS,
            EPISODES,
            SEED_START,
            OUT,
        ),
    ),
    "sweep": Verb(
        "a grid of compositions (Hydra multirun): one table row per episode, summary, plots",
        "robocompose.sweep.config:SweepConfig",
        _sweep,
        ("task", "composition", "launcher", "sweep"),
    ),
    "serve": Verb(
        "serve a checkpoint or a composition to robots (websocket + msgpack, openpi's protocol)",
        "robocompose.real_robot.serve:ServeConfig",
        _serve,
        ("composition",),
        Shorthand("", "parents", help="parent checkpoint folders to compose (>= 2)"),
        many=True,
        flags=(
            Shorthand("--checkpoint", "checkpoint", help="one checkpoint folder to serve"),
            OPERATOR,
            Shorthand("--weights", "composition.weights", _csv(float), "e.g. 0.6,0.4"),
            Shorthand("--host", "host", help="interface to listen on (default 127.0.0.1)"),
            Shorthand("--port", "port", int, "0: any free port"),
            Shorthand("--delay-s", "delay_s", float, "injected latency per inference (tests)"),
        ),
    ),
    "experts": Verb(
        "the scripted experts on every task, with videos",
        "robocompose.jobs:ExpertsConfig",
        _experts,
        flags=(EPISODES, OUT),
    ),
    "demo": Verb(
        "the main job: compose shipped parents and search",
        "robocompose.demo:DemoConfig",
        _demo,
        ("task",),
        flags=(
            Shorthand("--task", "task", help="the task (config group task/)", group=True),
            EPISODES,
            Shorthand("--method", "method", help="grid, halving or racing"),
            OUT,
        ),
        adapt=_task_name,
    ),
    "deploy": Verb(
        "run a policy on an arm (or its MuJoCo twin) at a fixed rate, safely, logging every step",
        "robocompose.real_robot.deploy:DeployConfig",
        _deploy,
        ("deploy", "task"),
        Shorthand("", "deploy", _deploy_option, "configs/deploy/<robot>.yaml", group=True),
        flags=(
            Shorthand(
                "--dry-run", "dry_run", _is_true, "run on the twin, whatever the robot", switch=True
            ),
            Shorthand("--mode", "executor.mode", help="sync, ensemble or async"),
            Shorthand("--rate-hz", "executor.rate_hz", float, "control loop rate, 10-50"),
            Shorthand("--server", "server", help="ws://host:port of a policy server"),
            EPISODES,
            OUT,
        ),
        adapt=_task_name,
    ),
    "replay": Verb(
        "plots and a summary of a deploy step log (commanded vs executed, clamps, jitter)",
        "robocompose.real_robot.replay:ReplayConfig",
        _replay,
        positional=Shorthand("", "log", help="a deploy steps.jsonl"),
        flags=(
            Shorthand("--seed", "seed", int, "the episode to plot (default: the first)"),
            Shorthand("--out", "out", help="plots folder (default: <log folder>/plots)"),
        ),
    ),
    "view": Verb(
        "a Rerun recording of a checkpoint's or a composition's episodes (camera, state, actions, "
        "each predicted chunk in 3-D, success and score), or with --denoising one chunk's "
        "denoising, each parent's and the composed one; --save FILE.rrd writes it, else a "
        "viewer opens",
        "robocompose.viz.view:ViewConfig",
        _view,
        ("composition",),
        Shorthand("", "run", help="a checkpoint folder, or >= 2 parents to compose"),
        many=True,
        flags=(
            Shorthand("--save", "save", help="the .rrd file to write (default: open a viewer)"),
            Shorthand("--denoising", "denoising", _is_true, "one chunk's denoising", switch=True),
            Shorthand("--seed", "seed_start", int, "the (first) episode seed, default 100000"),
            EPISODES,
            OPERATOR,
            Shorthand("--weights", "composition.weights", _csv(float), "e.g. 0.6,0.4"),
            Shorthand("--steps", "steps", int, "denoising steps of one checkpoint"),
        ),
    ),
    "report": Verb(
        "plot a training run's curves (loss, lr, grad norm, eval success) into one PNG",
        "robocompose.report:ReportConfig",
        _report,
        positional=Shorthand("", "run", help="a `robocompose train` out folder"),
        flags=(Shorthand("--out", "out", help="the PNG (default: RUN/curves.png)"),),
    ),
    "plan": Verb(
        "plan an instruction with an LLM (code, skills or saycan) and run it in sim, with "
        "repair and corrections typed on stdin",
        "robocompose.hierarchical.api:PlanConfig",
        _plan,
        ("task",),
        positional=Shorthand("", "instruction", help="the instruction, quoted"),
        flags=(OUT,),
        choices=_plan_tasks,
    ),
    "corrections": Verb(
        "correction logs of plan runs as training pairs (state, instruction, corrected call) "
        "and the corrected plans `plan correction_logs=[...]` puts in the planner's prompt",
        "robocompose.hierarchical.run.correction_bank:CorrectionsConfig",
        _corrections,
        positional=Shorthand("", "logs", help="correction logs (corrections.jsonl)"),
        many=True,
        flags=(
            Shorthand("--out", "out", help="write the pairs there as JSONL"),
            Shorthand("--instruction", "instruction", help="show its nearest corrected plans"),
        ),
    ),
    "rewards": Verb(
        "Language to Rewards: an LLM fills a reward template from the instruction, a sampling "
        "MPC optimises it in sim (tabletop blocks or PushT), against the scripted baseline",
        "robocompose.hierarchical.language_to_rewards.pipeline:RewardsConfig",
        _rewards,
        positional=Shorthand("", "instruction", help="the instruction, quoted"),
        flags=(
            Shorthand("--family", "family", help="tabletop or pusht"),
            EPISODES,
            SEED_START,
            Shorthand("--model", "model", help="qwen2.5-coder-1.5b (default), smollm2, a .gguf"),
            OUT,
        ),
    ),
}


def _options(group: str) -> list[str]:
    from robocompose.config import group_options

    return group_options(group)


def _epilog(name: str, verb: Verb) -> str:
    """The verb's config: every field (type, default, description) and the group options."""
    from robocompose.config_help import config_fields, format_fields, wrap

    setters = f"configs/{name}.yaml" + (" and its groups" if verb.groups else "")
    head = (
        f"config fields, set as key=value (defaults from the dataclass; {setters} may set "
        "others, --cfg prints what a run gets):"
    )
    fields = format_fields(config_fields(verb.config_class()), verb.groups)
    choices = verb.choices() if verb.choices else {}
    groups = [wrap(f"{g}: {', '.join(choices.get(g) or _options(g))}", 2, 4) for g in verb.groups]
    tail = ["config groups (group=option):", *groups] if groups else []
    return "\n".join([wrap(head), fields, *tail])


class VerbParser(argparse.ArgumentParser):
    """A verb's parser: its help lists the verb's config, imported only when help is asked."""

    verb = ""

    def format_help(self) -> str:
        if self.verb:
            self.epilog = _epilog(self.verb, VERBS[self.verb])
        return super().format_help()


def _verb_parser(name: str, verb: Verb, parser: VerbParser) -> None:
    parser.verb = name
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    what = f"; positional: {verb.positional.help}" if verb.positional else ""
    parser.add_argument("args", nargs="*", metavar="override", help=f"key=value{what}")
    for flag in (*verb.flags, CONFIG_DIR):
        if flag.switch:
            parser.add_argument(
                flag.flag, dest=flag.key, action="store_const", const="true", help=flag.help
            )
            continue
        parser.add_argument(flag.flag, dest=flag.key, help=f"= {flag.key}. {flag.help}".strip())
    parser.add_argument("--cfg", action="store_true", help="print the composed config and exit")
    if name == "sweep":
        parser.add_argument(
            "-m", "--multirun", action="store_true", help="as in Hydra (a sweep always expands)"
        )


class InstalledVersion(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked (importing
    importlib.metadata costs every command 20 ms)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib import metadata

        print(f"robocompose {metadata.version('robocompose')}")
        parser.exit()


def build_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser (help, verb names) and one parser per verb."""
    parser = argparse.ArgumentParser(
        prog="robocompose",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=InstalledVersion)
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=VerbParser)
    subs = {}
    for name, verb in VERBS.items():
        subs[name] = verbs.add_parser(name, help=verb.help, description=textwrap.fill(verb.help))
        _verb_parser(name, verb, subs[name])
    return parser, subs


def _overrides(name: str, verb: Verb, args: argparse.Namespace) -> list[str]:
    """Shorthands first, then the overrides as typed (so a typed override wins)."""
    is_override = [a.startswith(("~", "+")) or "=" in a for a in args.args]
    positional = [a for a, o in zip(args.args, is_override, strict=True) if not o]
    typed = [a for a, o in zip(args.args, is_override, strict=True) if o]
    out = []
    if positional:
        if verb.positional is None or (len(positional) > 1 and not verb.many):
            raise ValueError(
                f"unexpected argument(s) {positional}: overrides look like key=value "
                f"(see `robocompose {name} --help`)."
            )
        value = positional if verb.many else positional[0]
        out.append(verb.positional.override(value))
    for flag in (*verb.flags, CONFIG_DIR):
        value = getattr(args, flag.key)
        if value is not None:
            out.append(flag.override(value))
    return out + typed


def _show(name: str, verb: Verb, overrides: list[str]) -> str:
    from omegaconf import OmegaConf

    if name == "sweep":
        from robocompose.sweep.config import plan

        sweep_plan = plan(overrides, require_axes=False)
        head = f"# {len(sweep_plan.cells)} cells over axes {sweep_plan.axes}\n"
        if not sweep_plan.axes:
            head = (
                "# no axes yet: add one to run, e.g. composition=convex,mixture "
                "or sweep=operators\n"
            )
        return head + OmegaConf.to_yaml(sweep_plan.tree)
    return OmegaConf.to_yaml(to_tree(compose_all(name, verb.config_class(), [overrides])[0]))


def _negative_values_attached(argv: list[str], verb: Verb) -> list[str]:
    """`--weights -0.5,1.5` as `--weights=-0.5,1.5`: argparse takes a value that starts with
    `-` for a flag unless it is one plain number."""
    takes_value = {f.flag for f in verb.flags if not f.switch}
    out: list[str] = []
    for token in argv:
        if out and out[-1] in takes_value and re.fullmatch(r"-[\d.][\d.,eE+-]*", token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, subs = build_parsers()
    if not argv or argv[0] not in subs:
        parser.parse_args(argv)  # help, or the list of verbs
    name, verb = argv[0], VERBS[argv[0]]
    argv = _negative_values_attached(argv, verb)
    args = subs[name].parse_intermixed_args(argv[1:])  # flags and overrides in any order
    try:
        overrides = _with_task_of_parents(name, verb, _overrides(name, verb, args))
        if args.cfg:
            print(_show(name, verb, overrides), end="")
            return
        if name != "sweep":  # a sweep builds every cell's config itself before running any
            load_verb_config(name, overrides)  # a config error before the verb imports torch
        verb.run(overrides)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"robocompose {name}: error: {e}") from None
    except KeyboardInterrupt as e:  # Ctrl-C: what is saved (a `ResumableInterrupt`), no traceback
        print(
            f"\nrobocompose {name}: {e if isinstance(e, ResumableInterrupt) else 'interrupted'}",
            file=sys.stderr,
        )
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
