"""Configs: every verb composes from configs/, errors name the key, flags are shorthands for the
same overrides, the search defaults are the demo's, every ablation preset plans."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

import pytest

from robocompose.cli import VERBS, load_verb_config, main
from robocompose.config import ConfigError, build, hydra_value, load
from robocompose.config_help import config_fields
from robocompose.launch.config import LauncherConfig
from robocompose.shipped import (
    CHECKPOINTS,
    make_target,
    parent_pair,
    shipped_checkpoints,
    shipped_path,
)
from robocompose.sweep.config import plan
from robocompose.sweep.run import _applicable, run_sweep
from robocompose.verbs.compose import ComposeConfig
from robocompose.verbs.demo import DemoConfig
from robocompose.verbs.eval import EvalConfig
from robocompose.verbs.search import SearchConfig

REQUIRED = {
    "train": ["dataset=d.hdf5", "out=o"],
    "eval": ["checkpoint=c"],
    "serve": ["checkpoint=c"],
    "replay": ["log=l"],
    "report": ["run=r"],
    "view": ["run=[r]"],
    "compare": ["candidates=[PushT_flow_mlp,PushT_flow_unet]"],
    "adapt": ["out=o.gguf"],
    "verifier": ["logs=[runs/chunks]"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_builds_from_its_config(verb: str) -> None:
    config = load_verb_config(verb, REQUIRED.get(verb, []))
    assert isinstance(config, VERBS[verb].config_class())
    if "task" in VERBS[verb].groups:  # the task group means the same in every verb
        other = load_verb_config(verb, [*REQUIRED.get(verb, []), "task=Stack"])
        assert "Stack" in (other.task if isinstance(other.task, str) else other.task.name)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["composition.wieghts=[1,0]"], r"has no field 'wieghts'.*'composition.weights'"),
        (["+composition.extra=1"], r"unknown config key 'composition.extra'"),
        (["composition.steps=abc"], r"`composition.steps` must be .*Got 'abc'"),
        (["composition.weights=[a,b]"], r"`composition.weights\[0\]` must be float"),
        (["task=Pusht"], r"Could not find 'task/Pusht'.*PushT"),
        (["composition=nope"], r"Available options in 'composition'.*convex"),
        (["episodes=0"], r"`episodes` must be in \[1, "),
        (["task.name=Stak"], r"unknown task 'Stak'.*Did you mean 'Stack'"),
        (["parents=[only_one]"], r"`parents` must name >= 2"),
        (["episodes"], r"Error parsing override 'episodes'"),
    ],
)
def test_bad_overrides_name_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load("compose", ComposeConfig, overrides)


def test_required_keys_and_free_mappings() -> None:
    with pytest.raises(ConfigError, match=r"`checkpoint` is required: add checkpoint=\.\.\."):
        load("eval", EvalConfig, [])
    collect = VERBS["collect"].config_class()
    config = load("collect", collect, ["expert={action_noise_m:0.003}", "+expert.retries=2"])
    assert config.expert == {"action_noise_m": 0.003, "retries": 2}
    assert (config.episodes, config.out) == (400, "data/PushT.hdf5")  # from PushT's TaskSpec


@dataclass
class Inner:
    shape: tuple[int, ...] = (1,)


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    rate: float | None = None


def test_build_checks_nested_types() -> None:
    built = build(Outer, {"inner": {"shape": [2, 3]}, "rate": 1})
    assert built.inner.shape == (2, 3) and built.rate == 1.0
    with pytest.raises(ConfigError, match=r"`inner.shape\[1\]` must be int. Got 'x'"):
        build(Outer, {"inner": {"shape": [2, "x"]}})
    with pytest.raises(ConfigError, match=r"inner has no field 'shap'.*'inner.shape'"):
        build(Outer, {"inner": {"shap": [2]}})


@pytest.mark.parametrize("text", ["a b/c", "it's", "x,y=z", "a\\b", "a\\'b\\", "[not a list]"])
def test_hydra_value_survives_any_string(text: str) -> None:
    assert load("eval", EvalConfig, [f"checkpoint={hydra_value(text)}"]).checkpoint == text


def test_flags_are_shorthands_for_the_same_overrides(capsys) -> None:
    main(["compose", "a", "b", "--weights", "0.6,0.4", "--steps", "5", "--cfg", "episodes=7"])
    flags = capsys.readouterr().out
    main(
        ["compose", "parents=[a,b]", "composition.weights=[0.6,0.4]", "composition.steps=5"]
        + ["episodes=7", "--cfg"]
    )
    assert flags == capsys.readouterr().out
    assert "steps: 5" in flags and "episodes: 7" in flags


def test_config_dir_adds_presets(tmp_path, capsys) -> None:
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "mine.yaml").write_text(
        "# @package _global_\nsweep:\n  name: mine\n  axes:\n    seed: 0,1,2\n"
    )
    main(["sweep", "--config-dir", str(tmp_path), "sweep=mine", "--cfg"])
    assert capsys.readouterr().out.startswith("# 3 cells over axes ['seed']")


def test_cli_reports_config_errors_by_key() -> None:
    with pytest.raises(SystemExit, match=r"robocompose eval: error: `episodes` must be in"):
        main(["eval", "ckpt", "--episodes", "0"])
    with pytest.raises(SystemExit, match=r"unexpected argument\(s\) \['a', 'b'\]"):
        main(["eval", "a", "b"])


def test_search_defaults_are_the_demo() -> None:
    demo, search = DemoConfig(), load("search", SearchConfig, [])
    assert search.task.name == demo.task and search.parent_paths() == parent_pair(demo.task)
    assert search.seeds() == list(range(100_000, 100_000 + demo.episodes))
    assert (search.search.method, search.search.first_slice, search.num_envs) == (
        demo.method,
        demo.first_slice,
        demo.num_envs,
    )
    assert search.composition.operator == "convex"
    assert search.search.operators == ["convex", "weighted_sum"]  # every searchable method


def test_search_operators_are_searchable_methods(capsys) -> None:
    """`search.operators` (or `--operators`) names the methods searched; an entry that is no
    searchable method is refused, naming the entry and listing the searchable ones."""
    assert load("search", SearchConfig, ["search.operators=[convex]"]).search.operators == [
        "convex"
    ]
    with pytest.raises(
        ConfigError,
        match=r"`operators\[1\]` must be one of \['convex', 'weighted_sum'\]\. Got 'mixture'\. "
        r"\(in `search`\)",
    ):
        load("search", SearchConfig, ["search.operators=[convex,mixture]"])
    with pytest.raises(
        SystemExit, match=r"`operators\[0\]` must be one of .*Got 'convx'\. Did you"
    ):
        main(["search", "--operators", "convx"])
    main(["search", "--operators", "weighted_sum", "--cfg"])
    assert "  operators:\n  - weighted_sum\n" in capsys.readouterr().out
    help_line = next(f for f in config_fields(SearchConfig) if f.key == "search.operators")
    assert help_line.help.endswith("each one of: convex, weighted_sum")


@pytest.mark.skipif(shutil.which("make") is None, reason="`make` is not installed")
@pytest.mark.parametrize("folder", [p.name for p in shipped_checkpoints()])
def test_the_named_make_target_trains_each_shipped_checkpoint(folder: str) -> None:
    target = make_target(folder)
    dry_run = subprocess.run(
        ["make", "-n", target], cwd=CHECKPOINTS.parents[1], capture_output=True, text=True
    )
    assert dry_run.returncode == 0, dry_run.stderr
    assert f"out=robocompose/checkpoints/{folder} " in dry_run.stdout, (
        f"`make {target}` does not train it"
    )


def test_missing_shipped_checkpoint_says_how_to_train_it() -> None:
    with pytest.raises(FileNotFoundError, match=r"Stack_no_such_kind .*`make train-Stack`"):
        shipped_path("Stack", "no_such_kind")


@pytest.mark.parametrize(
    "preset, axes, cells",
    [
        ("operators", ["composition"], 4),
        ("weights", ["composition.weights"], 11),
        ("steps", ["composition.steps"], 6),
        ("demos", ["task.demos", "composition.weights"], 9),
    ],
)
def test_ablation_presets_plan(preset: str, axes: list[str], cells: int) -> None:
    sweep_plan = plan([f"sweep={preset}", "seed=0,1"])
    assert sweep_plan.axes == [*axes, "seed"] and len(sweep_plan.cells) == 2 * cells


def test_demos_ablation_names_its_missing_checkpoints(tmp_path) -> None:
    cells = plan(["sweep=demos"]).cells
    assert cells[0].job.parents[0].endswith("PickPlace_flow_mlp_50a")
    if all((p / "config.json").is_file() for c in cells for p in c.job.parent_paths()):
        pytest.skip("the demos-ablation checkpoints are trained here")
    with pytest.raises(FileNotFoundError, match=r"PickPlace_flow_mlp_50a.*make demos-ablation"):
        run_sweep(plan(["sweep=demos", f"sweep.dir={tmp_path}"]), progress=False)


def test_sweep_axes_pin_and_fail_by_cell() -> None:
    pinned = plan(["sweep=operators", "composition=mixture", "seed=0,1"])
    assert pinned.axes == ["seed"] and pinned.cells[0].job.composition.operator == "mixture"
    with pytest.raises(ConfigError, match=r"sweep cell composition.steps=0: `steps` must be >= 1"):
        plan(["composition.steps=2,0"])
    with pytest.raises(ConfigError, match=r"choice \(a,b,c\) or a range"):
        plan(["seed=interval(0,1)"])
    with pytest.raises(ConfigError, match="at least one axis"):
        plan([])


def test_merge_of_two_architectures_is_skipped_with_its_reason() -> None:
    sweep_plan = plan(["task=PickPlace", "composition=convex,merge"])  # diffusion UNet + flow MLP
    applicable, skipped = _applicable(sweep_plan)
    assert applicable == [0] and list(skipped) == [("merge",)]
    assert "one architecture" in skipped[("merge",)]


def test_launcher_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"`name` must be one of .* \(in `launcher`\)"):
        plan(["launcher.name=slurm", "seed=0,1"])
    with pytest.raises(ValueError, match=r"`name` must be one of \['local', 'ray'\]"):
        LauncherConfig(name="slurm")
    with pytest.raises(ValueError, match="with `address` the cluster's own settings apply"):
        LauncherConfig(name="ray", address="auto", num_cpus=2)


def test_eval_and_search_take_the_sweeps_launcher() -> None:
    """One launcher group for every verb that runs episodes: local by default, or Ray."""
    cluster = ["launcher=ray", "launcher.address=ray://head:10001", "launcher.episodes_per_task=4"]
    for verb, required in (("eval", ["checkpoint=c"]), ("search", [])):
        assert load_verb_config(verb, required).launcher == LauncherConfig()
        ray = load_verb_config(verb, [*required, *cluster]).launcher
        assert ray == LauncherConfig(name="ray", address="ray://head:10001", episodes_per_task=4)


def test_switching_operator_on_the_command_line_takes_its_default_steps() -> None:
    """The defaults tree is built from an instance: a default resolved there (steps for convex)
    would stick when the command line switches the operator to SuperDiff."""
    superdiff = load_verb_config("compose", ["composition=superdiff_or"]).composition
    assert superdiff.denoising_steps() == 40
    convex = load_verb_config("compose", ["composition.steps=7"]).composition
    assert convex.denoising_steps() == 7


def test_named_parents_run_on_their_own_task_unless_told(capsys) -> None:
    stack = [str(p) for p in parent_pair("Stack")]
    main(["search", *stack, "--cfg"])
    assert "task:\n  name: Stack\n" in capsys.readouterr().out
    main(["search", *stack, "task=PickPlace", "--cfg"])
    assert "task:\n  name: PickPlace\n" in capsys.readouterr().out


def test_a_missing_configs_folder_says_to_install_from_the_checkout(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("robocompose.config.CONFIGS", tmp_path)
    with pytest.raises(ConfigError, match=r"eval\.yaml.*pip install -e \."):
        load("eval", EvalConfig, ["checkpoint=c"])
