#!/usr/bin/env bash
# Create (or update) .venv with everything the tests and a baked project need. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# The tests run shellcheck on the rendered sbatch scripts; Debian has it (root only).
if ! command -v shellcheck >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null) ||
        echo "setup: could not install shellcheck; the tests that need it will be skipped" >&2
fi

[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
source "$VENV/bin/activate"
pip install --quiet --upgrade pip
pip install --quiet -r tools/requirements.txt

# A C++ compiler for DeepSpeed's CPU Adam op and Horovod, cmake for Horovod.
if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
  apt-get update -qq && apt-get install -y -qq cmake g++ >/dev/null
fi

# DeepSpeed: no ops compiled at install (they are built on first use); without
# --no-build-isolation its wheel would record torch version 0.0.
python -c 'import importlib.metadata as m; assert m.version("deepspeed") == "0.19.8"' 2>/dev/null ||
  DS_BUILD_OPS=0 pip install --quiet --no-build-isolation "deepspeed==0.19.8"
# ZeRO-Offload's CPU Adam (strategy=deepspeed_stage_3_offload): compiled once here, into torch's
# extensions cache (~/.cache/torch_extensions, or $TORCH_EXTENSIONS_DIR), which every test process
# then loads in about 2 s instead of compiling it (about 3 minutes on 2 busy cores). A load when built.
time python -c 'from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load()'

# Horovod: built from source against this torch by the generated project's own script
# (minutes, once; it does nothing when already built). With Open MPI present it is built with
# MPI besides gloo (srun --mpi=pmix, horovodrun --mpi).
if ! command -v mpicxx >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null) ||
    echo "setup: could not install Open MPI; Horovod is built with gloo only, its MPI tests are skipped" >&2
fi
time bash "{{cookiecutter.project_slug}}/scripts/install-horovod.sh"

echo "setup: $(python -c 'import torch, pytorch_lightning as pl; print(f"torch {torch.__version__}, lightning {pl.__version__}")') in $VENV"
