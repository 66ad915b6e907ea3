"""Rerun recordings of what a policy does, for a person to look at (the `viz` extra).

    robocompose view PushT_flow_mlp --episodes 2 --save runs/view/pusht.rrd
    robocompose view --denoising Stack_diffusion_mlp Stack_flow_mlp --seed 3
    robocompose deploy twin viewer=rerun

The `view` verb (`robocompose.verbs.view`) drives episodes.py and denoising.py.

Where things are:

    recording.py   open a recording (an .rrd file, or a spawned viewer), actions as 3-D points,
                   and read an .rrd back with Rerun's own reader (entity paths, row counts)
    episodes.py    record rollouts: camera, state, executed actions, each predicted chunk as a
                   3-D path, success and score (the episodes eval scores)
    denoising.py   record one chunk's denoising at one state, each parent's and the composed one
    live.py        `deploy viewer=rerun`: the deploy loop's step log streamed as it runs (a gRPC
                   server for viewers to connect to, a running viewer, or an .rrd file)

The ecosystem beside it: LeRobot datasets are robocompose.sim.lerobot_dataset, LeRobot parents
robocompose.policies.lerobot.
"""
