"""MuJoCo task suite, scripted experts, demo datasets and the rollout harness.

Where things are:

    tasks.py            the table of tasks (TASKS), gymnasium registration, make_env / make_expert
    base.py             MujocoTaskEnv: model, control loop, dict observations, rendering
    pusht.py, pick_place.py, stack.py, sort_bins.py   the tasks (gantry.py: their gripper robot;
                        planar.py: PushT's exact coverage score)
    external.py         third-party gymnasium envs as tasks (configs/task/ presets);
                        robosuite_env.py: robosuite's Lift and PickPlaceCan
    experts/            scripted experts, one module per task family
    skill_labels.py     which skill an expert step executes (skill-conditioned demos)
    snapshot.py         simulate on a copy of a live MjData (planners that look ahead)
    collect.py          expert rollouts -> demos (the `collect` and `experts` verbs run it)
    episode.py          Episode (one demo in memory) and the checks every demo format applies
    hdf5_dataset.py     robomimic hdf5 demos: DemoWriter, load_demos (also reads LeRobot folders)
    lerobot_dataset/    LeRobot v3.0 dataset folders: layout, reader, writer, video, stats
    windows.py          training windows (SequenceWindows, skill_segments) and normaliser stats
    rollout.py          run a policy on vector envs, one episode per seed (under evaluate)
"""

from robocompose.sim.tasks import TASKS, get_task, make_env, make_expert, register_tasks

# no registration at import: it loads gymnasium, which naming a task (every config) does not
# need; make_env and the evaluation paths register before they make an env by id

__all__ = ["TASKS", "get_task", "make_env", "make_expert", "register_tasks"]
