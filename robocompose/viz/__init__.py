"""Rerun recordings of what a policy does, for a person to look at (the `viz` extra).

    robocompose view checkpoints/PushT_flow_mlp --episodes 2 --save runs/view/pusht.rrd
    robocompose view --denoising checkpoints/Stack_diffusion_mlp checkpoints/Stack_flow_mlp --seed 3
    robocompose deploy twin viewer=rerun

`recording` opens a recording and reads one back; `episodes` records rollouts (camera, state,
executed actions, each predicted chunk as a 3-D path, success and score); `denoising` records
one chunk's denoising, each parent's and the composed one; `live` streams a deploy loop;
`view` is the verb.
"""
