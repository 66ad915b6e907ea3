"""MuJoCo task suite, scripted experts, demo datasets and the evaluation harness."""

from robocompose.sim.tasks import TASKS, get_task, make_env, make_expert, register_tasks

register_tasks()

__all__ = ["TASKS", "get_task", "make_env", "make_expert", "register_tasks"]
