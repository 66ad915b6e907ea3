"""Bad values for the CLI's shorthand flags name the flag and what it expects; the verb table
names runs that exist, and which errors end a verb in one line."""

from __future__ import annotations

import inspect

import pytest

from robocompose.cli import main
from robocompose.verbs import VERBS, imported


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["compose", "--weights", "a,b"],
            "compose: error: --weights 'a,b': expected comma-separated numbers",
        ),
        (
            ["eval", "PickPlace_flow_mlp", "--episodes", "two"],
            "eval: error: --episodes 'two': expected an integer",
        ),
        (
            ["eval", "PickPlace_flow_mlp", "--video-seeds", "0,x"],
            "eval: error: --video-seeds '0,x': expected comma-separated integers",
        ),
        (
            ["collect", "PushT", "--expert-config", "{noise"],
            "collect: error: --expert-config '{noise': expected JSON",
        ),
    ],
)
def test_bad_shorthand_value_names_the_flag(argv: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert f"robocompose {expected}" in str(exit_info.value.code)


def test_nan_weight_is_refused_before_running() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compose", "--weights", "nan,1.0", "--episodes", "1"])
    assert "`weights` must be finite numbers. Got [nan, 1.0]" in str(exit_info.value.code)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["compose", "--weights", "0.6"], "2 parents need 2 weights (e.g. 0.6,0.4). Got 1: [0.6]"),
        (
            [
                "compose",
                *(f"Stack_{k}" for k in ("diffusion_mlp", "flow_mlp", "flow_mlp_b")),
            ]
            + ["--weights", "0.6,0.4"],
            "3 parents need 3 weights. Got 2: [0.6, 0.4]",
        ),
        (
            ["serve", "Stack_diffusion_mlp", "Stack_flow_mlp"] + ["--weights", "0.2,0.2,0.6"],
            "2 parents need 2 weights. Got 3",
        ),
    ],
)
def test_a_weight_count_off_the_parent_count_names_both(argv: list[str], expected: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert expected in str(exit_info.value.code)


def test_negative_weights_after_a_flag_are_values(capsys) -> None:
    main(["compose", "composition=guided", "--weights", "-0.5,1.5", "--cfg"])
    assert "weights:\n  - -0.5\n  - 1.5\n" in capsys.readouterr().out


def test_comparing_a_checkpoint_with_itself_is_refused(tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["compare", "Stack_flow_mlp", "Stack_flow_mlp"]
            + ["--episodes", "1", "--out", str(tmp_path)]
        )
    assert "compare runs two different policies; both are Stack_flow_mlp" in str(
        exit_info.value.code
    )
    assert not any(tmp_path.iterdir())


def test_a_mistyped_preset_lists_the_options_and_suggests_the_nearest() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compose", "composition=convx"])
    message = str(exit_info.value.code)
    assert "Available options in 'composition': convex, guided," in message
    assert "Did you mean 'convex'?" in message


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_names_a_run_that_takes_its_config(verb: str) -> None:
    """The table names each verb's `run` as "module:function": it must import and take the
    config (or the sweep's plan) as its one required argument."""
    parameters = list(inspect.signature(imported(VERBS[verb].run)).parameters.values())
    assert parameters, f"{VERBS[verb].run} takes no config"
    assert all(p.default is not p.empty for p in parameters[1:])


def test_a_verbs_listed_errors_end_in_one_line_and_others_do_not() -> None:
    """Listed by name, so a subclass counts (ConnectionRefusedError is a ConnectionError) and
    nothing is imported to check; an unlisted error keeps its traceback."""
    deploy = VERBS["deploy"]
    assert deploy.is_user_error(ConnectionRefusedError("no server on ws://127.0.0.1:1"))
    assert deploy.is_user_error(ModuleNotFoundError("no module named rtde_control"))
    assert deploy.is_user_error(ValueError("`rate_hz` must be in [10, 50]"))
    assert not deploy.is_user_error(RuntimeError("a bug"))
    assert not VERBS["eval"].is_user_error(ConnectionRefusedError())
