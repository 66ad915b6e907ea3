"""Scripted experts, one module per task family; `sim.tasks.make_expert` picks a task's own.

Where things are:

    grasping.py       PickPlace, PickPlaceTwoCubes, Stack: a waypoint state machine on the gantry
    sort_bins.py      SortBins: the grasping expert's pick-and-place, once per unsorted block
    pusht.py          PushT: sampling MPC over push primitives in a scratch copy of the MuJoCo data
    gym_pusht.py      gym-pusht's PushT: the same planner in its pymunk world and pixel units
    push_paths.py     the push primitive both PushT experts plan with
    goal_reaching.py  goal-conditioned envs (Fetch reach): a proportional controller on the goal
    robosuite.py      robosuite's Lift and PickPlaceCan, from privileged simulator state
"""
