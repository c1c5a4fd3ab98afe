#!/usr/bin/env bash
# Opt-in: add DeepSpeed (with its CPU Adam op compiled) and Horovod (with Open MPI) to the venv
# ($VENV, default .venv) that tools/setup.sh made. tools/test.sh runs it before the generated
# project's tests, which use them; the default run needs neither. Idempotent, and cached
# across venvs and clones: the op in ~/.cache/torch_extensions, the Horovod wheel in
# ~/.cache/horovod-wheels (one per torch version, CPU or CUDA build, with or without MPI).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# shellcheck disable=SC1091
source "$VENV/bin/activate"

# Debian packages (as root): a C++ compiler for the CPU Adam op and Horovod, cmake for
# Horovod, Open MPI so that Horovod has MPI besides gloo (srun --mpi=pmix, horovodrun --mpi).
missing=()
command -v g++ >/dev/null || missing+=(g++)
command -v cmake >/dev/null || missing+=(cmake)
command -v mpicxx >/dev/null || missing+=(openmpi-bin libopenmpi-dev)
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup-deepspeed-horovod: cannot install ${missing[*]} (not root): the builds need g++ and cmake; without Open MPI Horovod has gloo only" >&2
  fi
fi

# DeepSpeed: no ops compiled at install (they are built on first use); without
# --no-build-isolation its wheel would record torch version 0.0.
python -c 'import importlib.metadata as m; assert m.version("deepspeed") == "0.19.8"' 2>/dev/null ||
  DS_BUILD_OPS=0 pip install --quiet --no-build-isolation "deepspeed==0.19.8"
# ZeRO-Offload's CPU Adam (strategy=deepspeed_stage_3_offload): compiled once into torch's
# extensions cache (~/.cache/torch_extensions, or $TORCH_EXTENSIONS_DIR), where every test
# process loads it in about 2 s instead of compiling it (minutes). Only a load when built.
python -c 'from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load()'

# Horovod: built from source against this torch by the generated project's own script, with
# CUDA wherever a CUDA toolkit is found (minutes, once; a cached wheel or nothing afterwards).
# Without a GPU here the build skips CUDA (torch's pip packages bring a toolkit): the tests
# train Horovod on CPUs, and the CUDA build costs 20 min of CPU time. HOROVOD_CPU_ONLY=0 forces it.
if ! python -c 'import torch; raise SystemExit(not torch.cuda.is_available())' 2>/dev/null; then
  export HOROVOD_CPU_ONLY=${HOROVOD_CPU_ONLY:-1}
fi
bash "{{cookiecutter.project_slug}}/scripts/install-horovod.sh"
