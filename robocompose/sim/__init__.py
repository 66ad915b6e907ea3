"""MuJoCo task suite, scripted experts, demo datasets and the evaluation harness."""

from robocompose.sim.tasks import TASKS, get_task, make_env, make_expert, register_tasks

# no registration at import: it loads gymnasium, which naming a task (every config) does not
# need; make_env and the evaluation paths register before they make an env by id

__all__ = ["TASKS", "get_task", "make_env", "make_expert", "register_tasks"]
