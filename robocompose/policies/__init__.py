"""Generative action-chunk policies: diffusion and flow matching, trained here or loaded from
LeRobot, each with the Denoiser adapter that composition runs on.

Where things are:

    registry.py         the families by name: policy class, config class, trainer
    config.py           PolicyConfig: backbone, horizons, data shapes (no torch)
    base.py             GenerativePolicy (normalisers, encoder, backbone), register_family,
                        build_policy
    denoiser.py         the Denoiser interface (EDM view) and its network adapters
    diffusion.py        Diffusion Policy: DDPM training, DDIM sampling (family "diffusion")
    flow.py             rectified flow (family "flow")
    lerobot.py          a LeRobot DiffusionPolicy checkpoint as a parent (loaded, never trained)
    jax_flow.py         the flow policy on a flax MLP (family "flow_jax", extra `jax`)
    jax_net.py          its network;  jax_bridge.py: arrays across torch and JAX
    networks.py         backbones: 1-D conditional UNet, MLP
    encoders.py         observation histories -> one conditioning vector
    normalizer.py       per-key affine normalisers, stored with the checkpoint
    checkpoint.py       save_policy, load_policy (the one loader): safetensors + config.json
    runner.py           observation history and action queues per env (PolicyPredictor)
    train_config.py     TrainConfig (no torch);  train.py: the torch loop and the `train` verb
    train_state.py      the training state on disk and the checks on resuming it
    train_monitor.py    divergence check, TensorBoard curves, EMA evaluation (both loops)
    mixed_precision.py  autocast and fp16 loss scaling
    jax_train.py        the JAX flow policy's loop (optax), sharing the above

The layers run one way: registry <- config <- base <- the families; checkpoint and the training
loops above them (tests/test_import_cycles.py fails on any import cycle).
"""
