#!/usr/bin/env bash
# The main job on a fresh machine: bake a project with the default answers and train it
# for one MNIST-shaped epoch on this CPU. Extra arguments go to train.py. It sets up only what
# the default run needs (tools/setup.sh), not DeepSpeed or Horovod.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# shellcheck disable=SC1091
source "${VENV:-.venv}/bin/activate"

rm -rf build/demo
cookiecutter . --no-input --output-dir build/demo
cd build/demo/mnist-ddp
# PYTHONPATH=src instead of `pip install -e .`: the demo leaves the shared .venv untouched.
export PYTHONPATH=$PWD/src
# Synthetic data has MNIST's shape and size and needs no download; use data=mnist with internet.
python train.py data=synthetic data.num_samples=60000 trainer.max_epochs=1 "$@"
