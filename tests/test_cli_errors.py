"""Bad values for the CLI's shorthand flags name the flag and what it expects."""

from __future__ import annotations

import pytest

from robocompose.cli import main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["compose", "--weights", "a,b"],
            "compose: error: --weights 'a,b': expected comma-separated numbers",
        ),
        (
            ["eval", "checkpoints/PickPlace_flow_mlp", "--episodes", "two"],
            "eval: error: --episodes 'two': expected an integer",
        ),
        (
            ["eval", "checkpoints/PickPlace_flow_mlp", "--video-seeds", "0,x"],
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
